"""FlashAttention in PyTorch: tiled attention with an online softmax, the split-K merge of
partial results, and FlashDecoding over a paged KV cache.

Shape legend: B batch, H query heads, H_kv key/value heads (H % H_kv == 0; query head h reads
KV head h // (H // H_kv)), Tq queries, Tk keys, D head dim, S splits, NB cache blocks,
BS block size (tokens per block), MB max blocks per sequence.

The online softmax keeps, for every query row, a running max m, a running sum l of
exp(score - m) and an unnormalised accumulator acc = sum of exp(score - m) * v. When a new
key tile raises the max to m', everything kept so far is rescaled by exp(m - m'):

    m'   = max(m, rowmax(s))
    p    = exp(s - m')
    l'   = l * exp(m - m') + rowsum(p)
    acc' = acc * exp(m - m') + p @ v

and at the end out = acc / l, lse = m + log(l). The (Tq, Tk) score matrix never exists:
only one (block_q, block_k) tile of it at a time.

References:
- Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness"
  (2022), and Dao, "FlashAttention-2" (2023): tiling, online softmax, skipping causal tiles.
- Milakov & Gimelshein, "Online normalizer calculation for softmax" (2018).
- Dao, Haziza, Massa, Sizov, "Flash-Decoding for long-context inference" (2023): split the
  keys of one query into ranges, reduce each to (out, lse), merge with a log-sum-exp.
- Kwon et al., "Efficient Memory Management for LLM Serving with PagedAttention" (2023):
  the block table.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_INDEX_DTYPES = (torch.int32, torch.int64)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Softmax statistics and accumulators: float64 for float64 inputs, float32 otherwise
    (half-precision scores overflow above 65504 and round coarsely)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_heads(num_heads: int, num_kv_heads: int) -> None:
    if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
        raise ValueError(f"the number of query heads H={num_heads} must be a multiple of the "
                         f"number of KV heads H_kv={num_kv_heads} (>= 1)")


def _check_attention_inputs(q: Tensor, k: Tensor, v: Tensor, block_q: int, block_k: int) -> None:
    """ValueError for anything flash_attention() does not accept."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor) or t.dim() != 4 or t.dtype not in _FLOATING:
            got = f"{t.dim()}-D {t.dtype}" if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a 4-D floating tensor (B, H, T, D); got {got}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape (B, H_kv, Tk, D); got "
                         f"{tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q (B, H, Tq, D) and k (B, H_kv, Tk, D) must share B and D; got "
                         f"{tuple(q.shape)} and {tuple(k.shape)}")
    if q.shape[3] < 1:
        raise ValueError("the head dim D must be >= 1")
    _check_heads(q.shape[1], k.shape[1])
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block_q and block_k must be >= 1; got {block_q} and {block_k}")


# ------------------------------------------------------------------------------ level 1, 2


def flash_attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False,
                    scale: float | None = None, block_q: int = 64,
                    block_k: int = 64) -> tuple[Tensor, Tensor]:
    """Attention softmax(q kᵀ · scale [+ causal mask]) v, one (block_q, block_k) tile at a time.

    q (B, H, Tq, D); k, v (B, H_kv, Tk, D) -> out (B, H, Tq, D) in q's dtype and
    lse (B, H, Tq) float32, the log-sum-exp of the scaled scores each row may attend."""
    _check_attention_inputs(q, k, v, block_q, block_k)
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    work = _compute_dtype(q.dtype)
    diagonal = Tk - Tq  # bottom-right causal: query i may attend key j iff j <= i + diagonal

    out = torch.zeros(B, H, Tq, D, dtype=work, device=q.device)  # accumulator of out's shape
    lse = torch.full((B, H, Tq), -math.inf, dtype=torch.float32, device=q.device)
    for q_start in range(0, Tq, block_q):
        q_end = min(q_start + block_q, Tq)
        out_tile, lse_tile = _attend_one_query_tile(q, k, v, q_start, q_end, causal, scale,
                                                    block_k, diagonal, work)
        # (B, H_kv, group * bq, ...) rows are ordered (head in group, query): unfold them
        out[:, :, q_start:q_end] = out_tile.reshape(B, H, q_end - q_start, D)
        lse[:, :, q_start:q_end] = lse_tile.reshape(B, H, q_end - q_start)
    return out.to(q.dtype), lse


