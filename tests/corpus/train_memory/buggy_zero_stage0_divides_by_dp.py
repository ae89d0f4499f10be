"""A buggy train-memory solution: Divides everything by dp at stage 0: plain data parallelism replicates every byte on every rank."""

from __future__ import annotations

import torch
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint as checkpoint_block

from train_memory_model import IGNORE_INDEX, TinyLM

OPTIMIZER_STATE_BYTES = {"adamw": 8, "sgd_momentum": 4, "sgd": 0}


def training_state_bytes(n_params: int, n_trainable: int, *, weight_bytes: int = 2,
                         optimizer: str = "adamw", master_weights: bool = True,
                         zero_stage: int = 0, dp: int = 1) -> int:
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise ValueError(f"unknown optimizer {optimizer!r}")
    if not 0 <= n_trainable <= n_params:
        raise ValueError("need 0 <= n_trainable <= n_params")
    if weight_bytes < 1 or zero_stage not in (0, 1, 2, 3) or dp < 1:
        raise ValueError("bad weight_bytes, zero_stage or dp")
    weights = n_params * weight_bytes
    grads = n_trainable * weight_bytes
    state = n_trainable * OPTIMIZER_STATE_BYTES[optimizer]
    if master_weights and weight_bytes < 4:
        state += 4 * n_trainable

    def shard(num_bytes: int, from_stage: int) -> int:
        return -(-num_bytes // dp) if zero_stage >= from_stage or zero_stage == 0 else num_bytes

    return shard(weights, 3) + shard(grads, 2) + shard(state, 1)


def _logits(model: TinyLM, input_ids: torch.Tensor, checkpoint: bool) -> torch.Tensor:
    x = model.embed(input_ids)
    for block in model.blocks:
        x = checkpoint_block(block, x, use_reentrant=False) if checkpoint else block(x)
    return model.head(x)


def finetune(model, batches, *, lr, steps, micro_batch_size=None, checkpoint=False):
    if micro_batch_size is not None and micro_batch_size < 1:
        raise ValueError("micro_batch_size must be >= 1")
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=lr)
    losses = []
    for step in range(steps):
        input_ids, labels = batches[step % len(batches)]
        size = input_ids.shape[0] if micro_batch_size is None else micro_batch_size
        num_valid = int((labels != IGNORE_INDEX).sum())
        optimizer.zero_grad()
        loss_sum = 0.0
        for start in range(0, input_ids.shape[0], size):
            logits = _logits(model, input_ids[start:start + size], checkpoint)
            micro_sum = F.cross_entropy(logits.flatten(0, 1), labels[start:start + size].flatten(),
                                        ignore_index=IGNORE_INDEX, reduction="sum")
            del logits
            (micro_sum / num_valid).backward()
            loss_sum += micro_sum.item()
            del micro_sum
        optimizer.step()
        losses.append(loss_sum / num_valid)
    return losses
