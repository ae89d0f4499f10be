"""Fused rotary position embedding (RoPE) in Triton: angles, cos/sin and the rotation in one pass.

A token at position p rotates each feature pair (a, b) by the angle p * inv_freq[i]:

    a' = a * cos - b * sin
    b' = b * cos + a * sin

The two layouts differ only in which features form pair i (R = rotary_dim):

    rotate-half (Llama, GPT-NeoX):  (x[i], x[i + R/2])     i.e. out = x*cos + rotate_half(x)*sin
    interleaved (GPT-J):            (x[2i], x[2i + 1])

Features R..D-1 pass through unchanged (partial rotary, as in GPT-NeoX / Phi). Frequencies are
Hugging Face's, ``1 / base ** (arange(0, R, 2) / R)`` in float32, computed on the host so a
scaled table (position interpolation, Llama 3.1) can be passed instead; angles, cos and sin are
float32 on the device, and the output is written in x's dtype to a new tensor. Fusing means x
is read once and written once, with no (T, R) cos/sin table in memory.

Legend: B batch, H heads, T time, D head dim, R rotary dim (even, <= D).

Reference: Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding" (2021).
"""

from __future__ import annotations

import torch

from reference.kernels._triton import next_pow2, require_device, tl, triton

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _rope_fwd(
    x_ptr, positions_ptr, inv_freq_ptr, out_ptr,
    num_rows, head_dim, rotary_dim,
    INTERLEAVED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr, BLOCK_PAIRS: tl.constexpr, BLOCK_PASS: tl.constexpr,
):
    # x and out are (num_rows, head_dim) contiguous; each row is one (.., token, head) vector
    row_ids = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_in = row_ids < num_rows
    row_base = row_ids.to(tl.int64)[:, None] * head_dim

    half = rotary_dim // 2
    pair_ids = tl.arange(0, BLOCK_PAIRS)
    pair_in = pair_ids < half
    positions = tl.load(positions_ptr + row_ids, mask=row_in, other=0).to(tl.float32)
    inv_freq = tl.load(inv_freq_ptr + pair_ids, mask=pair_in, other=0.0)
    angles = positions[:, None] * inv_freq[None, :]  # (BLOCK_ROWS, BLOCK_PAIRS) float32
    cos = tl.cos(angles)
    sin = tl.sin(angles)

    if INTERLEAVED:
        first = 2 * pair_ids
        second = 2 * pair_ids + 1
    else:
        first = pair_ids
        second = pair_ids + half
    mask = row_in[:, None] & pair_in[None, :]
    a = tl.load(x_ptr + row_base + first[None, :], mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row_base + second[None, :], mask=mask, other=0.0).to(tl.float32)
    out_dtype = out_ptr.dtype.element_ty
    tl.store(out_ptr + row_base + first[None, :], (a * cos - b * sin).to(out_dtype), mask=mask)
    tl.store(out_ptr + row_base + second[None, :], (b * cos + a * sin).to(out_dtype), mask=mask)

    # features past rotary_dim are copied through untouched
    pass_ids = rotary_dim + tl.arange(0, BLOCK_PASS)
    pass_mask = row_in[:, None] & (pass_ids[None, :] < head_dim)
    rest = tl.load(x_ptr + row_base + pass_ids[None, :], mask=pass_mask, other=0.0)
    tl.store(out_ptr + row_base + pass_ids[None, :], rest, mask=pass_mask)


def rope_frequencies(rotary_dim: int, base: float = 10000.0) -> torch.Tensor:
    """(R // 2,) float32 ``1 / base ** (arange(0, R, 2) / R)``, exactly as Hugging Face computes it."""
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64).to(torch.float32) / rotary_dim
    return 1.0 / (base ** exponents)


