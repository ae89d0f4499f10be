"""Paged decode attention (Triton, and CUDA C++ on a GPU) equals attention over the gathered cache."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.kernels._paged import gpu_case, make_paged_inputs, paged_oracle
from tests.kernels._support import SOME, dtypes_for, kernel_settings, tolerance

pytest.importorskip("triton", reason="Triton is not installed: `pip install -e .[kernels]`")

from reference.kernels import paged_decode_attention


@st.composite
def paged_cases(draw):
    batch = draw(st.integers(1, 3))
    block_size = draw(st.integers(1, 5))
    max_blocks = draw(st.integers(1, 4))
    seq_lens = [draw(st.integers(0, max_blocks * block_size)) for _ in range(batch)]
    return {
        "batch": batch,
        "block_size": block_size,
        "max_blocks": max_blocks,
        "seq_lens": seq_lens,
        "num_spare_blocks": draw(st.integers(0, 3)),
        "num_kv_heads": draw(st.integers(1, 2)),
        "groups": draw(st.integers(1, 3)),
        "head_dim": draw(st.sampled_from([1, 4, 8, 12, 16])),
        "seed": draw(st.integers(0, 2**16)),
    }


@kernel_settings(SOME)
@given(case=paged_cases())
def test_matches_attention_over_gathered_cache(device, case):
    """Random block sizes, tables, lengths (0 included) and GQA groups."""
    for dtype in dtypes_for(device):
        inputs = make_paged_inputs(case, dtype, device)
        got = paged_decode_attention(*inputs)
        assert got.dtype == dtype and got.shape == inputs[0].shape
        torch.testing.assert_close(got.double(), paged_oracle(*inputs), **tolerance(dtype))


def test_empty_sequence_gives_zeros(device):
    case = {"batch": 2, "block_size": 4, "max_blocks": 2, "seq_lens": [0, 5], "num_spare_blocks": 0,
            "num_kv_heads": 1, "groups": 2, "head_dim": 8, "seed": 0}
    out = paged_decode_attention(*make_paged_inputs(case, torch.float32, device))
    assert torch.equal(out[0], torch.zeros_like(out[0]))


def test_table_entries_past_the_sequence_are_ignored(device):
    """Garbage ids after the last used block are never dereferenced (masked loads)."""
    case = {"batch": 1, "block_size": 4, "max_blocks": 3, "seq_lens": [4], "num_spare_blocks": 0,
            "num_kv_heads": 1, "groups": 1, "head_dim": 8, "seed": 1}
    q, k_cache, v_cache, block_tables, seq_lens = make_paged_inputs(case, torch.float32, device)
    expected = paged_oracle(q, k_cache, v_cache, block_tables, seq_lens)
    block_tables[0, 1:] = 10**6
    got = paged_decode_attention(q, k_cache, v_cache, block_tables, seq_lens)
    torch.testing.assert_close(got.double(), expected, **tolerance(torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gpu_realistic_shapes(dtype):
    """Llama-like decode (32 query heads on 8 KV heads, D=128, block 16, up to 2048 tokens) on the GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: realistic shapes are too slow for the interpreter")
    from reference.kernels import kernel_skip_reason

    if (reason := kernel_skip_reason("cuda")) is not None:
        pytest.skip(reason)
    inputs = gpu_case(dtype)
    torch.testing.assert_close(paged_decode_attention(*inputs).double(), paged_oracle(*inputs), **tolerance(dtype))
