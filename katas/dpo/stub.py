"""DPO: sequence log-probs, the Bradley–Terry loss and DPO's variants.

Legend: B batch, T time (tokens), V vocabulary. Every per-sequence tensor is (B,).

Level 1  sequence_logprobs: logits[:, t - 1] predicts labels[:, t]; sum (or average) the
         log-probs of the positions t >= 1 where loss_mask is non-zero.
Level 2  bradley_terry_loss, and dpo_loss with loss_type="sigmoid" (label smoothing too).
Level 3  dpo_loss with "ipo" and "hinge", and the argument checks.

Worked example (level 1): B = 1, T = 4, V = 3,
    logits[0] = [[0, 0, 0], [2, 0, 0], [1, 1, 1], [5, 5, 5]]
    labels    = [[-100, 2, 0, -100]],  loss_mask = [[0, 1, 1, 0]]
    t = 1: log_softmax([0, 0, 0])[2] = -1.0986;  t = 2: log_softmax([2, 0, 0])[0] = -0.2395
    sequence_logprobs -> [-1.3382];  average=True -> [-0.6691]
Worked example (level 2): policy_chosen = [-10], policy_rejected = [-12],
    ref_chosen = ref_rejected = [-11], beta = 0.5: logits = 2, loss = -logsigmoid(1) = 0.3133.

Constraints: PyTorch only; do not modify the inputs; padding labels (-100, V + 5, ...) must
never be gathered; logits of magnitude 1e4 must not overflow.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: F401  (F.logsigmoid, F.relu, ...)


def sequence_logprobs(logits: torch.Tensor, labels: torch.Tensor, loss_mask: torch.Tensor, *,
                      average: bool = False) -> torch.Tensor:
    """Log-probability of each sequence's labels under next-token logits.

    logits    (B, T, V) float16 / bfloat16 / float32 / float64
    labels    (B, T) int64; unscored positions may hold any id (-100, V + 5, ...)
    loss_mask (B, T) bool, or 0/1 int or float; loss_mask[:, 0] is never read

    Position t >= 1 is scored when loss_mask[:, t] != 0; its log-prob is
    log_softmax(logits[:, t - 1])[labels[:, t]]. Returns (B,): the sum of the scored log-probs,
    or their mean over the scored positions of the row when `average`. A row with no scored
    position: 0 when summing, ValueError when averaging. A scored label outside [0, V):
    ValueError. float32 result (math in float32) for float16/bfloat16/float32 logits, float64
    for float64. Stable for logits of magnitude 1e4; gradients flow to `logits`.
    """
    # TODO: shift (logits[:, :-1] against labels[:, 1:]), check the scored labels, never
    # gather an unscored label, upcast, log_softmax, gather, mask, sum or average.
    raise NotImplementedError


def bradley_terry_loss(chosen_rewards: torch.Tensor, rejected_rewards: torch.Tensor,
                       margin: float | torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Reward-model loss: mean over the batch of -logsigmoid(chosen - rejected - margin).

    chosen_rewards, rejected_rewards (B,) float; margin None, a float (0.0 is a margin of 0),
    or a (B,) tensor.
    Returns (loss, stats): loss 0-d with gradients to both reward tensors; stats, 0-d and
    detached: "accuracy" (fraction with chosen > rejected; ties are wrong; no margin) and
    "mean_difference" (mean of chosen - rejected).
    ValueError: the per-sequence tensors (a tensor margin too) differ in shape; B == 0.
    """
    # TODO: check shapes, the loss with logsigmoid, the stats without gradient.
    raise NotImplementedError


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor,
             ref_chosen: torch.Tensor, ref_rejected: torch.Tensor, *, beta: float = 0.1,
             loss_type: str = "sigmoid", label_smoothing: float = 0.0
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """DPO loss from (B,) sequence log-probs of the policy and of the frozen reference model.

    logits = (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected)
    "sigmoid" (level 2): mean of -(1 - eps) logsigmoid(beta logits) - eps logsigmoid(-beta logits),
                         eps = label_smoothing
    "ipo"     (level 3): mean of (logits - 1 / (2 beta)) ** 2
    "hinge"   (level 3): mean of relu(1 - beta logits)
    Gradients flow to policy_chosen and policy_rejected only: the reference inputs' .grad stays
    None (or zero) even when they require grad.
    Stats (detached): "chosen_rewards" = beta (policy_chosen - ref_chosen), "rejected_rewards"
    = beta (policy_rejected - ref_rejected), both (B,); "reward_accuracy" = mean of
    chosen_rewards > rejected_rewards (ties are wrong) and "reward_margin" = mean of
    chosen_rewards - rejected_rewards, both 0-d.
    ValueError: shapes differ, B == 0 (level 2); unknown loss_type, beta not finite or <= 0,
    label_smoothing outside [0, 0.5) for any loss_type (level 3).
    """
    # TODO: check the inputs, detach the reference, the logits, the loss of each type, the stats.
    raise NotImplementedError
