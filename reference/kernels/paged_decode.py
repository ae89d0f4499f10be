"""Paged decode attention in Triton: one new query token per sequence, K and V read through a
block table (vLLM's PagedAttention, decode phase).

The KV cache is a pool of fixed-size blocks shared by every sequence, the layout that
the ``paged-kv`` allocator hands out (same as vLLM's flash-attention backend)::

    k_cache, v_cache : (NB, BS, H_kv, D)     block id -> BS token slots -> heads -> features
    block_tables     : (B, max_blocks) int32 sequence b's logical block i lives in physical
                                             block block_tables[b, i]; entries past the
                                             sequence's last block are ignored (any value)
    seq_lens         : (B,) int32            tokens held by sequence b (<= max_blocks * BS)

    token t of sequence b  ->  k_cache[block_tables[b, t // BS], t % BS, kv_head, :]

      block_tables[0] = [7, 2, 5]   seq_lens[0] = 10, BS = 4
      tokens 0-3 -> block 7 | tokens 4-7 -> block 2 | tokens 8-9 -> block 5 (slots 2-3 unused)

One program handles one (sequence, query head): it streams the sequence's tokens in BLOCK_N
tiles, gathers each token's K row through the table, and folds the tile into an online softmax
(running max, denominator, accumulator) exactly as the prefill kernel does. Decode is
memory-bound (each K/V byte is used once per query head), so the figure of merit is GB/s.
The new token attends every cached token (decode needs no causal mask); seq_len 0 gives zeros.

Legend: B sequences, H query heads, H_kv KV heads (H % H_kv == 0), D head dim, NB blocks,
BS block size (tokens per block).

References: Kwon et al., "Efficient Memory Management for Large Language Model Serving with
PagedAttention" (SOSP 2023); vLLM ``csrc/attention/attention_kernels.cu`` and the Triton
``unified_attention`` kernel.
"""

from __future__ import annotations

import math

import torch

from reference.kernels._triton import next_pow2, require_device, tl, triton

