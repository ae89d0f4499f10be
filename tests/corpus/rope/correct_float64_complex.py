"""A correct RoPE written differently from the reference: frequencies and angles in float64
(cast to float32 at the end), the rotation as a complex multiplication (torch.polar and
view_as_complex), and a cache that grows to exactly the positions needed. Its angles round
differently from the reference's float32 ones, within the suite's position-dependent
tolerance.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_LLAMA3 = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def rope_inv_freq(dim: int, base: float = 10000.0, scaling: dict | None = None) -> Tensor:
    if dim % 2:
        raise ValueError("dim must be even")
    w = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # float64
    if scaling is not None:
        kind = scaling.get("type")
        if kind == "linear":
            if "factor" not in scaling:
                raise ValueError("missing factor")
            if scaling["factor"] <= 0:
                raise ValueError("factor must be > 0")
            w = w / scaling["factor"]
        elif kind == "llama3":
            if any(k not in scaling for k in _LLAMA3):
                raise ValueError("missing llama3 keys")
            f, lo, hi, orig = (scaling[k] for k in _LLAMA3)
            if f <= 0 or lo >= hi:
                raise ValueError("bad llama3 parameters")
            wavelen = 2 * math.pi / w
            smooth = ((orig / wavelen - lo) / (hi - lo)).clamp(0.0, 1.0)
            w = (1 - smooth) * w / f + smooth * w  # smooth 0: low band, 1: high band
        else:
            raise ValueError(f"unknown scaling type {kind!r}")
    return w.float()


def _angles(positions: Tensor, inv_freq64: Tensor, x: Tensor) -> Tensor:
    angles = positions.double()[..., None] * inv_freq64  # float64 (T, R/2) / (B, T, R/2)
    if positions.dim() == 2 and x.dim() == 4:
        angles = angles[:, None]
    return angles


def _rotate(x: Tensor, angles: Tensor, interleaved: bool) -> Tensor:
    r = 2 * angles.shape[-1]
    rot = x[..., :r].float()
    if interleaved:
        pairs = rot.reshape(*rot.shape[:-1], r // 2, 2)
    else:
        pairs = torch.stack((rot[..., : r // 2], rot[..., r // 2:]), dim=-1)
    z = torch.view_as_complex(pairs.contiguous())
    turn = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
    out = torch.view_as_real(z * turn)  # (..., T, R/2, 2)
    if interleaved:
        out = out.flatten(-2)
    else:
        out = torch.cat((out[..., 0], out[..., 1]), dim=-1)
    return torch.cat((out.to(x.dtype), x[..., r:]), dim=-1)


def _check(x: Tensor, positions: Tensor, rotary_dim: int) -> None:
    if rotary_dim % 2 or rotary_dim > x.shape[-1]:
        raise ValueError("bad rotary_dim")
    if positions.shape[-1] != x.shape[-2]:
        raise ValueError("positions do not match T")


def apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0, *,
               interleaved: bool = False, rotary_dim: int | None = None,
               scaling: dict | None = None) -> Tensor:
    rotary_dim = x.shape[-1] if rotary_dim is None else rotary_dim
    _check(x, positions, rotary_dim)
    rope_inv_freq(rotary_dim, base, scaling)  # validation
    w = base ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    if scaling is not None:
        w = rope_inv_freq(rotary_dim, base, scaling).double()
    return _rotate(x, _angles(positions, w, x), interleaved)


class RotaryEmbedding:
    def __init__(self, dim: int, base: float = 10000.0, scaling: dict | None = None) -> None:
        self.dim = dim
        self.w = rope_inv_freq(dim, base, scaling).double()
        self.table = torch.zeros(0, dim // 2, dtype=torch.float64)  # angles, float64

    @property
    def cached_positions(self) -> int:
        return self.table.shape[0]

    def __call__(self, x: Tensor, positions: Tensor) -> Tensor:
        if self.dim > x.shape[-1]:
            raise ValueError("dim > D")
        _check(x, positions, self.dim)
        needed = int(positions.max()) + 1
        if needed > self.cached_positions:
            new = torch.arange(self.cached_positions, needed, dtype=torch.float64)
            self.table = torch.cat((self.table, new[:, None] * self.w))
        angles = self.table[positions.long()]  # int16 / int8 / uint8 positions index as int64
        if positions.dim() == 2 and x.dim() == 4:
            angles = angles[:, None]
        return _rotate(x, angles, interleaved=False)
