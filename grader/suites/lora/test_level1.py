"""Level 1: LoRALinear: frozen base, low-rank update, dropout.

Each rule of the statement's level 1, and the test that builds the situation where it decides
the outcome. The random tests (forward, gradients) run in addition.
"""

from __future__ import annotations

import math

import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch import nn

from grader.protocol import PropertyFailure, expect, kata_test
from grader.suites._common import check_close
from grader.suites.lora.strategies import (ALL_DTYPES, DTYPES, PROBE_IN, PROBE_ROWS, Case, base_out,
                                           build, cases, codes_are_masks, dropout_probe,
                                           dtype_name, forward, kept_bits, lora_update, param,
                                           probe_codes, set_param, showing)

RULES = {
    "__init__ wraps base in place (no copy)": "test_base_wrapped_in_place_and_frozen",
    "base.weight and base.bias get requires_grad = False":
        ("test_base_wrapped_in_place_and_frozen", "test_only_lora_params_receive_gradients"),
    "only lora_A and lora_B train; their gradients are the reference's (alpha = 0.0: zero "
    "gradients, the update stays in the graph)": "test_only_lora_params_receive_gradients",
    "lora_A (r, in) and lora_B (out, r); state_dict names lora_A, lora_B, base.weight, base.bias":
        "test_state_dict_names_and_shapes",
    "lora_A and lora_B have base.weight's dtype (float32, float64, bfloat16, float16)":
        "test_state_dict_names_and_shapes",
    "lora_A: kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), both signs":
        "test_lora_A_kaiming_and_lora_B_zero_at_init",
    "lora_B: zeros, so the layer starts equal to base":
        ("test_lora_A_kaiming_and_lora_B_zero_at_init", "test_init_output_equals_base"),
    "scaling = alpha / r, a float (alpha = 0.0 and fractional alphas included)":
        ("test_scaling_is_alpha_over_r_for_edge_alphas", "test_lora_update_scaled_by_alpha_over_r"),
    "ValueError when r < 1 (r = 0 included; r = 1 is valid)": "test_rank_below_one_raises",
    "forward(x) = base(x) + (dropout(x) @ lora_A.T @ lora_B.T) * scaling":
        "test_forward_matches_reference",
    "forward: x (..., in) -> (..., out) in x's dtype, any leading dims (none, several, empty)":
        ("test_forward_matches_reference", "test_one_layer_reused_across_calls"),
    "forward does not modify x (in train mode with dropout too)":
        ("test_forward_matches_reference", "test_train_mode_drops_lora_input_only"),
    "one layer serves calls of other shapes, other dtypes (after .to()) and updated parameters":
        "test_one_layer_reused_across_calls",
    "dropout acts on the adapter's input x: each element 0 or x / (1 - p); never the base path":
        "test_train_mode_drops_lora_input_only",
    "dropout (nn.Dropout): each element dropped independently with probability p, a fresh mask "
    "on every call": "test_train_mode_dropout_rate_and_fresh_masks",
    "dropout = 1.0 (nn.Dropout semantics): every element zeroed, forward(x) = base(x) in "
    "train mode": "test_dropout_one_drops_the_whole_update",
    "dropout only in training mode: eval() turns it off, train() back on (same layer)":
        "test_eval_mode_is_deterministic_with_dropout",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    '__init__ wraps base in place (no copy)':
        'wrap',
    'base.weight and base.bias get requires_grad = False':
        'frozen',
    "only lora_A and lora_B train; their gradients are the reference's (alpha = 0.0: zero"
    ' gradients, the update stays in the graph)':
        'frozen',
    'lora_A (r, in) and lora_B (out, r); state_dict names lora_A, lora_B, base.weight, '
    'base.bias':
        'ask',
    "lora_A and lora_B have base.weight's dtype (float32, float64, bfloat16, float16)":
        'ask',
    'lora_A: kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), both signs':
        'init',
    'lora_B: zeros, so the layer starts equal to base':
        'init',
    'scaling = alpha / r, a float (alpha = 0.0 and fractional alphas included)':
        'scaling',
    'ValueError when r < 1 (r = 0 included; r = 1 is valid)':
        'ask',
    'forward(x) = base(x) + (dropout(x) @ lora_A.T @ lora_B.T) * scaling':
        ('ask', 'scaling', 'dropout-where'),
    "forward: x (..., in) -> (..., out) in x's dtype, any leading dims (none, several, "
    'empty)':
        'ask',
    'forward does not modify x (in train mode with dropout too)':
        'ask',
    'one layer serves calls of other shapes, other dtypes (after .to()) and updated '
    'parameters':
        'reuse',
    "dropout acts on the adapter's input x: each element 0 or x / (1 - p); never the base"
    ' path':
        'dropout-where',
    'dropout (nn.Dropout): each element dropped independently with probability p, a fresh'
    ' mask on every call':
        ('ask', 'dropout-where'),
    'dropout = 1.0 (nn.Dropout semantics): every element zeroed, forward(x) = base(x) in '
    'train mode':
        'dropout-one',
    'dropout only in training mode: eval() turns it off, train() back on (same layer)':
        'dropout-where',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# dropout = 1.0 is nn.Dropout's edge (zeros, not 0 / 0): noted, not failed on.
DETAILS = {
    'dropout = 1.0 (nn.Dropout semantics): every element zeroed, forward(x) = base(x) in '
    'train mode',
}


@kata_test(level=1, category="api contract",
           description="lora_A (r, in), lora_B (out, r), base.weight, base.bias are the "
                       "state_dict names, in base's dtype (every float dtype)")
@settings(max_examples=5)
@given(case=cases())
def test_state_dict_names_and_shapes(solution, case):
    out_f, in_f = case.weight.shape
    wanted = {"lora_A": (case.r, in_f), "lora_B": (out_f, case.r), "base.weight": (out_f, in_f)}
    if case.bias is not None:
        wanted["base.bias"] = (out_f,)
    for dtype in ALL_DTYPES:  # every dtype on every example
        typed = case.to(dtype)
        state = build(solution, typed, with_adapter=False).state_dict()
        got = {k: tuple(v.shape) for k, v in state.items()}
        for name, shape in wanted.items():
            expect(got.get(name) == shape, f"state_dict has {name!r} of shape {shape}",
                   input=typed.shown(x="unused"), expected=wanted, got=got)
            expect(state[name].dtype == dtype, f"{name!r} has base.weight's dtype",
                   input=typed.shown(x="unused"), expected=dtype_name(dtype),
                   got=dtype_name(state[name].dtype))


@kata_test(level=1, category="api contract",
           description="__init__ uses the base it is given (no copy) and freezes it")
def test_base_wrapped_in_place_and_frozen(solution):
    for bias in (True, False):
        base = nn.Linear(3, 2, bias=bias)
        shown = {"base": f"nn.Linear(3, 2, bias={bias})",
                 "call": "LoRALinear(base, r=2, alpha=4.0)"}
        with showing(shown):
            layer = solution.LoRALinear(base, 2, 4.0)
        expect(layer.base is base, "LoRALinear wraps the base it is given in place: "
               "layer.base is base (not a copy)", input=shown, expected="the same nn.Linear",
               got="a different module")
        flags = {name: p.requires_grad for name, p in base.named_parameters()}
        expect(not any(flags.values()), "__init__ freezes base: base.weight and base.bias get "
               "requires_grad = False", input=shown, expected={k: False for k in flags},
               got=flags)


@kata_test(level=1, category="api contract",
           description="at init lora_B is zero and lora_A is Kaiming-uniform: "
                       "U(-1/sqrt(in_features), 1/sqrt(in_features)), negative values included")
@settings(max_examples=6)
@given(in_f=st.integers(16, 32), dtype=st.sampled_from(DTYPES))
def test_lora_A_kaiming_and_lora_B_zero_at_init(solution, in_f, dtype):
    # r * in >= 128 draws: a correct init has max |A| within 10% of the bound on every seed
    # (miss probability 0.9^128 < 1e-5), and Kaiming's default gain (bound sqrt(6 / in))
    # leaves the bound on every seed.
    r = 8
    case = Case(r=r, alpha=8.0, weight=torch.zeros(2, in_f, dtype=dtype), bias=None,
                lora_A=torch.zeros(r, in_f, dtype=dtype), lora_B=torch.zeros(2, r, dtype=dtype),
                x=torch.zeros(in_f, dtype=dtype))
    layer = build(solution, case, with_adapter=False)
    A, B = param(layer, "lora_A").detach(), param(layer, "lora_B").detach()
    shown = {"in_features": in_f, "out_features": 2, "r": r, "dtype": dtype_name(case.dtype)}
    expect(bool((B == 0).all()), "lora_B starts at zero, so the layer starts equal to base",
           input=shown, expected="all zeros", got=B)
    bound = 1 / math.sqrt(in_f)
    largest = float(A.abs().max())
    expect(largest <= bound * (1 + 1e-6) and largest >= 0.9 * bound,
           "lora_A starts Kaiming-uniform: kaiming_uniform_(a=sqrt(5)) draws from "
           "U(-1/sqrt(in_features), 1/sqrt(in_features))", input=shown,
           expected={"every |value| at most": bound, "largest |value| at least": 0.9 * bound},
           got={"largest |value|": largest})
    # Both halves of the interval: a correct init misses either half-tail (beyond bound / 2)
    # with probability 0.75^128 < 1e-15; U(0, bound) or |U| never reaches the negative one.
    low, high = float(A.min()), float(A.max())
    expect(low <= -0.5 * bound and high >= 0.5 * bound,
           "lora_A is symmetric around zero: U(-1/sqrt(in_features), 1/sqrt(in_features)) "
           "draws negative values as often as positive ones", input=shown,
           expected={"smallest value at most": -0.5 * bound, "largest value at least": 0.5 * bound},
           got={"smallest value": low, "largest value": high})


@kata_test(level=1, category="correctness", description="at init the output equals base(x)",
           weight=2)
@settings(max_examples=10)
@given(case=cases())
def test_init_output_equals_base(solution, case):
    layer = build(solution, case, with_adapter=False)
    check_close(forward(layer, case.x), base_out(case), "at init (lora_B = 0) forward(x) "
                "equals base(x)", input=case.shown(lora_A="random", lora_B="as initialised"))


@kata_test(level=1, category="correctness",
           description="forward matches the reference for the same parameters, any leading "
                       "dims (empty batches too), without modifying x", weight=2)
@settings(max_examples=20)
@given(case=cases())
def test_forward_matches_reference(solution, reference, case):
    x_before = case.x.clone()
    got = forward(build(solution, case), case.x, share_inputs=True)
    expect(torch.equal(case.x, x_before), "forward does not modify its input x",
           input=case.shown(x=x_before), expected=x_before, got=case.x)
    check_close(got, forward(build(reference, case), x_before),
                "forward(x) = base(x) + (x @ lora_A.T @ lora_B.T) * alpha / r", input=case.shown())


@kata_test(level=1, category="correctness",
           description="the low-rank update is scaled by alpha / r")
@settings(max_examples=15)
@given(case=cases())
def test_lora_update_scaled_by_alpha_over_r(solution, case):
    got = forward(build(solution, case), case.x) - base_out(case)
    check_close(got, lora_update(case, case.alpha / case.r),
                "forward(x) - base(x) = (x @ lora_A.T @ lora_B.T) * scaling with scaling = "
                "alpha / r", input=case.shown(scaling=case.alpha / case.r))


EDGE_SCALINGS = ((1, 0.0), (3, 0.0), (3, 0.5), (3, 8.0), (2, 1.0), (4, 2.0), (1, 16.0))


@kata_test(level=1, category="edge cases",
           description="scaling is alpha / r as a float for edge values: alpha = 0.0 (falsy "
                       "but valid), fractional alpha, alpha not a multiple of r")
def test_scaling_is_alpha_over_r_for_edge_alphas(solution):
    weight = torch.tensor([[1.0, -2.0, 0.0], [2.0, 1.0, -1.0]], dtype=torch.float64)
    x = torch.tensor([[1.0, 2.0, -1.0], [3.0, 0.0, 2.0]], dtype=torch.float64)
    for r, alpha in EDGE_SCALINGS:
        A = torch.arange(1, 3 * r + 1, dtype=torch.float64).reshape(r, 3) % 3 - 1
        B = torch.ones(2, r, dtype=torch.float64)
        A[0, 0] = 2.0  # a nonzero update, so the scaling shows
        case = Case(r=r, alpha=alpha, weight=weight, bias=None, lora_A=A, lora_B=B, x=x)
        with showing(case.shown()):
            layer = build(solution, case)
            got = forward(layer, x) - base_out(case)
        check_close(got, lora_update(case, alpha / r), f"forward(x) - base(x) = (x @ lora_A.T @ "
                    f"lora_B.T) * alpha / r, also for alpha = {alpha!r}, r = {r}",
                    input=case.shown(scaling=alpha / r))
        scaling = layer.scaling
        expect(isinstance(scaling, float) and math.isclose(scaling, alpha / r, abs_tol=1e-12),
               "the attribute scaling is the float alpha / r", input={"r": r, "alpha": alpha},
               expected=alpha / r, got=scaling)


# alpha = 0.0: scaling 0, yet the update stays in the graph (zero gradients, not none).
ZERO_ALPHA_CASE = Case(r=2, alpha=0.0, weight=torch.tensor([[1.0, -1.0, 2.0], [0.0, 2.0, -1.0]]),
                       bias=torch.tensor([1.0, -2.0]),
                       lora_A=torch.tensor([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]]),
                       lora_B=torch.tensor([[1.0, -1.0], [0.0, 2.0]]),
                       x=torch.tensor([[1.0, 2.0, -1.0], [0.0, -2.0, 1.0]]))


