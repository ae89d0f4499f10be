"""A correct train-memory solution close to finetune_leaky: the same loop, with the loss read
by .item(), the logits dropped and the logging metric computed under torch.no_grad(); the
micro-batch loop and the checkpointed forward are written inline; gradients are zeroed in
place (set_to_none=False), so they live for the whole call."""

from __future__ import annotations

import torch
from torch.nn import functional as F
from torch.utils import checkpoint as ckpt

from train_memory_model import IGNORE_INDEX


def training_state_bytes(n_params, n_trainable, *, weight_bytes=2, optimizer="adamw",
                         master_weights=True, zero_stage=0, dp=1):
    per_param = {"adamw": 8, "sgd_momentum": 4, "sgd": 0}
    if optimizer not in per_param:
        raise ValueError(optimizer)
    if n_trainable < 0 or n_params < n_trainable or weight_bytes < 1 or not 0 <= zero_stage <= 3 or dp < 1:
        raise ValueError("out of range")
    opt = n_trainable * per_param[optimizer]
    if master_weights and weight_bytes < 4:
        opt += n_trainable * 4
    w, g = n_params * weight_bytes, n_trainable * weight_bytes
    if zero_stage >= 1:
        opt = (opt + dp - 1) // dp
    if zero_stage >= 2:
        g = (g + dp - 1) // dp
    if zero_stage >= 3:
        w = (w + dp - 1) // dp
    return w + g + opt


def finetune(model, batches, *, lr, steps, micro_batch_size=None, checkpoint=False):
    if micro_batch_size is not None and micro_batch_size < 1:
        raise ValueError("micro_batch_size must be positive")
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    losses = []
    metric_log = []
    for step in range(steps):
        input_ids, labels = batches[step % len(batches)]
        B = input_ids.shape[0]
        m = B if micro_batch_size is None else micro_batch_size
        n_valid = (labels != IGNORE_INDEX).sum()
        optimizer.zero_grad(set_to_none=False)
        step_loss = 0.0
        logprob_sum = 0.0
        i = 0
        while i < B:
            ids, lab = input_ids[i:i + m], labels[i:i + m]
            x = model.embed(ids)
            for block in model.blocks:
                x = ckpt.checkpoint(block, x, use_reentrant=False) if checkpoint else block(x)
            logits = model.head(x)
            loss_sum = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1),
                                       ignore_index=IGNORE_INDEX, reduction="sum")
            with torch.no_grad():
                valid = lab != IGNORE_INDEX
                logprob_sum += (logits.log_softmax(-1).gather(-1, lab.clamp(min=0)[..., None])[..., 0]
                                * valid).sum().item()
            del logits, x
            (loss_sum / n_valid).backward()
            step_loss += loss_sum.item()
            del loss_sum
            i += m
        optimizer.step()
        losses.append(step_loss / n_valid.item())
        metric_log.append(logprob_sum / n_valid.item())
    return losses
