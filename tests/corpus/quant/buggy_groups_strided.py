"""quant with one realistic mistake: The reshape puts the group axis first: column j lands in group j % G instead of j // group_size (groups strided across the row).
"""

from __future__ import annotations

from collections import deque

import torch
from torch import Tensor

INT8_MAX = 127
INT4_MAX = 15
INT4_SCALE_FLOOR = 1e-5  # llm-awq's clamp on max - min, before dividing by 15
FP8_MAX = 448.0  # largest finite float8_e4m3fn
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


# ---------------------------------------------------------------------------- level 1: INT8


def _check_weight(w: Tensor) -> None:
    if not isinstance(w, Tensor) or w.dim() != 2:
        raise ValueError(f"w must be a 2-D (out, in) tensor, got {getattr(w, 'shape', type(w).__name__)}")
    if w.dtype not in FLOAT_DTYPES:
        raise ValueError(f"w must be float16, bfloat16 or float32, got {w.dtype}")


def quantize_int8(w: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric INT8, one scale per output channel (row).

    w: (out, in) float16 / bfloat16 / float32. Returns q (out, in) int8 and scale (out,)
    float32 with w ~= q * scale[:, None].
    """
    _check_weight(w)
    w32 = w.float()  # never divide in half precision
    absmax = w32.abs().amax(dim=1)  # (out,)
    scale = (absmax / INT8_MAX).clamp(min=torch.finfo(torch.float32).eps)  # all-zero row: eps
    q = torch.round(w32 / scale[:, None]).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


def _check_int8_pair(q: Tensor, scale: Tensor) -> None:
    if q.dim() != 2 or q.dtype != torch.int8:
        raise ValueError(f"q must be a 2-D int8 tensor, got {tuple(q.shape)} {q.dtype}")
    if tuple(scale.shape) != (q.shape[0],):
        raise ValueError(f"scale must be ({q.shape[0]},) for q {tuple(q.shape)}, got {tuple(scale.shape)}")


def dequantize_int8(q: Tensor, scale: Tensor) -> Tensor:
    """q (out, in) int8, scale (out,) float32 -> (out, in) float32, q * scale per row."""
    _check_int8_pair(q, scale)
    return q.float() * scale.float()[:, None]


def int8_linear(x: Tensor, q: Tensor, scale: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x @ dequantize_int8(q, scale).T (+ bias), computed in float32.

    x: (..., in) float16 / bfloat16 / float32; q (out, in) int8; scale (out,); bias (out,)
    or None. Returns (..., out) in x's dtype.
    """
    _check_int8_pair(q, scale)
    if x.dim() < 1 or x.shape[-1] != q.shape[1]:
        raise ValueError(f"x's last dimension must be in = {q.shape[1]}, got x {tuple(x.shape)}")
    if bias is not None and tuple(bias.shape) != (q.shape[0],):
        raise ValueError(f"bias must be ({q.shape[0]},), got {tuple(bias.shape)}")
    y = x.float() @ dequantize_int8(q, scale).T  # (..., out) float32
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


# ---------------------------------------------------------------------------- level 2: INT4


def _check_group_size(group_size: int, num_in: int) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2 or group_size % 2:
        raise ValueError(f"group_size must be an even integer >= 2, got {group_size!r}")
    if num_in % group_size:
        raise ValueError(f"in = {num_in} is not divisible by group_size = {group_size}")


def _int4_params(w32: Tensor, group_size: int) -> tuple[Tensor, Tensor]:
    """scales and zeros (out, G), float32, of llm-awq's zero-point quantizer."""
    out_features, num_in = w32.shape
    groups = w32.reshape(out_features, group_size, num_in // group_size).transpose(1, 2)
    max_val, min_val = groups.amax(dim=-1), groups.amin(dim=-1)
    scales = (max_val - min_val).clamp(min=INT4_SCALE_FLOOR) / INT4_MAX
    zeros = (-torch.round(min_val / scales)).clamp(0, INT4_MAX)  # an all-positive group: 0
    return scales, zeros


def quantize_int4(w: Tensor, group_size: int = 128) -> tuple[Tensor, Tensor, Tensor]:
    """Asymmetric INT4 per group of `group_size` consecutive input columns, packed two per byte.

    w: (out, in) float16 / bfloat16 / float32. Returns packed (out, in // 2) uint8 (column 2j
    in the low nibble, 2j + 1 in the high nibble), scales (out, G) float32 and zeros (out, G)
    uint8.
    """
    _check_weight(w)
    _check_group_size(group_size, w.shape[1])
    w32 = w.float()
    out_features, num_in = w32.shape
    scales, zeros = _int4_params(w32, group_size)
    groups = w32.reshape(out_features, group_size, num_in // group_size).transpose(1, 2)
    q = (torch.round(groups / scales[..., None]) + zeros[..., None]).clamp(0, INT4_MAX)
    q = q.transpose(1, 2).reshape(out_features, num_in).to(torch.uint8)
    packed = q[:, 0::2] | (q[:, 1::2] << 4)  # (out, in // 2)
    return packed, scales, zeros.to(torch.uint8)


def unpack_int4(packed: Tensor) -> Tensor:
    """(out, in // 2) uint8 -> (out, in) uint8 codes 0..15 (low nibble first)."""
    low, high = packed & 0x0F, packed >> 4
    return torch.stack((low, high), dim=-1).reshape(packed.shape[0], -1)


def dequantize_int4(packed: Tensor, scales: Tensor, zeros: Tensor, group_size: int = 128) -> Tensor:
    """packed (out, in // 2) uint8, scales (out, G) float32, zeros (out, G) uint8 ->
    (out, in) float32, (q - zero) * scale per group."""
    if packed.dim() != 2 or packed.dtype != torch.uint8:
        raise ValueError(f"packed must be a 2-D uint8 tensor, got {tuple(packed.shape)} {packed.dtype}")
    out_features, num_in = packed.shape[0], 2 * packed.shape[1]
    _check_group_size(group_size, num_in)
    num_groups = num_in // group_size
    for name, t in (("scales", scales), ("zeros", zeros)):
        if tuple(t.shape) != (out_features, num_groups):
            raise ValueError(f"{name} must be ({out_features}, {num_groups}), got {tuple(t.shape)}")
    q = unpack_int4(packed).float().reshape(out_features, group_size, num_groups).transpose(1, 2)
    w = (q - zeros.float()[..., None]) * scales.float()[..., None]
    return w.transpose(1, 2).reshape(out_features, num_in)


# ---------------------------------------------------------------------------- level 3: FP8


class FP8Scaler:
    """Delayed scaling of one tensor stream to float8_e4m3fn, Transformer Engine's recipe.

    Invariants:
      * `_amax_history` holds the amaxes of the last `history_len` accepted calls, oldest
        first; a call that raises records nothing.
      * A call's scale comes from the history as it was before the call (its own amax only
        when the history is empty): scale = 448 / max(history) / 2 ** margin, or 1.0 when
        that amax is 0.
    """

    def __init__(self, history_len: int = 16, margin: int = 0) -> None:
        if isinstance(history_len, bool) or not isinstance(history_len, int) or history_len < 1:
            raise ValueError(f"history_len must be an integer >= 1, got {history_len!r}")
        if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
            raise ValueError(f"margin must be an integer >= 0, got {margin!r}")
        self.history_len = history_len
        self.margin = margin
        self._amax_history: deque[float] = deque(maxlen=history_len)

    def _scale(self, current_amax: float) -> float:
        amax = max(self._amax_history) if self._amax_history else current_amax
        if amax == 0.0:
            return 1.0
        return FP8_MAX / amax / 2.0 ** self.margin

    def quantize(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x: any shape, float16 / bfloat16 / float32. Returns (x_fp8, scale): x_fp8 of x's
        shape in float8_e4m3fn, clamp(x * scale, -448, 448); scale a 0-d float32 tensor.
        ValueError when x holds NaN or inf (nothing is recorded)."""
        x32 = x.float()
        if not bool(torch.isfinite(x32).all()):
            raise ValueError("x holds NaN or inf: it cannot be scaled to FP8")
        current_amax = float(x32.abs().max()) if x32.numel() else 0.0
        scale = torch.tensor(self._scale(current_amax), dtype=torch.float32, device=x.device)
        x_fp8 = (x32 * scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)  # saturate, then cast
        self._amax_history.append(current_amax)  # after quantizing: the next call's scale
        return x_fp8, scale


def fp8_matmul(a_fp8: Tensor, a_scale: Tensor, b_fp8: Tensor, b_scale: Tensor,
               out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    """(a @ b) / (a_scale * b_scale) in out_dtype, accumulated in float32.

    a_fp8 (m, k) and b_fp8 (k, n) float8_e4m3fn; a_scale, b_scale 0-d float32 (the scales
    the tensors were multiplied by). The CPU emulation of torch._scaled_mm with
    scale_a = 1 / a_scale, scale_b = 1 / b_scale.
    """
    for name, t in (("a_fp8", a_fp8), ("b_fp8", b_fp8)):
        if t.dim() != 2 or t.dtype != torch.float8_e4m3fn:
            raise ValueError(f"{name} must be a 2-D float8_e4m3fn tensor, got {tuple(t.shape)} {t.dtype}")
    if a_fp8.shape[1] != b_fp8.shape[0]:
        raise ValueError(f"inner dimensions differ: a {tuple(a_fp8.shape)}, b {tuple(b_fp8.shape)}")
    y = a_fp8.float() @ b_fp8.float()  # (m, n) float32
    return (y / (a_scale.float() * b_scale.float())).to(out_dtype)