@kata_test(level=1, category="correctness",
           description="base is frozen: only lora_A and lora_B are trainable and get gradients "
                       "(equal to the reference's), also with alpha = 0.0", weight=2)
@settings(max_examples=10)
@given(case=cases(), seed=st.integers(0, 1000))
@example(case=ZERO_ALPHA_CASE, seed=0)
def test_only_lora_params_receive_gradients(solution, reference, case, seed):
    layer = build(solution, case)
    trainable = sorted(n for n, p in layer.named_parameters() if p.requires_grad)
    expect(trainable == ["lora_A", "lora_B"], "only lora_A and lora_B require grad (base.weight "
           "and base.bias are frozen)", input=case.shown(), expected=["lora_A", "lora_B"],
           got=trainable)
    ref = build(reference, case)
    weights = torch.randn(case.x.shape[:-1] + case.weight.shape[:1],
                          generator=torch.Generator().manual_seed(seed), dtype=case.dtype)
    out = layer(case.x.clone())  # a copy: the reference reads case.x after this call
    expect(out.requires_grad, "forward(x) depends on lora_A and lora_B through autograd, "
           "for every alpha: with alpha = 0.0 (scaling 0) they still train, with zero "
           "gradients", input=case.shown(), expected="an output that requires grad",
           got="requires_grad=False")
    (out * weights).sum().backward()
    (ref(case.x) * weights).sum().backward()
    params = dict(layer.named_parameters())  # fetched after backward: the grads are there now
    for name in ("base.weight", "base.bias"):
        p = params.get(name)
        expect(p is None or p.grad is None, f"{name} receives no gradient",
               input=case.shown(), expected=None, got=None if p is None else p.grad)
    for name in ("lora_A", "lora_B"):
        got_grad = params[name].grad
        expect(got_grad is not None, f"{name} receives a gradient", input=case.shown(),
               expected="a tensor", got=None)
        check_close(got_grad, param(ref, name).grad,
                    f"the gradient of sum(forward(x) * w) with respect to {name}",
                    input=case.shown(w=weights))


