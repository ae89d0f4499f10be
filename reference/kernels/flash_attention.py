"""Attention forward with online softmax, FlashAttention-2 style, in Triton.

One program computes a (BLOCK_M, Dv) tile of the output for one (batch, head): it keeps the
query tile in registers and streams K and V in BLOCK_N-key tiles, updating a running row max
``m``, a running denominator ``l`` and an unnormalised accumulator ``acc``:

    s     = (q @ k^T) * scale * log2(e)          # (BLOCK_M, BLOCK_N), base-2 logits
    m_new = max(m, rowmax(s))
    p     = exp2(s - m_new)
    l     = l * exp2(m - m_new) + rowsum(p)
    acc   = acc * exp2(m - m_new) + p @ v
    out   = acc / l                              # once, after the last tile

so the (Tq, Tk) score matrix never exists in memory: reads are O(T * D) per tile row instead
of O(T^2). Causal masking is bottom-right aligned (query i may attend key j iff
j <= i + (Tk - Tq)), the alignment decoding with a cache and chunked prefill need; tiles
entirely above the diagonal are never loaded. A row with no key it may attend outputs zeros.

Legend: B batch, H query heads, H_kv key/value heads (H % H_kv == 0, GQA), Tq / Tk query / key
length, D head dim, Dv value head dim.

References: Dao et al., "FlashAttention" (2022) and "FlashAttention-2" (2023); Milakov &
Gimelshein, "Online normalizer calculation for softmax" (2018); the Triton fused-attention
tutorial.
"""

from __future__ import annotations

import math

import torch

from reference.kernels._triton import next_pow2, require_device, tl, triton

