"""The Triton attention kernel equals softmax attention computed in float64 with plain torch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from tests.kernels._support import FEW, SOME, dtypes_for, kernel_settings, randn, seeded, tolerance

pytest.importorskip("triton", reason="Triton is not installed: `pip install -e .[kernels]`")

from reference.kernels import flash_attention


def attention_oracle(q, k, v, causal: bool, scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * scale + bottom-right causal mask) v in float64; rows with no key give 0."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    groups = q.shape[1] // k.shape[1]
    k64, v64 = k64.repeat_interleave(groups, 1), v64.repeat_interleave(groups, 1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q64 @ k64.transpose(-1, -2)) * scale  # (B, H, Tq, Tk)
    if causal:
        seq_len_q, seq_len_k = q.shape[2], k.shape[2]
        rows = torch.arange(seq_len_q, device=q.device)[:, None]
        cols = torch.arange(seq_len_k, device=q.device)[None, :]
        scores = scores.masked_fill(cols > rows + (seq_len_k - seq_len_q), float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # all -inf rows -> zeros
    return weights @ v64


@st.composite
def attention_cases(draw):
    return {
        "batch": draw(st.integers(1, 2)),
        "num_kv_heads": draw(st.integers(1, 2)),
        "groups": draw(st.integers(1, 2)),
        "seq_len_q": draw(st.integers(1, 20)),
        "seq_len_k": draw(st.integers(1, 20)),
        "head_dim": draw(st.sampled_from([1, 4, 8, 16, 24])),
        "head_dim_v": draw(st.sampled_from([None, 3, 16])),
        "causal": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
    }


def _run_case(case: dict, dtype: torch.dtype, device: str, **block_sizes) -> None:
    gen = seeded(case["seed"])
    num_heads = case["num_kv_heads"] * case["groups"]
    head_dim_v = case["head_dim_v"] or case["head_dim"]
    q = randn(gen, case["batch"], num_heads, case["seq_len_q"], case["head_dim"], dtype=dtype, device=device)
    k = randn(gen, case["batch"], case["num_kv_heads"], case["seq_len_k"], case["head_dim"], dtype=dtype, device=device)
    v = randn(gen, case["batch"], case["num_kv_heads"], case["seq_len_k"], head_dim_v, dtype=dtype, device=device)
    got = flash_attention(q, k, v, causal=case["causal"], **block_sizes)
    expected = attention_oracle(q, k, v, case["causal"])
    assert got.dtype == dtype and got.shape == expected.shape
    torch.testing.assert_close(got.double(), expected, **tolerance(dtype))


@kernel_settings(SOME)
@given(case=attention_cases())
def test_matches_softmax_attention(device, case):
    """Random shapes, GQA, Dv != D, causal or not: equal to the float64 formula (every dtype on GPU)."""
    for dtype in dtypes_for(device):
        _run_case(case, dtype, device)


@kernel_settings(FEW)
@given(case=attention_cases(), block_n=st.sampled_from([16, 32]))
def test_tile_sizes_do_not_change_the_result(device, case, block_n):
    """The online softmax gives the same answer whatever the key tiling."""
    _run_case(case, torch.float32, device, block_m=16, block_n=block_n)


def test_causal_rows_without_keys_are_zero(device):
    """Tq > Tk, causal: the first Tq - Tk query rows may attend nothing and output exact zeros."""
    gen = seeded(0)
    q = randn(gen, 1, 2, 7, 8, dtype=torch.float32, device=device)
    k = randn(gen, 1, 2, 3, 8, dtype=torch.float32, device=device)
    v = randn(gen, 1, 2, 3, 8, dtype=torch.float32, device=device)
    out = flash_attention(q, k, v, causal=True)
    assert torch.equal(out[:, :, :4], torch.zeros_like(out[:, :, :4]))
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), attention_oracle(q, k, v, True), **tolerance(torch.float32))


def test_no_keys_gives_zeros(device):
    """Tk == 0: every row is empty, the output is zeros, never NaN."""
    q = torch.randn(1, 1, 3, 8, device=device)
    empty = torch.zeros(1, 1, 0, 8, device=device)
    assert torch.equal(flash_attention(q, empty, empty), torch.zeros_like(q))


def test_equal_lengths_match_sdpa(device):
    """Tq == Tk causal equals scaled_dot_product_attention(is_causal=True) in fp32."""
    gen = seeded(1)
    q, k, v = (randn(gen, 2, 3, 19, 16, dtype=torch.float32, device=device) for _ in range(3))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(flash_attention(q, k, v, causal=True), expected, atol=1e-5, rtol=1e-5)


def test_huge_logits_stay_finite(device):
    """Logits of order 1e4 do not overflow: the running max is subtracted before exp."""
    gen = seeded(2)
    q = randn(gen, 1, 1, 9, 16, dtype=torch.float32, device=device) * 100
    k = randn(gen, 1, 1, 21, 16, dtype=torch.float32, device=device) * 100
    v = randn(gen, 1, 1, 21, 16, dtype=torch.float32, device=device)
    out = flash_attention(q, k, v, causal=True)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), attention_oracle(q, k, v, True), atol=1e-4, rtol=1e-4)


def test_custom_scale(device):
    gen = seeded(3)
    q, k, v = (randn(gen, 1, 2, 5, 8, dtype=torch.float32, device=device) for _ in range(3))
    out = flash_attention(q, k, v, scale=0.05)
    torch.testing.assert_close(out.double(), attention_oracle(q, k, v, False, scale=0.05), **tolerance(torch.float32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_realistic_shapes(dtype):
    """A prefill chunk (Tq=384 after 640 cached keys), D=128, GQA 4:1, on the GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: realistic shapes are too slow for the interpreter")
    from reference.kernels import kernel_skip_reason

    if (reason := kernel_skip_reason("cuda")) is not None:
        pytest.skip(reason)
    gen = seeded(4)
    q = randn(gen, 2, 16, 384, 128, dtype=dtype, device="cuda")
    k = randn(gen, 2, 4, 1024, 128, dtype=dtype, device="cuda")
    v = randn(gen, 2, 4, 1024, 128, dtype=dtype, device="cuda")
    out = flash_attention(q, k, v, causal=True)
    torch.testing.assert_close(out.double(), attention_oracle(q, k, v, True), **tolerance(dtype))
