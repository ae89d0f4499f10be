"""Correct alternative (corpus): einsum gathers, with a permanent zero adapter at storage
row 0 so that slot s lives at row s + 1 and -1 rows gather the zero adapter.

LoRALinear applies the update as a dense delta on the fly: x @ (scaling * B @ A).T, which is
the same function computed in a different order.
"""

from __future__ import annotations

import heapq

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0,
                 use_rslora: bool = False) -> None:
        super().__init__()
        if not r >= 1:
            raise ValueError(f"bad rank {r}")
        self.base = base
        self.base.weight.requires_grad = False
        if self.base.bias is not None:
            self.base.bias.requires_grad = False
        kw = {"dtype": base.weight.dtype, "device": base.weight.device}
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, **kw))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, **kw))
        nn.init.kaiming_uniform_(self.lora_A, a=5 ** 0.5)
        self.scaling = alpha / r ** 0.5 if use_rslora else alpha / r
        self.p = dropout
        self._merged = False

    merged = property(lambda self: self._merged)

    def forward(self, x: Tensor) -> Tensor:
        if self._merged:
            return self.base(x)
        xd = F.dropout(x, self.p, self.training)
        return self.base(x) + torch.einsum("...i,ri,or->...o", xd, self.lora_A,
                                           self.lora_B) * self.scaling

    def delta_weight(self) -> Tensor:
        return torch.einsum("or,ri->oi", self.lora_B, self.lora_A) * self.scaling

    def merge(self) -> None:
        if self._merged:
            return
        with torch.no_grad():
            self.base.weight.add_(self.delta_weight())
        self._merged = True

    def unmerge(self) -> None:
        if not self._merged:
            return
        with torch.no_grad():
            self.base.weight.sub_(self.delta_weight())
        self._merged = False


class MultiLoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, max_rank: int) -> None:
        super().__init__()
        self.base = base.requires_grad_(False)
        self.max_rank = max_rank
        self.rows_A = base.weight.new_zeros(1, max_rank, base.in_features)  # row 0: zero adapter
        self.rows_B = base.weight.new_zeros(1, base.out_features, max_rank)
        self.rows_scale = base.weight.new_zeros(1)
        self.by_name: dict[str, int] = {}
        self.free_slots: list[int] = []  # a heap: the lowest free slot first

    def add_adapter(self, name: str, lora_A: Tensor, lora_B: Tensor, alpha: float) -> int:
        if name in self.by_name:
            raise ValueError(f"{name} already loaded")
        r = lora_A.shape[0] if lora_A.dim() == 2 else -1
        if (r < 1 or r > self.max_rank or tuple(lora_A.shape) != (r, self.base.in_features)
                or tuple(lora_B.shape) != (self.base.out_features, r)):
            raise ValueError("bad adapter shapes or rank")
        if self.free_slots:
            slot = heapq.heappop(self.free_slots)
        else:
            slot = self.rows_A.shape[0] - 1
            self.rows_A = torch.cat([self.rows_A, torch.zeros_like(self.rows_A[:1])])
            self.rows_B = torch.cat([self.rows_B, torch.zeros_like(self.rows_B[:1])])
            self.rows_scale = torch.cat([self.rows_scale, torch.zeros_like(self.rows_scale[:1])])
        row = slot + 1
        self.rows_A[row] = F.pad(lora_A, (0, 0, 0, self.max_rank - r))
        self.rows_B[row] = F.pad(lora_B, (0, self.max_rank - r))
        self.rows_scale[row] = alpha / r
        self.by_name[name] = slot
        return slot

    def remove_adapter(self, name: str) -> None:
        if name not in self.by_name:
            raise KeyError(name)
        slot = self.by_name.pop(name)
        self.rows_A[slot + 1] = 0
        self.rows_B[slot + 1] = 0
        self.rows_scale[slot + 1] = 0
        heapq.heappush(self.free_slots, slot)

    def forward(self, x: Tensor, adapter_ids: Tensor) -> Tensor:
        if adapter_ids.dim() != 1 or len(adapter_ids) != len(x):
            raise ValueError("adapter_ids must be (N,)")
        rows = adapter_ids + 1
        live = torch.zeros(self.rows_A.shape[0], dtype=torch.bool)
        live[0] = True
        live[torch.tensor(sorted(self.by_name.values()), dtype=torch.long) + 1] = True
        inside = (rows >= 0) & (rows < len(live))
        if not bool(inside.all()) or not bool(live[rows.clamp(0, len(live) - 1)].all()):
            raise ValueError("unknown adapter slot")
        A, B, s = self.rows_A[rows], self.rows_B[rows], self.rows_scale[rows]
        if x.dim() == 2:
            delta = torch.einsum("ni,nri,nor->no", x, A, B) * s[:, None]
        else:
            delta = torch.einsum("nti,nri,nor->nto", x, A, B) * s[:, None, None]
        return self.base(x) + delta
