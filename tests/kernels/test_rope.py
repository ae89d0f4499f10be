"""The fused RoPE kernel equals the textbook formula: x*cos + rotate_half(x)*sin (or GPT-J pairs)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.kernels._support import SOME, dtypes_for, kernel_settings, randn, seeded

pytest.importorskip("triton", reason="Triton is not installed: `pip install -e .[kernels]`")

from reference.kernels import rope


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def rope_oracle(x, positions, base=10000.0, interleaved=False, rotary_dim=None) -> torch.Tensor:
    """Angles in float32 as Hugging Face computes them, the rotation in float64."""
    rotary_dim = x.shape[-1] if rotary_dim is None else rotary_dim
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim))
    angles = positions.cpu().float()[..., None] * inv_freq  # (T, R/2) or (B, T, R/2)
    if positions.dim() == 2 and x.dim() == 4:
        angles = angles[:, None]  # broadcast over heads
    cos, sin = angles.cos().double().to(x.device), angles.sin().double().to(x.device)
    rotated, passed = x[..., :rotary_dim].double(), x[..., rotary_dim:].double()
    if interleaved:
        even, odd = rotated[..., 0::2], rotated[..., 1::2]
        rotated = torch.stack([even * cos - odd * sin, odd * cos + even * sin], dim=-1).flatten(-2)
    else:
        cos, sin = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)
        rotated = rotated * cos + rotate_half(rotated) * sin
    return torch.cat([rotated, passed], dim=-1)


@st.composite
def rope_cases(draw):
    head_dim = draw(st.sampled_from([2, 4, 6, 8, 10, 16]))
    return {
        "batch": draw(st.integers(1, 2)),
        "num_heads": draw(st.integers(1, 3)),
        "seq_len": draw(st.integers(1, 9)),
        "head_dim": head_dim,
        "rotary_dim": draw(st.sampled_from([None] + list(range(2, head_dim + 1, 2)))),
        "interleaved": draw(st.booleans()),
        "per_batch_positions": draw(st.booleans()),
        "layout": draw(st.sampled_from(["BHTD", "BTD"])),
        "max_position": draw(st.sampled_from([8, 4096])),
        "seed": draw(st.integers(0, 2**16)),
    }


@kernel_settings(SOME)
@given(case=rope_cases())
def test_matches_rope_formula(device, case):
    """Both layouts, partial rotary_dim, (T,) or (B, T) positions, (B, H, T, D) or (B, T, D) inputs."""
    gen = seeded(case["seed"])
    batch, seq_len = case["batch"], case["seq_len"]
    shape = (batch, case["num_heads"], seq_len, case["head_dim"]) if case["layout"] == "BHTD" \
        else (batch, seq_len, case["head_dim"])
    pos_shape = (batch, seq_len) if case["per_batch_positions"] else (seq_len,)
    positions = torch.randint(0, case["max_position"], pos_shape, generator=gen).to(device)
    # a float32 angle at position p is off by about p * 1e-7: the tolerance grows with p
    atol_angle = 4e-7 * case["max_position"]
    for dtype in dtypes_for(device):
        x = randn(gen, *shape, dtype=dtype, device=device)
        before = x.clone()
        got = rope(x, positions, interleaved=case["interleaved"], rotary_dim=case["rotary_dim"])
        expected = rope_oracle(x, positions, interleaved=case["interleaved"], rotary_dim=case["rotary_dim"])
        assert torch.equal(x, before), "the input must not be modified"
        assert got.dtype == dtype and got.shape == x.shape
        rounding = {torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
        torch.testing.assert_close(got.double(), expected, atol=atol_angle * 4 + rounding * 4, rtol=rounding)


def test_pass_through_features_are_bit_exact(device):
    x = torch.randn(2, 3, 5, 10, device=device)
    out = rope(x, torch.arange(5, device=device), rotary_dim=4)
    assert torch.equal(out[..., 4:], x[..., 4:])


def test_position_zero_is_identity(device):
    x = torch.randn(1, 2, 1, 8, device=device)
    for interleaved in (False, True):
        assert torch.equal(rope(x, torch.zeros(1, dtype=torch.int64, device=device), interleaved=interleaved), x)


def test_custom_inv_freq_is_used(device):
    """A scaled frequency table (linear position interpolation by 4) equals positions / 4."""
    from reference.kernels.rope import rope_frequencies

    x = torch.randn(1, 1, 4, 8, device=device)
    positions = torch.tensor([0, 4, 8, 12], device=device)
    scaled = rope(x, positions, inv_freq=rope_frequencies(8) / 4)
    torch.testing.assert_close(scaled, rope(x, positions // 4), atol=1e-6, rtol=1e-6)


def test_bad_arguments_raise_value_error(device):
    x = torch.randn(1, 1, 3, 8, device=device)
    with pytest.raises(ValueError, match="rotary_dim"):
        rope(x, torch.arange(3, device=device), rotary_dim=5)
    with pytest.raises(ValueError, match="rotary_dim"):
        rope(x, torch.arange(3, device=device), rotary_dim=10)
    with pytest.raises(ValueError, match="T=3"):
        rope(x, torch.arange(4, device=device))
