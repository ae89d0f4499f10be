"""Level 3 of tensor-lib: reverse-mode autograd. requires_grad, backward() (with or without
a gradient), .grad accumulated over every use, gradients through broadcasting, views,
matmul, sum, exp, log and max (ties as torch), a topological order (each node runs once),
no_grad(). Gradients are compared with torch.autograd in float64 within 1e-12."""

from __future__ import annotations

import torch
from hypothesis import example, given, settings, strategies as st

from grader.protocol import expect, kata_test, read_all, run_in_one_process
from grader.suites._measure import best_time_s, growth_exponent
from grader.suites.tensor_lib.harness import no_grad_trials
from grader.suites.tensor_lib.strategies import (Case, broadcast_cases, build, cases, expect_error, expect_tensor,
                                                 matmul_cases, new_tensor, shapes, to_candidate)

RULES = {
    "gradients of add, sub, mul, div, neg, exp, log equal torch.autograd's": "test_elementwise_grads",
    "a broadcast input gets the gradient summed back to its own shape": "test_broadcast_grads_summed_back",
    "sum's gradient (dim, keepdim) reaches every element summed": "test_sum_grads",
    "max(): ties share the gradient equally; max(dim): the first maximal element gets it": "test_max_grads_ties",
    "matmul's gradients, 1-D and batch-broadcast operands": "test_matmul_grads",
    "views (transpose, permute, indexing, reshape) pass gradients back to their base": "test_view_grads",
    ".grad accumulates over every use of a tensor": "test_grad_accumulates_over_uses",
    ".grad accumulates over backward() calls": "test_grad_accumulates_over_backward_calls",
    "each node's backward runs once, after every use of its output (topological order)":
        ("test_diamond_graph", "test_backward_is_linear_in_graph_size"),
    "backward(gradient) for an output of any shape": "test_backward_with_gradient",
    "requires_grad propagates to results; only leaves get .grad; an unused leaf keeps grad None":
        "test_requires_grad_propagates",
    "no_grad(): no graph inside; the previous mode comes back on exit, after an exception too":
        "test_no_grad",
    "0-size tensors get zero gradients of their shape": "test_zero_size_grads",
    "RuntimeError: backward of a tensor that does not require grad, without a gradient on more than "
    "one element, with a gradient of another shape": "test_backward_errors",
}

SETTLED_BY = {
    "gradients of add, sub, mul, div, neg, exp, log equal torch.autograd's": ("ask", "oracle"),
    "a broadcast input gets the gradient summed back to its own shape": "broadcast-grad",
    "sum's gradient (dim, keepdim) reaches every element summed": "ask",
    "max(): ties share the gradient equally; max(dim): the first maximal element gets it": "max-ties",
    "matmul's gradients, 1-D and batch-broadcast operands": ("ask", "broadcast-grad"),
    "views (transpose, permute, indexing, reshape) pass gradients back to their base": "view-grad",
    ".grad accumulates over every use of a tensor": ("ask", "accumulate"),
    ".grad accumulates over backward() calls": "accumulate",
    "each node's backward runs once, after every use of its output (topological order)": "once",
    "backward(gradient) for an output of any shape": "ask",
    "requires_grad propagates to results; only leaves get .grad; an unused leaf keeps grad None": "leaves",
    "no_grad(): no graph inside; the previous mode comes back on exit, after an exception too": ("ask", "no-grad"),
    "0-size tensors get zero gradients of their shape": "leaves",
    "RuntimeError: backward of a tensor that does not require grad, without a gradient on more than "
    "one element, with a gradient of another shape": "backward-errors",
}
# Every rule here is core: the random tests draw 0-size dims too, so an empty gradient left
# None fails the gradient tests as well as the targeted one.
DETAILS: set[str] = set()


def _grad(leaf, what: str):
    (ok, g), = read_all(leaf, [("grad", None)])
    if not ok:
        raise g
    return g