@kata_test(level=1, category="edge cases",
           description="r < 1 raises ValueError (r = 0 included); r = 1 works on the same base")
def test_rank_below_one_raises(solution, reference):
    weight = torch.tensor([[1.0, 2.0, 0.0], [-1.0, 1.0, 2.0]])
    case = Case(r=1, alpha=2.0, weight=weight, bias=torch.tensor([0.5, -1.0]),
                lora_A=torch.tensor([[1.0, -1.0, 2.0]]), lora_B=torch.tensor([[1.0], [2.0]]),
                x=torch.tensor([[1.0, 2.0, 3.0]]))
    base = nn.Linear(3, 2)
    for r in (0, -1):
        calls = [f"LoRALinear(nn.Linear(3, 2), r={r}, alpha=2.0)"]
        try:
            solution.LoRALinear(base, r, 2.0)
        except ValueError:
            continue
        raise PropertyFailure("LoRALinear(base, r, alpha) with r < 1 raises ValueError",
                              input={"calls": calls}, expected="ValueError", got="no exception")
    # Looking forward: the smallest valid rank on the same base works as usual.
    calls = ["LoRALinear(base, r=0, alpha=2.0) -> ValueError",
             "LoRALinear(base, r=-1, alpha=2.0) -> ValueError",
             "LoRALinear(base, r=1, alpha=2.0)"]
    with showing({"calls": calls, **case.shown()}):
        layer = build(solution, case)
        got = forward(layer, case.x)
    check_close(got, forward(build(reference, case), case.x), "after rejected ranks, "
                "LoRALinear with r = 1 works: forward(x) matches the reference",
                input={"calls": calls, **case.shown()})


