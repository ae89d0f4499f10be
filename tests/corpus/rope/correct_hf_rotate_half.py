"""A correct RoPE in the Hugging Face style: cos/sin tables of width R (each angle repeated
for both halves, or twice in a row for GPT-J), out = x * cos + rotate_half(x) * sin with the
multiply done in x's dtype (cos/sin cast to it, as transformers does), and a cache
preallocated for 64 positions that is rebuilt larger when needed.
"""

from __future__ import annotations

import math

import torch


def rope_inv_freq(dim, base=10000.0, scaling=None):
    if dim % 2 != 0:
        raise ValueError(f"odd dim {dim}")
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if scaling is None:
        return inv_freq
    kind = scaling.get("type")
    if kind not in ("linear", "llama3"):
        raise ValueError(f"unknown type {kind}")
    if "factor" not in scaling:
        raise ValueError("no factor")
    factor = scaling["factor"]
    if factor <= 0:
        raise ValueError("factor <= 0")
    if kind == "linear":
        return inv_freq / factor
    try:
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
    except KeyError as exc:
        raise ValueError(f"missing {exc}") from None
    if low >= high:
        raise ValueError("low_freq_factor >= high_freq_factor")
    wavelen = 2 * math.pi / inv_freq
    out = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return torch.where(medium, smoothed, out)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def _cos_sin(angles, interleaved, dtype):
    emb = angles.repeat_interleave(2, -1) if interleaved else torch.cat((angles, angles), -1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _apply(x, cos, sin, interleaved):
    r = cos.shape[-1]
    if cos.dim() == 3 and x.dim() == 4:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    rot = x[..., :r]
    turn = rotate_every_two if interleaved else rotate_half
    return torch.cat((rot * cos + turn(rot) * sin, x[..., r:]), dim=-1)


def apply_rope(x, positions, base=10000.0, *, interleaved=False, rotary_dim=None, scaling=None):
    r = x.shape[-1] if rotary_dim is None else rotary_dim
    if r % 2 or r > x.shape[-1]:
        raise ValueError("rotary_dim must be even and <= D")
    if positions.shape[-1] != x.shape[-2]:
        raise ValueError("positions must have length T")
    inv_freq = rope_inv_freq(r, base, scaling)
    angles = positions.float()[..., None] * inv_freq
    cos, sin = _cos_sin(angles, interleaved, x.dtype)
    return _apply(x, cos, sin, interleaved)


class RotaryEmbedding:
    def __init__(self, dim, base=10000.0, scaling=None):
        self.dim = dim
        self.inv_freq = rope_inv_freq(dim, base, scaling)
        self._build(64)

    def _build(self, n):
        angles = torch.arange(n, dtype=torch.float32)[:, None] * self.inv_freq
        self.cos, self.sin = _cos_sin(angles, False, torch.float32)

    @property
    def cached_positions(self):
        return self.cos.shape[0]

    def __call__(self, x, positions):
        if self.dim > x.shape[-1]:
            raise ValueError("dim > D")
        if positions.shape[-1] != x.shape[-2]:
            raise ValueError("positions must have length T")
        needed = int(positions.max()) + 1
        if needed > self.cached_positions:
            self._build(max(needed, 2 * self.cached_positions))
        rows = positions.long()  # int16 / int8 / uint8 positions index as int64
        cos = self.cos[rows].to(x.dtype)
        sin = self.sin[rows].to(x.dtype)
        return _apply(x, cos, sin, False)
