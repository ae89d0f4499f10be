"""LoRA: a low-rank adapter on a frozen linear layer, merge/unmerge, and a multi-tenant
batched layer that serves many adapters in one batch.

Shapes: N rows, T tokens per row, IN = in_features, OUT = out_features, r = adapter rank.

Worked example (Level 1 and 2). base: nn.Linear(2, 2, bias=False) with weight = I; r = 1,
alpha = 2 (scaling = alpha / r = 2); after some training lora_A = [[1, 1]], lora_B = [[1], [0]].
    x = [1, 2]:  base(x) = [1, 2];  x @ A.T = [3];  @ B.T = [3, 0];  * 2 = [6, 0]
    forward(x) = [7, 2]
    delta_weight() = 2 * B @ A = [[2, 2], [0, 0]];  after merge() base.weight = [[3, 2], [0, 1]]
    and forward(x) = base(x) = [7, 2] again.

Levels:
    1. LoRALinear: __init__ (freeze base, init A and B) and forward (with dropout).
    2. delta_weight, merge, unmerge, merged, and rsLoRA scaling.
    3. MultiLoRALinear: many adapters, one batch, vectorised (no Python loop over rows or
       adapters).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update (PEFT's LoRA semantics).

    forward(x) = base(x) + (dropout(x) @ lora_A.T @ lora_B.T) * scaling

    Attributes (state_dict names are part of the API: "lora_A", "lora_B", "base.weight",
    "base.bias"):
        base:    the wrapped nn.Linear, frozen (weight and bias: requires_grad False).
        lora_A:  nn.Parameter (r, in_features), nn.init.kaiming_uniform_(a=math.sqrt(5)).
        lora_B:  nn.Parameter (out_features, r), zeros, so the layer starts equal to base.
                 lora_A and lora_B have base.weight's dtype and device.
        scaling: float, alpha / r (alpha / sqrt(r) when use_rslora).
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0,
                 use_rslora: bool = False) -> None:
        """Wrap `base` (used in place, not copied) and freeze it.

        Args:
            base: nn.Linear(in_features, out_features), with or without bias.
            r: adapter rank, >= 1.
            alpha: scaling numerator (scaling = alpha / r, or alpha / sqrt(r) with rsLoRA).
            dropout: probability of zeroing elements of the adapter's input, in training
                mode only (nn.Dropout semantics). The base path never sees dropout.
            use_rslora: Level 2. Rank-stabilised scaling alpha / sqrt(r).

        Raises:
            ValueError: r < 1.
        """
        super().__init__()
        # TODO: freeze base; create lora_A (kaiming uniform) and lora_B (zeros); scaling.
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """x (..., in_features) -> (..., out_features), x's dtype.

        base(x) + (dropout(x) @ lora_A.T @ lora_B.T) * scaling; when merged, base(x) only
        (the update already lives in base.weight). Does not modify x.
        """
        # TODO
        raise NotImplementedError

    # ------------------------------------------------------------------ Level 2

    def delta_weight(self) -> Tensor:
        """The update as a dense matrix: scaling * lora_B @ lora_A, (out_features,
        in_features), base.weight's dtype. Its rank is at most r."""
        # TODO
        raise NotImplementedError

    def merge(self) -> None:
        """Fold the update into the base: base.weight += delta_weight(). No-op if already
        merged. The base stays frozen (no autograd history on base.weight)."""
        # TODO
        raise NotImplementedError

    def unmerge(self) -> None:
        """Undo merge: base.weight -= delta_weight() (restores the weight up to float
        rounding). No-op if not merged."""
        # TODO
        raise NotImplementedError

    @property
    def merged(self) -> bool:
        """True between merge() and the next unmerge()."""
        # TODO
        raise NotImplementedError


class MultiLoRALinear(nn.Module):
    """Level 3. One frozen base, many adapters of different ranks, one mixed batch
    (S-LoRA / Punica BGMV).

    Row n of a batch uses the adapter in slot adapter_ids[n] (-1: base only):
        y_n = base(x_n) + scaling_a * x_n @ A_a.T @ B_a.T,  a = adapter_ids[n],
        scaling_a = alpha_a / r_a   (no dropout, no rsLoRA here).

    Slots: add_adapter returns a slot index (an int >= 0). Slots of loaded adapters are
    distinct. remove_adapter frees the slot; add_adapter reuses a freed slot before opening a
    new one, so every slot index is below the largest number of adapters ever loaded at once.
    Which free slot is reused is up to you. A freed slot is unknown to forward until
    add_adapter returns it again.
    """

    def __init__(self, base: nn.Linear, max_rank: int) -> None:
        """Wrap `base` (frozen) for adapters of rank 1..max_rank."""
        super().__init__()
        # TODO: keep the adapters' weights stacked (zero-padded to max_rank) so forward can
        # gather them by slot in one operation.
        raise NotImplementedError

    def add_adapter(self, name: str, lora_A: Tensor, lora_B: Tensor, alpha: float) -> int:
        """Load an adapter and return its slot.

        Args:
            name: unique among loaded adapters.
            lora_A: (r, in_features), base.weight's dtype.
            lora_B: (out_features, r), same r; 1 <= r <= max_rank.
            alpha: scaling = alpha / r.

        Raises:
            ValueError: duplicate name, r > max_rank, or a shape mismatch.
        """
        # TODO
        raise NotImplementedError

    def remove_adapter(self, name: str) -> None:
        """Unload an adapter; its slot becomes free for reuse.

        Raises:
            KeyError: no adapter of that name is loaded.
        """
        # TODO
        raise NotImplementedError

    def forward(self, x: Tensor, adapter_ids: Tensor) -> Tensor:
        """x (N, in_features) or (N, T, in_features); adapter_ids (N,) int64, one slot per
        row, -1 = base only -> (N, out_features) or (N, T, out_features), x's dtype.

        Rows with -1 equal base(x) exactly, in every dtype: also in float16 / bfloat16 when
        an adapter's update for their x would overflow to inf (inf * 0 is NaN, so scaling
        their update by 0 is not enough). Vectorised: gather each row's adapter weights
        and batch the matmuls; the number of tensor operations must not grow with N or with
        the number of adapters (no Python loop over rows or adapters). Does not modify x or
        adapter_ids.

        Raises:
            ValueError: a slot that holds no adapter (never returned, or freed), a value
                below -1, or adapter_ids not of shape (N,).
        """
        # TODO
        raise NotImplementedError
