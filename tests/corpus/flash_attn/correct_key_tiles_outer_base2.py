"""A correct flash-attn solution in FlashAttention-1 order: key tiles outside, query tiles
inside, with full-length row statistics (of lse's shape) and an out-shaped accumulator
updated slice by slice; softmax in base 2 (exp2, as GPU kernels do); GQA through einsum over
a (B, H_kv, group, bq, D) view; FlashDecoding with all splits at once (a one-hot split id per
token, no loop at all)."""

import math

import torch
import torch.nn.functional as F

LOG2E = 1.4426950408889634


def flash_attention(q, k, v, *, causal=False, scale=None, block_q=64, block_k=64):
    if not (q.ndim == k.ndim == v.ndim == 4):
        raise ValueError("q, k, v must be 4-D")
    B, H, Tq, D = q.shape
    _, H_kv, Tk, _ = k.shape
    if tuple(v.shape) != tuple(k.shape) or k.shape[0] != B or k.shape[3] != D:
        raise ValueError("k, v must be (B, H_kv, Tk, D)")
    if D < 1:
        raise ValueError("D must be >= 1")
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be >= 1")
    if H_kv == 0 or H % H_kv:
        raise ValueError("H must be a multiple of H_kv")
    G = H // H_kv
    c = (1.0 / math.sqrt(D) if scale is None else scale) * LOG2E  # base-2 logits
    work = torch.float64 if q.dtype == torch.float64 else torch.float32

    m = torch.full((B, H, Tq), -math.inf, dtype=work)   # running max of base-2 logits
    l = torch.zeros(B, H, Tq, dtype=work)
    acc = torch.zeros(B, H, Tq, D, dtype=work)
    for j0 in range(0, Tk, block_k):
        j1 = min(j0 + block_k, Tk)
        kt, vt = k[:, :, j0:j1].to(work), v[:, :, j0:j1].to(work)
        for i0 in range(0, Tq, block_q):
            i1 = min(i0 + block_q, Tq)
            if causal and j0 > i1 - 1 + Tk - Tq:
                continue  # every key of this tile is in the future of every query of the tile
            qt = q[:, :, i0:i1].to(work).view(B, H_kv, G, i1 - i0, D)
            s = torch.einsum("bhgqd,bhkd->bhgqk", qt, kt) * c
            if causal:
                allowed = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None] + (Tk - Tq)
                s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=work))
            m_old = m[:, :, i0:i1].view(B, H_kv, G, i1 - i0)
            m_new = torch.maximum(m_old, s.amax(-1))
            base = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp2(s - base.unsqueeze(-1))
            corr = torch.exp2(m_old - base)
            l_tile = l[:, :, i0:i1].view(B, H_kv, G, i1 - i0)
            l[:, :, i0:i1] = (l_tile * corr + p.sum(-1)).reshape(B, H, i1 - i0)
            acc_tile = acc[:, :, i0:i1].view(B, H_kv, G, i1 - i0, D)
            acc[:, :, i0:i1] = (acc_tile * corr.unsqueeze(-1)
                                + torch.einsum("bhgqk,bhkd->bhgqd", p, vt)).reshape(B, H, i1 - i0, D)
            m[:, :, i0:i1] = m_new.reshape(B, H, i1 - i0)
    has_keys = l > 0
    out = acc / torch.where(has_keys, l, torch.ones_like(l)).unsqueeze(-1)
    lse = torch.where(has_keys, (m + torch.log2(torch.where(has_keys, l, torch.ones_like(l)))) / LOG2E,
                      torch.full_like(l, -math.inf))
    return out.to(q.dtype), lse.to(torch.float32)


def combine_partials(outs, lses):
    if outs.ndim != 4 or lses.ndim != 3 or tuple(outs.shape[:3]) != tuple(lses.shape):
        raise ValueError("shape mismatch")
    if outs.shape[0] == 0:
        raise ValueError("need at least one split")
    lse = torch.logsumexp(lses, dim=0)                    # -inf when every split is empty
    finite = torch.isfinite(lse)
    w = torch.exp(lses - torch.where(finite, lse, torch.zeros_like(lse)))
    w = w.masked_fill(torch.isneginf(lses), 0.0)
    safe_outs = outs.masked_fill(torch.isneginf(lses).unsqueeze(-1), 0.0)
    out = (w.unsqueeze(-1) * safe_outs).sum(0)
    return out.to(outs.dtype), lse


def flash_decode(q, k_cache, v_cache, block_table, seq_lens, *, num_splits, scale=None):
    if q.ndim != 3 or k_cache.ndim != 4 or v_cache.ndim != 4 or tuple(k_cache.shape) != tuple(v_cache.shape):
        raise ValueError("bad shapes")
    B, H, D = q.shape
    NB, BS, H_kv, _ = k_cache.shape
    if k_cache.shape[3] != D or D < 1 or H_kv == 0 or H % H_kv:
        raise ValueError("bad head dims or head counts")
    if block_table.dtype not in (torch.int32, torch.int64) or seq_lens.dtype not in (torch.int32, torch.int64):
        raise ValueError("index tensors must be int32 or int64")
    if block_table.ndim != 2 or block_table.shape[0] != B or tuple(seq_lens.shape) != (B,):
        raise ValueError("bad index shapes")
    MB = block_table.shape[1]
    if B and not bool(((seq_lens >= 0) & (seq_lens <= MB * BS)).all()):
        raise ValueError("seq_lens out of range")
    if num_splits < 1:
        raise ValueError("num_splits must be >= 1")
    S, G, T = num_splits, H // H_kv, MB * BS
    c = (1.0 / math.sqrt(D) if scale is None else scale) * LOG2E
    work = torch.float64 if q.dtype == torch.float64 else torch.float32

    n = seq_lens.to(torch.int64)
    t = torch.arange(T)
    owned = t[None, :] < n[:, None]                                        # (B, T)
    block_ids = torch.where(owned.view(B, MB, BS)[:, :, 0], block_table.to(torch.int64), 0)
    k = k_cache[block_ids].view(B, T, H_kv, D).to(work).masked_fill(~owned[:, :, None, None], 0.0)
    v = v_cache[block_ids].view(B, T, H_kv, D).to(work).masked_fill(~owned[:, :, None, None], 0.0)
    s = torch.einsum("bkgd,btkd->bkgt", q.to(work).view(B, H_kv, G, D), k) * c   # (B, H_kv, G, T)

    # split of token t: the first n % S splits hold n // S + 1 tokens, the others n // S
    size, big = n // S, n % S
    cut = big * (size + 1)
    split = torch.where(t[None, :] < cut[:, None], t[None, :] // (size + 1)[:, None],
                        big[:, None] + (t[None, :] - cut[:, None]) // size.clamp(min=1)[:, None])
    member = F.one_hot(split.clamp(0, S - 1), S).bool() & owned[:, :, None]   # (B, T, S)
    s = s[..., None].masked_fill(~member[:, None, None], -math.inf)            # (B, H_kv, G, T, S)
    top = s.amax(3)
    top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
    p = torch.exp2(s - top[:, :, :, None])
    l = p.sum(3)                                                               # (B, H_kv, G, S)
    o = torch.einsum("bkgts,btkd->sbkgd", p, v) / l.clamp(min=1e-30).permute(3, 0, 1, 2)[..., None]
    part_lse = torch.where(l > 0, (top + torch.log2(l.clamp(min=1e-30))) / LOG2E, torch.full_like(l, -math.inf))
    out, _ = combine_partials(o.reshape(S, B, H, D), part_lse.permute(3, 0, 1, 2).reshape(S, B, H))
    return out.to(q.dtype)
