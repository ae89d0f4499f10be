"""Train memory: why this fine-tune runs out of memory.

`finetune_leaky` (in train_memory_model.py, next to this file) is a correct AdamW fine-tuning
loop whose memory grows with every step. Write the ledger of training memory, then a
`finetune` with the same updates whose memory does not grow:

Level 1  training_state_bytes; finetune: finetune_leaky's losses (Python floats) and weights,
         a peak memory that does not grow with steps.
Level 2  micro_batch_size: gradient accumulation with the whole batch's update; memory
         follows the micro-batch, not the batch.
Level 3  checkpoint=True: every block checkpointed (non-reentrant); same updates, one tensor
         kept per block, at most 1.4x the FLOPs.
(`kata show train-memory` has the interviewer's words, and the answers to what you ask.)

Worked example:
    training_state_bytes(7_000_000_000, 7_000_000_000)   -> 112_000_000_000   (16 bytes a parameter)
    batches = [(torch.tensor([[1, 5, 9, 2, 7, 0], [3, 3, 8, 1, 0, 0], [4, 6, 0, 0, 0, 0]]),
                torch.tensor([[5, 9, 2, 7, -100, -100], [3, 8, 1, -100, -100, -100],
                              [6, -100, -100, -100, -100, -100]]))]
    finetune(TinyLM(seed=0), batches, lr=1e-2, steps=3)   -> [3.7978..., 3.0357..., 2.6092...]

A batch is (input_ids, labels), both (B, T) int64; labels are -100 (IGNORE_INDEX) where
nothing is predicted. The model's pieces (see train_memory_model.py):
    x = model.embed(input_ids)     # (B, T) -> (B, T, C)
    x = block(x)                   # for block in model.blocks: (B, T, C) -> (B, T, C)
    logits = model.head(x)         # (B, T, V)

Constraints: PyTorch only; train with torch.optim.AdamW(trainable parameters, lr=lr).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F  # noqa: F401  (F.cross_entropy, for your solution)

from train_memory_model import IGNORE_INDEX, TinyLM, finetune_leaky  # noqa: F401  (the kata's model and loop)


def training_state_bytes(n_params: int, n_trainable: int, *, weight_bytes: int = 2,
                         optimizer: str = "adamw", master_weights: bool = True,
                         zero_stage: int = 0, dp: int = 1) -> int:
    """Bytes of weights, gradients and optimizer state one data-parallel rank holds.

    n_params        every parameter of the model
    n_trainable     those that train (requires_grad), 0 <= n_trainable <= n_params
    weight_bytes    bytes of a weight and of a gradient (2 for bf16)
    optimizer       "adamw", "sgd_momentum" or "sgd" (state in float32)
    master_weights  keep a float32 copy of the trainable weights (mixed precision)
    zero_stage      0, 1, 2 or 3 (ZeRO), sharding over dp data-parallel ranks
    Returns an int. ValueError for an unknown optimizer or counts out of range.
    """
    # TODO level 1: the ledger.
    raise NotImplementedError


def finetune(model: TinyLM, batches: list[tuple[torch.Tensor, torch.Tensor]], *, lr: float,
             steps: int, micro_batch_size: int | None = None, checkpoint: bool = False) -> list[float]:
    """finetune_leaky's training, without the leak.

    model             a TinyLM (float64); parameters with requires_grad=False do not train
    batches           (input_ids, labels) pairs, each (B, T) int64; step i uses
                      batches[i % len(batches)]
    lr                AdamW's learning rate (its other settings default)
    steps             number of optimizer steps (0: nothing changes)
    micro_batch_size  None: the whole batch at once; m: micro-batches of m sequences (level 2)
    checkpoint        True: every block under activation checkpointing (level 3)
    Returns the loss of every step as a Python float.
    """
    # TODO level 1: the same updates and losses as finetune_leaky; nothing kept across steps.
    # TODO level 2: micro-batches with the whole batch's loss.
    # TODO level 3: checkpoint each block.
    raise NotImplementedError
