"""A correct train-memory solution written differently: the ledger as a sum of per-part
(bytes, stage) pairs with math.ceil; the loss from per-token losses (reduction='none') masked
and summed; micro-batches from torch.split; checkpointing through
torch.utils.checkpoint.checkpoint_sequential with one segment a block (non-reentrant)."""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint_sequential

from train_memory_model import IGNORE_INDEX

STATE = {"adamw": 2, "sgd_momentum": 1, "sgd": 0}   # float32 buffers a trainable parameter


def training_state_bytes(n_params, n_trainable, *, weight_bytes=2, optimizer="adamw",
                         master_weights=True, zero_stage=0, dp=1):
    if optimizer not in STATE or n_trainable < 0 or n_trainable > n_params or weight_bytes < 1:
        raise ValueError("bad optimizer or counts")
    if zero_stage not in range(4) or dp < 1:
        raise ValueError("bad zero_stage or dp")
    fp32_copies = STATE[optimizer] + (1 if master_weights and weight_bytes < 4 else 0)
    parts = [(n_params * weight_bytes, 3), (n_trainable * weight_bytes, 2), (n_trainable * 4 * fp32_copies, 1)]
    return sum(math.ceil(b / dp) if zero_stage >= stage else b for b, stage in parts)


def _token_loss_sum(model, ids, labels, checkpoint):
    x = model.embed(ids)
    if checkpoint:
        x = checkpoint_sequential(model.blocks, len(model.blocks), x, use_reentrant=False)
    else:
        for block in model.blocks:
            x = block(x)
    per_token = F.cross_entropy(model.head(x).transpose(1, 2), labels.clamp(min=0), reduction="none")
    return (per_token * (labels != IGNORE_INDEX)).sum()


def finetune(model, batches, *, lr, steps, micro_batch_size=None, checkpoint=False):
    if micro_batch_size is not None and micro_batch_size < 1:
        raise ValueError("micro_batch_size < 1")
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    out = []
    for step in range(steps):
        ids, labels = batches[step % len(batches)]
        m = micro_batch_size or ids.shape[0]
        n = (labels != IGNORE_INDEX).sum().item()
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for ids_mb, labels_mb in zip(torch.split(ids, m), torch.split(labels, m)):
            s = _token_loss_sum(model, ids_mb, labels_mb, checkpoint)
            (s / n).backward()
            total += s.item()
        opt.step()
        out.append(total / n)
    return out
