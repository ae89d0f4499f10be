"""Level 1 of mha: attention() — scores, scale, bool / float masks, bottom-right causality,
fully masked rows, large logits, half precision. The argument checks (the ValueError rules
of this map) are in test_level1_errors.py.

Random tests compare with the reference over small shapes; every rule below also has a
constructed case (a loop over every scale, mask form, (Tq, Tk) alignment and dtype, or an
@example) that runs under every seed.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import example, given, settings, strategies as st

from grader.protocol import call, expect, kata_test
from grader.suites._common import count_ops
from grader.suites.mha.checks import (close, expect_attention, expect_tensor, guarded, readable,
                                      run, shown)
from grader.suites.mha.strategies import (ALL_DTYPES, BROADCAST_FULL, CAUSAL_ALIGNMENTS,
                                          FLOAT64_PRECISION_CASE, HALF_MASK_CASE, HALF_OVERFLOW,
                                          HALF_ROUNDING, HALF_SCALED_OVERFLOW, HALF_WIDE_MASKS,
                                          HALVES, SCALES, bool_mask, bool_masks, broadcast_forms,
                                          float_mask, float_masks, full_shape, make_case,
                                          mask_shapes, qkv, randn, seeds)

RULES = {
    "attention is softmax(q kᵀ · scale + mask) v, the softmax over the keys; output (B, H, Tq, Dv)":
        ("test_attention_matches_reference", "test_rows_of_weights_sum_to_one"),
    "scale multiplies q kᵀ: any float, 0.0 (falsy, not 'not given') and negatives included":
        "test_scale_argument_multiplies_scores",
    "scale=None means 1 / sqrt(D), D the head dim of q and k (not Dv, not Tk)":
        "test_default_scale_is_inverse_sqrt_d",
    "bool attn_mask: True = may attend; masked keys have no influence":
        ("test_bool_mask_matches_reference", "test_masked_keys_do_not_influence_output"),
    "float attn_mask is added to the scaled scores (after the scale); -inf removes a key":
        ("test_float_mask_added_to_scaled_scores", "test_float_mask_matches_reference"),
    "attn_mask broadcasts to (B, H, Tq, Tk) from every smaller shape, bool and float":
        "test_mask_broadcasts_in_every_allowed_form",
    "an all-True mask equals no mask": "test_all_true_mask_equals_no_mask",
    "a per-row constant in a float mask changes nothing": "test_row_constant_in_float_mask_changes_nothing",
    "is_causal: query i sees key j iff j <= i + (Tk - Tq), bottom-right aligned for every Tq, Tk":
        ("test_causal_alignment_for_every_tq_tk", "test_causal_is_bottom_right_aligned",
         "test_causality_future_keys_do_not_matter"),
    "a row with no key to attend (all False, all -inf, causal with Tq > Tk) is zeros, never NaN":
        ("test_fully_masked_rows_for_every_kind_and_dtype", "test_fully_masked_rows_are_zeros"),
    "stable for large logits (scores of 1e4 and more)": "test_huge_logits_stay_finite",
    "fp16/bf16 inputs: scores and softmax computed in float32":
        ("test_half_scores_computed_in_float32", "test_half_precision_matches_float32"),
    "fp16/bf16 inputs: q kᵀ · scale + float mask all in float32 (neither q · scale nor a float32 "
    "mask rounded to half first)": "test_half_scores_computed_in_float32",
    "the output has q's dtype, for float16, bfloat16, float32 and float64":
        "test_each_dtype_gives_q_dtype_and_exact_values",
    "an empty query axis (Tq = 0) gives an empty (B, H, 0, Dv) result":
        "test_empty_query_axis_gives_empty_output",
    "attention commutes with permuting the batch": "test_batch_permutation_equivariance",
    "inputs (q, k, v, attn_mask) are not modified": "test_inputs_not_modified",
    "ValueError: attn_mask together with is_causal=True": "test_rejects_mask_with_is_causal",
    "ValueError: a mask neither bool nor floating (int64, int32, uint8)":
        "test_rejects_mask_neither_bool_nor_float",
    "ValueError: q, k or v not 4-D; different B or H; q/k with different D; k/v with different Tk":
        "test_rejects_invalid_arguments",
    "ValueError: a mask that does not broadcast to (B, H, Tq, Tk) (wrong sizes, more dims, a larger batch)":
        "test_rejects_invalid_arguments",
    "a rejected call leaves nothing behind: the next valid call gives the same result as before it":
        "test_valid_call_after_rejected_call",
    "no Python loop over batch, heads or time": "test_attention_has_no_python_loop",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'attention is softmax(q kᵀ · scale + mask) v, the softmax over the keys; output (B, '
    'H, Tq, Dv)':
        'ask',
    "scale multiplies q kᵀ: any float, 0.0 (falsy, not 'not given') and negatives "
    'included':
        'default-scale',
    'scale=None means 1 / sqrt(D), D the head dim of q and k (not Dv, not Tk)':
        'default-scale',
    'bool attn_mask: True = may attend; masked keys have no influence':
        'mask-kinds',
    'float attn_mask is added to the scaled scores (after the scale); -inf removes a key':
        'mask-kinds',
    'attn_mask broadcasts to (B, H, Tq, Tk) from every smaller shape, bool and float':
        'mask-broadcast',
    'an all-True mask equals no mask':
        'mask-kinds',
    'a per-row constant in a float mask changes nothing':
        'mask-kinds',
    'is_causal: query i sees key j iff j <= i + (Tk - Tq), bottom-right aligned for every'
    ' Tq, Tk':
        'causal-alignment',
    'a row with no key to attend (all False, all -inf, causal with Tq > Tk) is zeros, '
    'never NaN':
        'empty-rows',
    'stable for large logits (scores of 1e4 and more)':
        'large-logits',
    'fp16/bf16 inputs: scores and softmax computed in float32':
        'half-precision',
    'fp16/bf16 inputs: q kᵀ · scale + float mask all in float32 (neither q · scale nor a '
    'float32 mask rounded to half first)':
        'half-precision',
    "the output has q's dtype, for float16, bfloat16, float32 and float64":
        ('ask', 'half-precision'),
    'an empty query axis (Tq = 0) gives an empty (B, H, 0, Dv) result':
        'empty-rows',
    'attention commutes with permuting the batch':
        'ask',
    'inputs (q, k, v, attn_mask) are not modified':
        'ask',
    'ValueError: attn_mask together with is_causal=True':
        'causal-alignment',
    'ValueError: a mask neither bool nor floating (int64, int32, uint8)':
        'mask-kinds',
    'ValueError: q, k or v not 4-D; different B or H; q/k with different D; k/v with '
    'different Tk':
        'shape-errors',
    'ValueError: a mask that does not broadcast to (B, H, Tq, Tk) (wrong sizes, more '
    'dims, a larger batch)':
        'mask-broadcast',
    'a rejected call leaves nothing behind: the next valid call gives the same result as '
    'before it':
        'shape-errors',
    'no Python loop over batch, heads or time':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# A scale of 0.0 catches the `scale or 1/sqrt(D)` slip; Tq = 0 is an empty call; an integer
# mask is rejected here although older PyTorch read uint8 as bool. The fp16 rule on the order
# of the float32 casts shares its test with the core half-precision rule, so it stays core.
DETAILS = {
    'ValueError: a mask neither bool nor floating (int64, int32, uint8)',
    'an empty query axis (Tq = 0) gives an empty (B, H, 0, Dv) result',
    "scale multiplies q kᵀ: any float, 0.0 (falsy, not 'not given') and negatives "
    'included',
}

# One query, three keys whose scores differ, so every scale gives a different output.
SCALE_CASE = {"q": torch.tensor([[[[1.0, 0.0]]]]), "k": torch.tensor([[[[0.0, 0.0], [2.0, 0.0], [-1.0, 1.0]]]]),
              "v": torch.tensor([[[[1.0], [2.0], [4.0]]]])}


# ------------------------------------------------------------------ core and scale


@kata_test(level=1, category="correctness", weight=3,
           description="attention() matches the reference on random shapes (no mask), with and without scale")
@settings(max_examples=30)
@given(case=qkv(), scale=st.sampled_from([None, 1.0, 0.3]))
def test_attention_matches_reference(solution, reference, case, scale):
    expect_attention(solution, reference, case, "attention equals softmax(q kᵀ·scale) v", scale=scale)


@kata_test(level=1, category="correctness", weight=1,
           description="an explicit scale multiplies q kᵀ, scale=0.0 and negative scales included")
@settings(max_examples=8)
@given(case=qkv(min_keys=2))
@example(case=SCALE_CASE)
def test_scale_argument_multiplies_scores(solution, reference, case):
    for scale in SCALES:
        expect_attention(solution, reference, case,
                         f"scores are q kᵀ times the given scale (scale={scale!r}: 0.0 is a scale, "
                         "not 'not given')", scale=scale)


@kata_test(level=1, category="correctness", weight=1,
           description="scale=None means 1 / sqrt(D), D the head dim of q and k")
def test_default_scale_is_inverse_sqrt_d(solution, reference):
    # D = 4 (scale 0.5) differs from Dv = 1, Tk = 3 and from 1: each wrong divisor shows.
    for B, H, Tq, Tk, D, Dv in ((1, 2, 2, 3, 4, 1), (2, 1, 3, 2, 9, 2)):
        case = make_case(B, H, Tq, Tk, D, Dv, seed=11, scale=1.5)
        expect_attention(solution, reference, case, "with scale=None the scores are q kᵀ / sqrt(D)")


@kata_test(level=1, category="correctness", weight=2,
           description="rows of attention weights are non-negative and sum to one (v = identity)")
@settings(max_examples=20)
@given(case=qkv(), masked=st.booleans(), mask_seed=seeds)
def test_rows_of_weights_sum_to_one(solution, case, masked, mask_seed):
    B, H, Tq, Tk = full_shape(case)
    # With v = I (Tk x Tk) the output rows are the attention weights themselves.
    v = torch.eye(Tk, dtype=case["q"].dtype).expand(B, H, Tk, Tk).contiguous()
    mask = None
    if masked:  # a random mask that leaves every row at least one key
        gen = torch.Generator().manual_seed(mask_seed)
        mask = torch.rand(Tq, Tk, generator=gen) < 0.6
        mask[torch.arange(Tq), torch.randint(Tk, (Tq,), generator=gen)] = True
    shown_input = shown({"q": case["q"], "k": case["k"], "v": "identity (Tk x Tk)"}, attn_mask=mask)
    # A copy of the mask: the check below reads the mask after the call.
    weights = guarded(solution.attention, case["q"], case["k"], v,
                      attn_mask=None if mask is None else mask.clone(), what="attention()",
                      input=shown_input)
    expect_tensor(weights, (B, H, Tq, Tk), "output shape (B, H, Tq, Dv)", input=shown_input)
    sums = weights.double().sum(-1)  # (B, H, Tq)
    close(sums, torch.ones_like(sums), "each row of attention weights sums to one",
          input=shown_input, atol=1e-5, rtol=1e-5)
    expect(bool((weights >= 0).all()), "weights are non-negative", input=readable(shown_input),
           got=readable(weights))
    if mask is not None:
        expect(bool((weights[..., ~mask] == 0).all()), "masked keys get weight 0",
               input=readable(shown_input), got=readable(weights))


# ------------------------------------------------------------------ masks


@kata_test(level=1, category="correctness", weight=2,
           description="a bool attn_mask (True = may attend), broadcast from smaller shapes")
@settings(max_examples=30)
@given(data=st.data(), case=qkv())
def test_bool_mask_matches_reference(solution, reference, data, case):
    mask = data.draw(bool_masks(full_shape(case)), label="attn_mask")
    expect_attention(solution, reference, case, "bool mask: attend only where True", attn_mask=mask)


@kata_test(level=1, category="correctness", weight=2,
           description="a float attn_mask is added to the scaled scores (-inf removes a key)")
@settings(max_examples=30)
@given(data=st.data(), case=qkv(), scale=st.sampled_from([None, 0.5, 2.0]),
       mask_dtype=st.sampled_from([None, torch.float32, torch.float64]))
def test_float_mask_matches_reference(solution, reference, data, case, scale, mask_dtype):
    mask = data.draw(float_masks(full_shape(case), mask_dtype or case["q"].dtype), label="attn_mask")
    expect_attention(solution, reference, case, "float mask is added to the scaled scores",
                     attn_mask=mask, scale=scale)


@kata_test(level=1, category="correctness", weight=1,
           description="a float mask is added after the scale: softmax(q kᵀ · scale + mask)")
def test_float_mask_added_to_scaled_scores(solution, reference):
    # Equal scores, mask [0, 1]: with scale 2 the mask must still shift the scores by exactly 1.
    case = {"q": torch.tensor([[[[1.0]]]]), "k": torch.tensor([[[[1.0], [1.0]]]]),
            "v": torch.tensor([[[[0.0], [1.0]]]])}
    for scale in (2.0, 0.5, None):
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            mask = torch.tensor([[0.0, 1.0]], dtype=dtype)
            expect_attention(solution, reference, case, "the float mask is added to the scores "
                             "after they are scaled (it is not scaled itself)", attn_mask=mask, scale=scale)


@kata_test(level=1, category="correctness", weight=2,
           description="masks broadcast from every allowed shape, (Tk,) to (B, H, Tq, Tk), bool and float")
def test_mask_broadcasts_in_every_allowed_form(solution, reference):
    case = make_case(*BROADCAST_FULL, D=2, Dv=2, seed=5)
    for i, shape in enumerate(broadcast_forms(BROADCAST_FULL)):
        expect_attention(solution, reference, case, f"a bool mask of shape {shape} broadcasts to "
                         "(B, H, Tq, Tk) as torch broadcasting does", attn_mask=bool_mask(shape, seed=i))
        dtype = (torch.float32, torch.float64, torch.float16)[i % 3]
        expect_attention(solution, reference, case, f"a float mask of shape {shape} broadcasts to "
                         "(B, H, Tq, Tk) as torch broadcasting does",
                         attn_mask=float_mask(shape, seed=100 + i, dtype=dtype))


@kata_test(level=1, category="correctness", weight=2,
           description="keys that are masked out do not influence the output")
@settings(max_examples=20)
@given(case=qkv(), seed=seeds)
def test_masked_keys_do_not_influence_output(solution, case, seed):
    B, H, Tq, Tk = full_shape(case)
    gen = torch.Generator().manual_seed(seed)
    key_mask = torch.rand(B, H, 1, Tk, generator=gen) < 0.6  # per key, for every query
    blocked = ~key_mask[:, :, 0, :, None]  # (B, H, Tk, 1)
    other = {"q": case["q"],
             "k": torch.where(blocked, randn(seed, case["k"].shape, case["k"].dtype, 10.0), case["k"]),
             "v": torch.where(blocked, randn(seed + 1, case["v"].shape, case["v"].dtype, 10.0), case["v"])}
    before = run(solution, case, attn_mask=key_mask)
    after = run(solution, other, attn_mask=key_mask)
    expect(isinstance(before, torch.Tensor), "attention returns a tensor", got=type(before).__name__)
    close(after, before.detach().clone(), "changing masked keys and values leaves the output unchanged",
          input={**shown(case, attn_mask=key_mask), "changed k": other["k"], "changed v": other["v"]})


@kata_test(level=1, category="edge cases", weight=1,
           description="an all-True mask gives the same output as no mask")
@settings(max_examples=15)
@given(data=st.data(), case=qkv())
def test_all_true_mask_equals_no_mask(solution, data, case):
    shape = data.draw(mask_shapes(full_shape(case)), label="mask_shape")
    mask = torch.ones(shape, dtype=torch.bool)
    got, expected = run(solution, case, attn_mask=mask), run(solution, case)
    expect(isinstance(expected, torch.Tensor), "attention returns a tensor", got=type(expected).__name__)
    close(got, expected.detach().clone(), "all-True mask == no mask", input=shown(case, attn_mask=mask))


@kata_test(level=1, category="numerics", weight=1,
           description="adding a constant to a whole row of a float mask changes nothing")
@settings(max_examples=15)
@given(data=st.data(), case=qkv(dtypes=(torch.float64,)),
       offsets=st.lists(st.sampled_from([-30.0, -3.0, 2.5, 40.0]), min_size=4, max_size=4))
def test_row_constant_in_float_mask_changes_nothing(solution, data, case, offsets):
    B, H, Tq, Tk = full_shape(case)
    mask = data.draw(float_masks((B, H, Tq, Tk), torch.float64), label="attn_mask")
    shifted = mask + torch.tensor(offsets[:Tq], dtype=torch.float64)[:, None]  # per query row
    got, expected = run(solution, case, attn_mask=shifted), run(solution, case, attn_mask=mask)
    expect(isinstance(expected, torch.Tensor), "attention returns a tensor", got=type(expected).__name__)
    close(got, expected.detach().clone(), "softmax is shift-invariant per row",
          input={**shown(case, attn_mask=mask), "row offsets": offsets[:Tq]}, atol=1e-7, rtol=1e-6)


# ------------------------------------------------------------------ causality


@kata_test(level=1, category="correctness", weight=2,
           description="is_causal is bottom-right aligned: query i sees keys j <= i + (Tk - Tq)")
@settings(max_examples=30)
@given(case=qkv())
def test_causal_is_bottom_right_aligned(solution, reference, case):
    expect_attention(solution, reference, case, "causal: query i attends keys j <= i + (Tk - Tq)",
                     is_causal=True)


@kata_test(level=1, category="correctness", weight=2,
           description="is_causal for Tq == Tk, Tq < Tk (decoding, chunked prefill) and Tq > Tk")
def test_causal_alignment_for_every_tq_tk(solution, reference):
    for Tq, Tk in CAUSAL_ALIGNMENTS:
        case = make_case(2, 2, Tq, Tk, D=2, Dv=3, seed=Tq * 10 + Tk)
        expect_attention(solution, reference, case, f"causal with Tq={Tq}, Tk={Tk}: query i sees "
                         f"keys j <= i + {Tk - Tq} (the queries are the last Tq positions)", is_causal=True)


@kata_test(level=1, category="correctness", weight=2,
           description="causality: changing keys a query may not see leaves its output unchanged")
@settings(max_examples=20)
@given(data=st.data(), case=qkv(), seed=seeds)
def test_causality_future_keys_do_not_matter(solution, data, case, seed):
    B, H, Tq, Tk = full_shape(case)
    query = data.draw(st.integers(0, Tq - 1), label="query")
    future = torch.arange(Tk) > query + (Tk - Tq)  # keys query `query` (and earlier) may not see
    other = {"q": case["q"],
             "k": torch.where(future[:, None], randn(seed, case["k"].shape, case["k"].dtype, 10.0), case["k"]),
             "v": torch.where(future[:, None], randn(seed + 1, case["v"].shape, case["v"].dtype, 10.0), case["v"])}
    before = run(solution, case, is_causal=True)
    after = run(solution, other, is_causal=True)
    for got in (before, after):
        expect_tensor(got, (B, H, Tq, case["v"].shape[-1]), "attention returns a (B, H, Tq, Dv) tensor",
                      input=shown(case, is_causal=True))
    changed = future.nonzero().flatten().tolist()
    close(after[:, :, : query + 1], before[:, :, : query + 1].detach().clone(),
          f"outputs of queries 0..{query} do not change when keys they may not see change "
          f"(keys {changed})", input={**shown(case, is_causal=True), "changed keys": changed})


@kata_test(level=1, category="correctness", weight=1,
           description="permuting the batch permutes the output the same way")
@settings(max_examples=15)
@given(case=qkv(), seed=seeds, causal=st.booleans())
def test_batch_permutation_equivariance(solution, case, seed, causal):
    B = case["q"].shape[0]
    perm = torch.randperm(B, generator=torch.Generator().manual_seed(seed))
    permuted = {name: t[perm] for name, t in case.items()}
    got, base = run(solution, permuted, is_causal=causal), run(solution, case, is_causal=causal)
    expect(isinstance(base, torch.Tensor), "attention returns a tensor", got=type(base).__name__)
    close(got, base[perm].detach().clone(), "attention(q[p], k[p], v[p]) == attention(q, k, v)[p]",
          input={**shown(case, is_causal=causal), "permutation": perm.tolist()})


# ------------------------------------------------------------------ fully masked rows, numerics


@kata_test(level=1, category="edge cases", weight=2,
           description="a query with no key to attend outputs zeros, never NaN (bool, float and causal)")
@settings(max_examples=20)
@given(case=qkv(), kind=st.sampled_from(["bool", "float", "causal"]), row_seed=seeds)
def test_fully_masked_rows_are_zeros(solution, reference, case, kind, row_seed):
    B, H, Tq, Tk = full_shape(case)
    gen = torch.Generator().manual_seed(row_seed)
    dead_rows = torch.rand(Tq, generator=gen) < 0.5
    dead_rows[0] = True
    allowed = (torch.rand(Tq, Tk, generator=gen) < 0.7) & ~dead_rows[:, None]
    if kind == "bool":
        kwargs: dict = {"attn_mask": allowed}
    elif kind == "float":
        kwargs = {"attn_mask": torch.zeros(Tq, Tk, dtype=case["q"].dtype).masked_fill(~allowed, float("-inf"))}
    else:  # more queries than keys: the first Tq - Tk queries see nothing
        q = randn(row_seed, (B, H, Tk + 1 + int(dead_rows.sum()), case["q"].shape[-1]), case["q"].dtype)
        case = {**case, "q": q}
        kwargs = {"is_causal": True}
    expect_attention(solution, reference, case,
                     "rows with nothing to attend are zeros; the other rows are the usual attention", **kwargs)


def _dead_row_masks(Tq: int, Tk: int, dtype: torch.dtype) -> dict[str, dict]:
    """Masks in which query 0 (or every query) may attend nothing."""
    allowed = torch.ones(Tq, Tk, dtype=torch.bool)
    allowed[0] = False
    allowed[1, 0] = False
    as_float = torch.zeros(Tq, Tk, dtype=dtype).masked_fill(~allowed, float("-inf"))
    return {"bool mask, row 0 all False": {"attn_mask": allowed},
            "float mask, row 0 all -inf": {"attn_mask": as_float},
            "every key masked (mask of shape (1, 1))": {"attn_mask": torch.zeros(1, 1, dtype=torch.bool)},
            "every key -inf (float mask (Tk,))": {"attn_mask": torch.full((Tk,), float("-inf"), dtype=dtype)}}


@kata_test(level=1, category="edge cases", weight=2,
           description="fully masked rows are zeros for every mask kind and every dtype")
def test_fully_masked_rows_for_every_kind_and_dtype(solution, reference):
    for dtype in ALL_DTYPES:
        case = make_case(1, 2, 3, 3, D=2, Dv=2, seed=3, dtype=dtype)
        for what, kwargs in _dead_row_masks(3, 3, dtype).items():
            expect_attention(solution, reference, case, f"{what}, {str(dtype)[6:]}: a row with no key "
                             "to attend is zeros, never NaN", **kwargs)
        more_queries = make_case(1, 2, 4, 2, D=2, Dv=2, seed=4, dtype=dtype)
        expect_attention(solution, reference, more_queries, f"causal with Tq=4 > Tk=2, {str(dtype)[6:]}: "
                         "queries 0 and 1 see no key and output zeros, never NaN", is_causal=True)


HUGE_CASE = {"q": torch.tensor([[[[1000.0, 0.0]], [[-300.0, 40.0]]]]),
             "k": torch.tensor([[[[1000.0, 0.0], [999.0, 1.0], [-1000.0, 0.0]], [[300.0, 0.0], [0.0, 300.0], [-300.0, 0.0]]]]),
             "v": torch.tensor([[[[1.0], [2.0], [3.0]], [[-1.0], [0.5], [4.0]]]])}


@kata_test(level=1, category="numerics", weight=2,
           description="huge logits stay finite: the output is a convex combination of v")
@settings(max_examples=20)
@given(case=qkv(dtypes=ALL_DTYPES, scale=150.0))
@example(case=HUGE_CASE)
@example(case={name: t.double() for name, t in HUGE_CASE.items()})
def test_huge_logits_stay_finite(solution, case):
    got = run(solution, case)
    shown_input = shown(case)
    expect_tensor(got, full_shape(case)[:3] + case["v"].shape[-1:], "output shape (B, H, Tq, Dv)",
                  input=shown_input)
    expect(got.dtype == case["q"].dtype, "output dtype is q's dtype", input=readable(shown_input),
           expected=case["q"].dtype, got=got.dtype)
    expect(bool(torch.isfinite(got).all()), "scores of 1e4 and more still give finite outputs",
           input=readable(shown_input), got=readable(got))
    v = case["v"].double()
    low, high = v.amin(dim=2, keepdim=True), v.amax(dim=2, keepdim=True)  # (B, H, 1, Dv)
    slack = 1e-2 * (1 + v.abs().amax())
    inside = (got.double() >= low - slack) & (got.double() <= high + slack)
    expect(bool(inside.all()), "each output lies between the smallest and largest value of v",
           input=readable(shown_input), expected="within [min v, max v] per feature", got=readable(got))


@kata_test(level=1, category="numerics", weight=2,
           description="fp16/bf16 inputs: float32 scores and softmax, output in the input dtype")
@settings(max_examples=30)
@given(case=qkv(dtypes=HALVES, scale=6.0), causal=st.booleans())
def test_half_precision_matches_float32(solution, reference, case, causal):
    expect_attention(solution, reference, case, "half-precision attention within tolerance of the "
                     "exact result", is_causal=causal)


@kata_test(level=1, category="numerics", weight=1,
           description="half-precision scores are computed in float32 (fp16 overflow, bf16 rounding), "
                       "q · scale and a float32 mask included")
def test_half_scores_computed_in_float32(solution, reference):
    for what, case, dtype in (("q kᵀ = 65536 overflows float16", HALF_OVERFLOW, torch.float16),
                              ("q kᵀ = 256.875 rounds to 256 in bfloat16", HALF_ROUNDING, torch.bfloat16)):
        half = {name: t.to(dtype) for name, t in case.items()}
        expect_attention(solution, reference, half, f"{what}: scores and softmax must be computed "
                         "in float32, then the result cast back", scale=1.0)
    for case in HALF_SCALED_OVERFLOW:
        half = {name: t.half() for name, t in case.items()}
        expect_attention(solution, reference, half, "q kᵀ · scale with q · scale or k · scale = 1e5 "
                         "(over the float16 max): upcast to float32 before scaling", scale=100.0)
    for dtype, mask, what in HALF_WIDE_MASKS:
        half = {name: t.to(dtype) for name, t in HALF_MASK_CASE.items()}
        expect_attention(solution, reference, half, f"{what}: the float mask is added to the float32 "
                         "scores as given, not cast to q's dtype first", attn_mask=mask, scale=1.0)


@kata_test(level=1, category="numerics", weight=1,
           description="each dtype (float16, bfloat16, float32, float64) gives q's dtype and the exact values")
def test_each_dtype_gives_q_dtype_and_exact_values(solution, reference):
    for dtype in ALL_DTYPES:
        case = make_case(2, 2, 3, 3, D=3, Dv=2, seed=21, dtype=dtype, scale=2.0)
        name = str(dtype)[6:]
        expect_attention(solution, reference, case, f"{name} inputs: the result is {name} and "
                         "within the dtype's tolerance of the exact result")
        expect_attention(solution, reference, case, f"{name} inputs, is_causal: the result is "
                         f"{name} and within tolerance of the exact result", is_causal=True)
        mask = float_mask((3, 3), seed=22, dtype=dtype)
        expect_attention(solution, reference, case, f"{name} inputs, float mask: the result is "
                         f"{name} and within tolerance of the exact result", attn_mask=mask)
    # Scores near 1e4 that differ by about 0.27: float32 rounding moves the weights by ~1e-4.
    precise = {name: t.double() for name, t in FLOAT64_PRECISION_CASE.items()}
    expect_attention(solution, reference, precise, "float64 inputs are computed in float64 "
                     "(not rounded through float32)", scale=1.0)


@kata_test(level=1, category="edge cases", weight=0.5,
           description="an empty query axis (Tq = 0) gives an empty (B, H, 0, Dv) result")
def test_empty_query_axis_gives_empty_output(solution, reference):
    case = make_case(2, 2, 0, 3, D=2, Dv=4, seed=1)
    for kwargs in ({}, {"is_causal": True}, {"attn_mask": torch.ones(0, 3, dtype=torch.bool)}):
        expect_attention(solution, reference, case, "no queries: the result is (B, H, 0, Dv)", **kwargs)


@kata_test(level=1, category="api contract", weight=1,
           description="inputs (q, k, v, attn_mask) are not modified")
@settings(max_examples=15)
@given(data=st.data(), case=qkv(dtypes=ALL_DTYPES), use_float=st.booleans())
def test_inputs_not_modified(solution, data, case, use_float):
    full = full_shape(case)
    mask = data.draw(float_masks(full, case["q"].dtype) if use_float else bool_masks(full), label="attn_mask")
    before = {**{k: t.clone() for k, t in case.items()}, "attn_mask": mask.clone()}
    call(solution.attention, case["q"], case["k"], case["v"], attn_mask=mask, what="attention()")
    for name, t in {**case, "attn_mask": mask}.items():
        expect(torch.equal(t, before[name]), f"{name} is not modified",
               input=readable(shown(case, attn_mask=before["attn_mask"])),
               expected=readable(before[name]), got=readable(t))


# ------------------------------------------------------------------ efficiency
# The argument checks (ValueError rules) are in test_level1_errors.py.


def _attention_ops(solution: Any, B: int, H: int, Tq: int, Tk: int, causal: bool) -> int:
    q, k, v = torch.randn(B, H, Tq, 2), torch.randn(B, H, Tk, 2), torch.randn(B, H, Tk, 2)
    return count_ops(lambda: solution.attention(q, k, v, is_causal=causal))


@kata_test(level=1, category="efficiency", weight=1,
           description="no Python loop over batch, heads or time: the operation count does not grow with B, H, T")
def test_attention_has_no_python_loop(solution):
    for causal in (False, True):
        base = _attention_ops(solution, 2, 2, 2, 3, causal)
        for what, dims in {"B": (6, 2, 2, 3), "H": (2, 6, 2, 3), "T": (2, 2, 6, 9)}.items():
            grown = _attention_ops(solution, *dims, causal)
            expect(grown <= base, f"the number of tensor operations does not grow with {what}",
                   input=f"(B, H, Tq, Tk) = (2, 2, 2, 3) vs {dims}, is_causal={causal}",
                   expected=f"<= {base} operations", got=f"{grown} operations")
