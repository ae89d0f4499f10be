"""A correct alternative: the gathered logit minus the row's logsumexp (no (B, T, V)
log-softmax is kept), padding zeroed with multiplication by a float mask, and the DPO loss
written through the per-answer log-ratios."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def sequence_logprobs(logits, labels, loss_mask, *, average=False):
    V = logits.shape[-1]
    dt = torch.float64 if logits.dtype == torch.float64 else torch.float32
    x = logits[..., :-1, :].to(dt)
    y = labels[..., 1:]
    m = (loss_mask[..., 1:] != 0).to(dt)
    out_of_range = ((y < 0) | (y >= V)).to(dt) * m
    if out_of_range.sum().item() > 0:
        raise ValueError("scored label out of vocabulary")
    y = torch.where(m > 0, y, 0)
    picked = torch.gather(x, 2, y[..., None])[..., 0]          # (B, T-1)
    lp = (picked - torch.logsumexp(x, dim=-1)) * m               # finite everywhere: 0 * x is 0
    s = lp.sum(-1)
    if not average:
        return s
    n = m.sum(-1)
    if (n == 0).any():
        raise ValueError("no scored position in a row")
    return s / n


def _validate(*ts):
    if len({tuple(t.shape) for t in ts}) != 1 or ts[0].dim() != 1:
        raise ValueError("per-sequence tensors must all be (B,)")
    if ts[0].numel() == 0:
        raise ValueError("empty batch")


def bradley_terry_loss(chosen_rewards, rejected_rewards, margin=None):
    tensors = [chosen_rewards, rejected_rewards] + ([margin] if isinstance(margin, torch.Tensor) else [])
    _validate(*tensors)
    diff = chosen_rewards - rejected_rewards
    target = diff if margin is None else diff - margin
    loss = torch.mean(-F.logsigmoid(target))
    with torch.no_grad():
        acc = torch.mean((chosen_rewards > rejected_rewards).to(diff.dtype))
        mean_diff = torch.mean(diff)
    return loss, {"accuracy": acc, "mean_difference": mean_diff}


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, *, beta=0.1,
             loss_type="sigmoid", label_smoothing=0.0):
    _validate(policy_chosen, policy_rejected, ref_chosen, ref_rejected)
    if not math.isfinite(beta) or not beta > 0:
        raise ValueError("beta must be finite and positive")
    if not (label_smoothing >= 0 and label_smoothing < 0.5):
        raise ValueError("label_smoothing must be in [0, 0.5)")
    with torch.no_grad():
        ref_gap = ref_chosen - ref_rejected
    logits = policy_chosen - policy_rejected - ref_gap
    if loss_type == "sigmoid":
        eps = label_smoothing
        losses = -F.logsigmoid(beta * logits) * (1 - eps) - F.logsigmoid(-beta * logits) * eps
    elif loss_type == "ipo":
        losses = (logits - 1 / (2 * beta)) ** 2
    elif loss_type == "hinge":
        losses = F.relu(1 - beta * logits)
    else:
        raise ValueError(f"unknown loss_type {loss_type}")
    with torch.no_grad():
        chosen = beta * (policy_chosen - ref_chosen)
        rejected = beta * (policy_rejected - ref_rejected)
        stats = {"chosen_rewards": chosen, "rejected_rewards": rejected,
                 "reward_accuracy": (chosen > rejected).to(chosen.dtype).mean(),
                 "reward_margin": (chosen - rejected).mean()}
    return losses.mean(), stats
