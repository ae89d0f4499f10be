"""LoRA: a low-rank adapter on a frozen linear layer, and a multi-tenant batched layer.

LoRALinear follows PEFT's ``LoraLayer`` / ``lora.Linear`` semantics: the base layer is frozen,
the update is ``scaling * B @ A`` with ``A`` (r, in) Kaiming-uniform and ``B`` (out, r) zero,
so training starts exactly at the base model. Dropout acts on the adapter's input only.
``merge`` folds the update into the base weight for zero-overhead inference; ``unmerge``
takes it back out.

MultiLoRALinear serves many adapters over one frozen base in one batch, the way S-LoRA and
Punica do: every adapter is zero-padded to ``max_rank`` and stacked, each row gathers its
adapter's weights by slot index, and the two low-rank products run as one batched matmul
(BGMV: batched gather matrix-vector). No Python loop over rows or adapters.

References:
    Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", 2021 (arXiv:2106.09685).
    Kalajdzievski, "A Rank Stabilization Scaling Factor for Fine-Tuning with LoRA" (rsLoRA),
        2023 (arXiv:2312.03732).
    Chen et al., "Punica: Multi-Tenant LoRA Serving", 2023 (arXiv:2310.18547).
    Sheng et al., "S-LoRA: Serving Thousands of Concurrent LoRA Adapters", 2023
        (arXiv:2311.03285).

Shapes: N rows, T tokens per row, IN = in_features, OUT = out_features, R = rank,
S = slots (stacked adapters).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LoRALinear(nn.Module):
    """``y = base(x) + scaling * dropout(x) @ A.T @ B.T`` on a frozen ``nn.Linear``.

    Invariants:
        * ``base.weight`` and ``base.bias`` never require grad; only ``lora_A`` and ``lora_B``
          are trainable.
        * ``merged`` is True exactly when ``base.weight`` holds ``W0 + delta_weight()``;
          then ``forward`` is ``base(x)`` alone, so the update is never applied twice.
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0,
                 use_rslora: bool = False) -> None:
        super().__init__()
        if r < 1:
            raise ValueError(f"LoRA rank r must be >= 1, got {r}")
        self.base = base
        for param in base.parameters():
            param.requires_grad_(False)
        self.r = r
        self.alpha = alpha
        # rsLoRA keeps the update's magnitude stable as r grows (alpha / sqrt(r)).
        self.scaling = alpha / math.sqrt(r) if use_rslora else alpha / r
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        weight = base.weight
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, dtype=weight.dtype,
                                               device=weight.device))  # (R, IN)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, dtype=weight.dtype,
                                               device=weight.device))  # (OUT, R)
        # The same init as nn.Linear; B = 0 makes the layer start equal to base.
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self._merged = False

    @property
    def merged(self) -> bool:
        return self._merged

    def forward(self, x: Tensor) -> Tensor:
        y = self.base(x)  # (..., OUT)
        if self._merged:
            return y
        h = F.linear(self.lora_dropout(x), self.lora_A)  # (..., R)
        return y + F.linear(h, self.lora_B) * self.scaling  # (..., OUT)

    def delta_weight(self) -> Tensor:
        """The update folded into the base weight: ``scaling * B @ A``, (OUT, IN)."""
        return (self.lora_B @ self.lora_A) * self.scaling

    @torch.no_grad()
    def merge(self) -> None:
        if self._merged:
            return
        self.base.weight += self.delta_weight()
        self._merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        if not self._merged:
            return
        self.base.weight -= self.delta_weight()
        self._merged = False