def _attend_one_query_tile(q: Tensor, k: Tensor, v: Tensor, q_start: int, q_end: int,
                           causal: bool, scale: float, block_k: int, diagonal: int,
                           work: torch.dtype) -> tuple[Tensor, Tensor]:
    """Stream the key tiles past one query tile. Returns (out, lse) of its rows, shaped
    (B, H_kv, group * bq, D) and (B, H_kv, group * bq)."""
    B, H, _, D = q.shape
    H_kv, Tk = k.shape[1], k.shape[2]
    group, num_rows = H // H_kv, q_end - q_start
    # GQA without copying K/V per query head: the `group` query heads that read one KV head
    # become extra rows of the tile, (B, H, bq, D) -> (B, H_kv, group * bq, D).
    q_tile = q[:, :, q_start:q_end].to(work).reshape(B, H_kv, group * num_rows, D)
    dev = q.device
    row_pos = torch.arange(q_start, q_end, device=dev).repeat(group)  # (group * bq,) query position of each row

    m = torch.full((B, H_kv, group * num_rows), -math.inf, dtype=work, device=dev)  # running max
    l = torch.zeros(B, H_kv, group * num_rows, dtype=work, device=dev)              # running sum of exp
    acc = torch.zeros(B, H_kv, group * num_rows, D, dtype=work, device=dev)         # running sum of p v
    last_visible_key = q_end - 1 + diagonal  # the tile's last query sees keys <= this one
    for k_start in range(0, Tk, block_k):
        if causal and k_start > last_visible_key:
            break  # this tile and all later ones are in the future of every query of the tile
        k_end = min(k_start + block_k, Tk)
        k_tile = k[:, :, k_start:k_end].to(work)  # (B, H_kv, bk, D)
        v_tile = v[:, :, k_start:k_end].to(work)
        s = (q_tile @ k_tile.transpose(-1, -2)) * scale  # (B, H_kv, group * bq, bk)
        if causal and k_end - 1 > q_start + diagonal:  # some key is in some row's future
            key_pos = torch.arange(k_start, k_end, device=dev)
            s = s.masked_fill(key_pos[None, :] > row_pos[:, None] + diagonal, -math.inf)
        m_new = torch.maximum(m, s.amax(dim=-1))
        # a row that has seen only masked keys keeps max -inf: shift by 0 so that
        # exp(-inf - 0) = 0 instead of exp(-inf + inf) = NaN
        shift = torch.where(m_new == -math.inf, 0.0, m_new)
        rescale = torch.exp(m - shift)                # (B, H_kv, rows): 0 when m = -inf
        p = torch.exp(s - shift[..., None])           # (B, H_kv, rows, bk)
        l = l * rescale + p.sum(dim=-1)
        acc = acc * rescale[..., None] + p @ v_tile   # (B, H_kv, rows, D)
        m = m_new
    seen = l > 0  # rows with at least one key they may attend
    out = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
    lse = torch.where(seen, m + torch.log(torch.where(seen, l, 1.0)), -math.inf)
    return out, lse.to(torch.float32)


def combine_partials(outs: Tensor, lses: Tensor) -> tuple[Tensor, Tensor]:
    """Merge S partial attentions over disjoint key sets into the attention over their union.

    outs (S, B, H, D), lses (S, B, H) -> out (B, H, D) in outs' dtype, lse (B, H) in lses'.
    A split with lse -inf (no key) contributes nothing, whatever its outs hold."""
    if not isinstance(outs, Tensor) or not isinstance(lses, Tensor) or outs.dim() != 4 \
            or lses.dim() != 3 or outs.shape[:3] != lses.shape:
        raise ValueError(f"outs must be (S, B, H, D) and lses (S, B, H); got "
                         f"{tuple(getattr(outs, 'shape', ()))} and {tuple(getattr(lses, 'shape', ()))}")
    if outs.shape[0] < 1:
        raise ValueError("combine_partials needs at least one split (S >= 1)")
    # subtract the max before exp: lse values of 1e4 overflow exp in any float dtype
    top = lses.amax(dim=0)                                # (B, H)
    top = torch.where(top == -math.inf, 0.0, top)
    weights = torch.exp(lses - top)                      # (S, B, H): 0 for empty splits
    total = weights.sum(dim=0)                            # (B, H)
    empty = lses == -math.inf
    # an empty split's outs may be NaN: 0 * NaN is NaN, so select instead of multiplying
    weighted = torch.where(empty[..., None], 0.0, weights[..., None] * outs)
    seen = total > 0
    out = torch.where(seen[..., None], weighted.sum(dim=0) / torch.where(seen, total, 1.0)[..., None], 0.0)
    lse = torch.where(seen, top + torch.log(torch.where(seen, total, 1.0)), -math.inf)
    return out.to(outs.dtype), lse.to(lses.dtype)


# ------------------------------------------------------------------------------ level 3


def _check_decode_inputs(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
                         seq_lens: Tensor, num_splits: int) -> None:
    """ValueError for anything flash_decode() does not accept."""
    if not isinstance(q, Tensor) or q.dim() != 3 or q.dtype not in _FLOATING:
        raise ValueError("q must be a 3-D floating tensor (B, H, D)")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(t, Tensor) or t.dim() != 4 or t.dtype not in _FLOATING:
            raise ValueError(f"{name} must be a 4-D floating tensor (NB, BS, H_kv, D)")
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache and v_cache must have the same shape; got "
                         f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    B, H, D = q.shape
    if k_cache.shape[3] != D or D < 1:
        raise ValueError(f"q (B, H, D) and the caches (NB, BS, H_kv, D) must share D >= 1; got "
                         f"{tuple(q.shape)} and {tuple(k_cache.shape)}")
    _check_heads(H, k_cache.shape[2])
    if not isinstance(block_table, Tensor) or block_table.dtype not in _INDEX_DTYPES \
            or block_table.dim() != 2 or block_table.shape[0] != B:
        raise ValueError("block_table must be an int32/int64 tensor of shape (B, max_blocks)")
    if not isinstance(seq_lens, Tensor) or seq_lens.dtype not in _INDEX_DTYPES \
            or tuple(seq_lens.shape) != (B,):
        raise ValueError("seq_lens must be an int32/int64 tensor of shape (B,)")
    capacity = block_table.shape[1] * k_cache.shape[1]
    if B and bool(((seq_lens < 0) | (seq_lens > capacity)).any()):
        raise ValueError(f"every seq_lens[b] must be in [0, max_blocks * block_size] = [0, {capacity}]")
    if num_splits < 1:
        raise ValueError(f"num_splits must be >= 1; got {num_splits}")