# ------------------------------------------------------------------------------ dropout


def _forward_keeping_x(layer: nn.Module, probe, shown: dict) -> torch.Tensor:
    x = probe.case.x.clone()
    with showing(shown):
        got = forward(layer, x, share_inputs=True)
    expect(torch.equal(x, probe.case.x), "forward does not modify its input x, also in "
           "training mode with dropout (no in-place dropout on the caller's x)", input=shown,
           expected=probe.case.x[:2], got=x[:2], note="first two rows shown")
    return got


@kata_test(level=1, category="correctness",
           description="in train mode dropout hits the adapter's input x only (inverted "
                       "dropout): not the base path, not the hidden x @ lora_A.T, not the "
                       "output", weight=2)
def test_train_mode_drops_lora_input_only(solution):
    probe = dropout_probe(0.25)
    layer = build(solution, probe.case, dropout=probe.p)
    layer.train()
    shown = {**probe.shown, "calls": ["layer.train()", "forward(x)"]}
    codes = probe_codes(probe, _forward_keeping_x(layer, probe, shown))
    ok = codes_are_masks(codes)
    if not bool(ok.all()):
        row, col = (~ok).nonzero()[0].tolist()
        raise PropertyFailure(
            "in train mode forward(x) - base(x) = dropout(x) @ lora_A.T @ lora_B.T * scaling, "
            "each element of dropout(x) 0 or x / (1 - p); the base path sees no dropout",
            input=shown, expected=f"(1 - p) * (forward(x) - base(x)) in row {row}, output {col}: "
            "a sum of some of 1., 2., 4., ..., 32.",
            got=codes[row, col].item())
    rounded = codes.round()
    differ = (rounded[:, 0] != rounded[:, 1]).nonzero()
    if len(differ):
        row = differ[0].item()
        raise PropertyFailure(
            "dropout acts on the adapter's input x, not on its output: both outputs of a row "
            "see the same dropped inputs", input=shown,
            expected=f"equal sums of kept inputs in both outputs of row {row}",
            got=f"(1 - p) * (forward(x) - base(x)) = {rounded[row].tolist()}")
    partial = (rounded[:, 0] > 0) & (rounded[:, 0] < 2**PROBE_IN - 1)
    expect(bool(partial.any()), "dropout acts on each element of the input x, not on "
           "x @ lora_A.T: some rows keep part of their inputs and drop the rest",
           input=shown, expected="rows whose kept sum lies strictly between 0 and 63",
           got=f"kept sums {sorted(set(rounded[:, 0].tolist()))}")


