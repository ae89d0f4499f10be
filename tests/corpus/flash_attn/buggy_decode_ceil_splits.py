"""Splits with chunks of ceil(n / num_splits): range sizes can differ by more than one."""

import math

import torch


def _check_heads(H, H_kv):
    if H_kv < 1 or H % H_kv != 0:
        raise ValueError(f"H={H} is not a multiple of H_kv={H_kv}")


def flash_attention(q, k, v, *, causal=False, scale=None, block_q=64, block_k=64):
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be 4-D")
    B, H, Tq, D = q.shape
    if k.shape != v.shape or k.shape[0] != B or k.shape[3] != D:
        raise ValueError("k and v must be (B, H_kv, Tk, D)")
    if D < 1 or block_q < 1 or block_k < 1:
        raise ValueError("D, block_q and block_k must be >= 1")
    H_kv, Tk = k.shape[1], k.shape[2]
    _check_heads(H, H_kv)
    G = H // H_kv
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    offset = Tk - Tq

    out = torch.empty(B, H, Tq, D, dtype=work)
    lse = torch.empty(B, H, Tq, dtype=torch.float32)
    for i0 in range(0, Tq, block_q):
        i1 = min(i0 + block_q, Tq)
        n = i1 - i0
        qt = q[:, :, i0:i1].to(work).reshape(B, H_kv, G * n, D)
        rows = torch.arange(i0, i1).repeat(G)
        m = torch.full((B, H_kv, G * n, 1), -math.inf, dtype=work)
        l = torch.zeros(B, H_kv, G * n, 1, dtype=work)
        acc = torch.zeros(B, H_kv, G * n, D, dtype=work)
        k_stop = min(Tk, max(0, i1 + offset)) if causal else Tk
        for j0 in range(0, k_stop, block_k):
            j1 = min(j0 + block_k, Tk)
            kt = k[:, :, j0:j1].to(work)
            vt = v[:, :, j0:j1].to(work)
            s = torch.matmul(qt, kt.transpose(-1, -2)) * scale
            if causal:
                cols = torch.arange(j0, j1)
                s = s.masked_fill(cols[None, :] > rows[:, None] + offset, -math.inf)
            m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
            m_safe = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
            p = torch.exp(s - m_safe)
            alpha = torch.exp(m - m_safe)
            l = alpha * l + p.sum(dim=-1, keepdim=True)
            acc = alpha * acc + torch.matmul(p, vt)
            m = m_new
        o = torch.where(l > 0, acc / l, torch.zeros_like(acc))
        row_lse = torch.where(l > 0, m + torch.log(l), torch.full_like(l, -math.inf))
        out[:, :, i0:i1] = o.reshape(B, H, n, D)
        lse[:, :, i0:i1] = row_lse.reshape(B, H, n).float()
    return out.to(q.dtype), lse


def combine_partials(outs, lses):
    if outs.dim() != 4 or lses.dim() != 3 or outs.shape[:3] != lses.shape or outs.shape[0] < 1:
        raise ValueError("outs must be (S, B, H, D) and lses (S, B, H) with S >= 1")
    m = lses.max(dim=0).values
    m = torch.where(m == -math.inf, torch.zeros_like(m), m)
    w = torch.exp(lses - m)
    total = w.sum(dim=0)
    num = torch.where(lses[..., None] == -math.inf, torch.zeros_like(outs), w[..., None] * outs).sum(dim=0)
    out = torch.where(total[..., None] > 0, num / total[..., None], torch.zeros_like(num))
    lse = torch.where(total > 0, m + torch.log(total), torch.full_like(total, -math.inf))
    return out.to(outs.dtype), lse.to(lses.dtype)


def flash_decode(q, k_cache, v_cache, block_table, seq_lens, *, num_splits, scale=None):
    if q.dim() != 3 or k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError("q must be (B, H, D) and the caches (NB, BS, H_kv, D)")
    B, H, D = q.shape
    NB, BS, H_kv, Dc = k_cache.shape
    if Dc != D or D < 1:
        raise ValueError("q and the caches must share D >= 1")
    _check_heads(H, H_kv)
    for name, t in (("block_table", block_table), ("seq_lens", seq_lens)):
        if t.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"{name} must be int32 or int64")
    if block_table.dim() != 2 or block_table.shape[0] != B or seq_lens.shape != (B,):
        raise ValueError("block_table must be (B, max_blocks) and seq_lens (B,)")
    MB = block_table.shape[1]
    if bool((seq_lens < 0).any()) or bool((seq_lens > MB * BS).any()):
        raise ValueError("seq_lens out of range")
    if num_splits < 1:
        raise ValueError("num_splits must be >= 1")
    G = H // H_kv
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    work = torch.float64 if q.dtype == torch.float64 else torch.float32

    lens = seq_lens.long()
    T = MB * BS
    num_used = (lens + BS - 1) // BS
    table = block_table.long().masked_fill(torch.arange(MB)[None, :] >= num_used[:, None], 0)
    pos = torch.arange(T)
    valid = (pos[None, :] < lens[:, None])[:, :, None, None]
    keys = k_cache[table].reshape(B, T, H_kv, D).to(work)
    vals = v_cache[table].reshape(B, T, H_kv, D).to(work)
    keys = torch.where(valid, keys, torch.zeros_like(keys))
    vals = torch.where(valid, vals, torch.zeros_like(vals))
    qg = q.to(work).reshape(B, H_kv, G, D)
    scores = torch.einsum("bhgd,bthd->bhgt", qg, keys) * scale

    base, rem = lens // num_splits, lens % num_splits
    outs, lses = [], []
    for s in range(num_splits):
        chunk = (lens + num_splits - 1) // num_splits
        start = torch.minimum(s * chunk, lens)
        size = torch.minimum(chunk, lens - start)
        in_range = (pos[None, :] >= start[:, None]) & (pos[None, :] < (start + size)[:, None])
        sc = scores.masked_fill(~in_range[:, None, None, :], -math.inf)
        m = sc.max(dim=-1, keepdim=True).values
        m = torch.where(m == -math.inf, torch.zeros_like(m), m)
        p = torch.exp(sc - m)
        l = p.sum(dim=-1)
        o = torch.einsum("bhgt,bthd->bhgd", p, vals)
        o = torch.where(l[..., None] > 0, o / l[..., None], torch.zeros_like(o))
        part_lse = torch.where(l > 0, m[..., 0] + torch.log(l), torch.full_like(l, -math.inf))
        outs.append(o.reshape(B, H, D))
        lses.append(part_lse.reshape(B, H))
    out, _ = combine_partials(torch.stack(outs), torch.stack(lses))
    return out.to(q.dtype)
