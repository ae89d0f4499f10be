"""A correct quant in llm-awq's own style: INT4 through w.reshape(-1, group_size) (rows of
groups), amax history in a deque, FP8 saturation with torch.clamp on the scaled tensor, and
the INT8 linear as F.linear on a dequantized weight in float32."""

from __future__ import annotations

from collections import deque

import torch
import torch.nn.functional as F
from torch import Tensor


def quantize_int8(w: Tensor) -> tuple[Tensor, Tensor]:
    if len(w.shape) != 2:
        raise ValueError("expected a 2-D weight")
    w = w.float()  # a copy for half inputs; for float32 it is w itself, never written
    max_val = w.abs().amax(dim=1, keepdim=True)
    scales = (max_val / 127).clamp(min=torch.finfo(torch.float32).eps)
    q = torch.clamp(torch.round(w / scales), -127, 127).to(torch.int8)
    return q, scales.squeeze(1)


def dequantize_int8(q: Tensor, scale: Tensor) -> Tensor:
    if len(q.shape) != 2 or q.dtype != torch.int8 or list(scale.shape) != [q.shape[0]]:
        raise ValueError("shape mismatch")
    return q.float() * scale.float().view(-1, 1)


def int8_linear(x: Tensor, q: Tensor, scale: Tensor, bias: Tensor | None = None) -> Tensor:
    weight = dequantize_int8(q, scale)
    if x.shape[-1] != weight.shape[1]:
        raise ValueError("x does not fit")
    if bias is not None and list(bias.shape) != [weight.shape[0]]:
        raise ValueError("bias does not fit")
    out = F.linear(x.float(), weight)
    if bias is not None:
        out += bias.float()
    return out.to(x.dtype)


def _validate(num_in: int, group_size: int) -> None:
    if group_size < 2 or group_size % 2 == 1:
        raise ValueError("group_size must be an even number >= 2")
    if num_in % group_size != 0:
        raise ValueError("in must be a multiple of group_size")


def quantize_int4(w: Tensor, group_size: int = 128) -> tuple[Tensor, Tensor, Tensor]:
    if len(w.shape) != 2:
        raise ValueError("expected a 2-D weight")
    org_shape = w.shape
    _validate(org_shape[1], group_size)
    w = w.float().reshape(-1, group_size)  # as pseudo_quantize_tensor
    max_val = w.amax(dim=1, keepdim=True)
    min_val = w.amin(dim=1, keepdim=True)
    max_int, min_int = 15, 0
    scales = (max_val - min_val).clamp(min=1e-5) / max_int
    zeros = (-torch.round(min_val / scales)).clamp_(min_int, max_int)
    q = torch.clamp(torch.round(w / scales) + zeros, min_int, max_int).to(torch.uint8)
    q = q.reshape(org_shape)
    packed = torch.bitwise_or(q[:, ::2], torch.bitwise_left_shift(q[:, 1::2], 4))
    groups = (org_shape[0], org_shape[1] // group_size)
    return packed, scales.reshape(groups), zeros.to(torch.uint8).reshape(groups)


def dequantize_int4(packed: Tensor, scales: Tensor, zeros: Tensor, group_size: int = 128) -> Tensor:
    if len(packed.shape) != 2 or packed.dtype != torch.uint8:
        raise ValueError("packed must be 2-D uint8")
    out_features, num_in = packed.shape[0], packed.shape[1] * 2
    _validate(num_in, group_size)
    if list(scales.shape) != [out_features, num_in // group_size] or list(zeros.shape) != list(scales.shape):
        raise ValueError("scales/zeros do not fit")
    q = torch.empty(out_features, num_in, dtype=torch.uint8)
    q[:, ::2] = torch.bitwise_and(packed, 15)
    q[:, 1::2] = torch.bitwise_right_shift(packed, 4)
    q = q.float().reshape(-1, group_size)
    w = (q - zeros.float().reshape(-1, 1)) * scales.float().reshape(-1, 1)
    return w.reshape(out_features, num_in)


class FP8Scaler:
    def __init__(self, history_len: int = 16, margin: int = 0) -> None:
        if history_len < 1:
            raise ValueError("history_len")
        if margin < 0:
            raise ValueError("margin")
        self.margin = margin
        self.amax_history: deque = deque(maxlen=history_len)

    def quantize(self, x: Tensor) -> tuple[Tensor, Tensor]:
        x = x.float()
        if not torch.isfinite(x).all():
            raise ValueError("non-finite input")
        amax = x.abs().amax() if x.numel() else torch.tensor(0.0)
        ref = torch.stack(list(self.amax_history)).amax() if self.amax_history else amax
        scale = torch.where(ref > 0, 448.0 / ref / (2.0 ** self.margin), torch.tensor(1.0)).float()
        x_fp8 = torch.clamp(x * scale, -448.0, 448.0).to(torch.float8_e4m3fn)
        self.amax_history.append(amax)
        return x_fp8, scale


def fp8_matmul(a_fp8: Tensor, a_scale: Tensor, b_fp8: Tensor, b_scale: Tensor,
               out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    if a_fp8.dim() != 2 or b_fp8.dim() != 2:
        raise ValueError("2-D operands only")
    if a_fp8.dtype != torch.float8_e4m3fn or b_fp8.dtype != torch.float8_e4m3fn:
        raise ValueError("float8_e4m3fn operands only")
    if a_fp8.shape[1] != b_fp8.shape[0]:
        raise ValueError("inner dimensions")
    scale_inv = 1.0 / (a_scale.float() * b_scale.float())  # what torch._scaled_mm takes
    return (a_fp8.float() @ b_fp8.float() * scale_inv).to(out_dtype)
