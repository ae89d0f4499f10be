"""DPO: sequence log-probs, the Bradley–Terry loss and DPO's variants.

Legend: B batch, T time (tokens), V vocabulary. Every per-sequence tensor is (B,).

Level 1  sequence_logprobs: each sequence's log-probability under a causal LM's logits,
         over the positions loss_mask scores.
Level 2  bradley_terry_loss, and dpo_loss with loss_type="sigmoid" (label smoothing too).
Level 3  more loss types for dpo_loss, and its argument checks.

Sanity check (level 2): when the policy equals the reference, the DPO loss is log 2.

Constraints: PyTorch only; do not modify the inputs; padding labels (-100, V + 5, ...) are
no error; logits of magnitude 1e4 happen.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: F401  (for your solution)


def sequence_logprobs(logits: torch.Tensor, labels: torch.Tensor, loss_mask: torch.Tensor, *,
                      average: bool = False) -> torch.Tensor:
    """Log-probability of each sequence's scored tokens under a causal LM's logits.

    logits    (B, T, V) float16 / bfloat16 / float32 / float64, the model's output per
              position (as a Hugging Face causal LM returns it)
    labels    (B, T) int64, the sequences' token ids; unscored positions may hold any id
              (-100, V + 5, ...)
    loss_mask (B, T) bool, or 0/1 int or float; non-zero where a token is scored

    Returns (B,): the sum of each row's scored log-probs, or their mean over the row's
    scored tokens when `average`. A scored label outside [0, V): ValueError. float32 result
    (math in float32) for float16/bfloat16/float32 logits, float64 for float64. Logits of
    magnitude 1e4 happen; gradients flow to `logits`.
    """
    # TODO
    raise NotImplementedError


def bradley_terry_loss(chosen_rewards: torch.Tensor, rejected_rewards: torch.Tensor,
                       margin: float | torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The reward model's Bradley–Terry loss over preference pairs.

    chosen_rewards, rejected_rewards (B,) float, the reward model's scores of each pair's
    answers; margin None, a float (0.0 is a margin of 0), or a (B,) tensor: how much the
    chosen answer should win by.
    Returns (loss, stats): loss 0-d, the mean over the pairs; stats, 0-d and detached:
    "accuracy" and "mean_difference".
    ValueError: the per-sequence tensors (a tensor margin too) differ in shape; B == 0.
    """
    # TODO
    raise NotImplementedError


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor,
             ref_chosen: torch.Tensor, ref_rejected: torch.Tensor, *, beta: float = 0.1,
             loss_type: str = "sigmoid", label_smoothing: float = 0.0
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """DPO loss from (B,) sequence log-probs of the policy and of the frozen reference model.

    beta: DPO's beta. loss_type: "sigmoid", the DPO paper's loss (level 2); level 3 adds
    more. label_smoothing: the probability that a pair's preference label is flipped
    (conservative DPO).
    Returns (loss, stats): loss 0-d, the mean over the pairs; stats, detached:
    "chosen_rewards" and "rejected_rewards" (B,), "reward_accuracy" and "reward_margin" (0-d).
    ValueError: the per-sequence tensors differ in shape; B == 0 (level 2); bad arguments
    (level 3).
    """
    # TODO
    raise NotImplementedError