def expect_grad(got_leaf, want_leaf, prop, *, input, name="x"):
    want = want_leaf.grad
    g = _grad(got_leaf, name)
    if want is None:
        want = torch.zeros_like(want_leaf)
    expect(g is not None, f"{prop}: {name}.grad is set after backward()", input=input,
           expected=f"a tensor of shape {tuple(want.shape)}", got=None)
    expect_tensor(g, want, prop, input=input, what=f"{name}.grad")


def _leaves(solution, *cs):
    out = []
    for c in cs:
        (tl, tv), (gl, gv) = build(None, c, True), build(solution, c, True)
        out.append((tl, tv, gl, gv))
    return out


def _backward_both(t_out, g_out, solution, seed):
    """backward on both sides: with a drawn gradient of the output's shape (from a seed)."""
    gen = torch.Generator().manual_seed(seed)
    grad = (torch.randint(-8, 9, tuple(t_out.shape), generator=gen) / 4).double()
    t_out.backward(grad)
    g_out.backward(to_candidate(solution, grad))
    return grad


EXPRS = {
    "a.add(b)": lambda a, b: a.add(b), "a.sub(b)": lambda a, b: a.sub(b),
    "a.mul(b)": lambda a, b: a.mul(b), "a.div(b.mul(b).add(1))": lambda a, b: a.div(b.mul(b).add(1.0)),
    "a.neg().mul(b)": lambda a, b: a.neg().mul(b), "a.mul(b).exp()": lambda a, b: a.mul(b).exp(),
    "a.mul(a).add(1).log().mul(b)": lambda a, b: a.mul(a).add(1.0).log().mul(b),
    "b.sub(a).mul(a)": lambda a, b: b.sub(a).mul(a),
}


@kata_test(level=3, category="correctness", weight=3,
           description="gradients of the elementwise ops equal torch.autograd's (same shapes)")
@settings(max_examples=15)
@given(case=cases(), data=st.data(), seed=st.integers(0, 2**16))
def test_elementwise_grads(solution, case, data, seed):
    other = data.draw(cases(case.shape))
    for expr, f in EXPRS.items():  # every expression on every example
        (ta, tav, ga, gav), (tb, tbv, gb, gbv) = _leaves(solution, case, other)
        _backward_both(f(tav, tbv), f(gav, gbv), solution, seed)
        shown = {"a": case.shown(), "b": other.shown(), "out": expr, "then": "out.backward(gradient)"}
        expect_grad(ga, ta, f"d/da of {expr}", input=shown, name="a")
        expect_grad(gb, tb, f"d/db of {expr}", input=shown, name="b")


@kata_test(level=3, category="correctness", weight=3,
           description="a broadcast input's gradient is summed back to its own shape")
@settings(max_examples=30)
@given(pair=broadcast_cases(), expr=st.sampled_from(["a.add(b)", "a.mul(b)", "b.sub(a).mul(a)", "a.sub(b)"]),
       seed=st.integers(0, 2**16))
@example(pair=(Case((3, 1), (1.0, -2.0, 0.5)), Case((2, 1, 4), (2.0, 4.0, -0.5, 1.5, 0.25, 1.0, -1.0, 3.0))),
         expr="a.mul(b)", seed=1)
def test_broadcast_grads_summed_back(solution, pair, expr, seed):
    (ta, tav, ga, gav), (tb, tbv, gb, gbv) = _leaves(solution, *pair)
    f = EXPRS[expr]
    _backward_both(f(tav, tbv), f(gav, gbv), solution, seed)
    shown = {"a": pair[0].shown(), "b": pair[1].shown(), "out": expr, "then": "out.backward(gradient)"}
    expect_grad(ga, ta, f"d/da of {expr} (broadcast)", input=shown, name="a")
    expect_grad(gb, tb, f"d/db of {expr} (broadcast)", input=shown, name="b")


