"""Level 3: MultiLoRALinear: many adapters in one batch.

Each rule of the statement's level 3, and the test that builds the situation where it decides
the outcome; the slot and error tests live in test_level3_slots.py. The lockstep machine runs
random add/remove/forward sequences, rejected calls included, in addition.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis.stateful import run_state_machine_as_test
from torch import nn

from grader.protocol import expect, kata_test
from grader.suites._common import check_close, count_ops
from grader.suites.lora.lockstep import multi_machine
from grader.suites.lora.strategies import (ALL_DTYPES, Adapter, add, dtype_name, forward, ids_for,
                                           load, make_base, multi_cases, multi_forward,
                                           per_row_expected, showing)

RULES = {
    "one frozen base: base.weight and base.bias get requires_grad = False":
        "test_multi_base_is_frozen",
    "row n = base(x_n) + (alpha_a / r_a) * x_n @ A_a.T @ B_a.T for a = adapter_ids[n]":
        "test_mixed_batch_matches_per_row_lora_linear",
    "rows with -1 equal base(x) exactly": "test_base_only_rows_equal_base_exactly",
    "rows with -1 equal base(x) exactly also in float16 / bfloat16 when an adapter's update "
    "for their x would overflow (select base(x); do not multiply the update by 0)":
        "test_base_only_rows_exact_when_an_update_would_overflow",
    "x (N, in) or (N, T, in) -> (N, out) or (N, T, out) in x's dtype; one layer across batch "
    "shapes, N = 0 included; every float dtype":
        "test_one_multi_layer_across_batch_shapes_and_dtypes",
    "neither x nor adapter_ids is modified": "test_mixed_batch_matches_per_row_lora_linear",
    "add_adapter returns the slot as an int; loaded adapters have distinct slots":
        ("test_freed_slots_are_reused", "test_adapters_added_and_removed_between_calls"),
    "a freed slot is reused before a new one opens: every slot is below the most adapters "
    "loaded at once": ("test_freed_slots_are_reused", "test_rejected_add_adapter_changes_nothing"),
    "adapters of rank below max_rank are zero-padded: a reused slot keeps nothing of the "
    "previous adapter": "test_slot_reused_by_lower_rank_adapter",
    "slot 0 and alpha = 0.0 are valid (falsy values are not 'missing')":
        "test_zero_alpha_adapter_in_slot_zero",
    "ValueError from add_adapter: duplicate name, r > max_rank, shape mismatch":
        "test_add_adapter_rejects_bad_adapters",
    "a rejected add_adapter changes nothing: no slot taken, name not registered, adapters "
    "intact (seen by the next add, remove and forward)":
        "test_rejected_add_adapter_changes_nothing",
    "KeyError from remove_adapter when no adapter of that name is loaded (never added, or "
    "already removed), and nothing is freed": "test_remove_unknown_adapter_raises_key_error",
    "remove_adapter frees the slot: forward rejects it until add_adapter returns it again":
        "test_only_loaded_slots_are_accepted",
    "ValueError from forward: a slot that holds no adapter, an id below -1, adapter_ids not "
    "of shape (N,); the rejected call changes nothing":
        "test_forward_rejects_unknown_slots_and_wrong_length",
    "ValueError (not another error, not a base-only shortcut) for adapter_ids not of shape "
    "(N,): 0-d, empty, all -1 of the wrong length or 2-D": "test_forward_checks_ids_shape_first",
    "any sequence of adds, removes, rejected calls and forwards matches a model of the loaded "
    "adapters": "test_adapters_added_and_removed_between_calls",
    "vectorised: the operations forward dispatches do not grow with N or the number of "
    "adapters": "test_mixed_batch_op_count_does_not_grow",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'one frozen base: base.weight and base.bias get requires_grad = False':
        ('ask', 'frozen'),
    'row n = base(x_n) + (alpha_a / r_a) * x_n @ A_a.T @ B_a.T for a = adapter_ids[n]':
        ('ask', 'scaling'),
    'rows with -1 equal base(x) exactly':
        'base-rows',
    "rows with -1 equal base(x) exactly also in float16 / bfloat16 when an adapter's "
    'update for their x would overflow (select base(x); do not multiply the update by 0)':
        'base-rows',
    "x (N, in) or (N, T, in) -> (N, out) or (N, T, out) in x's dtype; one layer across "
    'batch shapes, N = 0 included; every float dtype':
        'ask',
    'neither x nor adapter_ids is modified':
        'ask',
    'add_adapter returns the slot as an int; loaded adapters have distinct slots':
        ('ask', 'slots'),
    'a freed slot is reused before a new one opens: every slot is below the most adapters'
    ' loaded at once':
        'slots',
    'adapters of rank below max_rank are zero-padded: a reused slot keeps nothing of the '
    'previous adapter':
        'reused-slot',
    "slot 0 and alpha = 0.0 are valid (falsy values are not 'missing')":
        'falsy',
    'ValueError from add_adapter: duplicate name, r > max_rank, shape mismatch':
        'ask',
    'a rejected add_adapter changes nothing: no slot taken, name not registered, adapters'
    ' intact (seen by the next add, remove and forward)':
        ('ask', 'rejected'),
    'KeyError from remove_adapter when no adapter of that name is loaded (never added, or'
    ' already removed), and nothing is freed':
        ('ask', 'rejected'),
    'remove_adapter frees the slot: forward rejects it until add_adapter returns it again':
        'slots',
    'ValueError from forward: a slot that holds no adapter, an id below -1, adapter_ids '
    'not of shape (N,); the rejected call changes nothing':
        'ask',
    'ValueError (not another error, not a base-only shortcut) for adapter_ids not of '
    'shape (N,): 0-d, empty, all -1 of the wrong length or 2-D':
        'ids-shape',
    'any sequence of adds, removes, rejected calls and forwards matches a model of the '
    'loaded adapters':
        ('ask', 'slots', 'rejected'),
    'vectorised: the operations forward dispatches do not grow with N or the number of '
    'adapters':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# The core is per-row LoRA in one vectorised batch, slots and the named errors. Details: the
# half-precision overflow next to -1 rows (rulings.md settles the behaviour; a masked multiply
# is right everywhere else, and the plain -1 rule stays core) and the exotic adapter_ids shapes
# (the plain shape ValueError stays core). Slot 0 and alpha 0.0 are core: the lockstep run
# (test_adapters_added_and_removed_between_calls) adds alpha-0.0 adapters and removes slot 0,
# so a level cannot pass without them (an alpha-0 bug failed it under one seed of three).
DETAILS = {
    'ValueError (not another error, not a base-only shortcut) for adapter_ids not of '
    'shape (N,): 0-d, empty, all -1 of the wrong length or 2-D',
    "rows with -1 equal base(x) exactly also in float16 / bfloat16 when an adapter's "
    'update for their x would overflow (select base(x); do not multiply the update by 0)',
}


@kata_test(level=3, category="api contract",
           description="MultiLoRALinear freezes its base: base.weight and base.bias get "
                       "requires_grad = False")
def test_multi_base_is_frozen(solution):
    for bias in (True, False):
        base = nn.Linear(2, 3, bias=bias)
        shown = {"base": f"nn.Linear(2, 3, bias={bias})",
                 "call": "MultiLoRALinear(base, max_rank=2)"}
        with showing(shown):
            solution.MultiLoRALinear(base, 2)
        flags = {name: p.requires_grad for name, p in base.named_parameters()}
        expect(not any(flags.values()), "MultiLoRALinear wraps one frozen base: base.weight "
               "and base.bias get requires_grad = False", input=shown,
               expected={k: False for k in flags}, got=flags)


@kata_test(level=3, category="correctness",
           description="a mixed batch equals running each row through its own LoRALinear "
                       "(2-D and 3-D x), inputs unchanged", weight=3)
@settings(max_examples=20)
@given(mc=multi_cases())
def test_mixed_batch_matches_per_row_lora_linear(solution, reference, mc):
    layer, slots = load(solution, mc)
    ids = ids_for(mc.rows, slots)
    x_before, ids_before = mc.x.clone(), ids.clone()
    got = multi_forward(layer, mc.x, ids, share_inputs=True)
    expect(torch.equal(mc.x, x_before) and torch.equal(ids, ids_before),
           "forward does not modify x or adapter_ids", input=mc.shown(slots),
           expected={"x": x_before, "adapter_ids": ids_before}, got={"x": mc.x, "adapter_ids": ids})
    row_adapters = [mc.adapters[k] if k >= 0 else None for k in mc.rows]
    check_close(got, per_row_expected(reference, mc.weight, mc.bias, row_adapters, x_before),
                "row n = base(x_n) + (alpha_a / r_a) * x_n @ A_a.T @ B_a.T for a = "
                "adapter_ids[n]", input=mc.shown(slots))


@kata_test(level=3, category="correctness",
           description="rows with adapter id -1 equal base(x) exactly (not the last adapter)",
           weight=2)
@settings(max_examples=15)
@given(mc=multi_cases(dtypes=(torch.float64,), with_base_row=True))
def test_base_only_rows_equal_base_exactly(solution, mc):
    layer, slots = load(solution, mc)
    got = multi_forward(layer, mc.x, ids_for(mc.rows, slots))
    base_rows = torch.tensor([k == -1 for k in mc.rows])
    expected = forward(make_base(mc.weight, mc.bias), mc.x)
    same_shape = isinstance(got, torch.Tensor) and got.shape == expected.shape
    expect(same_shape and torch.equal(got[base_rows], expected[base_rows]),
           "rows with adapter id -1 are base(x) exactly (-1 is not Python's 'last slot')",
           input=mc.shown(slots), expected=expected[base_rows],
           got=got[base_rows] if same_shape else got)


# Half precision where an adapter's update of a -1 row overflows: lora_A = SCALE * small
# positive ints, -1 rows x = 16 * small positive ints, so x @ A.T >= 2^16 (float16) or 2^128
# (bfloat16) is inf, and with B @ A first (B holds ints, scalings are >= 1) some output of
# every -1 row is inf too: a 0/1 mask gives NaN in any order of the products. The adapters'
# own rows are small ints / SCALE: their updates are small ints, nothing overflows. Every
# value of base(x) on the -1 rows is a small integer, exact in both dtypes.
OVERFLOW_SCALE = {torch.float16: 2.0**12, torch.bfloat16: 2.0**124}
OVERFLOW_WEIGHT = [[1.0, 0.0, -1.0, 2.0], [2.0, 1.0, 1.0, -1.0]]  # (OUT 2, IN 4)
OVERFLOW_BIAS = [1.0, -1.0]
OVERFLOW_ADAPTERS = (  # name, lora_A / SCALE (r, 4), lora_B (2, r), alpha
    ("hot", [[1.0, 2.0, 1.0, 1.0], [1.0, 1.0, 1.0, 2.0]], [[1.0, 0.0], [1.0, -1.0]], 2.0),
    ("warm", [[2.0, 1.0, 1.0, 1.0]], [[1.0], [-1.0]], 2.0))
BASE_ROW_X = [[1.0, 1.0, 2.0, 1.0], [2.0, 1.0, 1.0, 1.0]]  # times 16
ADAPTER_ROW_X = [[1.0, 0.0, -1.0, 1.0], [0.0, 1.0, 1.0, -1.0]]  # divided by SCALE


def _overflow_batches(scale: float) -> list[tuple[torch.Tensor, list[int]]]:
    """(x in float64, rows: adapter index per row, -1 for base only): 2-D, then 3-D."""
    big, small = 16 * torch.tensor(BASE_ROW_X), torch.tensor(ADAPTER_ROW_X) / scale
    return [(torch.stack([big[0], small[0], big[1], small[1]]), [-1, 0, -1, 1]),
            (torch.stack([small, big]), [1, -1])]


@kata_test(level=3, category="numerics",
           description="rows with adapter id -1 equal base(x) exactly in float16 and bfloat16, "
                       "even where an adapter's update for their x would overflow to inf",
           weight=2)
def test_base_only_rows_exact_when_an_update_would_overflow(solution, reference):
    for dtype, scale in OVERFLOW_SCALE.items():
        w, b = torch.tensor(OVERFLOW_WEIGHT, dtype=dtype), torch.tensor(OVERFLOW_BIAS, dtype=dtype)
        adapters = [Adapter(name, (scale * torch.tensor(A)).to(dtype), torch.tensor(B, dtype=dtype),
                            alpha) for name, A, B, alpha in OVERFLOW_ADAPTERS]
        power = f"2**{int(math.log2(scale))}"
        shown: dict[str, Any] = {
            "dtype": dtype_name(dtype), "base": f"nn.Linear(4, 2), weight {OVERFLOW_WEIGHT}, "
            f"bias {OVERFLOW_BIAS}", "max_rank": 2,
            "adapters": [f"{name!r}: lora_A = {power} * {A}, lora_B = {B}, alpha = {alpha}"
                         for name, A, B, alpha in OVERFLOW_ADAPTERS]}
        with showing(shown):
            layer = solution.MultiLoRALinear(make_base(w, b), 2)
            slots = [int(add(layer, a)) for a in adapters]
        for x64, rows in _overflow_batches(scale):
            x, ids = x64.to(dtype), ids_for(rows, slots)
            call = {**shown, "x": f"shape {tuple(x.shape)}: rows with id -1 = 16 * {BASE_ROW_X}, "
                    f"the others = {ADAPTER_ROW_X} / {power}", "adapter_ids": ids.tolist()}
            with showing(call):
                got = multi_forward(layer, x, ids)
            _expect_base_rows_exact(got, forward(make_base(w, b), x), ids, call)
            expected = per_row_expected(reference, w, b, [adapters[k] if k >= 0 else None
                                                          for k in rows], x)
            check_close(got, expected, "row n = base(x_n) + (alpha_a / r_a) * x_n @ A_a.T @ "
                        "B_a.T for a = adapter_ids[n], in x's dtype", input=call)


def _expect_base_rows_exact(got: Any, base_y: torch.Tensor, ids: torch.Tensor,
                            call: dict[str, Any]) -> None:
    """The -1 rows of `got` are base_y's, bit for bit (a NaN or inf there names the cause)."""
    prop = ("rows with adapter id -1 are base(x) exactly, also in half precision where an "
            "adapter's update for their x overflows: select base(x) for them (an update of inf "
            "times 0 is NaN, so scaling it by 0 is not enough)")
    same = (isinstance(got, torch.Tensor) and got.shape == base_y.shape
            and got.dtype == base_y.dtype)
    expect(same, prop + " (the output has x's dtype and shape (N, out) or (N, T, out))",
           input=call, expected=f"{base_y.dtype} of shape {tuple(base_y.shape)}",
           got=f"{got.dtype} of shape {tuple(got.shape)}" if isinstance(got, torch.Tensor)
           else type(got).__name__)
    base_rows = ids == -1
    got_rows, expected_rows = got[base_rows], base_y[base_rows]
    num_nonfinite = int((~torch.isfinite(got_rows)).sum())
    note = f"rows {base_rows.nonzero().flatten().tolist()} (adapter id -1), {base_y.dtype}"
    if num_nonfinite:
        note += f": {num_nonfinite} of their {got_rows.numel()} values are NaN or inf"
    expect(torch.equal(got_rows, expected_rows), prop, input=call, expected=expected_rows,
           got=got_rows, note=note)


