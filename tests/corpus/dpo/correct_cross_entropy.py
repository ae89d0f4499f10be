"""A correct alternative: log-probs through F.cross_entropy with ignore_index, losses through
softplus, stats computed from detached copies, validation written differently."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

IGNORE = -100


def sequence_logprobs(logits, labels, loss_mask, *, average=False):
    B, T, V = logits.shape
    work = torch.float64 if logits.dtype == torch.float64 else torch.float32
    pred = logits[:, :-1].to(work)                      # (B, T-1, V)
    target = labels[:, 1:].long()
    keep = loss_mask[:, 1:].bool()
    bad = keep & ((target < 0) | (target >= V))
    if bad.any().item():
        raise ValueError("a scored label lies outside the vocabulary")
    # unscored positions become the ignore index: cross_entropy neither reads nor grades them
    target = target.masked_fill(~keep, IGNORE)
    nll = F.cross_entropy(pred.reshape(-1, V), target.reshape(-1), ignore_index=IGNORE,
                          reduction="none").reshape(B, T - 1)
    total = -nll.sum(-1)
    if average:
        counts = keep.sum(-1)
        if (counts == 0).any().item():
            raise ValueError("a row has no scored position")
        total = total / counts
    return total


def _same_shape(*ts):
    first = ts[0].shape
    if any(t.shape != first for t in ts) or len(first) != 1:
        raise ValueError("shape mismatch")
    if first[0] < 1:
        raise ValueError("empty batch")


def bradley_terry_loss(chosen_rewards, rejected_rewards, margin=None):
    if torch.is_tensor(margin):
        _same_shape(chosen_rewards, rejected_rewards, margin)
    else:
        _same_shape(chosen_rewards, rejected_rewards)
    gap = chosen_rewards - rejected_rewards
    m = 0.0 if margin is None else margin
    loss = F.softplus(-(gap - m)).mean()
    g = gap.detach()
    return loss, {"accuracy": (g > 0).float().mean(), "mean_difference": g.mean()}


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, *, beta=0.1,
             loss_type="sigmoid", label_smoothing=0.0):
    _same_shape(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    if loss_type not in {"sigmoid", "ipo", "hinge"}:
        raise ValueError(f"loss_type {loss_type!r}")
    if math.isnan(beta) or math.isinf(beta) or beta <= 0:
        raise ValueError("beta")
    if math.isnan(label_smoothing) or label_smoothing < 0 or label_smoothing >= 0.5:
        raise ValueError("label_smoothing")
    chosen_logratio = policy_chosen - ref_chosen.detach()
    rejected_logratio = policy_rejected - ref_rejected.detach()
    z = chosen_logratio - rejected_logratio
    if loss_type == "sigmoid":
        per_pair = ((1 - label_smoothing) * F.softplus(-beta * z)
                    + label_smoothing * F.softplus(beta * z))
    elif loss_type == "ipo":
        per_pair = (z - 0.5 / beta).pow(2)
    else:
        per_pair = (1 - beta * z).clamp(min=0)
    cr = beta * chosen_logratio.detach()
    rr = beta * rejected_logratio.detach()
    stats = {"chosen_rewards": cr, "rejected_rewards": rr,
             "reward_accuracy": (cr > rr).to(cr.dtype).mean(), "reward_margin": (cr - rr).mean()}
    return per_pair.mean(), stats