class MultiLoRALinear(nn.Module):
    """One frozen base and many adapters of different ranks, served in one mixed batch.

    Layout (S slots, each adapter zero-padded to R = max_rank)::

        stacked_A  (S, R, IN)   slot s: rows [0, r_s) hold A_s, rows [r_s, R) are zero
        stacked_B  (S, OUT, R)  slot s: cols [0, r_s) hold B_s, cols [r_s, R) are zero
        scalings   (S,)         alpha_s / r_s for a live slot, 0 for a free one
        row n ──adapter_ids[n]──> slot ──gather──> A, B ──bmm──> delta row n

    Invariants:
        * ``slot_by_name`` maps each loaded adapter to a distinct slot; ``live[s]`` is True
          exactly for those slots.
        * The padding of a slot is zero, so a lower-rank adapter in a reused slot never sees
          the previous tenant's weights.
        * Freed slots are reused before new ones open: every slot index is below the peak
          number of adapters loaded at once.
    """

    # buffers, registered in __init__ (declared here for the type checker)
    stacked_A: Tensor
    stacked_B: Tensor
    scalings: Tensor
    live: Tensor

    def __init__(self, base: nn.Linear, max_rank: int) -> None:
        super().__init__()
        if max_rank < 1:
            raise ValueError(f"max_rank must be >= 1, got {max_rank}")
        self.base = base
        for param in base.parameters():
            param.requires_grad_(False)
        self.max_rank = max_rank
        self.slot_by_name: dict[str, int] = {}
        weight = base.weight
        num_slots = 1  # one zero slot so an all-base batch still has something to gather
        self.register_buffer("stacked_A", weight.new_zeros(num_slots, max_rank, base.in_features))
        self.register_buffer("stacked_B", weight.new_zeros(num_slots, base.out_features, max_rank))
        self.register_buffer("scalings", weight.new_zeros(num_slots))
        self.register_buffer("live", torch.zeros(num_slots, dtype=torch.bool, device=weight.device))

    def add_adapter(self, name: str, lora_A: Tensor, lora_B: Tensor, alpha: float) -> int:
        """Load an adapter (A (r, IN), B (OUT, r)) into the lowest free slot; return it."""
        if name in self.slot_by_name:
            raise ValueError(f"adapter {name!r} is already loaded (slot {self.slot_by_name[name]})")
        self._check_shapes(lora_A, lora_B)
        r = lora_A.shape[0]
        free = (~self.live).nonzero()
        if len(free) == 0:
            self._grow()
            free = (~self.live).nonzero()
        slot = int(free[0])
        with torch.no_grad():
            # Zero the whole slot first: the padding must not keep an old tenant's weights.
            self.stacked_A[slot].zero_()
            self.stacked_B[slot].zero_()
            self.stacked_A[slot, :r] = lora_A
            self.stacked_B[slot, :, :r] = lora_B
            self.scalings[slot] = alpha / r
        self.live[slot] = True
        self.slot_by_name[name] = slot
        return slot

    def remove_adapter(self, name: str) -> None:
        if name not in self.slot_by_name:
            raise KeyError(f"no adapter named {name!r}; loaded: {sorted(self.slot_by_name)}")
        slot = self.slot_by_name.pop(name)
        self.live[slot] = False
        self.scalings[slot] = 0.0

    def forward(self, x: Tensor, adapter_ids: Tensor) -> Tensor:
        """x (N, IN) or (N, T, IN), adapter_ids (N,) int64 slots (-1: base only) ->
        (N, OUT) or (N, T, OUT)."""
        self._check_ids(x, adapter_ids)
        y = self.base(x)  # (N, [T,] OUT)
        slot_ids = adapter_ids.clamp(min=0)  # -1 rows gather slot 0; their delta is dropped
        A = self.stacked_A[slot_ids]  # (N, R, IN)
        B = self.stacked_B[slot_ids]  # (N, OUT, R)
        x3 = x if x.dim() == 3 else x.unsqueeze(1)  # (N, T, IN)
        h = torch.bmm(x3, A.transpose(1, 2))  # (N, T, R)
        delta = torch.bmm(h, B.transpose(1, 2)) * self.scalings[slot_ids, None, None]  # (N, T, OUT)
        # Select base(x) for -1 rows rather than scaling slot 0's delta by 0: an update that
        # overflows (inf in float16) times 0 is NaN, and -1 rows must be base(x) exactly.
        uses_adapter = (adapter_ids >= 0).view(-1, *[1] * (y.dim() - 1))  # (N, 1[, 1])
        return torch.where(uses_adapter, y + delta.reshape(y.shape), y)

    def _check_shapes(self, lora_A: Tensor, lora_B: Tensor) -> None:
        if lora_A.dim() != 2 or lora_B.dim() != 2:
            raise ValueError(f"lora_A and lora_B must be 2-D, got shapes {tuple(lora_A.shape)} "
                             f"and {tuple(lora_B.shape)}")
        r = lora_A.shape[0]
        expected_A, expected_B = (r, self.base.in_features), (self.base.out_features, r)
        if tuple(lora_A.shape) != expected_A or tuple(lora_B.shape) != expected_B:
            raise ValueError(f"expected lora_A {expected_A} and lora_B {expected_B}, got "
                             f"{tuple(lora_A.shape)} and {tuple(lora_B.shape)}")
        if not 1 <= r <= self.max_rank:
            raise ValueError(f"adapter rank {r} must be between 1 and max_rank={self.max_rank}")

    def _check_ids(self, x: Tensor, adapter_ids: Tensor) -> None:
        if x.dim() not in (2, 3) or x.shape[-1] != self.base.in_features:
            raise ValueError(f"x must be (N, {self.base.in_features}) or (N, T, "
                             f"{self.base.in_features}), got {tuple(x.shape)}")
        if adapter_ids.dim() != 1 or adapter_ids.shape[0] != x.shape[0]:
            raise ValueError(f"adapter_ids must have shape ({x.shape[0]},), "
                             f"got {tuple(adapter_ids.shape)}")
        num_slots = self.live.shape[0]
        in_range = (adapter_ids >= -1) & (adapter_ids < num_slots)
        known = adapter_ids.eq(-1) | self.live[adapter_ids.clamp(0, num_slots - 1)]
        if not bool((in_range & known).all()):
            bad = adapter_ids[~(in_range & known)].tolist()
            raise ValueError(f"unknown adapter slots {bad}; loaded slots: "
                             f"{sorted(self.slot_by_name.values())}")

    def _grow(self) -> None:
        """Double the number of slots (amortised O(1) per add); new slots are zero and free."""
        extra = self.live.shape[0]
        self.stacked_A = torch.cat([self.stacked_A, torch.zeros_like(self.stacked_A[:extra])])
        self.stacked_B = torch.cat([self.stacked_B, torch.zeros_like(self.stacked_B[:extra])])
        self.scalings = torch.cat([self.scalings, torch.zeros_like(self.scalings[:extra])])
        self.live = torch.cat([self.live, torch.zeros_like(self.live)])