def _small_exact_adapters(dtype: torch.dtype) -> list[Adapter]:
    """Integer weights and power-of-two scalings: exact in every float dtype."""
    return [Adapter("rank1", torch.tensor([[1.0, -1.0, 2.0]], dtype=dtype),
                    torch.tensor([[1.0], [2.0]], dtype=dtype), 2.0),
            Adapter("rank2", torch.tensor([[0.0, 1.0, 1.0], [2.0, 0.0, -1.0]], dtype=dtype),
                    torch.tensor([[1.0, -1.0], [0.0, 1.0]], dtype=dtype), 1.0)]


@kata_test(level=3, category="edge cases",
           description="one layer across calls of different batch shapes (2-D, 3-D, N = 0), "
                       "in every float dtype: each row matches its own LoRALinear", weight=2)
def test_one_multi_layer_across_batch_shapes_and_dtypes(solution, reference):
    weight = torch.tensor([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]])
    bias = torch.tensor([0.0, 1.0])
    x_rows = torch.tensor([[1.0, 2.0, -1.0], [0.0, -2.0, 1.0], [2.0, 1.0, 1.0], [-1.0, 0.0, 2.0]])
    for dtype in ALL_DTYPES:
        adapters = _small_exact_adapters(dtype)
        w, b = weight.to(dtype), bias.to(dtype)
        calls = [f"MultiLoRALinear(base {dtype_name(dtype)} (3 -> 2), max_rank=2)"]
        shown: dict[str, Any] = {"base.weight": w, "base.bias": b, "calls": calls,
                                 "adapters": [{"name": a.name, "lora_A": a.lora_A,
                                               "lora_B": a.lora_B, "alpha": a.alpha}
                                              for a in adapters]}
        with showing(shown):
            layer = solution.MultiLoRALinear(make_base(w, b), 2)
            slots = []
            for a in adapters:
                slots.append(int(add(layer, a)))
                calls.append(f"add_adapter({a.name!r}, ...) -> {slots[-1]}")
        batches = [(x_rows[:3], [1, -1, 0]), (x_rows[:2, None].expand(2, 3, 3), [0, 1]),
                   (x_rows[:0], []), (x_rows[:1], [-1]), (x_rows.reshape(2, 2, 3), [1, 1]),
                   (x_rows[:0].reshape(0, 2, 3), []), (x_rows, [0, 1, -1, 0])]
        for x, rows in batches:
            x = x.to(dtype)
            ids = ids_for(rows, slots)
            calls.append(f"forward(x of shape {tuple(x.shape)}, adapter_ids={ids.tolist()})")
            with showing(shown):
                got = multi_forward(layer, x, ids)
            expected = per_row_expected(reference, w, b, [adapters[k] if k >= 0 else None
                                                          for k in rows], x)
            check_close(got, expected, "the same layer serves every batch shape: row n = "
                        "base(x_n) + (alpha_a / r_a) * x_n @ A_a.T @ B_a.T, in x's dtype",
                        input={**shown, "x": x})


