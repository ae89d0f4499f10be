"""Correct alternative: masks applied with torch.where on a bool "allowed" tensor and
torch.softmax, fully masked rows zeroed afterwards (no additive mask, no manual max); forward
stores the new keys and values in the cache only once attention() has returned."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

_HALF_DTYPES = (torch.float16, torch.bfloat16)


def _check_inputs(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None,
                  is_causal: bool) -> None:
    """ValueError for arguments attention() does not accept."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be 4-D (B, H, T, D); got {q.dim()}-D, {k.dim()}-D, "
                         f"{v.dim()}-D")
    if not (q.shape[:2] == k.shape[:2] == v.shape[:2]):
        raise ValueError(f"q, k, v must share B and H; got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the head dim D; got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[2] != v.shape[2]:
        raise ValueError(f"k and v must have the same number of keys; got {k.shape[2]} and "
                         f"{v.shape[2]}")
    if attn_mask is None:
        return
    if is_causal:
        raise ValueError("pass either attn_mask or is_causal=True, not both")
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise ValueError(f"attn_mask must be bool or floating, got {attn_mask.dtype}")
    full = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    # By hand: torch.broadcast_shapes imports sympy on its first call (a third of a second).
    fits = attn_mask.dim() <= 4 and all(m in (1, f) for m, f in
                                        zip(reversed(attn_mask.shape), reversed(full)))
    if not fits:
        raise ValueError(f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to "
                         f"(B, H, Tq, Tk) = {full}")


def causal_lower_right(num_queries: int, num_keys: int, device: torch.device | None = None) -> Tensor:
    """(Tq, Tk) bool: query i may attend key j iff j <= i + (Tk - Tq).

    The queries are the last Tq positions of the key sequence, so a single decode token sees
    every key, and when Tq > Tk the first Tq - Tk queries see none."""
    # Comparing positions is much faster on CPU than tril of a bool tensor.
    query_pos = torch.arange(num_queries, device=device) + (num_keys - num_queries)
    key_pos = torch.arange(num_keys, device=device)
    return key_pos[None, :] <= query_pos[:, None]  # (Tq, Tk)


def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None,
              is_causal: bool = False, scale: float | None = None) -> Tensor:
    """softmax(q kᵀ · scale + mask) v.

    q (B, H, Tq, D); k (B, H, Tk, D); v (B, H, Tk, Dv) -> (B, H, Tq, Dv), dtype of q.
    attn_mask broadcastable to (B, H, Tq, Tk): bool (True = may attend) or float (added to the
    scores). Rows with no key they may attend output zeros. Half-precision inputs are
    computed in float32 (scores and softmax) and the result cast back."""
    _check_inputs(q, k, v, attn_mask, is_causal)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    compute_dtype = torch.float32 if q.dtype in _HALF_DTYPES else q.dtype
    qc, kc, vc = (t.to(compute_dtype) for t in (q, k, v))
    scores = torch.matmul(qc, kc.transpose(-1, -2)) * scale  # (B, H, Tq, Tk)
    allowed = torch.ones_like(scores, dtype=torch.bool)
    if is_causal:
        allowed = allowed & causal_lower_right(q.shape[2], k.shape[2], device=q.device)
    elif attn_mask is not None and attn_mask.dtype == torch.bool:
        allowed = allowed & attn_mask
    elif attn_mask is not None:
        scores = scores + attn_mask.to(compute_dtype)
        allowed = allowed & (scores != float("-inf"))
    scores = torch.where(allowed, scores, float("-inf"))
    has_key = allowed.any(dim=-1, keepdim=True)  # (B, H, Tq, 1)
    # Rows with no key: softmax of zeros (uniform), then zeroed by the where below.
    weights = torch.softmax(torch.where(has_key, scores, 0.0), dim=-1)
    weights = torch.where(allowed, weights, 0.0)
    return torch.matmul(weights, vc).to(q.dtype)


class KVCache:
    """Keys and values of every token decoded so far, for one attention layer.

    Invariants:
    - `k` and `v` are None together (empty cache) or both (B, H_kv, seq_len, D/Dv) tensors
      with the same B, H_kv and seq_len;
    - `seq_len` is the total number of tokens appended, in the order they were appended.
    """

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def update(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Append k_new, v_new (B, H_kv, T_new, D) along time; return all (k, v) cached."""
        self.k, self.v = self.appended(k_new, v_new)
        return self.k, self.v

    def appended(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """What update would cache, (k, v) with k_new, v_new appended; nothing is stored."""
        if self.k is None or self.v is None:
            return k_new, v_new
        # (B, H_kv, seq_len + T_new, D)
        return torch.cat([self.k, k_new], dim=2), torch.cat([self.v, v_new], dim=2)

    @property
    def seq_len(self) -> int:
        """Number of tokens cached so far (0 when empty)."""
        return 0 if self.k is None else int(self.k.shape[2])


class MultiHeadAttention(nn.Module):
    """Multi-head attention with grouped-query attention (GQA).

    Query head h reads key/value head h // (n_heads // n_kv_heads): consecutive query heads
    share a KV head, as `repeat_interleave` along the head axis lays them out.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None,
                 bias: bool = False) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads < 1 or n_kv_heads < 1:
            raise ValueError(f"n_heads and n_kv_heads must be positive; got {n_heads}, {n_kv_heads}")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        self.q_proj = nn.Linear(d_model, n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(n_heads * self.head_dim, d_model, bias=bias)

    def _split_heads(self, x: Tensor, num_heads: int) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, num_heads, self.head_dim).transpose(1, 2)  # (B, heads, T, D)

    def forward(self, x: Tensor, attn_mask: Tensor | None = None, is_causal: bool = False,
                kv_cache: KVCache | None = None) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model). With kv_cache, x holds the new tokens only;
        attn_mask then covers all cached keys: (..., T, kv_cache.seq_len + T)."""
        B, T, _ = x.shape
        q = self._split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, D)
        k = self._split_heads(self.k_proj(x), self.n_kv_heads)  # (B, H_kv, T, D)
        v = self._split_heads(self.v_proj(x), self.n_kv_heads)
        if kv_cache is not None:
            k, v = kv_cache.appended(k, v)  # (B, H_kv, Tk, D), Tk = cached + T
        group_size = self.n_heads // self.n_kv_heads
        k_all, v_all = k, v
        k = k.repeat_interleave(group_size, dim=1)  # (B, H, Tk, D)
        v = v.repeat_interleave(group_size, dim=1)
        y = attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)  # (B, H, T, D)
        if kv_cache is not None:
            # Stored only once attention() has accepted the call: a rejected one stores nothing.
            kv_cache.k, kv_cache.v = k_all, v_all
        y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)  # (B, T, H*D)
        return self.o_proj(y)
