"""A correct train-memory solution with its own AdamW (torch's update written out: decoupled
weight decay 0.01, bias corrections, eps 1e-8 added after the square root), float64 state,
the step counter a Python int; micro-batches by index lists; the ledger as a table of
bytes a parameter."""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F
from torch.utils import checkpoint as activation_checkpoint

from train_memory_model import IGNORE_INDEX


def training_state_bytes(n_params, n_trainable, *, weight_bytes=2, optimizer="adamw",
                         master_weights=True, zero_stage=0, dp=1):
    if optimizer == "adamw":
        state = 8
    elif optimizer == "sgd_momentum":
        state = 4
    elif optimizer == "sgd":
        state = 0
    else:
        raise ValueError(f"unknown optimizer {optimizer}")
    if not (0 <= n_trainable <= n_params) or weight_bytes < 1 or zero_stage not in (0, 1, 2, 3) or dp < 1:
        raise ValueError("invalid arguments")
    master = 4 if (master_weights and weight_bytes < 4) else 0
    sizes = {"weights": n_params * weight_bytes, "grads": n_trainable * weight_bytes,
             "optim": n_trainable * (state + master)}
    sharded = {0: (), 1: ("optim",), 2: ("optim", "grads"), 3: ("optim", "grads", "weights")}[zero_stage]
    return sum(-(-v // dp) if k in sharded else v for k, v in sizes.items())


@torch.no_grad()
def _adamw_step(params, state, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    b1, b2 = betas
    for p in params:
        if p.grad is None:
            continue
        if p not in state:
            state[p] = (torch.zeros_like(p), torch.zeros_like(p))
        m, v = state[p]
        p.mul_(1 - lr * weight_decay)
        m.lerp_(p.grad, 1 - b1)
        v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
        step_size = lr / (1 - b1 ** t)
        denom = (v.sqrt() / math.sqrt(1 - b2 ** t)).add_(eps)
        p.addcdiv_(m, denom, value=-step_size)


def finetune(model, batches, *, lr, steps, micro_batch_size=None, checkpoint=False):
    if micro_batch_size is not None and micro_batch_size < 1:
        raise ValueError("micro_batch_size")
    params = [p for p in model.parameters() if p.requires_grad]
    state = {}
    losses = []
    for t in range(1, steps + 1):
        ids, labels = batches[(t - 1) % len(batches)]
        rows = list(range(ids.shape[0]))
        m = micro_batch_size if micro_batch_size is not None else len(rows)
        count = int((labels != IGNORE_INDEX).sum())
        for p in params:
            p.grad = None
        running = 0.0
        for chunk in (rows[i:i + m] for i in range(0, len(rows), m)):
            sl = slice(chunk[0], chunk[-1] + 1)
            h = model.embed(ids[sl])
            for blk in model.blocks:
                h = activation_checkpoint.checkpoint(blk, h, use_reentrant=False) if checkpoint else blk(h)
            loss = F.cross_entropy(model.head(h).flatten(0, 1), labels[sl].flatten(), ignore_index=IGNORE_INDEX,
                                   reduction="sum")
            del h
            running += loss.item()
            (loss / count).backward()
            del loss
        _adamw_step(params, state, t, lr)
        losses.append(running / count)
    return losses