@kata_test(level=3, category="correctness",
           description="adding and removing adapters between calls, rejected calls included: "
                       "every batch still matches each row's own LoRALinear", weight=2)
def test_adapters_added_and_removed_between_calls(solution, reference):
    run_state_machine_as_test(
        multi_machine(solution, reference),
        settings=settings(max_examples=20, stateful_step_count=10))


@kata_test(level=3, category="efficiency",
           description="forward is vectorised: its operation count does not grow with rows "
                       "or adapters (no Python loop)", weight=2)
def test_mixed_batch_op_count_does_not_grow(solution, reference):
    def op_count(module: Any, num_adapters: int, num_rows: int, tokens: int | None) -> int:
        gen = torch.Generator().manual_seed(0)
        layer = module.MultiLoRALinear(make_base(torch.randn(4, 4, generator=gen),
                                                 torch.randn(4, generator=gen)), 4)
        slots = [int(layer.add_adapter(f"t{k}", torch.randn(1 + k % 4, 4, generator=gen),
                                       torch.randn(4, 1 + k % 4, generator=gen), 8.0))
                 for k in range(num_adapters)]
        choices = [-1, *slots]
        ids = torch.tensor([choices[n % len(choices)] for n in range(num_rows)])
        shape = (num_rows, 4) if tokens is None else (num_rows, tokens, 4)
        x = torch.randn(shape, generator=gen)
        return count_ops(lambda: layer(x, ids))

    for tokens in (None, 3):
        small = op_count(solution, 1, 2, tokens)
        sizes = {"1 adapter, 2 rows": small,
                 "1 adapter, 32 rows": op_count(solution, 1, 32, tokens),
                 "8 adapters, 9 rows": op_count(solution, 8, 9, tokens),
                 "8 adapters, 32 rows": op_count(solution, 8, 32, tokens)}
        worst = max(sizes.values())
        expect(worst <= small + 2,
               "the number of tensor operations forward dispatches does not grow with the "
               "number of rows or adapters (gather the weights, batch the matmuls)",
               input={"x": "(N, 4)" if tokens is None else f"(N, {tokens}, 4)",
                      "batches": list(sizes)},
               expected=f"about {small} operations for every batch (the reference: "
                        f"{op_count(reference, 8, 32, tokens)})",
               got=sizes)
