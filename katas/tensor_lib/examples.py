"""Visible examples for the `tensor-lib` kata (`kata check` runs them against your file).

Small fixed inputs with numbers you can check by hand: the statement's worked examples. The
hidden suite tests much more (random shapes of 0-4 dims, 0-size dims, non-contiguous
inputs, every view, broadcasting, ties, gradients against torch.autograd).
"""

from __future__ import annotations

from grader.protocol import expect, kata_test

X = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def _is(got, expected, what, call):
    expect(got == expected, what, input=call, expected=expected, got=got)


# ---------------------------------------------------------------------------- level 1


@kata_test(level=1, category="correctness", description="shape, strides and views of the worked example")
def test_views_example(solution):
    x = solution.Tensor([[1, 2, 3], [4, 5, 6]])
    _is((x.shape, x.strides), ((2, 3), (3, 1)), "shape and strides", "Tensor([[1, 2, 3], [4, 5, 6]])")
    t = x.transpose(0, 1)
    _is((t.shape, t.strides, t.tolist()), ((3, 2), (1, 3), [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]),
        "transpose is a view", "x.transpose(0, 1)")
    s = x[:, ::2]
    _is((s.shape, s.strides, s.tolist()), ((2, 2), (3, 2), [[1.0, 3.0], [4.0, 6.0]]), "a slice with a step",
        "x[:, ::2]")
    s[1, 1] = 60.0
    _is(x.tolist(), [[1.0, 2.0, 3.0], [4.0, 5.0, 60.0]], "a write through a view is seen by x",
        "s = x[:, ::2]; s[1, 1] = 60.0; x.tolist()")
    _is(t.is_contiguous(), False, "a transpose is not contiguous", "x.transpose(0, 1).is_contiguous()")
    r = t.reshape(6)
    _is((r.strides, r.tolist()), ((1,), [1.0, 4.0, 2.0, 5.0, 3.0, 60.0]), "reshape of a transpose copies",
        "x.transpose(0, 1).reshape(6)")
    _is(x.reshape(3, 2).strides, (2, 1), "reshape of a contiguous tensor is a view", "x.reshape(3, 2)")


# ---------------------------------------------------------------------------- level 2


@kata_test(level=2, category="correctness", description="broadcasting, sum, max and matmul on the worked example")
def test_math_example(solution):
    x = solution.Tensor(X)
    b = solution.Tensor([10.0, 20.0, 30.0])
    _is(x.add(b).tolist(), [[11.0, 22.0, 33.0], [14.0, 25.0, 36.0]], "(2, 3) + (3,) broadcasts", "x.add(b)")
    _is(x.sum(0).tolist(), [5.0, 7.0, 9.0], "sum over dim 0", "x.sum(0)")
    _is(x.sum(1, keepdim=True).shape, (2, 1), "keepdim keeps the dim", "x.sum(1, keepdim=True)")
    _is(x.max().tolist(), 6.0, "max of everything, 0-d", "x.max()")
    _is(x.matmul(solution.Tensor([1.0, 0.0, -1.0])).tolist(), [-2.0, -2.0], "matrix @ vector is 1-D",
        "x.matmul([1, 0, -1])")


# ---------------------------------------------------------------------------- level 3


@kata_test(level=3, category="correctness", description="gradients of the worked example")
def test_autograd_example(solution):
    x = solution.Tensor(X, requires_grad=True)
    w = solution.Tensor([[1.0], [0.0], [-1.0]], requires_grad=True)
    y = x.matmul(w).exp().sum().add(x.max())
    y.backward()
    e2 = 2.718281828459045 ** -2
    expected = [[e2, 0.0, -e2], [e2, 0.0, -e2 + 1.0]]
    _close(x.grad.tolist(), expected, "x.grad of sum(exp(x @ w)) + max(x)")
    _close(w.grad.tolist(), [[5 * e2], [7 * e2], [9 * e2]], "w.grad of the same y")


def _close(got, expected, what):
    ok = isinstance(got, list) and len(got) == len(expected) and all(
        isinstance(gr, list) and len(gr) == len(er) and all(abs(g - e) < 1e-12 for g, e in zip(gr, er))
        for gr, er in zip(got, expected))
    expect(ok, what, input="x = [[1, 2, 3], [4, 5, 6]], w = [[1], [0], [-1]]; y = sum(exp(x @ w)) + max(x); "
           "y.backward()", expected=expected, got=got)
