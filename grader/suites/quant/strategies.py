"""Strategies and constructed cases shared by the quant levels.

Weights are small (out 1..4, in up to 16) with float32 values drawn by hypothesis (readable
when shrunk), or seeded normal tensors for the larger cases. Every dtype the statement allows
(float32, float16, bfloat16) is drawn, and the targeted tests loop over all of them.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from grader.suites._common import tensors

WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
HALVES = (torch.float16, torch.bfloat16)
weight_dtypes = st.sampled_from(WEIGHT_DTYPES)


@st.composite
def weights(draw, *, max_out: int = 4, max_in: int = 8, dtype: torch.dtype | None = None) -> torch.Tensor:
    """(out, in) float weights in [-3, 3], some rows scaled up or down, in a drawn dtype."""
    out_features = draw(st.integers(1, max_out))
    in_features = draw(st.integers(1, max_in))
    w = draw(tensors((out_features, in_features), low=-3.0, high=3.0))
    row_scale = draw(st.sampled_from([1.0, 1.0, 0.01, 50.0]))
    dtype = dtype if dtype is not None else draw(weight_dtypes)
    return (w * row_scale).to(dtype)


def seeded_weight(seed: int, shape: tuple[int, ...], dtype: torch.dtype = torch.float32,
                  scale: float = 1.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


@st.composite
def grouped_weights(draw, *, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, int]:
    """(w, group_size): w (out, in) with in = G * group_size, G in 1..3, group_size in 2..8 even."""
    group_size = 2 * draw(st.integers(1, 4))
    num_groups = draw(st.integers(1, 3))
    out_features = draw(st.integers(1, 3))
    w = draw(tensors((out_features, num_groups * group_size), low=-3.0, high=3.0))
    offset = draw(st.sampled_from([0.0, 0.0, 2.0, -5.0]))  # all-positive / all-negative groups
    dtype = dtype if dtype is not None else draw(weight_dtypes)
    return (w + offset).to(dtype), group_size


# ---------------------------------------------------------------------------- FP8

# amaxes of a stream of tensors: 0 (an all-zero tensor), tiny, large, repeats.
amaxes = st.sampled_from([0.0, 1e-3, 0.25, 1.0, 3.0, 7.5, 100.0, 1000.0])
fp8_scales = st.sampled_from([1.0, 0.25, 3.0, 37.5, 448.0 / 3.0])


def with_amax(seed: int, shape: tuple[int, ...], amax: float, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A seeded tensor whose largest magnitude is exactly `amax` (in float32, then dtype)."""
    base = seeded_weight(seed, shape).float()
    base[(0,) * len(shape)] = -3.5  # one element to carry the amax, with a sign
    if amax == 0.0:
        return torch.zeros(shape, dtype=dtype)
    x = base / base.abs().max() * amax
    return x.to(dtype)


@st.composite
def fp8_operands(draw) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """a (m, k), b (k, n) float8_e4m3fn and their 0-d float32 scales."""
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    a = draw(tensors((m, k), low=-448.0, high=448.0)).to(torch.float8_e4m3fn)
    b = draw(tensors((k, n), low=-448.0, high=448.0)).to(torch.float8_e4m3fn)
    a_scale = torch.tensor(draw(fp8_scales), dtype=torch.float32)
    b_scale = torch.tensor(draw(fp8_scales), dtype=torch.float32)
    return a, a_scale, b, b_scale
