"""Level 1 — tiled attention with online softmax: flash_attention's values and lse, causal
alignment, rows with nothing to attend, scale, GQA, numerics, untouched inputs, errors, and
the memory rule measured on the storages the call creates.

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome; random shapes come on top.
"""

from __future__ import annotations

import torch
from hypothesis import given, settings, strategies as st

from grader.protocol import call, expect, kata_test
from grader.suites._measure import new_storages
from grader.suites.flash_attn.strategies import (HALVES, accumulator_like, attention_cases,
                                                 check_lse, check_out, dense_attention, raises_value_error,
                                                 randn, readable, run_attention, shown, storage_text)

RULES = {
    "out equals softmax(q kᵀ · scale) v (as scaled_dot_product_attention) for any shapes and tile sizes":
        "test_out_matches_dense_attention",
    "lse (B, H, Tq) float32 is the natural log of the sum of exp of the scaled scores a row may attend":
        "test_lse_is_natural_logsumexp",
    "causal is bottom-right aligned: query i may attend key j iff j <= i + (Tk - Tq)":
        "test_causal_is_bottom_right_aligned",
    "a row with nothing to attend (causal with Tq > Tk, or Tk = 0) has out 0 and lse -inf, never NaN":
        "test_rows_with_nothing_to_attend",
    "scale None means 1/sqrt(D); an explicit 0.0 is a valid scale": "test_scale_none_and_zero",
    "query head h reads KV head h // (H // H_kv)": "test_gqa_query_head_reads_its_kv_head",
    "running max: scores of 1e4 in float32 give finite, exact results": "test_large_scores_stay_finite",
    "half inputs: math in float32 (scores, softmax weights, the weighted sum of values), out in q's dtype, "
    "lse float32": ("test_half_inputs_math_in_float32", "test_half_inputs_weights_and_values_in_float32"),
    "inputs are never modified": "test_inputs_are_not_modified",
    "memory: no new storage beyond the outputs and float32/float64 accumulators of their shapes holds "
    "more than B·H·(block_q·block_k + (block_q + block_k)·D) elements": "test_memory_stays_within_tiles",
    "ValueError: bad shapes or dims, D < 1, block sizes < 1, H % H_kv != 0": "test_rejects_bad_arguments",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'out equals softmax(q kᵀ · scale) v (as scaled_dot_product_attention) for any shapes '
    'and tile sizes':
        'ask',
    'lse (B, H, Tq) float32 is the natural log of the sum of exp of the scaled scores a '
    'row may attend':
        ('ask', 'lse-definition'),
    'causal is bottom-right aligned: query i may attend key j iff j <= i + (Tk - Tq)':
        'causal-alignment',
    'a row with nothing to attend (causal with Tq > Tk, or Tk = 0) has out 0 and lse '
    '-inf, never NaN':
        'empty-rows',
    'scale None means 1/sqrt(D); an explicit 0.0 is a valid scale':
        'default-scale',
    'query head h reads KV head h // (H // H_kv)':
        'gqa-heads',
    'running max: scores of 1e4 in float32 give finite, exact results':
        'large-scores',
    'half inputs: math in float32 (scores, softmax weights, the weighted sum of values), '
    "out in q's dtype, lse float32":
        'half-math',
    'inputs are never modified':
        'ask',
    'memory: no new storage beyond the outputs and float32/float64 accumulators of their '
    'shapes holds more than B·H·(block_q·block_k + (block_q + block_k)·D) elements':
        ('ask', 'memory-rule'),
    'ValueError: bad shapes or dims, D < 1, block sizes < 1, H % H_kv != 0':
        'tile-errors',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# None: the default scale and an explicit 0.0 share one test, and the default is core.
DETAILS: set[str] = set()

OUT_RULE = "out equals softmax(q kᵀ · scale [+ causal mask]) v"


@kata_test(level=1, category="correctness", weight=3,
           description="out equals dense attention for random shapes, GQA, tile sizes, causal or not")
@settings(max_examples=15)
@given(case=attention_cases(), causal=st.booleans(), scale=st.sampled_from([None, 0.5]))
def test_out_matches_dense_attention(solution, case, causal, scale):
    out, _ = run_attention(solution, case, causal=causal, scale=scale)
    expected, _ = dense_attention(case["q"], case["k"], case["v"], causal=causal, scale=scale)
    check_out(out, case, expected, OUT_RULE, input=shown(case, causal=causal, scale=scale))


@kata_test(level=1, category="correctness", weight=2,
           description="lse is the natural log-sum-exp of the scaled scores each row may attend (float32)")
@settings(max_examples=12)
@given(case=attention_cases(), causal=st.booleans())
def test_lse_is_natural_logsumexp(solution, case, causal):
    _, lse = run_attention(solution, case, causal=causal)
    _, expected = dense_attention(case["q"], case["k"], case["v"], causal=causal)
    check_lse(lse, expected, "lse = log(sum(exp(q kᵀ · scale))) over the keys a row may attend, "
              "natural log", input=shown(case, causal=causal))


@kata_test(level=1, category="correctness", weight=2,
           description="causal is bottom-right aligned when Tq != Tk (query i sees keys j <= i + Tk - Tq)")
def test_causal_is_bottom_right_aligned(solution):
    for num_queries, num_keys, block_q, block_k in ((2, 5, 1, 2), (3, 7, 2, 3), (5, 3, 2, 2), (1, 4, 64, 64)):
        case = {"q": randn(11, (1, 2, num_queries, 3)), "k": randn(12, (1, 1, num_keys, 3)),
                "v": randn(13, (1, 1, num_keys, 3)), "block_q": block_q, "block_k": block_k}
        out, lse = run_attention(solution, case, causal=True)
        expected_out, expected_lse = dense_attention(case["q"], case["k"], case["v"], causal=True)
        rule = "causal: query i may attend key j iff j <= i + (Tk - Tq) (bottom-right aligned)"
        check_out(out, case, expected_out, rule, input=shown(case, causal=True))
        check_lse(lse, expected_lse, rule, input=shown(case, causal=True))


@kata_test(level=1, category="edge cases", weight=2,
           description="rows with nothing to attend (causal Tq > Tk, Tk = 0) give out 0 and lse -inf, no NaN")
def test_rows_with_nothing_to_attend(solution):
    cases = [((1, 2, 5, 2), (1, 1, 2, 2), True, 2, 1),   # queries 0..2 see no key
             ((1, 1, 6, 3), (1, 1, 1, 3), True, 4, 3),   # a whole query tile sees nothing
             ((2, 2, 3, 2), (2, 1, 0, 2), False, 2, 2),  # no keys at all
             ((1, 1, 2, 1), (1, 1, 0, 1), True, 1, 1)]
    for q_shape, kv_shape, causal, block_q, block_k in cases:
        case = {"q": randn(1, q_shape), "k": randn(2, kv_shape), "v": randn(3, kv_shape),
                "block_q": block_q, "block_k": block_k}
        out, lse = run_attention(solution, case, causal=causal)
        expected_out, expected_lse = dense_attention(case["q"], case["k"], case["v"], causal=causal)
        rule = "a row with nothing to attend has out 0 and lse -inf (never NaN)"
        check_out(out, case, expected_out, rule, input=shown(case, causal=causal))
        check_lse(lse, expected_lse, rule, input=shown(case, causal=causal))
    empty = {"q": randn(4, (1, 2, 0, 3)), "k": randn(5, (1, 1, 4, 3)), "v": randn(6, (1, 1, 4, 3)),
             "block_q": 2, "block_k": 2}
    out, lse = run_attention(solution, empty, causal=True)
    got = (tuple(getattr(out, "shape", ())), tuple(getattr(lse, "shape", ())))
    expect(got == ((1, 2, 0, 3), (1, 2, 0)), "Tq = 0 gives empty out (B, H, 0, D) and lse (B, H, 0)",
           input=shown(empty, causal=True), expected=((1, 2, 0, 3), (1, 2, 0)), got=got)


@kata_test(level=1, category="correctness", weight=1,
           description="scale None means 1/sqrt(D); scale=0.0 is a valid scale (uniform weights)")
def test_scale_none_and_zero(solution):
    case = {"q": randn(21, (1, 1, 3, 4), scale=2.0), "k": randn(22, (1, 1, 5, 4), scale=2.0),
            "v": randn(23, (1, 1, 5, 4)), "block_q": 2, "block_k": 2}
    for scale, rule in ((None, "scale None means 1/sqrt(D)"),
                        (0.0, "scale=0.0 is a valid scale: every visible key gets the same weight")):
        for causal in (False, True):
            out, lse = run_attention(solution, case, causal=causal, scale=scale)
            expected_out, expected_lse = dense_attention(case["q"], case["k"], case["v"], causal=causal,
                                                         scale=scale)
            check_out(out, case, expected_out, rule, input=shown(case, causal=causal, scale=scale))
            check_lse(lse, expected_lse, rule, input=shown(case, causal=causal, scale=scale))


@kata_test(level=1, category="correctness", weight=2,
           description="GQA: query head h reads KV head h // (H // H_kv)")
@settings(max_examples=6)
@given(H_kv=st.integers(2, 3), group=st.integers(2, 3), seed=st.integers(0, 2**16), causal=st.booleans())
def test_gqa_query_head_reads_its_kv_head(solution, H_kv, group, seed, causal):
    case = {"q": randn(seed, (1, H_kv * group, 3, 2)), "k": randn(seed + 1, (1, H_kv, 4, 2), scale=2.0),
            "v": randn(seed + 2, (1, H_kv, 4, 2), scale=3.0), "block_q": 2, "block_k": 3}
    out, _ = run_attention(solution, case, causal=causal)
    expected, _ = dense_attention(case["q"], case["k"], case["v"], causal=causal)
    check_out(out, case, expected, f"query head h reads KV head h // {group} (H={H_kv * group}, "
              f"H_kv={H_kv})", input=shown(case, causal=causal))


@kata_test(level=1, category="numerics", weight=2,
           description="scores of 1e4 in float32 stay finite and exact (running max, rescaled sums)")
@settings(max_examples=6)
@given(seed=st.integers(0, 2**16), causal=st.booleans(), block_k=st.sampled_from([1, 2, 3]))
def test_large_scores_stay_finite(solution, seed, causal, block_k):
    gen = torch.Generator().manual_seed(seed)
    # integer values: every score is an exact float32 integer up to 2e4, so exp(s - max) is exact
    q = torch.randint(-100, 101, (1, 2, 4, 2), generator=gen).float()
    k = torch.randint(-100, 101, (1, 1, 6, 2), generator=gen).float()
    v = randn(seed, (1, 1, 6, 2))
    case = {"q": q, "k": k, "v": v, "block_q": 2, "block_k": block_k}
    out, lse = run_attention(solution, case, causal=causal, scale=1.0)
    expected_out, expected_lse = dense_attention(q, k, v, causal=causal, scale=1.0)
    rule = "large scores: keep a running max and rescale the sums (exp(1e4) overflows)"
    check_out(out, case, expected_out, rule, input=shown(case, causal=causal, scale=1.0))
    check_lse(lse, expected_lse, rule, input=shown(case, causal=causal, scale=1.0))


@kata_test(level=1, category="numerics", weight=2,
           description="float16/bfloat16 inputs: math in float32, out in q's dtype, lse float32")
@settings(max_examples=8)
@given(seed=st.integers(0, 2**16), dtype=st.sampled_from(HALVES), causal=st.booleans())
def test_half_inputs_math_in_float32(solution, seed, dtype, causal):
    gen = torch.Generator().manual_seed(seed)
    # scores up to 1.6e5: above float16's 65504, and rounded to 1024 in bfloat16
    q = torch.randint(-200, 201, (1, 2, 3, 4), generator=gen).to(dtype)
    k = torch.randint(-200, 201, (1, 1, 5, 4), generator=gen).to(dtype)
    case = {"q": q, "k": k, "v": randn(seed, (1, 1, 5, 4), dtype), "block_q": 2, "block_k": 2}
    out, lse = run_attention(solution, case, causal=causal, scale=1.0)
    expected_out, expected_lse = dense_attention(q, k, case["v"], causal=causal, scale=1.0)
    rule = f"{str(dtype)[6:]} inputs: scores and softmax in float32"
    check_out(out, case, expected_out, rule, input=shown(case, causal=causal, scale=1.0))
    check_lse(lse, expected_lse, rule, input=shown(case, causal=causal, scale=1.0))


@kata_test(level=1, category="numerics", weight=1,
           description="float16/bfloat16 inputs: the softmax weights and their sum with v stay float32")
def test_half_inputs_weights_and_values_in_float32(solution):
    # scores within 0.1 of each other and values of +-1000 that nearly cancel: out is a few units,
    # so weights rounded to half (p cast to v's dtype for p @ v) or a half accumulator move it by
    # far more than the half tolerance
    q = torch.tensor([[0.1, 0.0], [0.3, 0.0], [0.7, 0.0], [0.9, 0.0]])[None, None]           # (1, 1, 4, 2)
    k = torch.tensor([[0.01, 0.0], [0.023, 0.0], [0.031, 0.0], [0.047, 0.0], [0.062, 0.0],
                      [0.089, 0.0]])[None, None]                                            # (1, 1, 6, 2)
    v = torch.tensor([[1000.0, 3000.0], [1000.0, 1000.0], [1000.0, 1000.0], [-1000.0, -2000.0],
                      [-1000.0, -1000.0], [-1000.0, -2000.0]])[None, None]                   # (1, 1, 6, 2)
    for dtype in HALVES:
        case = {"q": q.to(dtype), "k": k.to(dtype), "v": v.to(dtype), "block_q": 2, "block_k": 2}
        out, lse = run_attention(solution, case, scale=1.0)
        expected_out, expected_lse = dense_attention(case["q"], case["k"], case["v"], scale=1.0)
        rule = (f"{str(dtype)[6:]} inputs: math in float32, the softmax weights p and the accumulator of p v "
                "included (do not cast p to v's dtype for the product)")
        check_out(out, case, expected_out, rule, input=shown(case, scale=1.0))
        check_lse(lse, expected_lse, rule, input=shown(case, scale=1.0))


@kata_test(level=1, category="api contract", weight=1, description="q, k and v are never modified")
def test_inputs_are_not_modified(solution):
    for dtype, causal in ((torch.float32, True), (torch.float16, False)):
        q, k, v = randn(31, (1, 2, 5, 3), dtype), randn(32, (1, 1, 4, 3), dtype), randn(33, (1, 1, 4, 3), dtype)
        before = [t.clone() for t in (q, k, v)]
        call(solution.flash_attention, q, k, v, what="flash_attention()", causal=causal, block_q=2, block_k=3)
        for name, now, then in zip("qkv", (q, k, v), before):
            expect(torch.equal(now, then), f"flash_attention leaves {name} unchanged",
                   input=readable({"q": before[0], "k": before[1], "v": before[2], "causal": causal}),
                   expected=readable(then), got=readable(now))


# (B, H, H_kv, Tq, Tk, D, block_q, block_k, causal, dtype): the full score matrix, a full-length
# mask, and a whole converted or repeated K each exceed the limit somewhere here.
MEMORY_CASES = (
    (1, 2, 1, 20, 20, 2, 8, 8, True, torch.float32),     # full scores 800, full mask 400 > 192
    (1, 2, 1, 6, 80, 16, 8, 16, False, torch.float16),   # whole K in float32: 1280 > 1024
    (2, 2, 2, 12, 5, 3, 6, 4, True, torch.float32),      # full scores 240 > 216
    (1, 4, 2, 16, 48, 8, 8, 16, False, torch.float32),   # K repeated per query head: 1536 > 1280
)


@kata_test(level=1, category="efficiency", weight=3,
           description="memory: every tensor the call creates is tile-sized (or an output-shaped accumulator)")
def test_memory_stays_within_tiles(solution):
    for B, H, H_kv, Tq, Tk, D, block_q, block_k, causal, dtype in MEMORY_CASES:
        q, k, v = randn(41, (B, H, Tq, D), dtype), randn(42, (B, H_kv, Tk, D), dtype), randn(43, (B, H_kv, Tk, D), dtype)
        storages = new_storages(lambda: call(solution.flash_attention, q, k, v, causal=causal, block_q=block_q,
                                             block_k=block_k, what="flash_attention()"))
        limit = B * H * (block_q * block_k + (block_q + block_k) * D)
        too_big = [s for s in storages if s[0] > limit and not accumulator_like(s, B, H, Tq, D, str(dtype)[6:])]
        expect(not too_big, "memory rule: apart from out, lse and float32/float64 accumulators of their "
               "shapes, no tensor created during the call holds more than B·H·(block_q·block_k + "
               "(block_q + block_k)·D) elements (a full score matrix or mask, or a whole converted or "
               "repeated K or V, does)",
               input=f"q {tuple(q.shape)}, k/v {tuple(k.shape)} {str(dtype)[6:]}, causal={causal}, "
                     f"block_q={block_q}, block_k={block_k}",
               expected=f"every other new tensor <= {limit} elements",
               got="; ".join(storage_text(s) for s in too_big[:3]) + (" ..." if len(too_big) > 3 else ""))


@kata_test(level=1, category="api contract", weight=1,
           description="ValueError for bad shapes or dims, D < 1, block sizes < 1, H % H_kv != 0")
def test_rejects_bad_arguments(solution):
    def t(*shape):
        return torch.zeros(shape)

    bad = {
        "q not 4-D": (t(2, 3, 4), t(1, 1, 3, 4), t(1, 1, 3, 4), {}),
        "k not 4-D": (t(1, 2, 3, 4), t(1, 3, 4), t(1, 1, 3, 4), {}),
        "v not 4-D": (t(1, 2, 3, 4), t(1, 1, 3, 4), t(1, 1, 1, 3, 4), {}),
        "different batch sizes": (t(2, 2, 3, 4), t(1, 1, 3, 4), t(1, 1, 3, 4), {}),
        "q and k with different D": (t(1, 2, 3, 4), t(1, 1, 3, 5), t(1, 1, 3, 5), {}),
        "v's last dim differs from D": (t(1, 2, 3, 4), t(1, 1, 3, 4), t(1, 1, 3, 6), {}),
        "k and v with different Tk": (t(1, 2, 3, 4), t(1, 1, 3, 4), t(1, 1, 2, 4), {}),
        "k and v with different H_kv": (t(1, 2, 3, 4), t(1, 2, 3, 4), t(1, 1, 3, 4), {}),
        "D = 0": (t(1, 1, 2, 0), t(1, 1, 2, 0), t(1, 1, 2, 0), {}),
        "block_q = 0": (t(1, 1, 2, 2), t(1, 1, 2, 2), t(1, 1, 2, 2), {"block_q": 0}),
        "block_k = 0": (t(1, 1, 2, 2), t(1, 1, 2, 2), t(1, 1, 2, 2), {"block_k": 0}),
        "block_q = -1": (t(1, 1, 2, 2), t(1, 1, 2, 2), t(1, 1, 2, 2), {"block_q": -1}),
        "H % H_kv != 0 (H = 3, H_kv = 2)": (t(1, 3, 2, 2), t(1, 2, 2, 2), t(1, 2, 2, 2), {}),
    }
    for what, (q, k, v, kwargs) in bad.items():
        ok, got = raises_value_error(lambda: solution.flash_attention(q, k, v, **kwargs), "flash_attention()")
        expect(ok, f"ValueError for {what}",
               input=f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, {kwargs or ''}",
               expected="ValueError", got=got)
