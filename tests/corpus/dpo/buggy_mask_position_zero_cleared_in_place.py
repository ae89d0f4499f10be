"""Clears loss_mask[:, 0] after loss_mask.bool(): for a bool mask .bool() is the caller's own tensor, so the input is modified."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

LOSS_TYPES = ("sigmoid", "ipo", "hinge")


def sequence_logprobs(logits: torch.Tensor, labels: torch.Tensor, loss_mask: torch.Tensor, *,
                      average: bool = False) -> torch.Tensor:
    """Log-probability of each sequence's labels under next-token `logits`.

    logits (B, T, V) float; labels (B, T) int; loss_mask (B, T) bool or 0/1 int/float.
    Position t >= 1 is scored as log_softmax(logits[:, t - 1])[labels[:, t]] where
    loss_mask[:, t] != 0; position 0 is never scored. Returns (B,): the sum, or the mean over the
    scored positions with `average=True`. float32 for float16/bfloat16/float32 logits (the math
    runs in float32), float64 for float64. ValueError: a scored label outside [0, V), or a row
    with no scored position when averaging.
    """
    B, T, V = logits.shape
    compute_dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    # logits[:, t - 1] predicts labels[:, t]: drop the last logit and the first label.
    loss_mask = loss_mask.bool()
    loss_mask[:, 0] = False
    scored = loss_mask[:, 1:]                                        # (B, T-1) bool
    targets = labels[:, 1:]                                          # (B, T-1)
    out_of_vocab = scored & ((targets < 0) | (targets >= V))
    if bool(out_of_vocab.any()):
        b, t = out_of_vocab.nonzero()[0].tolist()
        raise ValueError(f"labels[{b}, {t + 1}] = {int(targets[b, t])} is scored (loss_mask is "
                         f"non-zero) but outside the vocabulary [0, {V})")
    # Padding may hold -100 or ids >= V: point it at token 0 before gathering, zero it after.
    safe_targets = torch.where(scored, targets, torch.zeros_like(targets))
    # log_softmax subtracts the row max inside: stable for logits of magnitude 1e4.
    logp = logits[:, :-1].to(compute_dtype).log_softmax(dim=-1)      # (B, T-1, V)
    token_logp = logp.gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)  # (B, T-1)
    token_logp = torch.where(scored, token_logp, torch.zeros_like(token_logp))
    total = token_logp.sum(dim=-1)                                   # (B,)
    if not average:
        return total
    num_scored = scored.sum(dim=-1)                                  # (B,)
    if bool((num_scored == 0).any()):
        raise ValueError("average=True needs at least one scored position (t >= 1 with a "
                         "non-zero loss_mask) in every row")
    return total / num_scored.to(compute_dtype)


def _check_pair(*tensors: torch.Tensor) -> None:
    """Every per-sequence tensor is (B,) with the same B >= 1."""
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        raise ValueError(f"per-sequence tensors must share one shape (B,), got {sorted(shapes)}")
    (shape,) = shapes
    if len(shape) != 1:
        raise ValueError(f"per-sequence tensors must be 1-D (B,), got shape {shape}")
    if shape[0] == 0:
        raise ValueError("the batch is empty")


def bradley_terry_loss(chosen_rewards: torch.Tensor, rejected_rewards: torch.Tensor,
                       margin: float | torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Reward-model loss: mean of -logsigmoid(chosen - rejected - margin).

    chosen_rewards, rejected_rewards (B,); margin None, a float, or a (B,) tensor.
    Stats: "accuracy" (fraction with chosen > rejected; a tie is wrong) and "mean_difference"
    (mean of chosen - rejected), 0-d and detached. ValueError: shapes differ, empty batch.
    """
    if isinstance(margin, torch.Tensor):
        _check_pair(chosen_rewards, rejected_rewards, margin)
    else:
        _check_pair(chosen_rewards, rejected_rewards)
    difference = chosen_rewards - rejected_rewards                   # (B,)
    shifted = difference if margin is None else difference - margin
    # logsigmoid is -softplus(-x): finite for differences of any size, unlike log(sigmoid(x)).
    loss = -F.logsigmoid(shifted).mean()
    with torch.no_grad():
        stats = {"accuracy": (difference > 0).to(difference.dtype).mean(),
                 "mean_difference": difference.mean()}
    return loss, stats


def _check_dpo_options(beta: float, loss_type: str, label_smoothing: float) -> None:
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"unknown loss_type {loss_type!r}; expected one of {LOSS_TYPES}")
    if not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be finite and > 0, got {beta}")
    if not 0.0 <= label_smoothing < 0.5:   # also False for NaN
        raise ValueError(f"label_smoothing must be in [0, 0.5), got {label_smoothing}")


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor,
             ref_chosen: torch.Tensor, ref_rejected: torch.Tensor, *, beta: float = 0.1,
             loss_type: str = "sigmoid", label_smoothing: float = 0.0
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """DPO loss from sequence log-probs of the policy and the frozen reference model.

    All four inputs (B,). logits = (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected);
    "sigmoid": -(1 - eps) logsigmoid(beta logits) - eps logsigmoid(-beta logits);
    "ipo": (logits - 1 / (2 beta))^2; "hinge": relu(1 - beta logits); the batch mean.
    Gradients reach the policy log-probs only. Stats (detached): "chosen_rewards",
    "rejected_rewards" (B,), "reward_accuracy", "reward_margin" (0-d).
    """
    _check_pair(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    _check_dpo_options(beta, loss_type, label_smoothing)
    # The reference model is frozen: no gradient may reach it, even if its log-probs carry one.
    ref_chosen, ref_rejected = ref_chosen.detach(), ref_rejected.detach()
    logits = (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected)   # (B,)
    if loss_type == "sigmoid":
        losses = (-(1 - label_smoothing) * F.logsigmoid(beta * logits)
                  - label_smoothing * F.logsigmoid(-beta * logits))
    elif loss_type == "ipo":
        # IPO regresses the log-ratio gap onto 1 / (2 beta) (tau in the paper, eq. 17).
        losses = (logits - 1 / (2 * beta)) ** 2
    else:  # "hinge" (SLiC)
        losses = torch.relu(1 - beta * logits)
    with torch.no_grad():
        chosen_rewards = beta * (policy_chosen - ref_chosen)                   # (B,)
        rejected_rewards = beta * (policy_rejected - ref_rejected)            # (B,)
        stats = {"chosen_rewards": chosen_rewards, "rejected_rewards": rejected_rewards,
                 "reward_accuracy": (chosen_rewards > rejected_rewards).to(chosen_rewards.dtype).mean(),
                 "reward_margin": (chosen_rewards - rejected_rewards).mean()}
    return losses.mean(), stats
