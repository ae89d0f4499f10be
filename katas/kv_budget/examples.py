"""Visible examples for the kv-budget kata: `kata check` runs them against your solution.

The worked example of the statement: Llama-3-8B on an H100 in BF16. The hidden suite checks
random configs, tensor parallelism, blocks, errors and the roofline's properties."""

import math

from grader.protocol import expect, kata_test

LLAMA3_8B = dict(n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128, d_ff=14336,
                 vocab_size=128256)
H100 = dict(hbm_bytes=80e9, hbm_bytes_per_s=3.35e12, flops_per_s=989e12)
# How the calls are shown when an example fails: spec = Llama-3-8B's config, gpu = an H100.
SPEC = "spec = ModelSpec(" + ", ".join(f"{k}={v}" for k, v in LLAMA3_8B.items()) + ")"
SPEC_GPU = SPEC + "; gpu = GPU(hbm_bytes=80e9, hbm_bytes_per_s=3.35e12, flops_per_s=989e12)"


@kata_test(level=1, category="correctness", description="Llama-3-8B: parameters, BF16 weight bytes, KV bytes per token")
def test_llama3_8b_counts(solution):
    spec = solution.ModelSpec(**LLAMA3_8B)
    got = solution.param_count(spec)
    expect(got == 8_030_261_248, "the value param_count returns", input=f"{SPEC}; param_count(spec)",
           expected=8_030_261_248, got=got)
    got = solution.weight_bytes(spec, 2.0)
    expect(math.isclose(got, 16_060_522_496), "the value weight_bytes returns",
           input=f"{SPEC}; weight_bytes(spec, 2.0)", expected=16_060_522_496, got=got)
    got = solution.kv_bytes_per_token(spec, 2.0)
    expect(math.isclose(got, 131_072), "the value kv_bytes_per_token returns",
           input=f"{SPEC}; kv_bytes_per_token(spec, 2.0)", expected=131_072, got=got)


@kata_test(level=1, category="correctness", description="Llama-3-8B with tp=2: weight and KV bytes per GPU")
def test_llama3_8b_tensor_parallel(solution):
    spec = solution.ModelSpec(**LLAMA3_8B)
    got = solution.weight_bytes(spec, 2.0, tp=2)
    expect(math.isclose(got, 9_081_200_640), "the value weight_bytes returns with tp=2",
           input=f"{SPEC}; weight_bytes(spec, 2.0, tp=2)", expected=9_081_200_640, got=got)
    got = solution.kv_bytes_per_token(spec, 2.0, tp=2)
    expect(math.isclose(got, 65_536), "the value kv_bytes_per_token returns with tp=2",
           input=f"{SPEC}; kv_bytes_per_token(spec, 2.0, tp=2)", expected=65_536, got=got)


@kata_test(level=2, category="correctness", description="Llama-3-8B on an H100: KV tokens and 8k-token sequences")
def test_llama3_8b_capacity(solution):
    spec, gpu = solution.ModelSpec(**LLAMA3_8B), solution.GPU(**H100)
    got = solution.max_kv_tokens(spec, gpu, 2.0, 2.0)
    expect(got == 426_784 and type(got) is int, "the value max_kv_tokens returns (an int)",
           input=f"{SPEC_GPU}; max_kv_tokens(spec, gpu, 2.0, 2.0)", expected=426_784, got=got)
    got = solution.max_concurrent_seqs(spec, gpu, 8192, 2.0, 2.0)
    expect(got == 52, "the value max_concurrent_seqs returns",
           input=f"{SPEC_GPU}; max_concurrent_seqs(spec, gpu, 8192, 2.0, 2.0)", expected=52, got=got)
    got = solution.max_concurrent_seqs(spec, gpu, 8193, 2.0, 2.0)
    expect(got == 51, "the value max_concurrent_seqs returns",
           input=f"{SPEC_GPU}; max_concurrent_seqs(spec, gpu, 8193, 2.0, 2.0)", expected=51, got=got)


@kata_test(level=3, category="correctness",
           description="Llama-3-8B on an H100: one decode step at batch 1, context 8192")
def test_llama3_8b_decode_step(solution):
    spec, gpu = solution.ModelSpec(**LLAMA3_8B), solution.GPU(**H100)
    got = solution.decode_step_time(spec, gpu, 1, 8192, 2.0, 2.0)
    expected = 17_134_264_320 / 3.35e12
    expect(math.isclose(got, expected, rel_tol=1e-9), "the value decode_step_time returns (seconds)",
           input=f"{SPEC_GPU}; decode_step_time(spec, gpu, 1, 8192, 2.0, 2.0)", expected=expected, got=got)
