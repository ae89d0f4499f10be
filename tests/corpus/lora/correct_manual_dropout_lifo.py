"""Correct alternative (corpus): hand-written inverted dropout and a last-in-first-out free
list.

LoRALinear draws its own Bernoulli keep mask (no nn.Dropout module) and folds the scaling
into lora_B's side of the product; merge and unmerge work on base.weight.data. MultiLoRALinear
hands out the most recently freed slot first (the statement leaves the choice open), grows
its storage by doubling, gathers with index_select, and silences -1 rows through a zero
scaling.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0,
                 use_rslora: bool = False) -> None:
        super().__init__()
        if r < 1:
            raise ValueError(f"rank must be at least 1, got {r}")
        self.base = base
        self.base.weight.requires_grad = False
        if self.base.bias is not None:
            self.base.bias.requires_grad = False
        out_f, in_f = base.weight.shape
        self.lora_A = nn.Parameter(base.weight.new_empty(r, in_f))
        self.lora_B = nn.Parameter(base.weight.new_zeros(out_f, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = float(alpha) / (math.sqrt(r) if use_rslora else r)
        self.dropout = float(dropout)
        self._is_merged = False

    @property
    def merged(self) -> bool:
        return self._is_merged

    def _drop(self, x: Tensor) -> Tensor:
        if not self.training or self.dropout == 0.0:
            return x
        if self.dropout == 1.0:  # nn.Dropout(1.0): everything dropped, no 0 / 0
            return torch.zeros_like(x)
        keep = torch.empty_like(x).bernoulli_(1.0 - self.dropout)
        return x * keep / (1.0 - self.dropout)

    def forward(self, x: Tensor) -> Tensor:
        y = self.base(x)
        if self._is_merged:
            return y
        h = self._drop(x) @ self.lora_A.T  # (..., r)
        return y + h @ (self.lora_B * self.scaling).T

    def delta_weight(self) -> Tensor:
        return (self.lora_B * self.scaling) @ self.lora_A

    def merge(self) -> None:
        if self._is_merged:
            return
        self.base.weight.data += self.delta_weight().detach()
        self._is_merged = True

    def unmerge(self) -> None:
        if not self._is_merged:
            return
        self.base.weight.data -= self.delta_weight().detach()
        self._is_merged = False


class MultiLoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, max_rank: int) -> None:
        super().__init__()
        self.base = base
        for p in base.parameters():
            p.requires_grad = False
        self.max_rank = max_rank
        w = base.weight
        self.capacity = 2
        self.A = w.new_zeros(self.capacity, max_rank, w.shape[1])  # (S, R, IN)
        self.B = w.new_zeros(self.capacity, w.shape[0], max_rank)  # (S, OUT, R)
        self.scale = w.new_zeros(self.capacity)
        self.live = torch.zeros(self.capacity, dtype=torch.bool)
        self.slots: dict[str, int] = {}
        self.free: list[int] = []  # freed slots, most recent last
        self.opened = 0  # slots handed out so far (freed or not)

    def add_adapter(self, name: str, lora_A: Tensor, lora_B: Tensor, alpha: float) -> int:
        if name in self.slots:
            raise ValueError(f"adapter {name!r} already loaded")
        out_f, in_f = self.base.weight.shape
        if lora_A.dim() != 2 or lora_B.dim() != 2:
            raise ValueError("lora_A and lora_B must be matrices")
        r = lora_A.shape[0]
        if lora_A.shape[1] != in_f or lora_B.shape != (out_f, r) or not 1 <= r <= self.max_rank:
            raise ValueError(f"bad adapter shapes {tuple(lora_A.shape)}, {tuple(lora_B.shape)}")
        if self.free:
            slot = self.free.pop()  # the most recently freed slot
        else:
            slot = self.opened
            self.opened += 1
            if slot == self.capacity:
                self._double()
        self.A[slot].zero_()
        self.B[slot].zero_()
        self.A[slot, :r] = lora_A
        self.B[slot, :, :r] = lora_B
        self.scale[slot] = alpha / r
        self.live[slot] = True
        self.slots[name] = slot
        return slot

    def _double(self) -> None:
        grow = lambda t: torch.cat([t, torch.zeros_like(t)])  # noqa: E731
        self.A, self.B, self.scale, self.live = (grow(self.A), grow(self.B), grow(self.scale),
                                                 grow(self.live))
        self.capacity *= 2

    def remove_adapter(self, name: str) -> None:
        try:
            slot = self.slots.pop(name)
        except KeyError:
            raise KeyError(f"adapter {name!r} is not loaded") from None
        self.live[slot] = False
        self.free.append(slot)

    def forward(self, x: Tensor, adapter_ids: Tensor) -> Tensor:
        if tuple(adapter_ids.shape) != (x.shape[0],):
            raise ValueError(f"adapter_ids must have shape ({x.shape[0]},)")
        in_range = (adapter_ids >= -1) & (adapter_ids < self.capacity)
        rows = adapter_ids.clamp(0, self.capacity - 1)
        ok = in_range & ((adapter_ids == -1) | self.live.index_select(0, rows))
        if not bool(ok.all()):
            raise ValueError("adapter_ids name slots that hold no adapter")
        scale = self.scale.index_select(0, rows)  # (N,)
        xs = x.unsqueeze(1) if x.dim() == 2 else x  # (N, T, IN)
        h = xs @ self.A.index_select(0, rows).transpose(1, 2)  # (N, T, R)
        delta = (h @ self.B.index_select(0, rows).transpose(1, 2)) * scale[:, None, None]
        # -1 rows borrowed slot 0's weights: fill their delta with 0 (a scale of 0 would turn
        # an update that overflows in float16 into inf * 0 = NaN).
        delta = delta.masked_fill((adapter_ids < 0)[:, None, None], 0.0)
        y = self.base(x)  # (N, [T,] OUT)
        return y + delta.reshape(y.shape)
