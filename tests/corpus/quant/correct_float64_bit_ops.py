"""A correct quant written differently: scales computed in float64 and stored as float32, the
INT4 codes packed and unpacked with explicit bit operations on int32, columns handled one
group at a time, and the amax history a list sliced to its last history_len entries."""

from __future__ import annotations

import torch
from torch import Tensor

E4M3_MAX = 448.0


def quantize_int8(w: Tensor) -> tuple[Tensor, Tensor]:
    if w.ndim != 2:
        raise ValueError(f"w must be (out, in), got {tuple(w.shape)}")
    w64 = w.double()
    scale64 = (w64.abs().amax(1) / 127).clamp_min(torch.finfo(torch.float32).eps)
    scale = scale64.float()
    q = (w.float() / scale[:, None]).round().clamp(-127, 127).to(torch.int8)
    return q, scale


def dequantize_int8(q: Tensor, scale: Tensor) -> Tensor:
    if q.ndim != 2 or q.dtype != torch.int8 or scale.ndim != 1 or scale.shape[0] != q.shape[0]:
        raise ValueError("scale must have one entry per row of q")
    return torch.einsum("oi,o->oi", q.float(), scale.float())


def int8_linear(x: Tensor, q: Tensor, scale: Tensor, bias: Tensor | None = None) -> Tensor:
    w = dequantize_int8(q, scale)
    if x.ndim == 0 or x.shape[-1] != w.shape[1]:
        raise ValueError("x's last dimension must be in")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != w.shape[0]):
        raise ValueError("bias must be (out,)")
    y = torch.nn.functional.linear(x.float(), w, None if bias is None else bias.float())
    return y.to(x.dtype)


def _check_group(group_size: int, num_in: int) -> None:
    if group_size < 2 or group_size % 2 or num_in % group_size:
        raise ValueError(f"bad group_size {group_size} for in = {num_in}")


def quantize_int4(w: Tensor, group_size: int = 128) -> tuple[Tensor, Tensor, Tensor]:
    if w.ndim != 2:
        raise ValueError("w must be 2-D")
    out_features, num_in = w.shape
    _check_group(group_size, num_in)
    wf = w.float()
    codes = torch.empty(out_features, num_in, dtype=torch.int32)
    scales = torch.empty(out_features, num_in // group_size, dtype=torch.float32)
    zeros = torch.empty(out_features, num_in // group_size, dtype=torch.uint8)
    for g, start in enumerate(range(0, num_in, group_size)):
        block = wf[:, start:start + group_size]
        s = (block.amax(1) - block.amin(1)).clamp(min=1e-5) / 15
        z = (-(block.amin(1) / s).round()).clamp(0, 15)
        codes[:, start:start + group_size] = ((block / s[:, None]).round() + z[:, None]).clamp(0, 15).int()
        scales[:, g], zeros[:, g] = s, z.to(torch.uint8)
    packed = (codes[:, 0::2] & 0xF) | ((codes[:, 1::2] & 0xF) << 4)
    return packed.to(torch.uint8), scales, zeros


def dequantize_int4(packed: Tensor, scales: Tensor, zeros: Tensor, group_size: int = 128) -> Tensor:
    if packed.ndim != 2 or packed.dtype != torch.uint8:
        raise ValueError("packed must be 2-D uint8")
    out_features, num_in = packed.shape[0], 2 * packed.shape[1]
    _check_group(group_size, num_in)
    if tuple(scales.shape) != (out_features, num_in // group_size) or tuple(zeros.shape) != tuple(scales.shape):
        raise ValueError("scales/zeros shape")
    p = packed.int()
    codes = torch.empty(out_features, num_in, dtype=torch.float32)
    codes[:, 0::2] = (p & 0xF).float()
    codes[:, 1::2] = ((p >> 4) & 0xF).float()
    per_col_scale = scales.float().repeat_interleave(group_size, dim=1)
    per_col_zero = zeros.float().repeat_interleave(group_size, dim=1)
    return (codes - per_col_zero) * per_col_scale


class FP8Scaler:
    def __init__(self, history_len: int = 16, margin: int = 0) -> None:
        if history_len <= 0:
            raise ValueError("history_len must be positive")
        if margin < 0:
            raise ValueError("margin must be >= 0")
        self.history_len, self.margin = history_len, margin
        self.amaxes: list[float] = []

    def quantize(self, x: Tensor) -> tuple[Tensor, Tensor]:
        if torch.isnan(x).any() or torch.isinf(x).any():
            raise ValueError("NaN or inf in x")
        amax_now = x.float().abs().max().item() if x.numel() else 0.0
        ref_amax = max(self.amaxes) if len(self.amaxes) > 0 else amax_now
        scale = torch.tensor(1.0 if ref_amax == 0 else E4M3_MAX / ref_amax / 2 ** self.margin,
                             dtype=torch.float32)
        scaled = x.float() * scale
        scaled = torch.where(scaled > E4M3_MAX, torch.tensor(E4M3_MAX), scaled)
        scaled = torch.where(scaled < -E4M3_MAX, torch.tensor(-E4M3_MAX), scaled)
        self.amaxes = (self.amaxes + [amax_now])[-self.history_len:]
        return scaled.to(torch.float8_e4m3fn), scale


def fp8_matmul(a_fp8: Tensor, a_scale: Tensor, b_fp8: Tensor, b_scale: Tensor,
               out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    if a_fp8.ndim != 2 or b_fp8.ndim != 2 or a_fp8.dtype != torch.float8_e4m3fn or b_fp8.dtype != torch.float8_e4m3fn:
        raise ValueError("fp8 operands must be 2-D float8_e4m3fn")
    if a_fp8.shape[1] != b_fp8.shape[0]:
        raise ValueError("shape mismatch")
    acc = torch.einsum("mk,kn->mn", a_fp8.float(), b_fp8.float())
    return (acc / a_scale.float() / b_scale.float()).to(out_dtype)
