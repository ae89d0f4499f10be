"""Multi-head attention from scratch.

Shape legend: B batch, H query heads, H_kv key/value heads, Tq queries, Tk keys,
D head dim, Dv value head dim. Use PyTorch tensor operations; do not call
torch.nn.functional.scaled_dot_product_attention or torch.nn.MultiheadAttention.

Level 1  attention(q, k, v, attn_mask=None, is_causal=False, scale=None)
Level 2  MultiHeadAttention(d_model, n_heads, n_kv_heads=None, bias=False)  (GQA)
Level 3  KVCache, and MultiHeadAttention.forward(..., kv_cache=cache) for decoding

Example (level 1): B = H = 1, D = 1, scale = 1, q = [[1.]], k = [[0.], [1.]],
    v = [[10.], [20.]]  ->  output [[17.311]]. With attn_mask=[[True, False]] the query sees
    key 0 only: output [[10.]].
"""

from __future__ import annotations

from torch import Tensor, nn


def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None,
              is_causal: bool = False, scale: float | None = None) -> Tensor:
    """Scaled dot-product attention, from scratch.

    Args:
        q: (B, H, Tq, D) floating.
        k: (B, H, Tk, D), same dtype as q.
        v: (B, H, Tk, Dv), same dtype as q.
        attn_mask: None, or a tensor broadcastable to (B, H, Tq, Tk), e.g. (Tq, Tk) or
            (B, 1, 1, Tk). bool: True means "this query may attend this key". Floating: added
            to the scaled scores (0 keeps a key, -inf removes it).
        is_causal: each query attends only the keys at or before its position; the queries
            are the LAST Tq positions of the key sequence (bottom-right alignment, as
            torch.nn.attention.bias.causal_lower_right, not SDPA's top-left is_causal).
        scale: multiplies q kᵀ; None means the standard default for head dim D (0.0 is a
            scale, not "not given").

    Returns:
        (B, H, Tq, Dv), dtype of q. Inputs are not modified.

    Rules:
        - A query row with no key it may attend (all False in a bool mask, all -inf in a float
          mask, or cut entirely by the causal rule when Tq > Tk) outputs zeros, never NaN.
        - Stable for large logits (scores of 1e4 and more give finite outputs).
        - float16 / bfloat16 inputs: the whole score path (q kᵀ, scale, a float mask, the
          softmax) in float32; return the input dtype.

    Raises:
        ValueError: both attn_mask and is_causal=True; a mask neither bool nor floating;
            shapes that do not fit (q, k, v not 4-D, different B or H, q and k with
            different D, k and v with different Tk, a mask that does not broadcast to
            (B, H, Tq, Tk)).
    """
    # TODO level 1: validate, compute scores, mask, stable softmax, weighted sum of v.
    raise NotImplementedError


class KVCache:
    """Keys and values of every token seen so far, for one attention layer (level 3).

    Starts empty (seq_len == 0). Invariant: the cached keys and values are the
    concatenation, along time, of everything passed to update(), in order.
    """

    def __init__(self) -> None:
        # TODO level 3: an empty cache.
        raise NotImplementedError

    def update(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Append new keys and values and return everything cached.

        Args:
            k_new: (B, H_kv, T_new, D).
            v_new: (B, H_kv, T_new, Dv).

        Returns:
            (k, v): (B, H_kv, seq_len, D) and (B, H_kv, seq_len, Dv), seq_len counting the new
            tokens.
        """
        # TODO level 3: append along the time axis.
        raise NotImplementedError

    @property
    def seq_len(self) -> int:
        """Number of tokens cached so far (an int; 0 for a new cache)."""
        # TODO level 3
        raise NotImplementedError


class MultiHeadAttention(nn.Module):
    """Multi-head attention with grouped-query attention (level 2).

    head_dim = d_model // n_heads. Parameters (exact names, nn.Linear each):
        q_proj: Linear(d_model, n_heads * head_dim, bias=bias)
        k_proj: Linear(d_model, n_kv_heads * head_dim, bias=bias)
        v_proj: Linear(d_model, n_kv_heads * head_dim, bias=bias)
        o_proj: Linear(n_heads * head_dim, d_model, bias=bias)
    Projection outputs are split head-major: features [h * head_dim, (h + 1) * head_dim)
    belong to head h. n_kv_heads defaults to n_heads. Consecutive query heads share a KV
    head: with 8 query heads and 2 KV heads, heads 0-3 read KV head 0, heads 4-7 KV head 1.

    Raises:
        ValueError: d_model % n_heads != 0 or n_heads % n_kv_heads != 0.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None,
                 bias: bool = False) -> None:
        super().__init__()
        # TODO level 2: validate; create q_proj, k_proj, v_proj, o_proj.
        raise NotImplementedError

    def forward(self, x: Tensor, attn_mask: Tensor | None = None, is_causal: bool = False,
                kv_cache: KVCache | None = None) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model).

        attn_mask and is_causal as in attention(), over all keys the queries see. With
        kv_cache (level 3), x holds only the new T tokens: project x, append its keys and
        values to the cache, and attend over everything cached (Tk = cache.seq_len after the
        update; an attn_mask is then (..., T, Tk)). Running a prompt and then its continuation
        token by token with is_causal=True equals one causal forward over the whole sequence.
        A call that raises (e.g. a mask attention() rejects) leaves the cache as it was.
        """
        # TODO level 2: project, split heads, (level 3: check the mask against every key, then
        # update the cache), share KV heads, attention, merge heads, output projection.
        raise NotImplementedError
