"""The suite's oracle: the statement's formulas in float64, one element at a time, with their
gradients written out by hand. Deliberately not the reference's code (no log_softmax, no
logsigmoid, no autograd), so a shared mistake cannot hide.

Inputs are small (B <= 4, T <= 6, V <= 7), so plain Python loops are cheap and obvious.
"""

from __future__ import annotations

import math

import torch


def _logsumexp(row: list[float]) -> float:
    top = max(row)
    return top + math.log(sum(math.exp(x - top) for x in row))


def _log_sigmoid(x: float) -> float:
    """log(1 / (1 + e^-x)) without overflow on either side."""
    if x >= 0:
        return -math.log1p(math.exp(-x))
    return x - math.log1p(math.exp(x))


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def scored_positions(labels: torch.Tensor, loss_mask: torch.Tensor) -> list[list[int]]:
    """For each row, the positions t >= 1 whose loss_mask is non-zero."""
    B, T = labels.shape
    mask = loss_mask.tolist()
    return [[t for t in range(1, T) if mask[b][t] != 0] for b in range(B)]


def sequence_logprobs(logits: torch.Tensor, labels: torch.Tensor, loss_mask: torch.Tensor,
                      average: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(values (B,), d sum(values) / d logits (B, T, V)) in float64. The caller makes sure
    every scored label is in the vocabulary and, when averaging, every row scores a position."""
    x = logits.detach().double()
    B, T, V = x.shape
    rows = x.tolist()
    ids = labels.tolist()
    values = []
    grad = torch.zeros(B, T, V, dtype=torch.float64)
    for b, positions in enumerate(scored_positions(labels, loss_mask)):
        weight = 1.0 / len(positions) if average else 1.0
        total = 0.0
        for t in positions:
            row = rows[b][t - 1]              # logits at t - 1 predict the label at t
            lse = _logsumexp(row)
            total += row[ids[b][t]] - lse
            probs = torch.tensor([math.exp(v - lse) for v in row], dtype=torch.float64)
            grad[b, t - 1] -= weight * probs
            grad[b, t - 1, ids[b][t]] += weight
        values.append(total * weight)
    return torch.tensor(values, dtype=torch.float64), grad


def bradley_terry(chosen: torch.Tensor, rejected: torch.Tensor, margin: float | torch.Tensor | None
                  ) -> dict[str, torch.Tensor]:
    """loss, its gradients to chosen and rejected, accuracy, mean_difference (float64)."""
    c, r = chosen.detach().double().tolist(), rejected.detach().double().tolist()
    B = len(c)
    if margin is None:
        m = [0.0] * B
    elif isinstance(margin, torch.Tensor):
        m = margin.detach().double().tolist()
    else:
        m = [float(margin)] * B
    z = [c[i] - r[i] - m[i] for i in range(B)]
    loss = -sum(_log_sigmoid(v) for v in z) / B
    # d/dz -log sigmoid(z) = -sigmoid(-z)
    dz = [-_sigmoid(-v) / B for v in z]
    return {"loss": torch.tensor(loss, dtype=torch.float64),
            "grad_chosen": torch.tensor(dz, dtype=torch.float64),
            "grad_rejected": -torch.tensor(dz, dtype=torch.float64),
            "accuracy": torch.tensor(sum(c[i] > r[i] for i in range(B)) / B, dtype=torch.float64),
            "mean_difference": torch.tensor(sum(c[i] - r[i] for i in range(B)) / B, dtype=torch.float64)}


def dpo(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
        ref_rejected: torch.Tensor, beta: float, loss_type: str, label_smoothing: float
        ) -> dict[str, torch.Tensor]:
    """loss, gradients to the two policy inputs, and the four stats (float64)."""
    pc, pr = policy_chosen.detach().double().tolist(), policy_rejected.detach().double().tolist()
    rc, rr = ref_chosen.detach().double().tolist(), ref_rejected.detach().double().tolist()
    B = len(pc)
    eps = label_smoothing
    losses, dlogits = [], []
    for i in range(B):
        z = (pc[i] - pr[i]) - (rc[i] - rr[i])
        if loss_type == "sigmoid":
            losses.append(-(1 - eps) * _log_sigmoid(beta * z) - eps * _log_sigmoid(-beta * z))
            dlogits.append(-(1 - eps) * beta * _sigmoid(-beta * z) + eps * beta * _sigmoid(beta * z))
        elif loss_type == "ipo":
            target = 1.0 / (2.0 * beta)
            losses.append((z - target) ** 2)
            dlogits.append(2.0 * (z - target))
        elif loss_type == "hinge":
            slack = 1.0 - beta * z
            losses.append(max(slack, 0.0))
            dlogits.append(-beta if slack > 0 else 0.0)
        else:
            raise AssertionError(loss_type)
    chosen = [beta * (pc[i] - rc[i]) for i in range(B)]
    rejected = [beta * (pr[i] - rr[i]) for i in range(B)]
    grad = torch.tensor(dlogits, dtype=torch.float64) / B
    return {"loss": torch.tensor(sum(losses) / B, dtype=torch.float64),
            "grad_policy_chosen": grad, "grad_policy_rejected": -grad,
            "chosen_rewards": torch.tensor(chosen, dtype=torch.float64),
            "rejected_rewards": torch.tensor(rejected, dtype=torch.float64),
            "reward_accuracy": torch.tensor(sum(chosen[i] > rejected[i] for i in range(B)) / B,
                                            dtype=torch.float64),
            "reward_margin": torch.tensor(sum(chosen[i] - rejected[i] for i in range(B)) / B,
                                          dtype=torch.float64)}


def hinge_kink_free(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor,
                    ref_chosen: torch.Tensor, ref_rejected: torch.Tensor, beta: float) -> bool:
    """True when no pair sits at the hinge's kink (1 - beta logits == 0 within 1e-6), where
    relu and clamp legitimately disagree on the gradient."""
    z = (policy_chosen.double() - policy_rejected.double()) - (ref_chosen.double() - ref_rejected.double())
    return bool(((1 - beta * z).abs() > 1e-6).all())
