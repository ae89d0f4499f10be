"""Level 1 — count: param_count against Hugging Face's Llama parameter table (written out in
plain Python, cross-checked with transformers in the project's tests), weight bytes and
KV bytes per token per GPU under tensor parallelism.

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome; random configs come on top.
"""

from __future__ import annotations

from hypothesis import example, given, settings, strategies as st

from grader.protocol import call, expect, kata_test
from grader.suites.kv_budget.strategies import (LLAMA3_70B, LLAMA3_8B, counts, expect_close, expect_int,
                                                expect_value_error, kv_per_token, make_spec, param_total,
                                                params_per_gpu, small_specs, spec_text, tp_specs, weight_bytes)

RULES = {
    "param_count equals Hugging Face's LlamaForCausalLM: embedding, per layer 2 RMSNorms, q/k/v/o without "
    "bias, gated or plain MLP, final norm, lm_head unless tied": "test_param_count_matches_the_llama_module",
    "Llama-3-8B's published config has 8,030,261,248 parameters (Llama-3-70B 70,553,706,496)":
        "test_param_count_of_llama3_configs",
    "each part counted once: tied lm_head not counted, plain MLP has 2 matrices, k/v use n_kv_heads, "
    "q/o use n_heads·head_dim (not d_model)": "test_param_count_parts",
    "weight_bytes per GPU = (replicated + sharded / tp) · bytes_per_param": "test_weight_bytes_per_gpu",
    "bytes_per_param may be fractional (0.5 for 4-bit weights): an odd parameter count gives a fractional "
    "byte count, not rounded": "test_fractional_bytes_per_param_are_not_rounded",
    "tp splits heads and d_ff; embedding, lm_head and norms are replicated on every GPU":
        "test_tp_replicates_embeddings_and_norms",
    "kv_bytes_per_token = 2 · n_layers · (n_kv_heads / tp) · head_dim · bytes_per_elem":
        "test_kv_bytes_per_token",
    "GQA divides KV bytes by n_heads / n_kv_heads": "test_gqa_divides_kv_bytes",
    "tp defaults to 1 (weight_bytes and kv_bytes_per_token called without it)": "test_tp_defaults_to_one",
    "ValueError: tp < 1, or tp not dividing n_heads, n_kv_heads and d_ff": "test_ledger_rejects_bad_tp",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    "param_count equals Hugging Face's LlamaForCausalLM: embedding, per layer 2 RMSNorms,"
    ' q/k/v/o without bias, gated or plain MLP, final norm, lm_head unless tied':
        'arch',
    "Llama-3-8B's published config has 8,030,261,248 parameters (Llama-3-70B "
    '70,553,706,496)':
        'arch',
    'each part counted once: tied lm_head not counted, plain MLP has 2 matrices, k/v use '
    'n_kv_heads, q/o use n_heads·head_dim (not d_model)':
        ('tied', 'head-dim'),
    'weight_bytes per GPU = (replicated + sharded / tp) · bytes_per_param':
        'tp-split',
    'bytes_per_param may be fractional (0.5 for 4-bit weights): an odd parameter count '
    'gives a fractional byte count, not rounded':
        'fractional',
    'tp splits heads and d_ff; embedding, lm_head and norms are replicated on every GPU':
        'tp-split',
    'kv_bytes_per_token = 2 · n_layers · (n_kv_heads / tp) · head_dim · bytes_per_elem':
        'kv-count',
    'GQA divides KV bytes by n_heads / n_kv_heads':
        'kv-count',
    'tp defaults to 1 (weight_bytes and kv_bytes_per_token called without it)':
        'ask',
    'ValueError: tp < 1, or tp not dividing n_heads, n_kv_heads and d_ff':
        'tp-invalid',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS = {
    'bytes_per_param may be fractional (0.5 for 4-bit weights): an odd parameter count '
    'gives a fractional byte count, not rounded',
}


@kata_test(level=1, category="correctness", weight=3,
           description="param_count equals the Llama module's parameter count (random configs)")
@settings(max_examples=25)
@given(spec=small_specs())
def test_param_count_matches_the_llama_module(solution, spec):
    got = call(solution.param_count, make_spec(solution, spec), what="param_count()")
    expect_int(got, param_total(spec), "param_count equals the parameters of Hugging Face's "
               "LlamaForCausalLM with these settings (an int)", input=spec_text(spec))


@kata_test(level=1, category="correctness", weight=2,
           description="Llama-3-8B has 8,030,261,248 parameters, Llama-3-70B 70,553,706,496")
def test_param_count_of_llama3_configs(solution):
    for spec, published in ((LLAMA3_8B, 8_030_261_248), (LLAMA3_70B, 70_553_706_496)):
        got = call(solution.param_count, make_spec(solution, spec), what="param_count()")
        expect_int(got, published, "the published Llama-3 configs give their published parameter counts",
                   input=spec_text(spec))


@kata_test(level=1, category="correctness", weight=2,
           description="each part is counted once: tied lm_head, plain MLP, k/v with n_kv_heads, head_dim")
def test_param_count_parts(solution):
    base = dict(n_layers=2, d_model=12, n_heads=4, n_kv_heads=2, head_dim=5, d_ff=20, vocab_size=50,
                tied_embeddings=False, gated_mlp=True)
    variants = {"tied_embeddings=True: lm_head is the embedding, counted once": dict(tied_embeddings=True),
                "gated_mlp=False: up and down only": dict(gated_mlp=False),
                "n_kv_heads=1: k_proj and v_proj have n_kv_heads·head_dim outputs": dict(n_kv_heads=1),
                "head_dim=3 (n_heads·head_dim != d_model): q and o use n_heads·head_dim": dict(head_dim=3)}
    for rule, change in variants.items():
        spec = {**base, **change}
        got = call(solution.param_count, make_spec(solution, spec), what="param_count()")
        expect_int(got, param_total(spec), rule, input=spec_text(spec))


@kata_test(level=1, category="correctness", weight=2,
           description="weight_bytes is the bytes of weights on each GPU under tensor parallelism")
@settings(max_examples=20)
@given(pair=tp_specs(), bpp=st.sampled_from([0.5, 1.0, 2.0, 4.0, 1.125]))
def test_weight_bytes_per_gpu(solution, pair, bpp):
    spec, tp = pair
    got = call(solution.weight_bytes, make_spec(solution, spec), bpp, tp=tp, what="weight_bytes()")
    expect_close(got, weight_bytes(spec, bpp, tp), "weight_bytes = (replicated params + sharded params / tp) "
                 "· bytes_per_param, per GPU", input={"spec": spec_text(spec), "bytes_per_param": bpp, "tp": tp})


@kata_test(level=1, category="edge cases", weight=1,
           description="fractional bytes_per_param: an odd parameter count's bytes are not rounded")
def test_fractional_bytes_per_param_are_not_rounded(solution):
    # 33 parameters on each GPU (tp=1 and tp=2): 16.5 bytes at 0.5 bytes each, 37.125 at 1.125
    specs = [(dict(n_layers=1, d_model=3, n_heads=1, n_kv_heads=1, head_dim=1, d_ff=1, vocab_size=1,
                   tied_embeddings=False, gated_mlp=False), 1),
             (dict(n_layers=1, d_model=3, n_heads=2, n_kv_heads=2, head_dim=1, d_ff=2, vocab_size=1,
                   tied_embeddings=False, gated_mlp=False), 2)]
    for spec, tp in specs:
        for bpp in (0.5, 1.125):
            got = call(solution.weight_bytes, make_spec(solution, spec), bpp, tp=tp, what="weight_bytes()")
            want = weight_bytes(spec, bpp, tp)
            expect_close(got, want, f"{params_per_gpu(spec, tp)} parameters per GPU at {bpp} bytes each are "
                         f"{float(want)} bytes: bytes_per_param may be fractional, and the bytes are not rounded",
                         input={"spec": spec_text(spec), "bytes_per_param": bpp, "tp": tp})


@kata_test(level=1, category="correctness", weight=2,
           description="tp splits heads and d_ff; embedding, lm_head and norms stay whole on every GPU")
def test_tp_replicates_embeddings_and_norms(solution):
    # a large vocabulary: sharding the embedding would change the result by far more than the tolerance
    spec = dict(n_layers=2, d_model=16, n_heads=8, n_kv_heads=4, head_dim=4, d_ff=32, vocab_size=1000,
                tied_embeddings=False, gated_mlp=True)
    for tp in (1, 2, 4):
        for tied in (False, True):
            case = {**spec, "tied_embeddings": tied}
            got = call(solution.weight_bytes, make_spec(solution, case), 2.0, tp=tp, what="weight_bytes()")
            rep, shard = counts(case)
            expect_close(got, weight_bytes(case, 2.0, tp), f"tp={tp}: every GPU holds the whole embedding"
                         f"{'' if tied else ', lm_head'} and norms ({rep} params) and 1/tp of the projections "
                         f"and MLP ({shard} / {tp})", input={"spec": spec_text(case), "bytes_per_param": 2.0, "tp": tp})


@kata_test(level=1, category="correctness", weight=2,
           description="kv_bytes_per_token = 2 · n_layers · (n_kv_heads / tp) · head_dim · bytes_per_elem")
@settings(max_examples=20)
@given(pair=tp_specs(), bpe=st.sampled_from([1.0, 2.0, 4.0, 0.5]))
def test_kv_bytes_per_token(solution, pair, bpe):
    spec, tp = pair
    got = call(solution.kv_bytes_per_token, make_spec(solution, spec), bpe, tp=tp, what="kv_bytes_per_token()")
    expect_close(got, kv_per_token(spec, bpe, tp), "kv_bytes_per_token = 2 (K and V) · n_layers · "
                 "(n_kv_heads / tp) · head_dim · bytes_per_elem", input={"spec": spec_text(spec),
                                                                        "bytes_per_elem": bpe, "tp": tp})


@kata_test(level=1, category="correctness", weight=1,
           description="GQA: n_kv_heads = n_heads / g divides the KV bytes per token by g")
@settings(max_examples=10)
@example(group=8, tp=1)
@given(group=st.sampled_from([1, 2, 4, 8]), tp=st.sampled_from([1, 2]))
def test_gqa_divides_kv_bytes(solution, group, tp):
    mha = dict(n_layers=4, d_model=256, n_heads=16, n_kv_heads=16, head_dim=16, d_ff=512, vocab_size=100)
    gqa = {**mha, "n_kv_heads": 16 // group}
    full = call(solution.kv_bytes_per_token, make_spec(solution, mha), 2.0, tp=tp, what="kv_bytes_per_token()")
    grouped = call(solution.kv_bytes_per_token, make_spec(solution, gqa), 2.0, tp=tp, what="kv_bytes_per_token()")
    ok = isinstance(full, (int, float)) and isinstance(grouped, (int, float)) and grouped > 0 and \
        abs(full / grouped - group) < 1e-9 * group
    expect(ok, "GQA divides the KV bytes per token by n_heads / n_kv_heads",
           input={"multi-head": spec_text(mha), "grouped": spec_text(gqa), "tp": tp},
           expected=f"ratio {group}", got=f"{full!r} / {grouped!r}")


@kata_test(level=1, category="api contract", weight=1,
           description="tp defaults to 1: weight_bytes and kv_bytes_per_token called without tp")
def test_tp_defaults_to_one(solution):
    spec = dict(n_layers=2, d_model=64, n_heads=8, n_kv_heads=2, head_dim=8, d_ff=96, vocab_size=100)
    shown = {"spec": spec_text(spec), "tp": "(not given)"}
    got = call(solution.weight_bytes, make_spec(solution, spec), 2.0, what="weight_bytes()")
    expect_close(got, weight_bytes(spec, 2.0, 1), "tp defaults to 1: weight_bytes(spec, 2.0) is the whole model's "
                 "bytes on one GPU", input={**shown, "bytes_per_param": 2.0})
    got = call(solution.kv_bytes_per_token, make_spec(solution, spec), 2.0, what="kv_bytes_per_token()")
    expect_close(got, kv_per_token(spec, 2.0, 1), "tp defaults to 1: kv_bytes_per_token(spec, 2.0) holds every KV "
                 "head", input={**shown, "bytes_per_elem": 2.0})


@kata_test(level=1, category="api contract", weight=1,
           description="ValueError when tp < 1 or tp does not divide n_heads, n_kv_heads and d_ff")
def test_ledger_rejects_bad_tp(solution):
    spec = dict(n_layers=2, d_model=64, n_heads=8, n_kv_heads=2, head_dim=8, d_ff=96, vocab_size=100)
    # -1 and -2 divide every count (8 % -2 == 0 in Python): only the tp < 1 rule rejects them
    bad = {0: "tp = 0", -1: "tp = -1 < 1", -2: "tp = -2 < 1 (it divides every count)",
           3: "tp = 3 does not divide n_heads = 8", 4: "tp = 4 does not divide n_kv_heads = 2"}
    odd_ff = {**spec, "n_kv_heads": 8, "d_ff": 100}
    for name in ("weight_bytes", "kv_bytes_per_token"):
        fn = getattr(solution, name)
        for tp, why in bad.items():
            expect_value_error(lambda: fn(make_spec(solution, spec), 2.0, tp=tp), f"{name}: ValueError when {why}",
                               input={"spec": spec_text(spec), "tp": tp}, what=f"{name}()")
        expect_value_error(lambda: fn(make_spec(solution, odd_ff), 2.0, tp=8), f"{name}: ValueError when tp = 8 "
                           "does not divide d_ff = 100", input={"spec": spec_text(odd_ff), "tp": 8}, what=f"{name}()")