@kata_test(level=3, category="correctness", weight=2, description="sum's gradient, with dim and keepdim")
@settings(max_examples=30)
@given(case=cases(shapes(min_dims=1)), data=st.data(), seed=st.integers(0, 2**16))
def test_sum_grads(solution, case, data, seed):
    n = len(case.shape)
    dim = data.draw(st.one_of(st.none(), st.integers(-n, n - 1)))
    keepdim = data.draw(st.booleans())
    (ta, tav, ga, gav), = _leaves(solution, case)
    _backward_both(tav.mul(tav).sum(dim=dim, keepdim=keepdim), gav.mul(gav).sum(dim=dim, keepdim=keepdim),
                   solution, seed)
    expect_grad(ga, ta, f"d/dx of (x * x).sum(dim={dim}, keepdim={keepdim})",
                input={"x": case.shown(), "out": f"x.mul(x).sum(dim={dim}, keepdim={keepdim})"})


@kata_test(level=3, category="correctness", weight=3,
           description="max's gradient: max() splits it among ties, max(dim) gives it to the first maximum")
@settings(max_examples=30)
@given(shape=shapes(min_dims=1, min_size=1), data=st.data(), seed=st.integers(0, 2**16))
def test_max_grads_ties(solution, shape, data, seed):
    n = len(shape)
    case = data.draw(cases(shape).filter(lambda c: True))
    case = type(case)(case.shape, tuple(float(int(v) % 2) for v in case.values), case.layout)  # many ties
    dim = data.draw(st.one_of(st.none(), st.integers(-n, n - 1)))
    (ta, tav, ga, gav), = _leaves(solution, case)
    t_out = tav.max() if dim is None else tav.max(dim)[0]
    g_out = gav.max() if dim is None else gav.max(dim)
    _backward_both(t_out, g_out, solution, seed)
    expect_grad(ga, ta, "max() splits the gradient evenly among its ties" if dim is None
                else f"max({dim}) sends the gradient to the first maximal element along the dim",
                input={"x": case.shown(), "out": f"x.max({'' if dim is None else dim})"})


@kata_test(level=3, category="correctness", weight=3, description="matmul's gradients, 1-D and batched operands")
@settings(max_examples=30)
@given(pair=matmul_cases(), seed=st.integers(0, 2**16))
def test_matmul_grads(solution, pair, seed):
    (ta, tav, ga, gav), (tb, tbv, gb, gbv) = _leaves(solution, *pair)
    _backward_both(tav.matmul(tbv), gav.matmul(gbv), solution, seed)
    shown = {"a": pair[0].shown(), "b": pair[1].shown(), "out": "a.matmul(b)"}
    expect_grad(ga, ta, "d/da of a.matmul(b)", input=shown, name="a")
    expect_grad(gb, tb, "d/db of a.matmul(b)", input=shown, name="b")


VIEWS = {
    "x.transpose(0, -1)": lambda x: x.transpose(0, -1),
    "x.permute(reversed)": lambda x: x.permute(*reversed(range(len(tuple(x.shape))))),
    "x.permute(cycle)": lambda x: x.permute(*range(1, len(tuple(x.shape))), 0),
    "x[1:, ::2]": lambda x: x[1:, ::2] if len(tuple(x.shape)) >= 2 else x[1:],
    "x[0]": lambda x: x[0],
    "x.reshape(-1)": lambda x: x.reshape(-1),
    "x.transpose(0, -1).reshape(-1)": lambda x: x.transpose(0, -1).reshape(-1),
}


@kata_test(level=3, category="correctness", weight=3,
           description="transpose, permute, indexing and reshape pass gradients back to the base tensor")
@settings(max_examples=15)
@given(case=cases(shapes(min_dims=1, min_size=1)), seed=st.integers(0, 2**16))
@example(case=Case((2, 3, 4), tuple(float(v % 7) / 4 for v in range(24))), seed=1)
def test_view_grads(solution, case, seed):
    for view, f in VIEWS.items():  # every view on every example
        (ta, tav, ga, gav), = _leaves(solution, case)
        _backward_both(f(tav.mul(tav)).mul(2.0), f(gav.mul(gav)).mul(2.0), solution, seed)
        expect_grad(ga, ta, f"gradient through the view {view}",
                    input={"x": case.shown(), "out": f"{view} of x*x, times 2"})


