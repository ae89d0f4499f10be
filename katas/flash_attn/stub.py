"""FlashAttention in PyTorch: tiled attention with an online softmax, the split-K merge, and
FlashDecoding over a paged KV cache.

Shape legend: B batch, H query heads, H_kv key/value heads (consecutive query heads share a
KV head), Tq queries, Tk keys, D head dim, S splits, NB cache blocks, BS block size,
MB max blocks per sequence. Plain tensor operations: no scaled_dot_product_attention.

Level 1  flash_attention(q, k, v, *, causal=False, scale=None, block_q=64, block_k=64)
Level 2  the same, skipping causal tiles and without K/V copies per query head;
         combine_partials(outs, lses)
Level 3  flash_decode(q, k_cache, v_cache, block_table, seq_lens, *, num_splits, scale=None)

Example (level 1): q = [[1]], k = [[0], [1], [2]], v = [[10], [20], [30]], scale=1,
block_k=2 (B = H = 1, D = 1): out = 25.752, lse = ln(1 + e + e^2) = 2.4076.
"""

from __future__ import annotations

from torch import Tensor


def flash_attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False,
                    scale: float | None = None, block_q: int = 64,
                    block_k: int = 64) -> tuple[Tensor, Tensor]:
    """Attention over tiles of block_q queries x block_k keys with an online softmax.

    Args:
        q: (B, H, Tq, D), float16 / bfloat16 / float32 / float64.
        k: (B, H_kv, Tk, D), same dtype; H % H_kv == 0.
        v: (B, H_kv, Tk, D), same shape as k (v's last dim equals D).
        causal: bottom-right aligned: the Tq queries are the last Tq positions of the keys.
        scale: multiplies q kᵀ; None means the standard default (0.0 is a valid scale).
        block_q, block_k: tile sizes (>= 1); tiles start at 0, the last may be partial.

    Returns:
        (out, lse): out (B, H, Tq, D) in q's dtype; lse (B, H, Tq) float32, the natural log of
        the sum of exp of the scaled scores each row may attend. A row with nothing to attend
        has out 0 and lse -inf (never NaN).

    Rules:
        - Math in float32 for half and float32 inputs (float64 inputs may use float64).
        - An online softmax over key tiles; inputs never modified.
        - Memory: apart from the outputs and float32/float64 tensors of exactly an output's
          shape ((B, H, Tq, D), (B, H, Tq) or (B, H, Tq, 1)), no tensor created during the
          call holds more than B·H·(block_q·block_k + (block_q + block_k)·D) elements.
        - Level 2: scores and values via matmuls, each tile pair once; causal: a tile pair
          the mask hides entirely costs no FLOPs, a visible one is computed at its full tile
          size; GQA: never copy K/V tiles per query head.

    Raises:
        ValueError: q, k, v not 4-D; different B; q/k with different D; k and v of different
            shapes; D < 1; block_q or block_k < 1; H % H_kv != 0.
    """
    # TODO level 1: validate; loop over query tiles, then key tiles, with an online softmax.
    # TODO level 2: skip the tiles the causal mask hides; no K/V copies per query head.
    raise NotImplementedError


def combine_partials(outs: Tensor, lses: Tensor) -> tuple[Tensor, Tensor]:
    """Merge S partial attentions over disjoint key sets (level 2).

    Args:
        outs: (S, B, H, D) float32 (or float64), S >= 1. A split whose lse is -inf may hold
            anything here, NaN included.
        lses: (S, B, H), -inf for a split with no key; never NaN or +inf.

    Returns:
        (out (B, H, D), lse (B, H)) in the dtypes of outs and lses: the exact attention over
        the union of the splits' keys. All splits -inf: out 0, lse -inf. Stable for |lse| up
        to 1e4.

    Raises:
        ValueError: S < 1, outs not 4-D, lses not 3-D, or outs.shape[:3] != lses.shape.
    """
    # TODO level 2
    raise NotImplementedError


def flash_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
                 seq_lens: Tensor, *, num_splits: int, scale: float | None = None) -> Tensor:
    """One query per sequence over a paged KV cache, split-K (level 3).

    Args:
        q: (B, H, D) floating.
        k_cache, v_cache: (NB, BS, H_kv, D), one shape, q's dtype.
        block_table: (B, MB) int32 or int64; token t of sequence b lives in block
            block_table[b, t // BS], slot t % BS. Entries past a sequence's last block may
            hold any value; cache slots no sequence owns may hold anything (NaN too).
        seq_lens: (B,) int32 or int64, 0 <= seq_lens[b] <= MB * BS.
        num_splits: >= 1. Each sequence's keys are cut into num_splits contiguous ranges whose
            sizes differ by at most one (empty ranges when seq_lens[b] < num_splits).
        scale: as in flash_attention.

    Returns:
        (B, H, D) in q's dtype: dense attention over each sequence's own tokens; zeros when
        seq_lens[b] == 0.

    Rules:
        - Reduce each range to a partial (out, lse); merge all partials with ONE call of the
          module-level combine_partials(outs, lses), looked up at call time, with
          (num_splits, B, H, D) float32 partials (float64 allowed for float64 inputs).
        - Math in float32 for half inputs, as in level 1.
        - Vectorised: the same number of tensor operations for B = 2 and 8 and for lengths
          64 and 512 (loops over splits are fine).

    Raises:
        ValueError: index tensors not int32/int64 or of the wrong shape; a length outside
            [0, MB * BS]; num_splits < 1; q not 3-D or caches not 4-D; caches of different
            shapes; q and caches with different D; D < 1; H % H_kv != 0.
    """
    # TODO level 3: read each sequence's keys through the table, ignore what it does not own,
    # reduce each split range to (out, lse), then call combine_partials once.
    raise NotImplementedError
