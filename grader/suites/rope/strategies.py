"""Strategies and constructed cases shared by the rope levels.

Random x are integer-valued (readable when shrunk); positions are small, sometimes offset
far (decoding late in a long context). The constants at the bottom (every dtype, every
leading shape, every partial-rotary fraction, every scaling type and factor) are looped
over by the targeted tests, so each legal-but-rare option is exercised under every seed.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from grader.suites._common import tensors

ALL_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
LLAMA31 = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}

head_dims = st.integers(1, 4).map(lambda n: 2 * n)  # D in 2, 4, 6, 8
bases = st.sampled_from([10000.0, 100.0, 500000.0])
seeds = st.integers(0, 2**16)


@st.composite
def positions_of(draw, num_tokens: int, max_position: int = 40) -> torch.Tensor:
    """(T,) int64 positions; sometimes offset far (decoding late in a long context)."""
    offset = draw(st.sampled_from([0, 0, 0, 1000, 5000]))
    values = draw(st.lists(st.integers(0, max_position), min_size=num_tokens,
                           max_size=num_tokens))
    return torch.tensor(values, dtype=torch.int64) + offset


@st.composite
def rope_cases(draw, *, batched_positions: bool = False, min_head_dim: int = 2):
    """x (..., T, D) integer-valued float32 and positions (T,) or (B, T)."""
    head_dim = draw(head_dims.filter(lambda d: d >= min_head_dim))
    num_tokens = draw(st.integers(1, 3))
    if batched_positions:
        batch = draw(st.integers(1, 3))
        lead = draw(st.sampled_from([(batch,), (batch, draw(st.integers(1, 2)))]))
        positions = torch.stack([draw(positions_of(num_tokens)) for _ in range(batch)])
    else:
        lead = draw(st.sampled_from([(), (2,), (1, 2)]))
        positions = draw(positions_of(num_tokens))
    shape = lead + (num_tokens, head_dim)
    x = draw(tensors(shape, low=-3, high=3, integers=True))
    return x, positions


@st.composite
def partial_cases(draw, *, strictly_partial: bool = False):
    """A rope case with D >= 4 and an even rotary_dim R <= D (R < D when strictly_partial)."""
    x, positions = draw(rope_cases(min_head_dim=4))
    head_dim = x.shape[-1]
    top = head_dim - 2 if strictly_partial else head_dim
    rotary_dim = 2 * draw(st.integers(1, top // 2))
    return x, positions, rotary_dim


def seeded_x(seed: int, shape: tuple[int, ...], dtype: torch.dtype = torch.float32,
             scale: float = 3.0) -> torch.Tensor:
    """Values in [-scale, scale] rounded to one decimal, from a seed."""
    gen = torch.Generator().manual_seed(seed)
    values = ((torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale).round(decimals=1)
    return values.to(dtype)


# ---------------------------------------------------------------------------- scaling

scaling_dims = st.integers(2, 16).map(lambda n: 2 * n)  # 4 .. 32: several bands for llama3


@st.composite
def llama3_scalings(draw) -> dict:
    return {"type": "llama3", "factor": draw(st.sampled_from([2.0, 4.0, 8.0, 32.0])),
            "low_freq_factor": draw(st.sampled_from([1.0, 2.0])),
            "high_freq_factor": draw(st.sampled_from([4.0, 8.0])),
            "original_max_position_embeddings": draw(st.sampled_from([64, 256, 1024, 8192]))}


linear_scalings = st.sampled_from([0.5, 1.0, 2.0, 2.5, 4.0, 8.0]).map(
    lambda f: {"type": "linear", "factor": f})
scalings = st.one_of(st.none(), linear_scalings, llama3_scalings())


def wavelengths(dim: int, base: float) -> torch.Tensor:
    """2 pi / w_i in float64, to classify components away from the llama3 band edges."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    return 2 * math.pi * base ** exponents


def llama3(factor: float, low: float = 1.0, high: float = 4.0, original: int = 2048) -> dict:
    return {"type": "llama3", "factor": factor, "low_freq_factor": low, "high_freq_factor": high,
            "original_max_position_embeddings": original}


# ------------------------------------------------------------------ constructed cases

# x shapes with positions (T,) (every leading shape, up to 5-D) and (B, T) (B == H, so
# positions broadcast against the heads instead of the batch cannot go unnoticed).
T_FORMS = ((), (3,), (2, 3), (2, 1, 2))
BT_FORMS = ((2,), (2, 2), (3, 1))

# Every scaling the statement allows, factor 1.0 and factors below 1 included.
SCALING_CONFIGS = (None, {"type": "linear", "factor": 1.0}, {"type": "linear", "factor": 0.5},
                   {"type": "linear", "factor": 4.0}, llama3(1.0), llama3(8.0),
                   llama3(32.0, 2.0, 8.0, 64), LLAMA31)

# llama3 configs whose thresholds L / lo and L / hi are not integers, each just past a
# wavelength (dim 16, base 10000: 198.69 and 628.32): thresholds rounded down (L // lo,
# int(L / lo)) put those components in the wrong band with the first config; rounded up, with
# the second.
LLAMA3_FRACTIONAL_THRESHOLDS = (
    (llama3(8.0, 10.0, 31.6, 6284), "L / lo = 628.4 and L / hi = 198.86: wavelength 628.32 is blended "
     "(not divided) and 198.69 kept (not blended)"),
    (llama3(8.0, 10.0, 31.66, 6282), "L / lo = 628.2 and L / hi = 198.42: wavelength 628.32 is divided "
     "(not blended) and 198.69 blended (not kept)"),
)

BAD_SCALINGS = [
    {},
    {"type": "ntk", "factor": 2.0},
    {"type": "dynamic", "factor": 2.0},
    {"factor": 2.0},
    {"type": "linear"},
    {"type": "linear", "factor": 0.0},
    {"type": "linear", "factor": 0},
    {"type": "linear", "factor": -2.0},
    {**LLAMA31, "factor": 0.0},
    {**LLAMA31, "factor": -1.0},
    {**LLAMA31, "low_freq_factor": 4.0},
    {**LLAMA31, "low_freq_factor": 8.0},
    # factor 1.0 changes nothing, but the config is still checked: no shortcut before validation
    {"type": "ntk", "factor": 1.0},
    {"factor": 1.0},
    {"type": "llama3", "factor": 1.0},
    {**llama3(1.0), "low_freq_factor": 4.0},
] + [{key: value for key, value in LLAMA31.items() if key != missing}
     for missing in ("factor", "low_freq_factor", "high_freq_factor",
                     "original_max_position_embeddings")]
