"""The `quant` suite rejects each realistic buggy solution of tests/corpus/quant at the level its
corpus.toml declares, by the test it names, under two seeds; passes correct solutions written
differently; and checks the reference against outside implementations: torch's per-channel
quantizer (qint8, zero points 0) for level 1 and, where a GPU is lent, torch._scaled_mm for
fp8_matmul."""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import pytest
import torch

from reference.quant import (FP8Scaler, dequantize_int4, dequantize_int8, fp8_matmul, quantize_int4,
                             quantize_int8, unpack_int4)
from tests.kata_testing import (assert_rejected_at_level, assert_scores_full, buggy_params,
                                corpus_file, correct_params)

SLUG = "quant"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"quant_corpus_{name[:-3]}", corpus_file(SLUG, name))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------- outside oracles


def _quantize_per_channel(w: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's own per-channel INT8 quantizer with the reference's scales and zero points 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the quantized dtypes are deprecated, still present
        qt = torch.quantize_per_channel(w.float(), scale.double(), torch.zeros(len(scale), dtype=torch.int64),
                                        0, torch.qint8)
    return qt.int_repr(), qt.dequantize()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_int8_agrees_with_torch_quantize_per_channel(dtype):
    """Where the conventions coincide (symmetric, zero point 0, round half to even) the
    reference's codes equal torch.quantize_per_channel's, on rows of every magnitude, an
    all-zero row and exact halfway values."""
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(16, 64, generator=gen) * torch.logspace(-3, 2, 16)[:, None]
    w[3] = 0.0
    w[5, :4] = torch.tensor([127.0, 0.5, 2.5, -2.5]) * w[5].abs().max() / 127  # ties, scale kept
    w = w.to(dtype)
    q, scale = quantize_int8(w)
    codes, dequantized = _quantize_per_channel(w, scale)
    assert torch.equal(codes, q)
    torch.testing.assert_close(dequantized, dequantize_int8(q, scale), atol=0.0, rtol=1e-6)


def test_int8_ties_agree_with_torch_quantize_per_channel():
    w = torch.tensor([[127.0, 0.5, 1.5, 2.5, -0.5, -2.5, 126.5, -125.5]])
    q, scale = quantize_int8(w)
    assert scale.item() == 1.0
    assert torch.equal(_quantize_per_channel(w, scale)[0], q)
    assert q.tolist() == [[127, 0, 2, 2, 0, -2, 126, -126]]


def _awq_pseudo_quantize(w: torch.Tensor, group_size: int) -> torch.Tensor:
    """llm-awq's pseudo_quantize_tensor(w, n_bit=4, zero_point=True, q_group_size=group_size),
    as in mit-han-lab/llm-awq awq/quantize/quantizer.py (fake quantization: the dequantized weight)."""
    org_w_shape = w.shape
    w = w.reshape(-1, group_size)
    max_val = w.amax(dim=1, keepdim=True)
    min_val = w.amin(dim=1, keepdim=True)
    max_int, min_int = 2 ** 4 - 1, 0
    scales = (max_val - min_val).clamp(min=1e-5) / max_int
    zeros = (-torch.round(min_val / scales)).clamp_(min_int, max_int)
    w = (torch.clamp(torch.round(w / scales) + zeros, min_int, max_int) - zeros) * scales
    return w.reshape(org_w_shape)


@pytest.mark.parametrize("group_size", [2, 8, 32])
def test_int4_round_trip_equals_llm_awq_pseudo_quantize(group_size):
    gen = torch.Generator().manual_seed(group_size)
    w = torch.randn(8, 64, generator=gen) + torch.linspace(-2, 2, 8)[:, None]
    w[0, :group_size] = 0.0  # a constant group
    packed, scales, zeros = quantize_int4(w, group_size)
    torch.testing.assert_close(dequantize_int4(packed, scales, zeros, group_size),
                               _awq_pseudo_quantize(w, group_size), atol=0.0, rtol=1e-6)


def test_nibble_order_low_first():
    packed = torch.tensor([[0x2F]], dtype=torch.uint8)
    assert unpack_int4(packed).tolist() == [[15, 2]]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU with FP8 (torch._scaled_mm)")
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_fp8_matmul_equals_torch_scaled_mm(out_dtype):
    """fp8_matmul on the CPU equals torch._scaled_mm on the GPU, given the inverse scales
    (sizes multiples of 16, b column-major as cuBLASLt wants)."""
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 matmul needs compute capability 8.9 or later")
    gen = torch.Generator().manual_seed(0)
    a, sa = FP8Scaler().quantize(torch.randn(32, 64, generator=gen))
    b, sb = FP8Scaler().quantize(torch.randn(64, 48, generator=gen) * 0.1)
    expected = fp8_matmul(a, sa, b, sb, out_dtype)
    got = torch._scaled_mm(a.cuda(), b.cuda().t().contiguous().t(), scale_a=(1 / sa).cuda(),
                           scale_b=(1 / sb).cuda(), out_dtype=out_dtype)
    torch.testing.assert_close(got.cpu().float(), expected.float(), rtol=1.6e-2 if out_dtype == torch.bfloat16 else 1e-5,
                               atol=1e-3 * float(expected.float().abs().max()))


# ---------------------------------------------------------------------------- regressions


def test_regression_fp8_cast_saturates_on_this_torch():
    """Why test_fp8_saturates_before_the_cast runs the scaler under its own non-saturating
    conversion: torch 2.13's CPU cast already saturates, so the corpus's no-clamp bug gives
    the reference's values when the cast is left alone."""
    if torch.tensor([500.0]).to(torch.float8_e4m3fn).float().item() != 448.0:
        pytest.skip("this torch's float8 cast does not saturate")
    x = torch.tensor([1.0, 8.0])
    scaler = _load("buggy_no_saturation.py").FP8Scaler()
    scaler.quantize(torch.tensor([1.0]))
    got, _ = scaler.quantize(x)
    ref = FP8Scaler()
    ref.quantize(torch.tensor([1.0]))
    assert torch.equal(got.float(), ref.quantize(x)[0].float())  # equal here: only the harness tells them apart
