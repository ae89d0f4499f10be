"""Rotary position embeddings (RoPE), as Llama, GPT-NeoX and GPT-J apply them.

RoPE encodes the absolute position of a token by rotating pairs of features of a query or
key by angles that grow with the position, one frequency per pair.

Example: apply_rope(torch.tensor([[1., 2., 3., 4.]]), torch.tensor([1]))
    -> [[-1.9841, 1.9599, 2.4624, 4.0198]]

Levels:
    1. rope_inv_freq without scaling; apply_rope with the rotate-half layout.
    2. apply_rope(interleaved=True) (GPT-J pairs) and rotary_dim (partial rotary).
    3. scaling ("linear", "llama3") and RotaryEmbedding, a cos/sin cache that grows.

Shapes: B batch, H heads, T time, D head dim.
Constraints: angles in float32 (even for bf16/fp16 inputs); output in x's dtype; never
modify the inputs. Vectorise (no Python loop over batch, heads or time).
"""

from __future__ import annotations

import math  # noqa: F401  (for your solution)

import torch  # noqa: F401  (for your solution)
from torch import Tensor


def rope_inv_freq(dim: int, base: float = 10000.0, scaling: dict | None = None) -> Tensor:
    """Inverse frequencies of RoPE: (dim // 2,) float32, the standard RoFormer frequencies
    with `base` as theta, one per pair of features, computed as Hugging Face does.

    Level 3 adds `scaling`:
      * None: no scaling.
      * {"type": "linear", "factor": f}: position interpolation (position f * p turns as
        position p did without scaling).
      * {"type": "llama3", "factor": f, "low_freq_factor": lo, "high_freq_factor": hi,
        "original_max_position_embeddings": L}: the Llama 3.1 rule of Hugging Face's
        `_compute_llama3_parameters`: by wavelength 2 * pi / w against L, short wavelengths
        (< L / hi) kept, long ones (> L / lo) scaled as linear scaling would, a linear
        blend in L / wavelength in between.

    Raises ValueError: odd dim; a scaling type other than "linear" / "llama3" (or no
    "type" key); missing keys; factor <= 0; low_freq_factor >= high_freq_factor.
    """
    # TODO level 1: validate dim; the (dim // 2,) float32 frequencies.
    # TODO level 3: validate `scaling` and apply "linear" or "llama3".
    raise NotImplementedError


def apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0, *,
               interleaved: bool = False, rotary_dim: int | None = None,
               scaling: dict | None = None) -> Tensor:
    """Rotate the features of x by angles positions * rope_inv_freq(...).

    x: (..., T, D) floating (float32, float64, float16 or bfloat16), e.g. (B, H, T, D).
    positions: integer tensor of absolute positions (decoding passes the offset positions
        of the new tokens), either
          * (T,): the same positions for every leading index of x, or
          * (B, T): one row per batch element; x must be (B, T, D) or (B, H, T, D), and
            the row is shared by all heads.
    base: the RoPE base (theta).
    interleaved (level 2): False = rotate-half layout of Llama / GPT-NeoX, feature i
        paired with feature i + D/2, turned counterclockwise. True = GPT-J layout, adjacent
        features paired: (x[0], x[1]), (x[2], x[3]), ...
    rotary_dim (level 2): R, default D. Only x[..., :R] is rotated, as a head of R features
        would be; x[..., R:] passes through unchanged.
    scaling (level 3): as in rope_inv_freq.

    Returns a new tensor of x's shape and dtype. Angles and cos/sin are computed in
    float32. x and positions are not modified.

    Raises ValueError: odd rotary_dim, rotary_dim > D, positions whose last dimension is
    not T.
    """
    # TODO level 1: check positions; angles in float32; rotate the pairs of the
    #               rotate-half layout; cast back to x.dtype.
    # TODO level 2: interleaved pairs; rotary_dim with pass-through features.
    raise NotImplementedError


class RotaryEmbedding:
    """Level 3. RoPE (rotate-half layout) with a cos/sin table that grows on demand.

    emb = RotaryEmbedding(dim, base, scaling); emb(x, positions) equals
    apply_rope(x, positions, base, rotary_dim=dim, scaling=scaling): x's last dimension D
    may exceed dim (features dim.. pass through). The table holds cos/sin for positions
    0 .. cached_positions - 1 and is extended only when a call needs a position beyond it.
    """

    def __init__(self, dim: int, base: float = 10000.0, scaling: dict | None = None) -> None:
        # TODO level 3: frequencies and an empty (or small) cos/sin table.
        raise NotImplementedError

    def __call__(self, x: Tensor, positions: Tensor) -> Tensor:
        """x (..., T, D) with D >= dim; positions (T,) or (B, T) as in apply_rope.
        Returns a new tensor of x's shape and dtype. ValueError when dim > D."""
        # TODO level 3: grow the table if needed, look up rows by position, rotate.
        raise NotImplementedError

    @property
    def cached_positions(self) -> int:
        """Length of the cos/sin table built so far (positions 0 .. cached_positions - 1)."""
        # TODO level 3
        raise NotImplementedError
