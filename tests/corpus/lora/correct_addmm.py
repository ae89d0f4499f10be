"""Correct alternative (corpus): the LoRA update folded through torch.addmm.

forward flattens the leading dims and adds the update with one addmm (beta=1 on base(x),
alpha=scaling); delta_weight, merge and unmerge use addmm too. MultiLoRALinear masks the
-1 rows of the delta with torch.where instead of a zero scaling, and keeps the adapters in
Python-side free lists with stacked tensors grown one slot at a time.
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
            raise ValueError("r must be positive")
        base.requires_grad_(False)
        self.base = base
        w = base.weight
        self.lora_A = nn.Parameter(torch.zeros(r, w.shape[1], dtype=w.dtype, device=w.device))
        self.lora_B = nn.Parameter(torch.zeros(w.shape[0], r, dtype=w.dtype, device=w.device))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / (math.sqrt(r) if use_rslora else r)
        self.drop = nn.Dropout(p=dropout)
        self.is_merged = False

    @property
    def merged(self) -> bool:
        return self.is_merged

    def forward(self, x: Tensor) -> Tensor:
        out = self.base(x)
        if self.is_merged:
            return out
        x2 = self.drop(x).reshape(-1, x.shape[-1])
        flat = torch.addmm(out.reshape(-1, out.shape[-1]), x2 @ self.lora_A.t(),
                           self.lora_B.t(), alpha=self.scaling)
        return flat.reshape(out.shape)

    def delta_weight(self) -> Tensor:
        zeros = self.base.weight.new_zeros(self.base.weight.shape)
        return torch.addmm(zeros, self.lora_B, self.lora_A, beta=0, alpha=self.scaling)

    def merge(self) -> None:
        if not self.is_merged:
            with torch.no_grad():
                w = self.base.weight
                w.copy_(torch.addmm(w, self.lora_B, self.lora_A, alpha=self.scaling))
            self.is_merged = True

    def unmerge(self) -> None:
        if self.is_merged:
            with torch.no_grad():
                w = self.base.weight
                w.copy_(torch.addmm(w, self.lora_B, self.lora_A, alpha=-self.scaling))
            self.is_merged = False


class MultiLoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, max_rank: int) -> None:
        super().__init__()
        base.requires_grad_(False)
        self.base = base
        self.max_rank = max_rank
        w = base.weight
        self.A = w.new_zeros(1, max_rank, w.shape[1])
        self.B = w.new_zeros(1, w.shape[0], max_rank)
        self.scale = w.new_zeros(1)
        self.valid = torch.zeros(1, dtype=torch.bool)
        self.names: dict[str, int] = {}
        self.free: list[int] = [0]

    def add_adapter(self, name: str, lora_A: Tensor, lora_B: Tensor, alpha: float) -> int:
        if name in self.names:
            raise ValueError(f"duplicate adapter {name}")
        out_f, in_f = self.base.weight.shape
        r = lora_A.shape[0]
        if (lora_A.dim() != 2 or lora_B.dim() != 2 or lora_A.shape[1] != in_f
                or lora_B.shape != (out_f, r)):
            raise ValueError("shape mismatch")
        if r > self.max_rank or r < 1:
            raise ValueError("rank out of range")
        if not self.free:
            n = self.A.shape[0]
            self.A = torch.cat([self.A, self.A.new_zeros(1, *self.A.shape[1:])])
            self.B = torch.cat([self.B, self.B.new_zeros(1, *self.B.shape[1:])])
            self.scale = torch.cat([self.scale, self.scale.new_zeros(1)])
            self.valid = torch.cat([self.valid, self.valid.new_zeros(1)])
            self.free.append(n)
        slot = min(self.free)
        self.free.remove(slot)
        padded_A = self.A.new_zeros(self.max_rank, in_f)
        padded_A[:r] = lora_A
        padded_B = self.B.new_zeros(out_f, self.max_rank)
        padded_B[:, :r] = lora_B
        self.A[slot], self.B[slot] = padded_A, padded_B
        self.scale[slot] = alpha / r
        self.valid[slot] = True
        self.names[name] = slot
        return slot

    def remove_adapter(self, name: str) -> None:
        slot = self.names.pop(name)  # KeyError for an unknown name
        self.valid[slot] = False
        self.free.append(slot)

    def forward(self, x: Tensor, adapter_ids: Tensor) -> Tensor:
        if adapter_ids.shape != (x.shape[0],):
            raise ValueError("adapter_ids must have one id per row")
        n_slots = self.A.shape[0]
        ok = (adapter_ids >= -1) & (adapter_ids < n_slots)
        if not bool(ok.all()):
            raise ValueError("adapter id out of range")
        use = adapter_ids >= 0
        idx = torch.where(use, adapter_ids, torch.zeros_like(adapter_ids))
        if not bool((~use | self.valid[idx]).all()):
            raise ValueError("slot holds no adapter")
        xs = x if x.dim() == 3 else x.unsqueeze(1)  # (N, T, IN)
        h = torch.matmul(xs, self.A[idx].transpose(-1, -2))  # (N, T, R)
        delta = torch.matmul(h, self.B[idx].transpose(-1, -2)) * self.scale[idx].view(-1, 1, 1)
        delta = torch.where(use.view(-1, 1, 1), delta, torch.zeros_like(delta))
        return self.base(x) + delta.reshape(*x.shape[:-1], delta.shape[-1])