_LOG2E = 1.4426950408889634
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _flash_attention_fwd(
    q_ptr, k_ptr, v_ptr, out_ptr,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    num_heads, num_kv_groups, seq_len_q, seq_len_k, head_dim, head_dim_v,
    qk_scale_log2,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    tile_id = tl.program_id(0)
    batch_head_id = tl.program_id(1)
    batch_id = batch_head_id // num_heads
    head_id = batch_head_id % num_heads
    kv_head_id = head_id // num_kv_groups  # GQA: query head h reads KV head h // (H // H_kv)

    row_ids = tile_id * BLOCK_M + tl.arange(0, BLOCK_M)
    col_offs = tl.arange(0, BLOCK_N)
    d_offs = tl.arange(0, BLOCK_D)
    dv_offs = tl.arange(0, BLOCK_DV)

    q_base = q_ptr + batch_id * stride_qb + head_id * stride_qh
    k_base = k_ptr + batch_id * stride_kb + kv_head_id * stride_kh
    v_base = v_ptr + batch_id * stride_vb + kv_head_id * stride_vh

    q_mask = (row_ids[:, None] < seq_len_q) & (d_offs[None, :] < head_dim)
    q = tl.load(q_base + row_ids[:, None] * stride_qm + d_offs[None, :] * stride_qd,
                mask=q_mask, other=0.0)  # (BLOCK_M, BLOCK_D)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running row max (base-2 logits)
    l_i = tl.zeros([BLOCK_M], tl.float32)                 # running softmax denominator
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)       # running unnormalised output

    diagonal = seq_len_k - seq_len_q  # bottom-right alignment: key j allowed iff j <= i + diagonal
    key_end = seq_len_k
    if CAUSAL:
        # keys past the last row's diagonal are masked for the whole tile: never load them
        key_end = tl.minimum(seq_len_k, (tile_id + 1) * BLOCK_M + diagonal)

    for key_start in range(0, key_end, BLOCK_N):
        col_ids = key_start + col_offs
        col_in = col_ids < seq_len_k
        k_t = tl.load(k_base + col_ids[None, :] * stride_kn + d_offs[:, None] * stride_kd,
                      mask=col_in[None, :] & (d_offs[:, None] < head_dim), other=0.0)  # (BLOCK_D, BLOCK_N)
        s = tl.dot(q, k_t, input_precision="ieee") * qk_scale_log2  # (BLOCK_M, BLOCK_N) fp32
        allowed = col_in[None, :]
        if CAUSAL:
            allowed = allowed & (col_ids[None, :] <= row_ids[:, None] + diagonal)
        s = tl.where(allowed, s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, 1))
        # a row whose keys were all masked so far has m_new = -inf; subtract 0 instead so that
        # exp2 gives exact zeros rather than exp2(-inf - -inf) = NaN
        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_shift)      # rescales what was accumulated under the old max
        p = tl.exp2(s - m_shift[:, None])   # (BLOCK_M, BLOCK_N)
        l_i = l_i * alpha + tl.sum(p, 1)

        v = tl.load(v_base + col_ids[:, None] * stride_vn + dv_offs[None, :] * stride_vd,
                    mask=col_in[:, None] & (dv_offs[None, :] < head_dim_v), other=0.0)  # (BLOCK_N, BLOCK_DV)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        m_i = m_new

    # rows with no allowed key have l = 0 and acc = 0: output zeros, never NaN
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_safe[:, None]
    out_base = out_ptr + batch_id * stride_ob + head_id * stride_oh
    out_mask = (row_ids[:, None] < seq_len_q) & (dv_offs[None, :] < head_dim_v)
    tl.store(out_base + row_ids[:, None] * stride_om + dv_offs[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=out_mask)


def _default_blocks(head_dim: int, on_gpu: bool) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages): FA2-like tiles on a GPU, tiny ones in the interpreter."""
    if not on_gpu:
        return 16, 16, 1, 1  # the interpreter runs each program in numpy; small tiles keep it quick
    if head_dim <= 64:
        return 128, 64, 4, 3
    return 128, 64, 8, 3


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be 4-D (B, H, T, D); got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype not in SUPPORTED_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share one dtype among {SUPPORTED_DTYPES}; got {q.dtype}, {k.dtype}, {v.dtype}")
    batch, num_heads, _, head_dim = q.shape
    if k.shape[0] != batch or v.shape[0] != batch:
        raise ValueError(f"batch sizes differ: q {q.shape[0]}, k {k.shape[0]}, v {v.shape[0]}")
    if k.shape[1] != v.shape[1] or num_heads % k.shape[1] != 0:
        raise ValueError(f"k and v need the same number of heads H_kv dividing H; got H={num_heads}, "
                         f"k {k.shape[1]}, v {v.shape[1]}")
    if k.shape[3] != head_dim or k.shape[2] != v.shape[2]:
        raise ValueError(f"k must be (B, H_kv, Tk, {head_dim}) and v (B, H_kv, Tk, Dv); "
                         f"got k {tuple(k.shape)}, v {tuple(v.shape)}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device; got {q.device}, {k.device}, {v.device}")


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
) -> torch.Tensor:
    """Softmax attention ``softmax(q k^T * scale [+ causal mask]) v`` without materialising scores.

    Args:
        q: (B, H, Tq, D) float16 / bfloat16 / float32.
        k: (B, H_kv, Tk, D), same dtype; H % H_kv == 0 (GQA: head h reads KV head h // (H // H_kv)).
        v: (B, H_kv, Tk, Dv), same dtype.
        causal: bottom-right aligned: query i may attend key j iff j <= i + (Tk - Tq).
        scale: multiplies the logits; default 1 / sqrt(D).
        block_m, block_n: tile sizes (powers of two >= 16); defaults depend on the device.

    Returns:
        (B, H, Tq, Dv) in q's dtype. Softmax statistics are kept in float32. A query row with no
        key it may attend (causal with Tq > Tk, or Tk == 0) is all zeros.

    Raises:
        ValueError: shapes, dtypes or devices that do not fit.
        KernelUnavailable: Triton missing, or CPU tensors without TRITON_INTERPRET=1.
    """
    _check_inputs(q, k, v)
    require_device(q)
    batch, num_heads, seq_len_q, head_dim = q.shape
    num_kv_heads, seq_len_k, head_dim_v = k.shape[1], k.shape[2], v.shape[3]
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)

    out = torch.empty((batch, num_heads, seq_len_q, head_dim_v), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    default_m, default_n, num_warps, num_stages = _default_blocks(head_dim, q.is_cuda)
    block_m, block_n = block_m or default_m, block_n or default_n
    # tl.dot needs every tile side >= 16
    block_d, block_dv = max(16, next_pow2(head_dim)), max(16, next_pow2(head_dim_v))

    grid = (triton.cdiv(seq_len_q, block_m), batch * num_heads)
    _flash_attention_fwd[grid](
        q, k, v, out,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        num_heads, num_heads // num_kv_heads, seq_len_q, seq_len_k, head_dim, head_dim_v,
        float(scale) * _LOG2E,
        CAUSAL=bool(causal),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, BLOCK_DV=block_dv,
        num_warps=num_warps, num_stages=num_stages,
    )
    return out