@kata_test(level=1, category="correctness",
           description="in train mode dropout zeroes each element independently with "
                       "probability p, with a fresh mask on every call")
def test_train_mode_dropout_rate_and_fresh_masks(solution):
    for p in (0.25, 0.75):
        probe = dropout_probe(p)
        layer = build(solution, probe.case, dropout=p)
        layer.train()
        shown = {**probe.shown, "calls": ["layer.train()", "forward(x)", "forward(x)"]}
        with showing(shown):
            first = probe_codes(probe, forward(layer, probe.case.x.clone()))
            second = probe_codes(probe, forward(layer, probe.case.x.clone()))
        if not (bool(codes_are_masks(first).all()) and bool(codes_are_masks(second).all())):
            return  # dropout in the wrong place: test_train_mode_drops_lora_input_only says so
        kept = kept_bits(first)
        dropped = 1 - kept.double().mean().item()
        expect(abs(dropped - p) <= 0.15, f"dropout zeroes each element with probability p "
               f"(p = {p}, not 1 - p)", input=shown,
               expected=f"about {p:.0%} of {kept.numel()} elements dropped",
               got=f"{dropped:.0%} dropped")
        expect(len(set(first[:, 0].round().tolist())) > 1, "dropout draws each element "
               "independently: the rows of one batch get different masks", input=shown,
               expected="different kept inputs in different rows",
               got=f"every row kept {kept[0].nonzero().flatten().tolist()}")
        expect(not torch.equal(first.round(), second.round()), "dropout draws a fresh mask on "
               "every call", input=shown, expected="two calls with different masks",
               got=f"the same mask on both calls ({PROBE_ROWS} rows)")


@kata_test(level=1, category="edge cases",
           description="dropout = 1.0 (nn.Dropout(1.0)): in train mode every input of the "
                       "adapter is dropped, so forward(x) equals base(x), with no 0 / 0")