def split_ranges(seq_lens: Tensor, num_splits: int) -> tuple[Tensor, Tensor]:
    """(start, size) of every split, each (B, S): S contiguous ranges covering [0, seq_len)
    whose sizes differ by at most one (the first seq_len % S ranges get the extra token)."""
    lens = seq_lens.to(torch.int64)[:, None]                 # (B, 1)
    split_ids = torch.arange(num_splits, device=lens.device)[None, :]  # (1, S)
    base, extra = lens // num_splits, lens % num_splits
    starts = split_ids * base + torch.minimum(split_ids, extra)
    sizes = base + (split_ids < extra).to(torch.int64)
    return starts, sizes                                      # (B, S) each


def _gather_keys(cache: Tensor, block_table: Tensor, seq_lens: Tensor, work: torch.dtype) -> Tensor:
    """Every sequence's keys (or values) in token order, (B, MB * BS, H_kv, D), with every slot
    the sequence does not own set to 0 (such slots may hold anything, NaN included)."""
    B, max_blocks = block_table.shape
    block_size = cache.shape[1]
    lens = seq_lens.to(torch.int64)
    blocks_used = (lens + block_size - 1) // block_size      # (B,)
    # table entries past a sequence's last block may hold anything: read block 0 there
    in_use = torch.arange(max_blocks, device=lens.device)[None, :] < blocks_used[:, None]
    table = torch.where(in_use, block_table.to(torch.int64), 0)
    keys = cache[table].to(work)                             # (B, MB, BS, H_kv, D)
    keys = keys.reshape(B, max_blocks * block_size, *cache.shape[2:])
    owned = torch.arange(max_blocks * block_size, device=lens.device)[None, :] < lens[:, None]  # (B, T)
    return torch.where(owned[:, :, None, None], keys, 0.0)


def flash_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
                 seq_lens: Tensor, *, num_splits: int, scale: float | None = None) -> Tensor:
    """One decode query per sequence over a paged KV cache, split-K: each sequence's keys are
    cut into num_splits ranges, each range reduced to a partial (out, lse), and the partials
    merged by one call of the module-level combine_partials.

    q (B, H, D); k_cache, v_cache (NB, BS, H_kv, D); block_table (B, MB); seq_lens (B,)
    -> (B, H, D) in q's dtype."""
    _check_decode_inputs(q, k_cache, v_cache, block_table, seq_lens, num_splits)
    B, H, D = q.shape
    H_kv = k_cache.shape[2]
    group = H // H_kv
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    work = _compute_dtype(q.dtype)

    keys = _gather_keys(k_cache, block_table, seq_lens, work)    # (B, T, H_kv, D)
    values = _gather_keys(v_cache, block_table, seq_lens, work)
    T = keys.shape[1]
    q_grouped = q.to(work).reshape(B, H_kv, group, D)
    scores = torch.einsum("bkgd,btkd->bkgt", q_grouped, keys) * scale  # (B, H_kv, group, T)

    starts, sizes = split_ranges(seq_lens, num_splits)          # (B, S)
    pos = torch.arange(T, device=starts.device)
    in_split = (pos >= starts[..., None]) & (pos < (starts + sizes)[..., None])  # (B, S, T)
    s = scores[:, None].masked_fill(~in_split[:, :, None, None, :], -math.inf)  # (B, S, H_kv, g, T)
    top = s.amax(dim=-1)
    shift = torch.where(top == -math.inf, 0.0, top)
    p = torch.exp(s - shift[..., None])
    total = p.sum(dim=-1)                                        # (B, S, H_kv, g)
    acc = torch.einsum("bskgt,btkd->bskgd", p, values)           # (B, S, H_kv, g, D)
    seen = total > 0
    part_out = torch.where(seen[..., None], acc / torch.where(seen, total, 1.0)[..., None], 0.0)
    part_lse = torch.where(seen, shift + torch.log(torch.where(seen, total, 1.0)), -math.inf)
    outs = part_out.reshape(B, num_splits, H, D).transpose(0, 1)  # (S, B, H, D)
    lses = part_lse.reshape(B, num_splits, H).transpose(0, 1)     # (S, B, H)
    # the global name is looked up now, at call time: a wrapper set on the module is seen
    out, _ = combine_partials(outs, lses)
    return out.to(q.dtype)
