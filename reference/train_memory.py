"""Reference for the `train-memory` kata: the memory ledger of training, and a fine-tuning
loop whose memory does not grow.

1. The ledger: every parameter's weight, the trainable ones' gradients (in the weights'
   dtype), their optimizer state in float32 (AdamW: m and v; SGD with momentum: one buffer)
   and, for weights narrower than float32, their float32 master copy. ZeRO shards the
   optimizer state (master weights included) over the data-parallel ranks at stage 1, the
   gradients too at stage 2, the weights too at stage 3: 2 + 2 + 12 = 16 bytes a parameter
   for mixed-precision AdamW, 2 + 2 + 12 / dp at stage 1.
2. No leak: each step's loss is read with `.item()`; nothing of a step (its loss, logits,
   graph) outlives it, so the peak of live tensor bytes is the same after 2 steps or 200.
3. Gradient accumulation: the batch runs in micro-batches of `micro_batch_size` sequences;
   each micro-batch's summed token loss is divided by the valid tokens of the *whole* batch
   before `backward()`, so the accumulated gradient is the whole batch's.
4. Activation checkpointing: each block runs under `torch.utils.checkpoint` (non-reentrant):
   only its input is kept, and its activations are recomputed during the backward pass.

References: Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models" (2020); Chen et al., "Training Deep Nets with Sublinear Memory Cost"
(2016); the PyTorch FAQ "My model reports cuda runtime error(2): out of memory"
(accumulating history across the training loop).

Legend: B batch (sequences), M micro-batch, T time, C d_model, V vocabulary.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint as checkpoint_block

try:
    from train_memory_model import IGNORE_INDEX, TinyLM  # the kata's support file
except ModuleNotFoundError:  # outside the grader (a notebook, the project's tests)
    from grader.catalog import KATAS_DIR
    from grader.worker.loading import import_from_path

    import_from_path(KATAS_DIR / "train_memory" / "train_memory_model.py", "train_memory_model")
    from train_memory_model import IGNORE_INDEX, TinyLM

# Optimizer state in float32 bytes per trainable parameter.
OPTIMIZER_STATE_BYTES = {"adamw": 8, "sgd_momentum": 4, "sgd": 0}
MASTER_WEIGHT_BYTES = 4


def training_state_bytes(n_params: int, n_trainable: int, *, weight_bytes: int = 2,
                         optimizer: str = "adamw", master_weights: bool = True,
                         zero_stage: int = 0, dp: int = 1) -> int:
    """Bytes one data-parallel rank holds for weights, gradients and optimizer state."""
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise ValueError(f"unknown optimizer {optimizer!r}; known: {sorted(OPTIMIZER_STATE_BYTES)}")
    if not 0 <= n_trainable <= n_params:
        raise ValueError(f"need 0 <= n_trainable <= n_params, got {n_trainable} and {n_params}")
    if weight_bytes < 1:
        raise ValueError(f"weight_bytes must be >= 1, got {weight_bytes}")
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    if dp < 1:
        raise ValueError(f"dp must be >= 1, got {dp}")
    weights = n_params * weight_bytes
    grads = n_trainable * weight_bytes
    optimizer_state = n_trainable * OPTIMIZER_STATE_BYTES[optimizer]
    if master_weights and weight_bytes < MASTER_WEIGHT_BYTES:
        optimizer_state += n_trainable * MASTER_WEIGHT_BYTES   # part of the optimizer state (ZeRO's K)

    def shard(num_bytes: int, from_stage: int) -> int:
        return -(-num_bytes // dp) if zero_stage >= from_stage else num_bytes

    return shard(weights, 3) + shard(grads, 2) + shard(optimizer_state, 1)


def _logits(model: TinyLM, input_ids: torch.Tensor, checkpoint: bool) -> torch.Tensor:
    """(M, T) -> (M, T, V); with `checkpoint`, each block keeps only its input."""
    x = model.embed(input_ids)                                            # (M, T, C)
    for block in model.blocks:
        x = checkpoint_block(block, x, use_reentrant=False) if checkpoint else block(x)
    return model.head(x)


def finetune(model: TinyLM, batches: list[tuple[torch.Tensor, torch.Tensor]], *, lr: float,
             steps: int, micro_batch_size: int | None = None, checkpoint: bool = False) -> list[float]:
    """finetune_leaky's updates and losses, with a peak memory that does not grow with
    `steps`, scales with the micro-batch and, with `checkpoint`, keeps one tensor per block."""
    if micro_batch_size is not None and micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1 or None, got {micro_batch_size}")
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=lr)
    losses: list[float] = []
    for step in range(steps):
        input_ids, labels = batches[step % len(batches)]                  # (B, T) each
        num_sequences = input_ids.shape[0]
        size = num_sequences if micro_batch_size is None else micro_batch_size
        num_valid = int((labels != IGNORE_INDEX).sum())                   # of the whole batch
        optimizer.zero_grad()
        loss_sum = 0.0
        for start in range(0, num_sequences, size):
            logits = _logits(model, input_ids[start:start + size], checkpoint)   # (M, T, V)
            micro_sum = F.cross_entropy(logits.flatten(0, 1), labels[start:start + size].flatten(),
                                        ignore_index=IGNORE_INDEX, reduction="sum")
            del logits   # the graph keeps what backward needs; nothing else of it survives
            (micro_sum / num_valid).backward()
            loss_sum += micro_sum.item()
            del micro_sum
        optimizer.step()
        losses.append(loss_sum / num_valid)
    return losses
