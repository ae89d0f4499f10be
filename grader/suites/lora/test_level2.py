"""Level 2: delta_weight, merge, unmerge, merged, rsLoRA.

Each rule of the statement's level 2, and the test that builds the situation where it decides
the outcome. The lockstep machine runs random merge/unmerge/training sequences in addition.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from grader.protocol import expect, kata_test
from grader.suites._common import check_close
from grader.suites.lora.lockstep import merge_machine
from grader.suites.lora.strategies import (ALL_DTYPES, Case, base_out, build, cases, delta_of,
                                           dropout_probe, float_cases, forward, lora_update,
                                           merge_atol, param, set_param, showing)

RULES = {
    "delta_weight() = scaling * lora_B @ lora_A, (out, in), base.weight's dtype (every dtype)":
        "test_delta_weight_is_scaled_B_times_A",
    "delta_weight() has rank at most r": "test_delta_weight_rank_at_most_r",
    "delta_weight() carries the scaling alpha / r (linear in alpha)":
        "test_delta_weight_linear_in_alpha",
    "use_rslora=True: scaling = alpha / sqrt(r) in forward, delta_weight, merge and the "
    "scaling attribute (r >= 2, where it differs from alpha / r)": "test_rslora_scaling",
    "after merge(), forward(x) equals the unmerged forward up to rounding (bf16 included)":
        "test_merge_then_forward_matches_unmerged",
    "after merge(), forward(x) is base(x) only: no second update, no dropout in train mode":
        "test_merged_forward_is_base_only_in_train_mode",
    "merge(); unmerge() restores base.weight up to rounding":
        "test_merge_then_unmerge_restores_weight",
    "merge() twice is a no-op; unmerge() when not merged is a no-op": "test_merge_twice_is_noop",
    "merged is False, True after merge(), False after unmerge()":
        "test_merged_flag_and_base_stays_frozen",
    "the base stays frozen: base.weight keeps requires_grad = False and no autograd history":
        "test_merged_flag_and_base_stays_frozen",
    "merge and unmerge change base.weight in place: the same Parameter object, never a new one":
        "test_merged_flag_and_base_stays_frozen",
    "merge and unmerge use the adapter as it is now: training steps between merges; lora_A "
    "and lora_B still train after unmerge()": ("test_merge_interleaved_with_training_steps",
                                              "test_merge_unmerge_sequences_match_reference"),
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    "delta_weight() = scaling * lora_B @ lora_A, (out, in), base.weight's dtype (every "
    'dtype)':
        ('ask', 'scaling'),
    'delta_weight() has rank at most r':
        'ask',
    'delta_weight() carries the scaling alpha / r (linear in alpha)':
        'scaling',
    'use_rslora=True: scaling = alpha / sqrt(r) in forward, delta_weight, merge and the '
    'scaling attribute (r >= 2, where it differs from alpha / r)':
        'rslora',
    'after merge(), forward(x) equals the unmerged forward up to rounding (bf16 included)':
        'ask',
    'after merge(), forward(x) is base(x) only: no second update, no dropout in train '
    'mode':
        'merged-forward',
    'merge(); unmerge() restores base.weight up to rounding':
        'ask',
    'merge() twice is a no-op; unmerge() when not merged is a no-op':
        'merge-twice',
    'merged is False, True after merge(), False after unmerge()':
        'ask',
    'the base stays frozen: base.weight keeps requires_grad = False and no autograd '
    'history':
        'merge-in-place',
    'merge and unmerge change base.weight in place: the same Parameter object, never a '
    'new one':
        'merge-in-place',
    'merge and unmerge use the adapter as it is now: training steps between merges; '
    'lora_A and lora_B still train after unmerge()':
        'train-between',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS: set[str] = set()


@kata_test(level=2, category="correctness",
           description="delta_weight() = scaling * lora_B @ lora_A, shape (out, in), in "
                       "base.weight's dtype", weight=2)
@settings(max_examples=10)
@given(case=cases())
def test_delta_weight_is_scaled_B_times_A(solution, case):
    scaling = case.alpha / case.r
    for dtype in ALL_DTYPES:  # every dtype on every example
        typed = case.to(dtype)
        expected = ((typed.lora_B.double() @ typed.lora_A.double()) * scaling).to(dtype)
        with showing(typed.shown(x="unused")):
            got = delta_of(build(solution, typed))
        check_close(got, expected, "delta_weight() = (alpha / r) * lora_B @ lora_A, "
                    "(out_features, in_features), base.weight's dtype",
                    input=typed.shown(x="unused"))


@kata_test(level=2, category="numerics", description="delta_weight() has rank at most r")
@settings(max_examples=8)
@given(in_f=st.integers(2, 5), out_f=st.integers(2, 5), r=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_delta_weight_rank_at_most_r(solution, in_f, out_f, r, seed):
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731 - a one-line helper over gen
    case = Case(r=r, alpha=8.0, weight=rand(out_f, in_f), bias=None, lora_A=rand(r, in_f),
                lora_B=rand(out_f, r), x=rand(1, in_f))
    delta = delta_of(build(solution, case))
    rank = int(torch.linalg.matrix_rank(delta.double()))
    expect(rank <= r, "delta_weight() has rank at most r (it is a product through r dims)",
           input=case.shown(x="unused"), expected=f"rank <= {r}", got=f"rank {rank}: {delta}")


@kata_test(level=2, category="correctness",
           description="delta_weight() is linear in alpha (doubling alpha doubles it)")
@settings(max_examples=10)
@given(case=cases(dtypes=(torch.float64,)), factor=st.sampled_from((2.0, 3.0, 0.5)))
def test_delta_weight_linear_in_alpha(solution, case, factor):
    case.lora_A[case.lora_A == 0] = 1.0  # a nonzero update, so linearity is visible
    case.lora_B[case.lora_B == 0] = 1.0
    small = delta_of(build(solution, case))
    big_case = copy.copy(case)
    big_case.alpha = case.alpha * factor
    check_close(delta_of(build(solution, big_case)), small * factor,
                f"delta_weight() with alpha * {factor:g} is {factor:g} * delta_weight() with alpha",
                input=case.shown(factor=factor))


# r = 4, all ones: alpha / sqrt(r) = 1 against alpha / r = 0.5, an update on every output.
RSLORA_CASE = Case(r=4, alpha=2.0, weight=torch.tensor([[1.0, 0.0], [-1.0, 2.0]]), bias=None,
                   lora_A=torch.ones(4, 2), lora_B=torch.ones(2, 4), x=torch.tensor([[1.0, 2.0]]))


@kata_test(level=2, category="correctness",
           description="use_rslora=True scales by alpha / sqrt(r) in forward, delta_weight and "
                       "merge")
@settings(max_examples=12)
@given(case=cases(min_r=2, max_r=4))
@example(case=RSLORA_CASE)
def test_rslora_scaling(solution, case):
    # r >= 2 on every example: at r = 1, alpha / sqrt(r) and alpha / r agree.
    scaling = case.alpha / math.sqrt(case.r)
    layer = build(solution, case, use_rslora=True)
    shown = case.shown(use_rslora=True, scaling=scaling)
    check_close(forward(layer, case.x) - base_out(case), lora_update(case, scaling),
                "with use_rslora, forward(x) - base(x) = (x @ A.T @ B.T) * alpha / sqrt(r)",
                input=shown)
    expected = ((case.lora_B.double() @ case.lora_A.double()) * scaling).to(case.dtype)
    check_close(delta_of(layer), expected, "with use_rslora, delta_weight() = "
                "(alpha / sqrt(r)) * lora_B @ lora_A", input=shown)
    expect(math.isclose(float(layer.scaling), scaling, rel_tol=1e-12),
           "with use_rslora, the attribute scaling is alpha / sqrt(r)", input=shown,
           expected=scaling, got=layer.scaling)
    unmerged = forward(layer, case.x)
    with showing({**shown, "calls": ["merge()"]}):
        layer.merge()
    check_close(param(layer, "base.weight").detach(), case.weight + expected,
                "with use_rslora, merge() adds delta_weight() = (alpha / sqrt(r)) * lora_B @ "
                "lora_A to base.weight", input={**shown, "calls": ["merge()"]},
                atol=merge_atol(case, scaling), rtol=0.0)
    check_close(forward(layer, case.x), unmerged, "with use_rslora, the merged forward(x) "
                "equals the unmerged one", input={**shown, "calls": ["merge()", "forward(x)"]},
                atol=merge_atol(case, scaling), rtol=0.0)


MERGE_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


@kata_test(level=2, category="numerics",
           description="after merge(), forward equals the unmerged forward (tolerance per "
                       "dtype, float32, float64 and bfloat16)", weight=2)
@settings(max_examples=6)
@given(case=float_cases(dtypes=(torch.float64,)))
def test_merge_then_forward_matches_unmerged(solution, case):
    for dtype in MERGE_DTYPES:  # every dtype on every example
        typed = case.to(dtype)
        layer = build(solution, typed)
        before = forward(layer, typed.x)
        layer.merge()
        check_close(forward(layer, typed.x), before,
                    "merge() then forward(x) equals forward(x) before merging (the update is "
                    "applied once: in base.weight, not again in forward)", input=typed.shown(),
                    atol=merge_atol(typed), rtol=0.0)


@kata_test(level=2, category="correctness",
           description="a merged layer in train mode with dropout is base(x) with the merged "
                       "weight: no update on top, no dropout")
def test_merged_forward_is_base_only_in_train_mode(solution, reference):
    probe = dropout_probe(0.5)
    layer, model = build(solution, probe.case, dropout=0.5), build(reference, probe.case)
    model.merge()
    merged_weight = param(model, "base.weight").detach()
    calls = ["layer.train()", "merge()", "forward(x)", "forward(x)"]
    shown = {**probe.shown, "calls": calls}
    with showing(shown):
        layer.train()
        layer.merge()
        first, second = forward(layer, probe.case.x), forward(layer, probe.case.x)
    expected = base_out(replace(probe.case, weight=merged_weight))
    check_close(first, expected, "when merged, forward(x) is base(x) with the merged weight "
                "only: no update added again and no dropout, also in train mode", input=shown)
    check_close(second, first, "when merged, forward(x) is deterministic in train mode",
                input=shown)


@kata_test(level=2, category="numerics",
           description="merge() then unmerge() restores base.weight and the output")
@settings(max_examples=6)
@given(case=float_cases(dtypes=(torch.float64,)))
def test_merge_then_unmerge_restores_weight(solution, case):
    for dtype in MERGE_DTYPES:
        typed = case.to(dtype)
        layer = build(solution, typed)
        before = forward(layer, typed.x)
        layer.merge()
        layer.unmerge()
        check_close(param(layer, "base.weight").detach(), typed.weight,
                    "merge() then unmerge() restores base.weight", input=typed.shown(),
                    atol=merge_atol(typed), rtol=0.0)
        check_close(forward(layer, typed.x), before, "merge() then unmerge(): forward(x) as "
                    "before", input=typed.shown(), atol=merge_atol(typed), rtol=0.0)


@kata_test(level=2, category="correctness",
           description="merge() twice equals merge() once; unmerge() twice equals once")
@settings(max_examples=10)
@given(case=cases())
def test_merge_twice_is_noop(solution, case):
    layer = build(solution, case)
    before = forward(layer, case.x)
    layer.unmerge()  # not merged: a no-op
    check_close(param(layer, "base.weight").detach(), case.weight,
                "unmerge() on a layer that is not merged changes nothing",
                input=case.shown(calls="unmerge()"))
    layer.merge()
    once = param(layer, "base.weight").detach().clone()
    layer.merge()
    check_close(param(layer, "base.weight").detach(), once,
                "a second merge() changes nothing",
                input=case.shown(calls="unmerge(); merge(); merge()"))
    check_close(forward(layer, case.x), before, "merge(); merge() then forward(x) equals the "
                "unmerged forward(x)", input=case.shown(), atol=merge_atol(case), rtol=0.0)
    layer.unmerge()
    layer.unmerge()
    check_close(param(layer, "base.weight").detach(), case.weight,
                "merge(); merge(); unmerge(); unmerge() restores base.weight",
                input=case.shown(calls="unmerge(); merge(); merge(); unmerge(); unmerge()"),
                atol=merge_atol(case), rtol=0.0)


@kata_test(level=2, category="api contract",
           description="merged is False, True after merge(), False after unmerge(); the base "
                       "stays frozen")
@settings(max_examples=4)
@given(case=cases())
def test_merged_flag_and_base_stays_frozen(solution, case):
    layer = build(solution, case)
    held = param(layer, "base.weight")  # what an optimizer or a tied weight holds
    steps = [("init", False), ("unmerge", False), ("merge", True), ("merge", True),
             ("unmerge", False)]
    done = []
    for step, flag in steps:
        if step != "init":
            getattr(layer, step)()
        done.append(step)
        expect(layer.merged is flag, "merged tells whether the update is in base.weight",
               input={"calls": done}, expected=flag, got=layer.merged)
        w = param(layer, "base.weight")
        expect(w is held, "merge() and unmerge() change base.weight in place: it stays the "
               "same Parameter (not a new one), so whoever holds it sees the merged values",
               input={"calls": done}, expected="the Parameter base.weight was at __init__",
               got="a different Parameter object")
        expect(not w.requires_grad and w.grad_fn is None,
               "base.weight stays frozen with no autograd history (change it under "
               "torch.no_grad())", input={"calls": done},
               expected="requires_grad=False, grad_fn=None",
               got=f"requires_grad={w.requires_grad}, grad_fn={w.grad_fn}")


@kata_test(level=2, category="correctness",
           description="training steps between merges: merge() and unmerge() use the current "
                       "lora_A and lora_B, which still train after unmerge()", weight=2)
def test_merge_interleaved_with_training_steps(solution, reference):
    case = Case(r=2, alpha=3.0, weight=torch.tensor([[1.0, 0.0, -2.0], [2.0, -1.0, 1.0]]).double(),
                bias=torch.tensor([0.5, -1.0]).double(),
                lora_A=torch.tensor([[1.0, 2.0, 0.0], [-1.0, 0.0, 1.0]]).double(),
                lora_B=torch.tensor([[0.0, 1.0], [2.0, -1.0]]).double(),
                x=torch.tensor([[1.0, -1.0, 2.0], [0.0, 3.0, 1.0]]).double())
    layer, model = build(solution, case), build(reference, case)
    calls: list[str] = []
    script = ("train", "merge", "unmerge", "train", "merge", "unmerge", "train", "merge")
    for step in script:
        shown = {**case.shown(), "calls": list(calls)}
        if step == "train":
            calls.append("loss = sum(forward(x) * w); loss.backward(); lora_A, lora_B -= "
                         "0.5 * grad")
            shown["calls"] = list(calls)
            with showing(shown):
                loss = (layer(case.x.clone()) * torch.arange(1.0, 3.0).double()).sum()
            expect(loss.requires_grad, "lora_A and lora_B still train after merge() and "
                   "unmerge(): forward(x) depends on them with autograd", input=shown,
                   expected="an output that requires grad", got="requires_grad=False")
            loss.backward()
            (model(case.x) * torch.arange(1.0, 3.0).double()).sum().backward()
            got_params = dict(layer.named_parameters())  # after backward: grads are filled
            for name in ("lora_A", "lora_B"):
                expected_grad = param(model, name).grad
                got_grad = got_params[name].grad
                expect(got_grad is not None, f"{name} still trains after merge() and "
                       "unmerge(): it receives a gradient", input=shown,
                       expected="a gradient", got=None)
                check_close(got_grad, expected_grad, f"the accumulated gradient of {name} "
                            "after these calls", input=shown)
                new = param(model, name).detach() - 0.5 * expected_grad
                set_param(model, name, new)
                set_param(layer, name, new)
            continue
        calls.append(f"{step}()")
        shown["calls"] = list(calls)
        with showing(shown):
            getattr(layer, step)()
        getattr(model, step)()
        held = " + delta_weight()" if step == "merge" else ""
        check_close(param(layer, "base.weight").detach(), param(model, "base.weight").detach(),
                    f"after {step}() base.weight is W0{held} for the adapter as it is now",
                    input=shown)
        check_close(forward(layer, case.x), forward(model, case.x),
                    "forward(x) after these calls matches the reference", input=shown)


@kata_test(level=2, category="correctness",
           description="any sequence of merge, unmerge, training steps, train/eval and "
                       "forward matches the reference", weight=2)
def test_merge_unmerge_sequences_match_reference(solution, reference):
    run_state_machine_as_test(
        merge_machine(solution, reference),
        settings=settings(max_examples=12, stateful_step_count=8))
