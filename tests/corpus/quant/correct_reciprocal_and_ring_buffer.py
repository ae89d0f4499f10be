"""A correct quant written differently: multiplies by reciprocal scales (codes may differ from
the reference only on exact rounding ties), packs with arithmetic on a (out, in // 2, 2) view,
keeps the amax history as a Transformer-Engine-style tensor ring buffer, and undoes the FP8
scales on each operand before the matmul."""

from __future__ import annotations

import torch
from torch import Tensor


def quantize_int8(w: Tensor) -> tuple[Tensor, Tensor]:
    if w.dim() != 2:
        raise ValueError("w must be 2-D")
    wf = w.to(torch.float32)
    scale = torch.clamp(wf.abs().max(dim=1).values / 127.0, min=torch.finfo(torch.float32).eps)
    inv = 1.0 / scale
    q = torch.clamp(torch.round(wf * inv.unsqueeze(1)), -127, 127).to(torch.int8)
    return q, scale


def _check(q: Tensor, scale: Tensor) -> None:
    if q.dim() != 2 or q.dtype != torch.int8 or scale.shape != (q.shape[0],):
        raise ValueError("q must be (out, in) int8 and scale (out,)")


def dequantize_int8(q: Tensor, scale: Tensor) -> Tensor:
    _check(q, scale)
    return q.to(torch.float32) * scale.to(torch.float32).unsqueeze(1)


def int8_linear(x: Tensor, q: Tensor, scale: Tensor, bias: Tensor | None = None) -> Tensor:
    _check(q, scale)
    if x.shape[-1:] != q.shape[1:]:
        raise ValueError("x does not fit q")
    if bias is not None and bias.shape != scale.shape:
        raise ValueError("bias does not fit q")
    # integer-valued matmul first, scales applied to the output columns afterwards
    y = torch.matmul(x.to(torch.float32), q.to(torch.float32).t()) * scale.to(torch.float32)
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y.to(x.dtype)


def _group_size_ok(group_size: int, num_in: int) -> None:
    if not isinstance(group_size, int) or group_size < 2 or group_size % 2 != 0 or num_in % group_size != 0:
        raise ValueError("group_size must be even, >= 2 and divide in")


def quantize_int4(w: Tensor, group_size: int = 128) -> tuple[Tensor, Tensor, Tensor]:
    if w.dim() != 2:
        raise ValueError("w must be 2-D")
    rows, cols = w.shape
    _group_size_ok(group_size, cols)
    g = w.to(torch.float32).view(rows, cols // group_size, group_size)
    hi, lo = g.max(dim=2).values, g.min(dim=2).values
    scales = torch.clamp(hi - lo, min=1e-5) / 15
    zeros = torch.clamp(-torch.round(lo / scales), 0, 15)
    codes = torch.clamp(torch.round(g * (1.0 / scales).unsqueeze(2)) + zeros.unsqueeze(2), 0, 15)
    pairs = codes.to(torch.uint8).view(rows, cols // 2, 2)
    packed = (pairs[..., 0] + pairs[..., 1] * 16).to(torch.uint8)
    return packed, scales, zeros.to(torch.uint8)


def dequantize_int4(packed: Tensor, scales: Tensor, zeros: Tensor, group_size: int = 128) -> Tensor:
    if packed.dim() != 2 or packed.dtype != torch.uint8:
        raise ValueError("packed must be (out, in // 2) uint8")
    rows, cols = packed.shape[0], packed.shape[1] * 2
    _group_size_ok(group_size, cols)
    if scales.shape != (rows, cols // group_size) or zeros.shape != scales.shape:
        raise ValueError("scales and zeros must be (out, in // group_size)")
    p = packed.to(torch.int16)
    codes = torch.stack([p % 16, p // 16], dim=2).view(rows, cols // group_size, group_size)
    out = (codes.to(torch.float32) - zeros.to(torch.float32).unsqueeze(2)) * scales.to(torch.float32).unsqueeze(2)
    return out.view(rows, cols)


class FP8Scaler:
    def __init__(self, history_len: int = 16, margin: int = 0) -> None:
        if history_len < 1 or margin < 0:
            raise ValueError("history_len >= 1 and margin >= 0")
        self.margin = margin
        self.history = torch.zeros(history_len, dtype=torch.float32)  # ring buffer of amaxes
        self.count = 0

    def quantize(self, x: Tensor) -> tuple[Tensor, Tensor]:
        xf = x.to(torch.float32)
        if not torch.isfinite(xf).all():
            raise ValueError("x must be finite")
        amax_now = xf.abs().max() if xf.numel() > 0 else torch.zeros(())
        amax = self.history.max() if self.count > 0 else amax_now  # unfilled slots are 0
        if amax > 0:
            scale = torch.tensor(448.0, dtype=torch.float32) / amax / (2 ** self.margin)
        else:
            scale = torch.ones((), dtype=torch.float32)
        out = torch.clamp(xf * scale, min=-448.0, max=448.0).to(torch.float8_e4m3fn)
        self.history = torch.roll(self.history, 1)
        self.history[0] = amax_now
        self.count += 1
        return out, scale.to(torch.float32).reshape(())


def fp8_matmul(a_fp8: Tensor, a_scale: Tensor, b_fp8: Tensor, b_scale: Tensor,
               out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    for t in (a_fp8, b_fp8):
        if t.dtype != torch.float8_e4m3fn or t.dim() != 2:
            raise ValueError("operands must be 2-D float8_e4m3fn")
    if a_fp8.shape[1] != b_fp8.shape[0]:
        raise ValueError("inner dimensions differ")
    a = a_fp8.to(torch.float32) / a_scale
    b = b_fp8.to(torch.float32) / b_scale
    return torch.mm(a, b).to(out_dtype)
