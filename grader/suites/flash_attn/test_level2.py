"""Level 2 — skip what the mask hides: flash_attention's FLOPs counted tile pair by tile pair
(future pairs never computed, visible pairs at full tile size, matmuls only), GQA without
copying K/V per query head, and combine_partials, the merge of split-K partial results.

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome.
"""

from __future__ import annotations

import torch
from hypothesis import example, given, settings, strategies as st

from grader.protocol import PropertyFailure, call, expect, kata_test
from grader.suites._measure import count_flops, new_storages
from grader.suites.flash_attn.strategies import (INF, accumulator_like, close, expected_flops,
                                                 raises_value_error, randn, readable, storage_text,
                                                 visible_tile_pairs)

RULES = {
    "causal: a (q-tile, k-tile) pair entirely in the future is never computed, a visible pair at its "
    "full tile size: FLOPs = sum over visible pairs of 4·B·H·bq·bk·D": "test_causal_flops_count_visible_tiles",
    "scores and values are matrix multiplications, each pair computed once: without a mask, FLOPs = "
    "4·B·H·Tq·Tk·D": "test_flops_without_mask_are_one_pass_of_matmuls",
    "GQA: K and V tiles are never copied per query head": "test_gqa_copies_no_kv_per_query_head",
    "combine_partials returns the exact attention (out, lse) over the union of the splits' keys":
        "test_combine_matches_attention_over_the_union",
    "a split whose lse is -inf contributes nothing, whatever its outs hold (NaN, +inf, -inf)":
        "test_combine_ignores_empty_splits",
    "all splits -inf: out 0 and lse -inf": "test_combine_all_empty_gives_zeros",
    "out in the dtype of outs, lse in the dtype of lses (they may differ)": "test_combine_keeps_each_dtype",
    "stable for |lse| up to 1e4 (relative tolerance)": "test_combine_is_stable_for_large_lse",
    "ValueError: S < 1 or mismatched shapes": "test_combine_rejects_bad_shapes",
    "inputs are never modified: combine_partials leaves outs and lses as they were":
        "test_combine_inputs_are_not_modified",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'causal: a (q-tile, k-tile) pair entirely in the future is never computed, a visible '
    'pair at its full tile size: FLOPs = sum over visible pairs of 4·B·H·bq·bk·D':
        ('flop-accounting', 'hidden-tiles'),
    'scores and values are matrix multiplications, each pair computed once: without a '
    'mask, FLOPs = 4·B·H·Tq·Tk·D':
        'flop-accounting',
    'GQA: K and V tiles are never copied per query head':
        'gqa-no-copies',
    'combine_partials returns the exact attention (out, lse) over the union of the '
    "splits' keys":
        'ask',
    'a split whose lse is -inf contributes nothing, whatever its outs hold (NaN, +inf, '
    '-inf)':
        'empty-splits',
    'all splits -inf: out 0 and lse -inf':
        'empty-splits',
    'out in the dtype of outs, lse in the dtype of lses (they may differ)':
        'merge-dtypes',
    'stable for |lse| up to 1e4 (relative tolerance)':
        'merge-range',
    'ValueError: S < 1 or mismatched shapes':
        'merge-errors',
    'inputs are never modified: combine_partials leaves outs and lses as they were':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# Returning each output in its input's dtype when outs and lses differ is bookkeeping,
# not the merge.
DETAILS = {
    'out in the dtype of outs, lse in the dtype of lses (they may differ)',
}

# (B, H, H_kv, Tq, Tk, D, block_q, block_k): square, more keys (decode-like), more queries (some
# rows see nothing), partial last tiles both ways, tiles larger than the sequence. D and every
# key tile have >= 2 elements: einsum contracts a dimension of size 1 without a matmul, which
# FlopCounterMode would not see.
FLOP_CASES = ((1, 2, 1, 8, 8, 2, 2, 2), (1, 1, 1, 7, 12, 3, 3, 5), (2, 2, 2, 10, 5, 2, 4, 3),
              (1, 3, 1, 9, 9, 2, 4, 3), (1, 2, 2, 5, 5, 2, 64, 64), (1, 1, 1, 6, 6, 2, 1, 4))


def _flops(solution, B, H, H_kv, Tq, Tk, D, block_q, block_k, causal):
    q, k, v = randn(1, (B, H, Tq, D)), randn(2, (B, H_kv, Tk, D)), randn(3, (B, H_kv, Tk, D))
    return count_flops(lambda: call(solution.flash_attention, q, k, v, causal=causal, block_q=block_q,
                                    block_k=block_k, what="flash_attention()"))


@kata_test(level=2, category="efficiency", weight=3,
           description="causal: future tile pairs are skipped, visible ones computed at full tile size")
def test_causal_flops_count_visible_tiles(solution):
    for B, H, H_kv, Tq, Tk, D, block_q, block_k in FLOP_CASES:
        got = _flops(solution, B, H, H_kv, Tq, Tk, D, block_q, block_k, True)
        want = expected_flops(B, H, Tq, Tk, D, block_q, block_k, True)
        pairs = visible_tile_pairs(Tq, Tk, block_q, block_k, True)
        expect(got == want, "causal FLOPs = sum over visible (q-tile, k-tile) pairs of 4·B·H·bq·bk·D: "
               "a pair entirely in the future is never computed, a visible pair is computed at its "
               "full tile size and masked inside",
               input=f"B={B}, H={H}, H_kv={H_kv}, Tq={Tq}, Tk={Tk}, D={D}, block_q={block_q}, "
                     f"block_k={block_k}, causal=True",
               expected=f"{want} FLOPs ({len(pairs)} visible pairs, (bq, bk) = {pairs})",
               got=f"{got} FLOPs" + (" (more: future tiles computed, or scores computed twice)" if got > want
                                     else " (fewer: tiles cut to their visible part, or not computed "
                                          "with matmuls)"))


@kata_test(level=2, category="efficiency", weight=1,
           description="without a mask every tile pair is computed once, with matmuls: 4·B·H·Tq·Tk·D FLOPs")
def test_flops_without_mask_are_one_pass_of_matmuls(solution):
    for B, H, H_kv, Tq, Tk, D, block_q, block_k in FLOP_CASES[:4]:
        got = _flops(solution, B, H, H_kv, Tq, Tk, D, block_q, block_k, False)
        want = 4 * B * H * Tq * Tk * D
        expect(got == want, "q kᵀ and p v are matrix multiplications (@, matmul, bmm, einsum over D), "
               "each tile pair computed once: 4·B·H·Tq·Tk·D FLOPs",
               input=f"B={B}, H={H}, H_kv={H_kv}, Tq={Tq}, Tk={Tk}, D={D}, block_q={block_q}, "
                     f"block_k={block_k}, causal=False",
               expected=f"{want} FLOPs", got=f"{got} FLOPs")


@kata_test(level=2, category="efficiency", weight=2,
           description="GQA: K and V tiles are never copied once per query head")
def test_gqa_copies_no_kv_per_query_head(solution):
    # D > block_k > block_q: a K or V tile copied per query head (B·H·block_k·D elements) is
    # bigger than anything a solution that folds the query group into the tile rows creates
    B, H, H_kv, Tq, Tk, D, block_q, block_k = 1, 4, 2, 6, 9, 8, 2, 3
    for causal in (False, True):
        q, k, v = randn(4, (B, H, Tq, D)), randn(5, (B, H_kv, Tk, D)), randn(6, (B, H_kv, Tk, D))
        storages = new_storages(lambda: call(solution.flash_attention, q, k, v, causal=causal, block_q=block_q,
                                             block_k=block_k, what="flash_attention()"))
        per_head_copy = B * H * block_k * D
        copies = [s for s in storages if s[0] >= per_head_copy and not accumulator_like(s, B, H, Tq, D, "float32")]
        expect(not copies, "GQA: K and V tiles are never copied per query head (no repeat_interleave, no "
               "expand-and-copy, no broadcasting matmul over the H query heads): fold each KV head's "
               "query group into the tile rows, (B, H, bq, D) -> (B, H_kv, group·bq, D)",
               input=f"q {tuple(q.shape)}, k/v {tuple(k.shape)}, block_q={block_q}, block_k={block_k}, "
                     f"causal={causal}",
               expected=f"no new tensor of >= B·H·block_k·D = {per_head_copy} elements besides out/lse",
               got="; ".join(storage_text(s) for s in copies[:3]))


# ------------------------------------------------------------------------------ combine_partials


def dense_merge(outs: torch.Tensor, lses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 merge: weights exp(lse_s - lse) over the non-empty splits."""
    lses64 = lses.double()
    lse = torch.logsumexp(lses64, dim=0)
    shift = torch.where(lse == -INF, 0.0, lse)
    weights = torch.exp(lses64 - shift)  # (S, B, H)
    outs64 = torch.where((lses == -INF)[..., None], 0.0, outs.double())
    return (weights[..., None] * outs64).sum(0), lse


@st.composite
def partials(draw, *, lse_low: float = -5.0, lse_high: float = 5.0, empty_fill: float | None = None):
    """(outs (S, B, H, D), lses (S, B, H)) with some splits empty (lse -inf)."""
    S, B, H, D = draw(st.integers(1, 4)), draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    outs = (torch.randn(S, B, H, D, generator=gen, dtype=torch.float64) * 2).round(decimals=1).to(dtype)
    lses = (torch.rand(S, B, H, generator=gen, dtype=torch.float64) * (lse_high - lse_low) + lse_low).round(
        decimals=1).to(dtype)
    empty = torch.rand(S, B, H, generator=gen) < draw(st.sampled_from([0.0, 0.3]))
    lses = lses.masked_fill(empty, -INF)
    if empty_fill is not None:
        outs = outs.masked_fill(empty[..., None], empty_fill)
    return outs, lses


def _combine(solution, outs, lses):
    result = call(solution.combine_partials, outs.clone(), lses.clone(), what="combine_partials()")
    if not (isinstance(result, tuple) and len(result) == 2):
        raise PropertyFailure("combine_partials returns a tuple (out, lse)", input=readable({"outs": outs, "lses": lses}),
                              got=type(result).__name__)
    return result


def _check_merge(got, outs, lses, prop, *, rtol=None, atol=None):
    expected_out, expected_lse = dense_merge(outs, lses)
    shown_input = readable({"outs": outs, "lses": lses})
    close(got[0], expected_out.to(outs.dtype), prop + " (out)", input=shown_input, atol=atol, rtol=rtol)
    close(got[1], expected_lse.to(lses.dtype), prop + " (lse)", input=shown_input, atol=atol, rtol=rtol)


@kata_test(level=2, category="correctness", weight=2,
           description="combine_partials returns the attention over the union: softmax-weighted by exp(lse)")
@settings(max_examples=12)
@given(pair=partials())
def test_combine_matches_attention_over_the_union(solution, pair):
    outs, lses = pair
    _check_merge(_combine(solution, outs, lses), outs, lses,
                 "out = sum_s exp(lse_s - lse) out_s with lse = log(sum_s exp(lse_s)); dtypes of outs and lses")


# what the outs of an empty split may hold: 0 * each of them is NaN
EMPTY_OUTS = (float("nan"), INF, -INF)


@kata_test(level=2, category="edge cases", weight=2,
           description="a split with lse -inf contributes nothing, even when its outs hold NaN or inf")
@settings(max_examples=8)
@example(pair=(torch.tensor([[[[float("nan")]]], [[[2.0]]]]), torch.tensor([[[-INF]], [[0.5]]])))
@example(pair=(torch.tensor([[[[1.0, 2.0, 3.0]]], [[[4.0, 5.0, 6.0]]]]), torch.tensor([[[-INF]], [[0.5]]])))
@given(pair=st.sampled_from(EMPTY_OUTS).flatmap(lambda fill: partials(empty_fill=fill)))
def test_combine_ignores_empty_splits(solution, pair):
    outs, lses = pair
    lses = lses.clone()
    lses[0, 0, 0] = -INF  # always at least one empty split, its outs NaN, inf and -inf in turn
    outs = outs.clone()
    outs[0, 0, 0] = torch.tensor(EMPTY_OUTS, dtype=outs.dtype)[torch.arange(outs.shape[-1]) % len(EMPTY_OUTS)]
    _check_merge(_combine(solution, outs, lses), outs, lses,
                 "a split whose lse is -inf contributes nothing: its outs may hold anything, NaN or inf "
                 "included (select, do not multiply by 0: 0 * NaN and 0 * inf are NaN)")


@kata_test(level=2, category="edge cases", weight=1,
           description="when every split is empty (lse -inf) the merge is out 0, lse -inf")
def test_combine_all_empty_gives_zeros(solution):
    for S, fill in ((1, 0.0), (3, float("nan")), (2, 5.0)):
        outs = torch.full((S, 2, 1, 2), fill)
        lses = torch.full((S, 2, 1), -INF)
        _check_merge(_combine(solution, outs, lses), outs, lses, "all splits empty: out 0 and lse -inf (never NaN)")


@kata_test(level=2, category="api contract", weight=1,
           description="combine_partials returns out in the dtype of outs and lse in the dtype of lses")
def test_combine_keeps_each_dtype(solution):
    gen = torch.Generator().manual_seed(3)
    for outs_dtype, lses_dtype in ((torch.float64, torch.float32), (torch.float32, torch.float64)):
        outs = torch.randn(3, 2, 2, 4, generator=gen, dtype=torch.float64).to(outs_dtype)
        lses = torch.tensor([[[0.5, -1.0], [2.0, -INF]], [[1.5, 0.0], [-INF, -INF]], [[-2.0, 3.0], [1.0, -INF]]],
                            dtype=lses_dtype)
        _check_merge(_combine(solution, outs, lses), outs, lses,
                     f"out in the dtype of outs ({str(outs_dtype)[6:]}), lse in the dtype of lses "
                     f"({str(lses_dtype)[6:]})")


@kata_test(level=2, category="numerics", weight=2,
           description="combine_partials is stable for |lse| up to 1e4 (no exp overflow or underflow)")
@settings(max_examples=6)
@example(pair=(torch.tensor([[[[1.0]]], [[[3.0]]]]), torch.tensor([[[10000.0]], [[10000.5]]])))
@example(pair=(torch.tensor([[[[1.0]]], [[[3.0]]]]), torch.tensor([[[-10000.0]], [[-9999.5]]])))
@given(pair=st.one_of(partials(lse_low=9900.0, lse_high=10000.0), partials(lse_low=-10000.0, lse_high=-9900.0)))
def test_combine_is_stable_for_large_lse(solution, pair):
    outs, lses = pair
    # float32 rounds an lse of 1e4 to about 1e-3: the weights then carry a relative error of
    # about 1e-3, so out is judged relative to the size of the outs
    scale = float(outs.abs().max()) if outs.numel() else 1.0
    _check_merge(_combine(solution, outs, lses), outs, lses,
                 "stable for |lse| up to 1e4: subtract the max lse before exp",
                 rtol=2e-3, atol=2e-3 * max(scale, 1.0))


@kata_test(level=2, category="api contract", weight=1,
           description="combine_partials raises ValueError for S < 1 or mismatched shapes")
def test_combine_rejects_bad_shapes(solution):
    bad = {"S = 0": (torch.zeros(0, 1, 2, 3), torch.zeros(0, 1, 2)),
           "lses (S, B, H) not matching outs (S, B, H, D)": (torch.zeros(2, 1, 2, 3), torch.zeros(2, 1, 3)),
           "different S": (torch.zeros(2, 1, 2, 3), torch.zeros(3, 1, 2)),
           "outs not 4-D": (torch.zeros(2, 2, 3), torch.zeros(2, 2)),
           "lses not 3-D": (torch.zeros(2, 1, 2, 3), torch.zeros(2, 1, 2, 1))}
    for what, (outs, lses) in bad.items():
        ok, got = raises_value_error(lambda: solution.combine_partials(outs, lses), "combine_partials()")
        expect(ok, f"combine_partials: ValueError for {what}",
               input=f"outs {tuple(outs.shape)}, lses {tuple(lses.shape)}", expected="ValueError", got=got)


@kata_test(level=2, category="api contract", weight=1,
           description="combine_partials never modifies outs or lses (empty splits' outs included)")
def test_combine_inputs_are_not_modified(solution):
    for dtype in (torch.float32, torch.float64):
        # split 1 is empty for head 0 (its outs NaN), split 2 for head 1 (inf); no lse is 0, so
        # subtracting the max or normalising in place shows too
        outs = torch.tensor([[[[1.0, -2.0], [0.5, 3.0]]], [[[float("nan"), 7.0], [2.0, -1.0]]],
                             [[[-3.0, 4.0], [INF, -INF]]]], dtype=dtype)                  # (S=3, B=1, H=2, D=2)
        lses = torch.tensor([[[0.5, -1.0]], [[-INF, 2.0]], [[1.5, -INF]]], dtype=dtype)  # (S, B, H)
        before = {"outs": outs.clone(), "lses": lses.clone()}
        call(solution.combine_partials, outs, lses, what="combine_partials()")
        for name, now in (("outs", outs), ("lses", lses)):
            then = before[name]
            same = now.shape == then.shape and bool(torch.isclose(now, then, rtol=0, atol=0, equal_nan=True).all())
            expect(same, f"inputs are never modified: combine_partials leaves {name} unchanged (clean or scale "
                   "a copy, e.g. torch.where, not masked_fill_ or mul_ on the argument)",
                   input=readable(before), expected=readable(then), got=readable(now))
