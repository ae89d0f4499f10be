"""RoPE with one realistic mistake: the llama3 wavelength thresholds are computed with floor
division (L // low_freq_factor, L // high_freq_factor): when L / lo or L / hi is not an
integer, a wavelength between the floor and the exact quotient lands in the wrong band.
"""


from __future__ import annotations

import math

import torch
from torch import Tensor

LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings")


# ---------------------------------------------------------------------------- frequencies


def rope_inv_freq(dim: int, base: float = 10000.0, scaling: dict | None = None) -> Tensor:
    """Inverse frequencies w_i = base ** (-2i / dim), i = 0 .. dim/2 - 1: (dim // 2,) float32.

    Computed as Hugging Face does: 1.0 / base ** (arange(0, dim, 2) / dim) in float32.
    scaling: None, {"type": "linear", "factor": f} (w / f, position interpolation) or
    {"type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
    "original_max_position_embeddings"} (the Llama 3.1 rule).
    ValueError: odd or non-positive dim, unknown type, missing keys, factor <= 0,
    low_freq_factor >= high_freq_factor.
    """
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0 or dim % 2:
        raise ValueError(f"dim must be a positive even integer, got {dim!r}")
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim  # (dim/2,)
    inv_freq = 1.0 / (base ** exponents)  # (dim/2,) float32
    if scaling is None:
        return inv_freq
    kind = _scaling_type(scaling)
    if kind == "linear":
        return inv_freq / _factor(scaling)
    return _llama3(inv_freq, scaling)


def _scaling_type(scaling: dict) -> str:
    if not isinstance(scaling, dict) or "type" not in scaling:
        raise ValueError(f"scaling must be a dict with a 'type' key, got {scaling!r}")
    kind = scaling["type"]
    if kind not in ("linear", "llama3"):
        raise ValueError(f"unknown scaling type {kind!r}; expected 'linear' or 'llama3'")
    needed = ("factor",) if kind == "linear" else LLAMA3_KEYS
    missing = [key for key in needed if key not in scaling]
    if missing:
        raise ValueError(f"{kind} scaling is missing the key(s) {missing}")
    return kind


def _factor(scaling: dict) -> float:
    factor = float(scaling["factor"])
    if not factor > 0:
        raise ValueError(f"scaling factor must be > 0, got {scaling['factor']!r}")
    return factor


def _llama3(inv_freq: Tensor, scaling: dict) -> Tensor:
    """The Llama 3.1 rule, step for step as Hugging Face's _compute_llama3_parameters.

    Long wavelengths (low frequencies, the ones that never completed a turn within the
    original context) are interpolated by `factor`; short ones, which already encode local
    order well, are kept; the band between is blended linearly in 1 / wavelength.
    """
    factor = _factor(scaling)
    low_freq_factor = float(scaling["low_freq_factor"])
    high_freq_factor = float(scaling["high_freq_factor"])
    if not low_freq_factor < high_freq_factor:
        raise ValueError("llama3 scaling needs low_freq_factor < high_freq_factor, got "
                         f"{low_freq_factor} and {high_freq_factor}")
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len // low_freq_factor  # longer than this: divided
    high_freq_wavelen = old_context_len // high_freq_factor  # shorter than this: kept

    wavelen = 2 * math.pi / inv_freq  # (dim/2,) tokens per turn
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)


# ---------------------------------------------------------------------------- rotation


def apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0, *,
               interleaved: bool = False, rotary_dim: int | None = None,
               scaling: dict | None = None) -> Tensor:
    """Rotate the first rotary_dim features of x by position-dependent angles.

    x: (..., T, D) floating, e.g. (B, H, T, D). positions: integer absolute positions,
    (T,) broadcast over all leading dims, or (B, T) with x (B, T, D) or (B, H, T, D)
    (broadcast over heads). Returns a new tensor of x's shape and dtype; x is not modified.
    Angles are computed in float32; the frequencies use rotary_dim as the dimension.
    ValueError: odd rotary_dim, rotary_dim > D, positions not matching T.
    """
    head_dim = x.shape[-1]
    rotary_dim = head_dim if rotary_dim is None else rotary_dim
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int) or rotary_dim <= 0 \
            or rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(f"rotary_dim must be a positive even integer <= D = {head_dim}, "
                         f"got {rotary_dim!r}")
    positions = _check_positions(x, positions).to(x.device)  # angles on x's device (CUDA too)
    inv_freq = rope_inv_freq(rotary_dim, base, scaling).to(x.device)  # (R/2,)
    angles = positions.to(torch.float32)[..., None] * inv_freq  # (T, R/2) or (B, T, R/2)
    return rotate(x, _fit_to_x(angles.cos(), x), _fit_to_x(angles.sin(), x),
                  interleaved=interleaved)


