"""LoRA: a low-rank adapter on a frozen linear layer, merge/unmerge, and a multi-tenant
batched layer that serves many adapters in one batch.

Shapes: N rows, T tokens per row, IN = in_features, OUT = out_features, r = adapter rank,
... = any leading dimensions.

Levels:
    1. LoRALinear: __init__ (wrap and freeze the base, create the adapter) and forward
       (with adapter dropout), with PEFT's semantics.
    2. delta_weight, merge, unmerge, merged, and the use_rslora flag.
    3. MultiLoRALinear: many adapters, one batch, vectorised (no Python loop over rows or
       adapters).

Sanity check (level 1): a fresh LoRALinear computes exactly what its base computes.

Constraints: PyTorch only, no PEFT. Results are compared with a reference within float32 /
float64 tolerances.
"""

from __future__ import annotations

import math  # noqa: F401  (for your solution)

import torch  # noqa: F401  (for your solution)
import torch.nn.functional as F  # noqa: F401  (for your solution)
from torch import Tensor, nn


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus a trainable rank-r update (PEFT's LoRA semantics).

    Attributes (state_dict names are part of the API: "lora_A", "lora_B", "base.weight",
    "base.bias"):
        base:    the wrapped nn.Linear, frozen (weight and bias: requires_grad False).
        lora_A:  nn.Parameter (r, in_features).
        lora_B:  nn.Parameter (out_features, r).
                 lora_A and lora_B have base.weight's dtype and device, and are
                 initialised as PEFT initialises them.
        scaling: float, the factor applied to the low-rank update (set from alpha and r).
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0,
                 use_rslora: bool = False) -> None:
        """Wrap `base` (used in place, not copied) and freeze it.

        Args:
            base: nn.Linear(in_features, out_features), with or without bias.
            r: adapter rank, >= 1.
            alpha: LoRA's scaling hyperparameter (any float, 0.0 included).
            dropout: the adapter dropout probability, nn.Dropout semantics.
            use_rslora: Level 2. Rank-stabilised scaling (rsLoRA, as PEFT's flag).

        Raises:
            ValueError: r < 1.
        """
        super().__init__()
        # TODO: freeze base; create lora_A and lora_B; scaling.
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """x (..., in_features) -> (..., out_features), x's dtype.

        The base's output plus the scaled low-rank update, with adapter dropout in training
        mode. Any leading dimensions (none, several, an empty batch). Does not modify x.
        """
        # TODO
        raise NotImplementedError

    # ------------------------------------------------------------------ Level 2

    def delta_weight(self) -> Tensor:
        """The dense matrix the adapter adds to base.weight: (out_features, in_features),
        base.weight's dtype. Its rank is at most r."""
        # TODO
        raise NotImplementedError

    def merge(self) -> None:
        """Fold the update into base.weight, so forward costs what the base costs. A merged
        layer's output equals the unmerged one up to float rounding. Never raises."""
        # TODO
        raise NotImplementedError

    def unmerge(self) -> None:
        """Take the update out of base.weight again (restores it up to float rounding).
        Never raises."""
        # TODO
        raise NotImplementedError

    @property
    def merged(self) -> bool:
        """True between merge() and the next unmerge()."""
        # TODO
        raise NotImplementedError


class MultiLoRALinear(nn.Module):
    """Level 3. One frozen base, many adapters of different ranks, one mixed batch
    (S-LoRA / Punica).

    Row n of a batch uses the adapter in slot adapter_ids[n] (-1: no adapter, the base
    only); each adapter is a LoRA update as in LoRALinear (no dropout, no rsLoRA here).
    Slots: add_adapter returns a slot index (an int >= 0); forward refers to adapters by
    it.
    """

    def __init__(self, base: nn.Linear, max_rank: int) -> None:
        """Wrap `base` (frozen) for adapters of rank 1..max_rank."""
        super().__init__()
        # TODO
        raise NotImplementedError

    def add_adapter(self, name: str, lora_A: Tensor, lora_B: Tensor, alpha: float) -> int:
        """Load an adapter and return its slot.

        Args:
            name: unique among loaded adapters.
            lora_A: (r, in_features), base.weight's dtype.
            lora_B: (out_features, r), same r; 1 <= r <= max_rank.
            alpha: as in LoRALinear.

        Raises:
            ValueError: duplicate name, r > max_rank, or a shape mismatch (nothing changes).
        """
        # TODO
        raise NotImplementedError

    def remove_adapter(self, name: str) -> None:
        """Unload an adapter; its slot becomes free.

        Raises:
            KeyError: no adapter of that name is loaded (nothing changes).
        """
        # TODO
        raise NotImplementedError

    def forward(self, x: Tensor, adapter_ids: Tensor) -> Tensor:
        """x (N, in_features) or (N, T, in_features); adapter_ids (N,) int64, one slot per
        row, -1 = base only -> (N, out_features) or (N, T, out_features), x's dtype.

        Vectorised: the number of tensor operations must not grow with N or with the number
        of adapters (no Python loop over rows or adapters). Does not modify x or
        adapter_ids.

        Raises:
            ValueError: a slot that holds no adapter, a value below -1, or adapter_ids not
                of shape (N,) (nothing changes).
        """
        # TODO
        raise NotImplementedError
