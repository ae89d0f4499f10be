"""Visible examples for the kv-budget kata: `kata check` runs them against your solution.

The worked example of the statement: Llama-3-8B on an H100 in BF16. The hidden suite checks
random configs, tensor parallelism, blocks, errors and the roofline's properties."""

import math

from grader.protocol import expect, kata_test

LLAMA3_8B = dict(n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128, d_ff=14336,
                 vocab_size=128256)
H100 = dict(hbm_bytes=80e9, hbm_bytes_per_s=3.35e12, flops_per_s=989e12)


@kata_test(level=1, category="correctness", description="Llama-3-8B: parameters, BF16 weight bytes, KV bytes per token")
def test_llama3_8b_counts(solution):
    spec = solution.ModelSpec(**LLAMA3_8B)
    got = solution.param_count(spec)
    expect(got == 8_030_261_248, "param_count of Llama-3-8B's published config", expected=8_030_261_248, got=got)
    got = solution.weight_bytes(spec, 2.0)
    expect(math.isclose(got, 16_060_522_496), "BF16 weights: 2 bytes per parameter", expected=16_060_522_496, got=got)
    got = solution.kv_bytes_per_token(spec, 2.0)
    expect(math.isclose(got, 131_072), "2 (K, V) * 32 layers * 8 KV heads * 128 * 2 bytes", expected=131_072, got=got)


@kata_test(level=1, category="correctness", description="tp=2: heads and d_ff split, embeddings and norms replicated")
def test_llama3_8b_tensor_parallel(solution):
    spec = solution.ModelSpec(**LLAMA3_8B)
    got = solution.weight_bytes(spec, 2.0, tp=2)
    expect(math.isclose(got, 9_081_200_640), "(replicated + sharded / 2) * 2 bytes", expected=9_081_200_640, got=got)
    got = solution.kv_bytes_per_token(spec, 2.0, tp=2)
    expect(math.isclose(got, 65_536), "each GPU holds 4 of the 8 KV heads", expected=65_536, got=got)


@kata_test(level=2, category="correctness", description="Llama-3-8B on an H100: KV tokens and 8k-token sequences")
def test_llama3_8b_capacity(solution):
    spec, gpu = solution.ModelSpec(**LLAMA3_8B), solution.GPU(**H100)
    got = solution.max_kv_tokens(spec, gpu, 2.0, 2.0)
    expect(got == 426_784 and type(got) is int, "floor((72e9 - 16,060,522,496) / 131,072)", expected=426_784, got=got)
    got = solution.max_concurrent_seqs(spec, gpu, 8192, 2.0, 2.0)
    expect(got == 52, "26,674 blocks of 16 tokens, 512 blocks per sequence", expected=52, got=got)
    got = solution.max_concurrent_seqs(spec, gpu, 8193, 2.0, 2.0)
    expect(got == 51, "8193 tokens need 513 blocks", expected=51, got=got)


@kata_test(level=3, category="correctness", description="a decode step at batch 1, context 8192, is memory-bound")
def test_llama3_8b_decode_step(solution):
    spec, gpu = solution.ModelSpec(**LLAMA3_8B), solution.GPU(**H100)
    got = solution.decode_step_time(spec, gpu, 1, 8192, 2.0, 2.0)
    expected = 17_134_264_320 / 3.35e12  # 5.115 ms
    expect(math.isclose(got, expected, rel_tol=1e-9), "weights once plus one KV cache, over the bandwidth",
           expected=expected, got=got)