def _row_positions(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """One int32 position per row of x viewed as (-1, D): broadcast (T,) or (B, T) over x[..., :]."""
    seq_len = x.shape[-2]
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be an integer tensor; got {positions.dtype}")
    if positions.dim() == 1:
        if positions.shape[0] != seq_len:
            raise ValueError(f"positions (T,) must have T={seq_len} entries; got {tuple(positions.shape)}")
        expanded = positions.expand(x.shape[:-1])
    elif positions.dim() == 2:
        if positions.shape != (x.shape[0], seq_len) or x.dim() not in (3, 4):
            raise ValueError(f"positions (B, T) needs x (B, T, D) or (B, H, T, D) with B={positions.shape[0]}, "
                             f"T={positions.shape[1]}; got x {tuple(x.shape)}")
        expanded = positions if x.dim() == 3 else positions[:, None, :].expand(x.shape[:-1])
    else:
        raise ValueError(f"positions must be (T,) or (B, T); got {tuple(positions.shape)}")
    return expanded.to(device=x.device, dtype=torch.int32).contiguous().reshape(-1)


def rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    base: float = 10000.0,
    *,
    interleaved: bool = False,
    rotary_dim: int | None = None,
    inv_freq: torch.Tensor | None = None,
) -> torch.Tensor:
    """Apply rotary embeddings to x at the given absolute positions; x is not modified.

    Args:
        x: (..., T, D), e.g. (B, H, T, D), float16 / bfloat16 / float32.
        positions: integer (T,) broadcast over leading dims, or (B, T) with x (B, T, D) or
            (B, H, T, D) broadcast over heads. Decoding passes the offsets of the new tokens.
        base: frequency base (ignored when inv_freq is given).
        interleaved: False = rotate-half pairs (x[i], x[i + R/2]); True = GPT-J pairs (x[2i], x[2i+1]).
        rotary_dim: R, even, <= D; only the first R features rotate. Default D.
        inv_freq: optional (R // 2,) float32 frequencies (e.g. a scaled table); default
            ``rope_frequencies(R, base)``.

    Returns:
        A new tensor shaped and typed like x.

    Raises:
        ValueError: odd rotary_dim, rotary_dim > D, positions not matching T, bad inv_freq.
        KernelUnavailable: see flash_attention.
    """
    if x.dim() < 2 or x.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"x must be (..., T, D) in {SUPPORTED_DTYPES}; got {tuple(x.shape)} {x.dtype}")
    head_dim = x.shape[-1]
    rotary_dim = head_dim if rotary_dim is None else int(rotary_dim)
    if rotary_dim % 2 or not 0 < rotary_dim <= head_dim:
        raise ValueError(f"rotary_dim must be even and in (0, D={head_dim}]; got {rotary_dim}")
    if inv_freq is None:
        inv_freq = rope_frequencies(rotary_dim, base)
    if inv_freq.shape != (rotary_dim // 2,):
        raise ValueError(f"inv_freq must be (rotary_dim // 2,) = ({rotary_dim // 2},); got {tuple(inv_freq.shape)}")
    row_positions = _row_positions(x, positions)
    require_device(x)

    x_rows = x.reshape(-1, head_dim).contiguous()  # (N, D), N = prod(leading dims)
    out = torch.empty_like(x_rows)
    num_rows = x_rows.shape[0]
    if num_rows == 0:
        return out.reshape(x.shape)
    inv_freq = inv_freq.to(device=x.device, dtype=torch.float32).contiguous()
    block_rows = 16 if x.is_cuda else 8
    grid = (triton.cdiv(num_rows, block_rows),)
    _rope_fwd[grid](
        x_rows, row_positions, inv_freq, out,
        num_rows, head_dim, rotary_dim,
        INTERLEAVED=bool(interleaved),
        BLOCK_ROWS=block_rows,
        BLOCK_PAIRS=next_pow2(rotary_dim // 2),
        BLOCK_PASS=next_pow2(max(1, head_dim - rotary_dim)),
        num_warps=4 if x.is_cuda else 1,
    )
    return out.reshape(x.shape)