def test_dropout_one_drops_the_whole_update(solution):
    probe = dropout_probe(1.0)
    layer = build(solution, probe.case, dropout=probe.p)
    shown = {**probe.shown, "calls": ["layer.train()", "forward(x)"]}
    with showing(shown):
        layer.train()
        got = forward(layer, probe.case.x.clone())
    check_close(got, base_out(probe.case), "with dropout = 1.0 every element of the adapter's "
                "input is zeroed (nn.Dropout(1.0) gives zeros, not 0 / (1 - p)): in train mode "
                "forward(x) = base(x)", input=shown)


@kata_test(level=1, category="correctness",
           description="dropout only in training mode: eval() makes the layer deterministic "
                       "and dropout-free, train() turns dropout back on")
def test_eval_mode_is_deterministic_with_dropout(solution, reference):
    probe = dropout_probe(0.5)
    layer = build(solution, probe.case, dropout=probe.p)
    no_dropout = forward(build(reference, probe.case), probe.case.x)
    calls = []
    for mode in ("train", "eval", "train", "eval"):
        getattr(layer, mode)()
        calls += [f"layer.{mode}()", "forward(x)"]
        shown = {**probe.shown, "calls": list(calls)}
        with showing(shown):
            got = forward(layer, probe.case.x.clone())
        if mode == "eval":
            check_close(got, no_dropout, "in eval mode there is no dropout: forward(x) equals "
                        "the output without dropout", input=shown)
            continue
        expect(not torch.allclose(got, no_dropout), "in train mode dropout is on, also after "
               "eval() and train() on the same layer", input=shown,
               expected=f"some of {PROBE_ROWS} rows with dropped inputs",
               got="the output without dropout")


@kata_test(level=1, category="correctness",
           description="one layer, many calls: other leading dims, an empty batch, eval and "
                       "train, updated lora_A / lora_B, .to(float64) and .to(bfloat16)", weight=2)
def test_one_layer_reused_across_calls(solution, reference):
    case = Case(r=2, alpha=2.0, weight=torch.tensor([[1.0, -1.0, 2.0], [0.0, 2.0, -1.0]]),
                bias=torch.tensor([1.0, -2.0]), lora_A=torch.tensor([[1.0, 0.0, -1.0],
                                                                     [2.0, 1.0, 0.0]]),
                lora_B=torch.tensor([[1.0, -1.0], [0.0, 2.0]]), x=torch.zeros(3))
    layer, model = build(solution, case, dropout=0.0), build(reference, case, dropout=0.0)
    xs = torch.tensor([[1.0, 2.0, -1.0], [0.0, -2.0, 1.0], [2.0, 1.0, 1.0], [-1.0, 0.0, 2.0]])
    not_contiguous = xs[:2].reshape(1, 2, 3).expand(2, 2, 3)
    steps = [("forward", xs[0]), ("forward", xs), ("forward", not_contiguous),
             ("forward", xs[:0]), ("mode", "eval"), ("forward", xs), ("update", None),
             ("forward", xs), ("to", torch.float64), ("forward", xs), ("mode", "train"),
             ("update", None), ("forward", xs[1:3]), ("to", torch.bfloat16), ("forward", xs),
             ("mode", "eval"), ("forward", xs[:0].reshape(0, 2, 3))]
    calls: list[str] = ["LoRALinear(base float32, r=2, alpha=2.0, dropout=0.0)"]
    dtype = torch.float32
    for kind, arg in steps:
        shown = {**case.shown(x="see calls"), "calls": list(calls)}
        if kind == "update":  # a training step: both adapters change in place
            for name, step in (("lora_A", 1.0), ("lora_B", -1.0)):
                new = param(model, name).detach() + step
                set_param(layer, name, new)
                set_param(model, name, new)
            calls.append("lora_A += 1; lora_B -= 1 (in place)")
            continue
        if kind == "mode":
            with showing(shown):
                getattr(layer, arg)()
            getattr(model, arg)()
            calls.append(f"layer.{arg}()")
            continue
        if kind == "to":
            dtype = arg
            with showing(shown):
                layer.to(dtype)
            model.to(dtype)
            calls.append(f"layer.to({dtype_name(dtype)})")
            continue
        x = arg.to(dtype)
        calls.append(f"forward(x of shape {tuple(x.shape)}, {dtype_name(dtype)})")
        shown = {**case.shown(x=x), "calls": list(calls)}
        with showing(shown):
            got = forward(layer, x)
        check_close(got, forward(model, x), "the same layer gives the reference's output on "
                    "every call: any leading dims, eval or train, after parameter updates and "
                    "after .to(dtype)",
                    input=shown)