_LOG2E = 1.4426950408889634
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _paged_decode_fwd(
    q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, seq_lens_ptr, out_ptr,
    stride_qb, stride_qh, stride_qd,
    stride_kblock, stride_kslot, stride_khead, stride_kd,
    stride_vblock, stride_vslot, stride_vhead, stride_vd,
    stride_tb, stride_tblock,
    stride_ob, stride_oh, stride_od,
    num_heads, num_kv_groups, block_size, head_dim,
    qk_scale_log2,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    seq_id = tl.program_id(0)
    head_id = tl.program_id(1)
    kv_head_id = head_id // num_kv_groups
    seq_len = tl.load(seq_lens_ptr + seq_id)

    d_offs = tl.arange(0, BLOCK_D)
    d_in = d_offs < head_dim
    q = tl.load(q_ptr + seq_id * stride_qb + head_id * stride_qh + d_offs * stride_qd,
                mask=d_in, other=0.0).to(tl.float32)  # (BLOCK_D,)

    # scalars kept as 0-d tensors so that the loop carries a fixed type
    m_i = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)
    l_i = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)
    acc = tl.zeros([BLOCK_D], tl.float32)

    table_row = block_tables_ptr + seq_id * stride_tb
    for token_start in range(0, seq_len, BLOCK_N):
        token_ids = token_start + tl.arange(0, BLOCK_N)
        token_in = token_ids < seq_len
        # logical position -> (physical block, slot inside it)
        block_ids = tl.load(table_row + (token_ids // block_size) * stride_tblock, mask=token_in, other=0)
        slot_ids = token_ids % block_size
        k_rows = (k_cache_ptr + block_ids.to(tl.int64)[:, None] * stride_kblock
                  + slot_ids[:, None] * stride_kslot + kv_head_id * stride_khead)
        kv_mask = token_in[:, None] & d_in[None, :]
        k = tl.load(k_rows + d_offs[None, :] * stride_kd, mask=kv_mask, other=0.0).to(tl.float32)  # (BLOCK_N, BLOCK_D)

        s = tl.sum(k * q[None, :], 1) * qk_scale_log2  # (BLOCK_N,) base-2 logits
        s = tl.where(token_in, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))  # finite: every tile holds at least one real token
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new)
        l_i = l_i * alpha + tl.sum(p, 0)

        v_rows = (v_cache_ptr + block_ids.to(tl.int64)[:, None] * stride_vblock
                  + slot_ids[:, None] * stride_vslot + kv_head_id * stride_vhead)
        v = tl.load(v_rows + d_offs[None, :] * stride_vd, mask=kv_mask, other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m_i = m_new

    l_safe = tl.where(l_i == 0.0, 1.0, l_i)  # seq_len 0: zeros, never NaN
    out = acc / l_safe
    tl.store(out_ptr + seq_id * stride_ob + head_id * stride_oh + d_offs * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=d_in)


def _check_inputs(q, k_cache, v_cache, block_tables, seq_lens) -> None:
    if q.dim() != 3:
        raise ValueError(f"q must be (B, H, D); got shape {tuple(q.shape)}")
    if k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache and v_cache must both be (NB, BS, H_kv, D); got "
                         f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    if q.dtype not in SUPPORTED_DTYPES or k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise ValueError(f"q, k_cache, v_cache must share one dtype among {SUPPORTED_DTYPES}; got "
                         f"{q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    batch, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    if k_cache.shape[3] != head_dim or num_heads % num_kv_heads != 0:
        raise ValueError(f"k_cache must be (NB, BS, H_kv, {head_dim}) with H_kv dividing H={num_heads}; "
                         f"got {tuple(k_cache.shape)}")
    if block_tables.dim() != 2 or block_tables.shape[0] != batch or block_tables.dtype != torch.int32:
        raise ValueError(f"block_tables must be (B={batch}, max_blocks) int32; got "
                         f"{tuple(block_tables.shape)} {block_tables.dtype}")
    if seq_lens.shape != (batch,) or seq_lens.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"seq_lens must be (B={batch},) int32; got {tuple(seq_lens.shape)} {seq_lens.dtype}")


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    scale: float | None = None,
    block_n: int | None = None,
) -> torch.Tensor:
    """Attention of one new query token per sequence over its paged K/V cache.

    Args:
        q: (B, H, D) float16 / bfloat16 / float32, the new token's queries.
        k_cache, v_cache: (NB, BS, H_kv, D), same dtype; H % H_kv == 0 (GQA: query head h reads
            KV head h // (H // H_kv)).
        block_tables: (B, max_blocks) int32 physical block ids in logical order.
        seq_lens: (B,) int32 (or int64) cached tokens per sequence, including the new token's
            own K/V if the caller wrote it first (as vLLM does).
        scale: multiplies the logits; default 1 / sqrt(D).
        block_n: tokens per tile (power of two); default 64 on a GPU, 16 in the interpreter.

    Returns:
        (B, H, D) in q's dtype; rows with seq_len 0 are zeros. Ids and lengths are trusted (not
        bounds-checked on the device): seq_lens[b] <= max_blocks * BS, ids < NB.

    Raises:
        ValueError: shapes or dtypes that do not fit. KernelUnavailable: see flash_attention.
    """
    _check_inputs(q, k_cache, v_cache, block_tables, seq_lens)
    require_device(q)
    batch, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    out = torch.empty_like(q)
    if out.numel() == 0:
        return out
    block_n = block_n or (64 if q.is_cuda else 16)
    seq_lens = seq_lens.to(torch.int32)

    _paged_decode_fwd[(batch, num_heads)](
        q, k_cache, v_cache, block_tables, seq_lens, out,
        *q.stride(), *k_cache.stride(), *v_cache.stride(), *block_tables.stride(), *out.stride(),
        num_heads, num_heads // num_kv_heads, block_size, head_dim,
        float(scale) * _LOG2E,
        BLOCK_N=block_n, BLOCK_D=next_pow2(head_dim),
        num_warps=4 if q.is_cuda else 1,
    )
    return out
