"""Quantization for serving: INT8 weights per output channel, INT4 groups packed two per
byte, FP8 (E4M3) with delayed scaling.

Example: quantize_int8(torch.tensor([[0.5, -1.27, 0.3, 0.0]]))
    -> q = [[50, -127, 30, 0]] (int8), scale = [0.01] (float32)

Levels:
    1. quantize_int8 / dequantize_int8 / int8_linear: symmetric, one scale per output row.
    2. quantize_int4 / dequantize_int4: asymmetric groups with zero points (llm-awq's
       conventions), two codes per byte.
    3. FP8Scaler (Transformer Engine's delayed scaling) and fp8_matmul (torch._scaled_mm).

Shapes: weights are (out, in) as nn.Linear stores them; G = in // group_size groups per row.
Constraints: compute in float32 whatever the input dtype; never modify an input; round with
torch.round (half to even).
"""

from __future__ import annotations

import torch
from torch import Tensor


def quantize_int8(w: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric INT8 with one scale per output channel (row), LLM.int8()'s absmax.

    w: (out, in) float16 / bfloat16 / float32.
    Returns (q, scale): q (out, in) int8 in [-127, 127], scale (out,) float32, with
    w ~= q * scale[:, None]; each row's largest magnitude maps to +-127. Scales are clamped
    below at torch.finfo(torch.float32).eps (an all-zero row quantizes to zeros).
    Raises ValueError: w not 2-D.
    """
    # TODO level 1: float32 copy of w; per-row scale; round, clamp, cast to int8.
    raise NotImplementedError


def dequantize_int8(q: Tensor, scale: Tensor) -> Tensor:
    """q (out, in) int8, scale (out,) float32 -> (out, in) float32, q * scale per row.

    Raises ValueError: q not a 2-D int8 tensor; scale not (out,).
    """
    # TODO level 1
    raise NotImplementedError


def int8_linear(x: Tensor, q: Tensor, scale: Tensor, bias: Tensor | None = None) -> Tensor:
    """A linear layer on INT8 weights: x @ dequantize_int8(q, scale).T (+ bias).

    x: (..., in) float16 / bfloat16 / float32; q (out, in) int8; scale (out,) float32;
    bias (out,) or None. Computed in float32; returns (..., out) in x's dtype.
    Raises ValueError: q not a 2-D int8 tensor; x's last dimension is not in; scale or bias
    not (out,).
    """
    # TODO level 1: check shapes; matmul in float32; add bias; cast to x.dtype.
    raise NotImplementedError


def quantize_int4(w: Tensor, group_size: int = 128) -> tuple[Tensor, Tensor, Tensor]:
    """Level 2. Asymmetric INT4 (codes 0..15) per group of group_size consecutive input
    columns, with llm-awq's pseudo_quantize_tensor conventions, packed two codes per byte.

    w: (out, in) float16 / bfloat16 / float32.
    Returns (packed, scales, zeros): packed (out, in // 2) uint8 with column 2j in the low
    nibble and column 2j + 1 in the high nibble; scales (out, G) float32; zeros (out, G)
    uint8 (the zero points).
    Raises ValueError: in not divisible by group_size; group_size < 2 or odd.
    """
    # TODO level 2: groups along the input columns; scales, zero points, codes; pack.
    raise NotImplementedError


def dequantize_int4(packed: Tensor, scales: Tensor, zeros: Tensor, group_size: int = 128) -> Tensor:
    """Level 2. packed (out, in // 2) uint8, scales (out, G) float32, zeros (out, G) uint8
    -> (out, in) float32, (code - zero) * scale per group.

    Raises ValueError: group_size < 2, odd, or not dividing in = 2 * packed.shape[1];
    packed not a 2-D uint8 tensor; scales or zeros not (out, G).
    """
    # TODO level 2: unpack (low nibble first); subtract zero points; multiply by scales.
    raise NotImplementedError


class FP8Scaler:
    """Level 3. Quantizes a stream of tensors to float8_e4m3fn with Transformer Engine's
    delayed scaling: each call's scale comes from the amax history of the earlier calls
    (its own amax when there are none), then its own amax is recorded. The history keeps
    the last history_len amaxes; margin backs the scale off by powers of two.
    """

    def __init__(self, history_len: int = 16, margin: int = 0) -> None:
        """Raises ValueError: history_len < 1 or margin < 0."""
        # TODO level 3: validate; an empty amax history.
        raise NotImplementedError

    def quantize(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x: any shape, float16 / bfloat16 / float32.

        Returns (x_fp8, scale): x_fp8 of x's shape in torch.float8_e4m3fn holding x * scale
        saturated to +-448 (clamp before the cast); scale a 0-d float32 tensor (1.0 when the
        amax that decides it is 0).
        Raises ValueError: NaN or inf in x (nothing is recorded).
        """
        # TODO level 3: check x; scale from the history as it is; saturate and cast;
        #               then record this call's amax.
        raise NotImplementedError


def fp8_matmul(a_fp8: Tensor, a_scale: Tensor, b_fp8: Tensor, b_scale: Tensor,
               out_dtype: torch.dtype = torch.bfloat16) -> Tensor:
    """Level 3. The CPU emulation of torch._scaled_mm.

    a_fp8 (m, k) and b_fp8 (k, n) float8_e4m3fn, holding a * a_scale and b * b_scale;
    a_scale, b_scale 0-d float32. Returns a @ b as (m, n) in out_dtype, accumulated in
    float32.
    Raises ValueError: operands not 2-D float8_e4m3fn; inner dimensions that differ.
    """
    # TODO level 3
    raise NotImplementedError