@kata_test(level=3, category="correctness", weight=3, description=".grad sums the gradients of every use of a tensor")
@settings(max_examples=20)
@given(case=cases(shapes(min_dims=1, min_size=1)))
def test_grad_accumulates_over_uses(solution, case):
    (ta, tav, ga, gav), = _leaves(solution, case)

    def f(x):
        return x.mul(x).add(x.exp()).sum().add(x.sum(0).sum()).add(x.max())

    f(tav).backward()
    f(gav).backward()
    expect_grad(ga, ta, "x used five times: its gradient is the sum over the uses",
                input={"x": case.shown(), "out": "(x*x + exp(x)).sum() + x.sum(0).sum() + x.max()"})


@kata_test(level=3, category="correctness", weight=2, description=".grad accumulates over backward() calls")
def test_grad_accumulates_over_backward_calls(solution):
    data = [[1.0, -2.0], [0.5, 3.0]]
    tx = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    gx = solution.Tensor(data, requires_grad=True)
    for k in (1.0, 3.0):
        tx.mul(tx).mul(k).sum().backward()
        gx.mul(gx).mul(k).sum().backward()
    expect_grad(gx, tx, "two backward() calls add into .grad", input={"x": data,
                "calls": "x.mul(x).mul(1).sum().backward(); x.mul(x).mul(3).sum().backward()"})


@kata_test(level=3, category="correctness", weight=3,
           description="a node used twice runs its backward once, with the sum of both gradients")
def test_diamond_graph(solution):
    data = [0.5, -1.0, 2.0]
    tx = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    gx = solution.Tensor(data, requires_grad=True)

    def f(x):
        y = x.exp()  # used by both branches below
        z = y.mul(2.0).add(y.mul(y))
        w = z.mul(z.sub(1.0))  # z used twice
        return w.sum()

    f(tx).backward()
    f(gx).backward()
    expect_grad(gx, tx, "y = exp(x); z = 2y + y*y; w = z*(z - 1): each of y and z runs backward once",
                input={"x": data, "out": "sum(z * (z - 1)), z = 2 exp(x) + exp(x)^2"})


@kata_test(level=3, category="efficiency", weight=2,
           description="backward's time grows with the graph's size, not with its number of paths")
def test_backward_is_linear_in_graph_size(solution):
    def run_at(depth):
        def fn():
            x = solution.Tensor([1.0, 2.0], requires_grad=True)
            y = x
            for _ in range(depth):
                y = y.add(y).mul(0.5)  # 2**depth paths from y to x
            y.sum().backward()
        return fn

    exponent = growth_exponent(run_at, [6, 9, 12], timer=lambda fn: best_time_s(fn, repeats=3, budget_s=1.0))
    expect(exponent < 2.5, "backward visits each node once: doubling the depth doubles the work",
           input="y = x; 6, 9, 12 times: y = (y + y) * 0.5; y.sum().backward()",
           expected="time growing about linearly with depth (exponent about 1)",
           got=f"time growing as depth ** {exponent:.1f} (the number of paths is 2 ** depth)")


@kata_test(level=3, category="correctness", weight=2, description="backward(gradient) on an output of any shape")
@settings(max_examples=20)
@given(case=cases(shapes(min_size=1)), seed=st.integers(0, 2**16))
def test_backward_with_gradient(solution, case, seed):
    (ta, tav, ga, gav), = _leaves(solution, case)
    _backward_both(tav.mul(3.0).exp(), gav.mul(3.0).exp(), solution, seed)
    expect_grad(ga, ta, "backward(gradient) weights each output by its gradient",
                input={"x": case.shown(), "out": "exp(3x)", "then": "out.backward(gradient of out's shape)"})


@kata_test(level=3, category="api contract", weight=2,
           description="requires_grad propagates; only leaves get .grad; an unused leaf keeps grad None")
