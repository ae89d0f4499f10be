"""Level 3 — roofline: the time of a decode step and of a prefill as max(bytes / bandwidth,
FLOPs / peak) with exactly the bytes and FLOPs the statement counts; monotonicity, and the
batch at which decode turns compute-bound.

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome; random serving cases come on top.
"""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from grader.protocol import call, call_many, expect, kata_test
from grader.suites.kv_budget.strategies import (GPUS, H100, LLAMA3_70B, LLAMA3_8B, case_text, crossover_batch,
                                                decode_terms, expect_close, expect_value_error, make_gpu,
                                                make_spec, prefill_terms, serving_cases)

RULES = {
    "decode_step_time = max(bytes / hbm_bytes_per_s, flops / flops_per_s)": "test_decode_step_time_matches",
    "decode bytes = weight_bytes (every weight once) + batch · context_len · kv_bytes_per_token":
        "test_decode_bytes_are_weights_once_plus_every_kv_cache",
    "decode FLOPs = batch · (2 · params per GPU + 4 · n_layers · (n_heads / tp) · head_dim · context_len)":
        "test_decode_flops_are_two_per_param_plus_attention",
    "prefill_time: the weights read once; FLOPs = prompt_len · 2 · params per GPU + 4 · n_layers · "
    "(n_heads / tp) · head_dim · prompt_len · (prompt_len + 1) / 2": "test_prefill_time_matches",
    "prefill attention is causal: token i (from 1) attends i keys": "test_prefill_attention_is_causal",
    "decode time is monotone (non-decreasing) in batch and in context_len": "test_decode_time_is_monotone",
    "decode turns compute-bound exactly past the analytic crossover batch":
        "test_decode_turns_compute_bound_at_the_crossover",
    "tp defaults to 1 (decode_step_time and prefill_time called without it)": "test_roofline_tp_defaults_to_one",
    "ValueError: batch, context_len or prompt_len < 1; tp not dividing": "test_roofline_rejects_bad_arguments",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'decode_step_time = max(bytes / hbm_bytes_per_s, flops / flops_per_s)':
        'roofline',
    'decode bytes = weight_bytes (every weight once) + batch · context_len · '
    'kv_bytes_per_token':
        'decode-bytes',
    'decode FLOPs = batch · (2 · params per GPU + 4 · n_layers · (n_heads / tp) · '
    'head_dim · context_len)':
        'decode-flops',
    'prefill_time: the weights read once; FLOPs = prompt_len · 2 · params per GPU + 4 · '
    'n_layers · (n_heads / tp) · head_dim · prompt_len · (prompt_len + 1) / 2':
        ('causal-prefill', 'decode-flops'),
    'prefill attention is causal: token i (from 1) attends i keys':
        'causal-prefill',
    'decode time is monotone (non-decreasing) in batch and in context_len':
        'roofline',
    'decode turns compute-bound exactly past the analytic crossover batch':
        'roofline',
    'tp defaults to 1 (decode_step_time and prefill_time called without it)':
        'ask',
    'ValueError: batch, context_len or prompt_len < 1; tp not dividing':
        'roofline-errors',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS: set[str] = set()

# A GPU with unlimited bandwidth shows the compute term alone, one with unlimited FLOPs the memory term.
FAST_MEMORY, FAST_COMPUTE = 1e30, 1e30


def _decode(solution, case, batch, context_len, gpu=None):
    return call(solution.decode_step_time, make_spec(solution, case["spec"]), make_gpu(solution, gpu or case["gpu"]),
                batch, context_len, case["bpp"], case["bpe"], tp=case["tp"], what="decode_step_time()")


def _prefill(solution, case, prompt_len, gpu=None):
    return call(solution.prefill_time, make_spec(solution, case["spec"]), make_gpu(solution, gpu or case["gpu"]),
                prompt_len, case["bpp"], tp=case["tp"], what="prefill_time()")


@kata_test(level=3, category="correctness", weight=3,
           description="decode_step_time = max(bytes / bandwidth, FLOPs / peak) on random models and GPUs")
@settings(max_examples=20)
@given(case=serving_cases(), batch=st.integers(1, 1024), context_len=st.integers(1, 32768))
def test_decode_step_time_matches(solution, case, batch, context_len):
    got = _decode(solution, case, batch, context_len)
    expect_close(got, max(decode_terms(case, batch, context_len)), "decode_step_time = max(bytes / "
                 "hbm_bytes_per_s, flops / flops_per_s)", input=case_text(case, batch=batch, context_len=context_len))


@kata_test(level=3, category="correctness", weight=2,
           description="memory-bound decode reads every weight once and every sequence's whole KV cache")
def test_decode_bytes_are_weights_once_plus_every_kv_cache(solution):
    case = {"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100, flops_per_s=FAST_COMPUTE), "bpp": 2.0, "bpe": 2.0,
            "reserve_fraction": 0.1}
    for batch, context_len in ((1, 1), (1, 8192), (16, 1000), (64, 4096)):
        expect_close(_decode(solution, case, batch, context_len), decode_terms(case, batch, context_len)[0],
                     "decode bytes = weight_bytes + batch · context_len · kv_bytes_per_token (unlimited FLOPs: "
                     "time = bytes / hbm_bytes_per_s)", input=case_text(case, batch=batch, context_len=context_len))
    tp_case = {**case, "spec": dict(LLAMA3_70B), "tp": 4}
    expect_close(_decode(solution, tp_case, 8, 2048), decode_terms(tp_case, 8, 2048)[0],
                 "under tp every quantity is per GPU", input=case_text(tp_case, batch=8, context_len=2048))


@kata_test(level=3, category="correctness", weight=2,
           description="decode FLOPs: 2 per parameter per token plus 4·head_dim per head, layer and attended key")
def test_decode_flops_are_two_per_param_plus_attention(solution):
    case = {"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100, hbm_bytes_per_s=FAST_MEMORY), "bpp": 2.0,
            "bpe": 2.0, "reserve_fraction": 0.1}
    for batch, context_len in ((1, 1), (1, 8192), (16, 1000)):
        expect_close(_decode(solution, case, batch, context_len), decode_terms(case, batch, context_len)[1],
                     "decode FLOPs = batch · (2 · params per GPU + 4 · n_layers · (n_heads / tp) · head_dim · "
                     "context_len) (unlimited bandwidth: time = flops / flops_per_s)",
                     input=case_text(case, batch=batch, context_len=context_len))
    tp_case = {**case, "spec": dict(LLAMA3_70B), "tp": 8}
    expect_close(_decode(solution, tp_case, 4, 512), decode_terms(tp_case, 4, 512)[1],
                 "under tp every GPU does the FLOPs of its own parameters and heads",
                 input=case_text(tp_case, batch=4, context_len=512))


@kata_test(level=3, category="correctness", weight=2,
           description="prefill_time = max(weights / bandwidth, FLOPs / peak) with causal attention FLOPs")
@settings(max_examples=15)
@given(case=serving_cases(), prompt_len=st.integers(1, 32768))
def test_prefill_time_matches(solution, case, prompt_len):
    got = _prefill(solution, case, prompt_len)
    expect_close(got, max(prefill_terms(case, prompt_len)), "prefill_time = max(weight_bytes / hbm_bytes_per_s, "
                 "flops / flops_per_s)", input=case_text(case, prompt_len=prompt_len))


@kata_test(level=3, category="correctness", weight=1,
           description="prefill attention is causal: token i attends i keys, T(T+1)/2 in all")
def test_prefill_attention_is_causal(solution):
    case = {"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100, hbm_bytes_per_s=FAST_MEMORY), "bpp": 2.0,
            "bpe": 2.0, "reserve_fraction": 0.1}
    for prompt_len in (1, 2, 128, 32768):
        expect_close(_prefill(solution, case, prompt_len), prefill_terms(case, prompt_len)[1],
                     "prefill FLOPs = prompt_len · 2 · params + 4 · n_layers · n_heads · head_dim · "
                     "prompt_len · (prompt_len + 1) / 2 (unlimited bandwidth: time = flops / flops_per_s)",
                     input=case_text(case, prompt_len=prompt_len))
    slow = {**case, "gpu": dict(H100, flops_per_s=FAST_COMPUTE)}
    expect_close(_prefill(solution, slow, 4096), prefill_terms(slow, 4096)[0],
                 "prefill reads every weight once (unlimited FLOPs: time = weight_bytes / hbm_bytes_per_s)",
                 input=case_text(slow, prompt_len=4096))


@kata_test(level=3, category="correctness", weight=2,
           description="decode time never decreases when the batch or the context grows")
@settings(max_examples=10)
@given(case=serving_cases(), context_len=st.integers(1, 8192), batch=st.integers(1, 512))
def test_decode_time_is_monotone(solution, case, context_len, batch):
    spec, gpu = make_spec(solution, case["spec"]), make_gpu(solution, case["gpu"])
    batches = sorted({1, 2, 3, 8, 64, 300, 1000, 5000, batch})
    contexts = sorted({1, 2, 100, 1000, 8000, 32768, context_len})
    calls = [((spec, gpu, b, context_len, case["bpp"], case["bpe"]), {"tp": case["tp"]}) for b in batches]
    calls += [((spec, gpu, batch, c, case["bpp"], case["bpe"]), {"tp": case["tp"]}) for c in contexts]
    times = call_many(solution.decode_step_time, calls, what="decode_step_time()")
    by_batch, by_context = times[: len(batches)], times[len(batches):]
    for what, xs, ys in (("batch", batches, by_batch), ("context_len", contexts, by_context)):
        drops = [(xs[i], ys[i], xs[i + 1], ys[i + 1]) for i in range(len(xs) - 1) if not ys[i + 1] >= ys[i]]
        expect(not drops, f"decode_step_time is non-decreasing in {what}", input=case_text(case, batch=batch,
               context_len=context_len), expected=f"times non-decreasing over {what} = {xs}",
               got=f"({what}, time) {drops[0][:2]} then {drops[0][2:]}" if drops else None)


def _crossover_cases() -> list[tuple[dict, int]]:
    cases = []
    for spec, tp, gpu, bpp, contexts in ((LLAMA3_8B, 1, H100, 2.0, (1, 512, 4096)),
                                         (LLAMA3_70B, 4, GPUS[2], 1.0, (1, 2048)),
                                         (LLAMA3_8B, 2, GPUS[3], 0.5, (1, 100))):
        for context_len in contexts:
            cases.append(({"spec": dict(spec), "tp": tp, "gpu": dict(gpu), "bpp": bpp, "bpe": 2.0,
                           "reserve_fraction": 0.1}, context_len))
    return cases


@kata_test(level=3, category="correctness", weight=2,
           description="decode is memory-bound up to the analytic crossover batch and compute-bound past it")
def test_decode_turns_compute_bound_at_the_crossover(solution):
    for case, context_len in _crossover_cases():
        crossover = crossover_batch(case, context_len)
        shown = case_text(case, context_len=context_len)
        if crossover is None:  # the KV cache costs more time per sequence than its FLOPs: never compute-bound
            batch = 10**6
            expect_close(_decode(solution, case, batch, context_len), decode_terms(case, batch, context_len)[0],
                         "this decode never turns compute-bound (each sequence's KV bytes take longer than its "
                         "FLOPs)", input={**shown, "batch": batch})
            continue
        below = math.floor(crossover)
        for batch, bound in ((below, 0), (below + 1, 1)):
            expect_close(_decode(solution, case, batch, context_len), decode_terms(case, batch, context_len)[bound],
                         f"the analytic crossover batch is {float(crossover):.2f}: at batch {batch} decode is "
                         f"{'memory' if bound == 0 else 'compute'}-bound", input={**shown, "batch": batch})


@kata_test(level=3, category="api contract", weight=1,
           description="tp defaults to 1: decode_step_time and prefill_time called without tp")
def test_roofline_tp_defaults_to_one(solution):
    case = {"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100), "bpp": 2.0, "bpe": 2.0, "reserve_fraction": 0.1}
    shown = {**case_text(case), "tp": "(not given)"}
    got = call(solution.decode_step_time, make_spec(solution, case["spec"]), make_gpu(solution, case["gpu"]),
               8, 1000, case["bpp"], case["bpe"], what="decode_step_time()")
    expect_close(got, max(decode_terms(case, 8, 1000)), "decode_step_time defaults to tp=1",
                 input={**shown, "batch": 8, "context_len": 1000})
    got = call(solution.prefill_time, make_spec(solution, case["spec"]), make_gpu(solution, case["gpu"]),
               1000, case["bpp"], what="prefill_time()")
    expect_close(got, max(prefill_terms(case, 1000)), "prefill_time defaults to tp=1",
                 input={**shown, "prompt_len": 1000})


@kata_test(level=3, category="api contract", weight=1,
           description="ValueError for batch, context_len or prompt_len < 1, and for a tp that does not divide")
def test_roofline_rejects_bad_arguments(solution):
    case = {"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100), "bpp": 2.0, "bpe": 2.0, "reserve_fraction": 0.1}
    bad = [("batch = 0", lambda: _decode(solution, case, 0, 100)),
           ("context_len = 0", lambda: _decode(solution, case, 4, 0)),
           ("prompt_len = 0", lambda: _prefill(solution, case, 0)),
           ("tp = 3 (decode)", lambda: _decode(solution, {**case, "tp": 3}, 4, 100)),
           ("tp = 3 (prefill)", lambda: _prefill(solution, {**case, "tp": 3}, 100))]
    for why, fn in bad:
        expect_value_error(fn, f"ValueError when {why}", input=case_text(case), what="roofline")