def _check_positions(x: Tensor, positions: Tensor) -> Tensor:
    positions = torch.as_tensor(positions)
    if x.dim() < 2:
        raise ValueError(f"x must be (..., T, D), got shape {tuple(x.shape)}")
    if positions.dim() not in (1, 2) or positions.shape[-1] != x.shape[-2]:
        raise ValueError(f"positions must be (T,) or (B, T) with T = {x.shape[-2]}, got "
                         f"shape {tuple(positions.shape)}")
    if positions.dim() == 2 and (x.dim() not in (3, 4) or positions.shape[0] != x.shape[0]):
        raise ValueError(f"positions of shape (B, T) = {tuple(positions.shape)} need x of "
                         f"shape (B, T, D) or (B, H, T, D), got {tuple(x.shape)}")
    if positions.dtype.is_floating_point or positions.dtype.is_complex:
        raise ValueError(f"positions must be integers, got {positions.dtype}")
    return positions


def _fit_to_x(table: Tensor, x: Tensor) -> Tensor:
    """(B, T, R/2) tables broadcast over the heads of a (B, H, T, D) x."""
    if table.dim() == 3 and x.dim() == 4:
        return table.unsqueeze(1)  # (B, 1, T, R/2)
    return table


def rotate(x: Tensor, cos: Tensor, sin: Tensor, *, interleaved: bool = False) -> Tensor:
    """Rotate the first R features of x pairwise; cos, sin: (..., T, R/2) float32,
    broadcastable against x's pairs. The rest of x passes through unchanged.

    Pair (a, b) becomes (a cos - b sin, b cos + a sin), which is x*cos + rotate_half(x)*sin
    with the angle table repeated for both halves.
    """
    rotary_dim = 2 * cos.shape[-1]
    compute_dtype = torch.promote_types(x.dtype, torch.float32)  # half inputs: math in fp32
    x_rot = x[..., :rotary_dim].to(compute_dtype)  # (..., T, R)
    if interleaved:
        first, second = x_rot[..., 0::2], x_rot[..., 1::2]  # (..., T, R/2) each
    else:
        first, second = x_rot[..., : rotary_dim // 2], x_rot[..., rotary_dim // 2:]
    out_first = first * cos - second * sin
    out_second = second * cos + first * sin
    if interleaved:
        rotated = torch.stack((out_first, out_second), dim=-1).flatten(-2)  # (..., T, R)
    else:
        rotated = torch.cat((out_first, out_second), dim=-1)  # (..., T, R)
    return torch.cat((rotated.to(x.dtype), x[..., rotary_dim:]), dim=-1)  # (..., T, D)


# ---------------------------------------------------------------------------- cache


class RotaryEmbedding:
    """RoPE with a cos/sin table that grows on demand (rotate-half layout).

    Calling it equals apply_rope(x, positions, base, rotary_dim=dim, scaling=scaling).

    Invariants:
      * `_cos` and `_sin` are float32 of shape (cached_positions, dim // 2); row p holds
        cos(p * inv_freq) and sin(p * inv_freq), computed exactly as apply_rope does.
      * cached_positions never decreases; it grows (at least doubling) only when a call
        needs a position at or beyond it.
    """

    def __init__(self, dim: int, base: float = 10000.0, scaling: dict | None = None) -> None:
        self.dim = dim
        self.base = base
        self.scaling = scaling
        self.inv_freq = rope_inv_freq(dim, base, scaling)  # (dim/2,) float32
        self._cos = torch.empty(0, dim // 2)  # (cached_positions, dim/2)
        self._sin = torch.empty(0, dim // 2)

    @property
    def cached_positions(self) -> int:
        """Number of positions (0 .. cached_positions - 1) in the table built so far."""
        return self._cos.shape[0]

    def __call__(self, x: Tensor, positions: Tensor) -> Tensor:
        """x (..., T, D) with D >= dim; positions (T,) or (B, T) as in apply_rope."""
        if self.dim > x.shape[-1]:
            raise ValueError(f"RotaryEmbedding(dim={self.dim}) needs x with D >= {self.dim}, "
                             f"got D = {x.shape[-1]}")
        positions = _check_positions(x, positions)
        if positions.numel():
            self._grow(int(positions.max()) + 1)
        # The table lives on the CPU; the rows a call needs go to x's device. Indexing needs
        # int64 rows: int16 / int8 indices raise, and uint8 ones would be read as a mask.
        rows = positions.cpu().long()
        cos = _fit_to_x(self._cos[rows].to(x.device), x)  # (T, dim/2), (B, T, dim/2) or (B, 1, T, dim/2)
        sin = _fit_to_x(self._sin[rows].to(x.device), x)
        return rotate(x, cos, sin)

    def _grow(self, num_positions: int) -> None:
        if num_positions <= self.cached_positions:
            return
        # Doubling keeps token-by-token decoding at amortised O(1) table work per step.
        new_len = max(num_positions, 2 * self.cached_positions)
        new_positions = torch.arange(self.cached_positions, new_len, dtype=torch.float32)
        angles = new_positions[:, None] * self.inv_freq  # (new rows, dim/2)
        self._cos = torch.cat((self._cos, angles.cos()))
        self._sin = torch.cat((self._sin, angles.sin()))