def test_requires_grad_propagates(solution):
    x = solution.Tensor([1.0, 2.0], requires_grad=True)
    c = solution.Tensor([3.0, 4.0])
    u = solution.Tensor([5.0], requires_grad=True)
    expect(x.requires_grad is True and c.requires_grad is False, "Tensor(data, requires_grad) sets requires_grad",
           input="x = Tensor([1, 2], requires_grad=True); c = Tensor([3, 4])", expected=(True, False),
           got=(x.requires_grad, c.requires_grad))
    y = x.mul(c)
    expect(y.requires_grad is True and c.mul(c).requires_grad is False,
           "a result requires grad when an input does", input="y = x.mul(c); c.mul(c)",
           expected=(True, False), got=(y.requires_grad, c.mul(c).requires_grad))
    y.sum().backward()
    expect_tensor(_grad(x, "x"), torch.tensor([3.0, 4.0], dtype=torch.float64), "x.grad of (x * c).sum()",
                  input="(x * c).sum().backward()", what="x.grad")
    expect(_grad(c, "c") is None and _grad(u, "u") is None,
           "a tensor that does not require grad, and a leaf not in the graph, keep grad None",
           input="c = Tensor([3, 4]); u = Tensor([5], requires_grad=True) unused",
           expected="c.grad None, u.grad None", got=(_grad(c, "c"), _grad(u, "u")))


@kata_test(level=3, category="correctness", weight=2,
           description="no_grad(): results need no grad inside; grad mode comes back on exit, after an exception too")
def test_no_grad(solution):
    report = run_in_one_process(no_grad_trials, solution)
    expected = {"inside": False, "inside, after a nested block": False, "after the block": True,
                "after a block left by an exception": True, "grad of sum(x * x + no_grad(3x))": [2.0, 4.0, 6.0]}
    for key, want in expected.items():
        expect(report.get(key) == want, f"no_grad: requires_grad {key}" if "grad of" not in key
               else "a tensor made under no_grad is a constant for the graph", input=
               "x = Tensor([1, 2, 3], requires_grad=True); x.mul(2.0) inside and after `with no_grad():` blocks",
               expected=want, got=report.get(key))


@kata_test(level=3, category="edge cases", weight=2, description="0-size tensors get zero gradients of their shape")
@settings(max_examples=15)
@given(shape=shapes(min_dims=1).filter(lambda s: 0 in s))
def test_zero_size_grads(solution, shape):
    tx = new_tensor(None, shape, [], True)
    gx = new_tensor(solution, shape, [], True)
    other = solution.Tensor([[1.0, 2.0]], requires_grad=True)
    t_other = torch.tensor([[1.0, 2.0]], dtype=torch.float64, requires_grad=True)
    tx.exp().sum().add(tx.log().sum()).add(t_other.sum()).backward()
    gx.exp().sum().add(gx.log().sum()).add(other.sum()).backward()
    expect_grad(gx, tx, "an empty tensor's gradient is zeros of its shape",
                input={"x": f"shape {shape}", "out": "x.exp().sum() + x.log().sum() + y.sum()"})


@kata_test(level=3, category="api contract", weight=2,
           description="RuntimeError from backward on misuse, as torch raises")
def test_backward_errors(solution):
    c = solution.Tensor([1.0, 2.0])
    expect_error(lambda: c.sum().backward(), RuntimeError, "backward() of a tensor that does not require grad")
    x = solution.Tensor([1.0, 2.0], requires_grad=True)
    expect_error(lambda: x.mul(2.0).backward(), RuntimeError, "backward() without a gradient on a (2,) output")
    expect_error(lambda: x.mul(2.0).backward(solution.Tensor([1.0, 2.0, 3.0])), RuntimeError,
                 "backward(gradient of shape (3,)) on a (2,) output")
    x.mul(x).sum().backward()
    expect_tensor(_grad(x, "x"), torch.tensor([2.0, 4.0], dtype=torch.float64),
                  "x.grad after the rejected calls: only the good backward counts",
                  input="x.mul(x).sum().backward() after the rejected calls", what="x.grad")
