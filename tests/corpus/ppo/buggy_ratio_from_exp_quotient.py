"""Buggy `ppo` solution (corpus): a copy of the reference with one mistake.

Mistake: the ratio is exp(logprobs) / exp(old_logprobs): both exponentials underflow to 0 for
log-probs far below 0 (below about -17 in float16, -104 in float32), giving 0 / 0 = NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["compute_gae", "kl_shaped_rewards", "masked_mean", "masked_whiten", "ppo_loss",
           "ppo_policy_loss", "ppo_value_loss"]


# ---------------------------------------------------------------------------- masking helpers


def _check_same_shape(mask: Tensor, **tensors: Tensor) -> None:
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(mask.shape):
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but mask has shape "
                             f"{tuple(mask.shape)}; every (B, T) tensor must match the mask")


def _valid(mask: Tensor) -> Tensor:
    """The mask as bool: a bool mask as is, a 0/1 float mask as mask != 0."""
    return mask if mask.dtype == torch.bool else mask != 0


def _zero_padding(x: Tensor, valid: Tensor) -> Tensor:
    # torch.where, not x * mask: NaN * 0 is NaN, and inf * 0 is NaN too. Applied to the
    # inputs (not only the outputs) so the backward pass never multiplies a zero by a NaN.
    return torch.where(valid, x, torch.zeros((), dtype=x.dtype, device=x.device))


def masked_mean(x: Tensor, valid: Tensor) -> Tensor:
    """Token mean over the valid entries of the whole batch; padding never leaks in."""
    num_valid = valid.sum()
    return _zero_padding(x, valid).sum() / num_valid


# ---------------------------------------------------------------------------- level 1


def ppo_policy_loss(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor,
                    clip_eps: float = 0.2) -> tuple[Tensor, dict[str, Tensor]]:
    """Clipped surrogate loss: token mean of max(-A * ratio, -A * clip(ratio, 1 -+ eps)).

    logprobs, old_logprobs, advantages, mask: (B, T); gradients flow to logprobs only.
    Returns (loss, {"clipfrac", "approx_kl"}): loss a 0-d tensor of logprobs.dtype, stats
    detached 0-d tensors.
    """
    _check_same_shape(mask, logprobs=logprobs, old_logprobs=old_logprobs, advantages=advantages)
    if not clip_eps > 0:
        raise ValueError(f"clip_eps must be > 0, got {clip_eps}")
    valid = _valid(mask)
    logprobs = _zero_padding(logprobs, valid)
    old_logprobs = _zero_padding(old_logprobs.detach(), valid)
    advantages = _zero_padding(advantages.detach(), valid)

    log_ratio = logprobs - old_logprobs                               # (B, T)
    ratio = torch.exp(logprobs) / torch.exp(old_logprobs)             # (B, T)
    unclipped = -advantages * ratio                                   # (B, T)
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    # The pessimistic (larger) loss: once the ratio has left the trust region in the direction
    # the advantage pushes, the clipped term is constant and the gradient vanishes.
    per_token = torch.maximum(unclipped, clipped)                     # (B, T)
    loss = masked_mean(per_token, valid)

    with torch.no_grad():
        clipfrac = masked_mean((clipped > unclipped).to(logprobs.dtype), valid)
        approx_kl = masked_mean(0.5 * log_ratio ** 2, valid)
    return loss, {"clipfrac": clipfrac, "approx_kl": approx_kl}


# ---------------------------------------------------------------------------- level 2


@torch.no_grad()
def compute_gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float,
                lam: float) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation, backwards over each row's valid tokens.

    rewards, values, mask: (B, T). Returns (advantages, returns), both (B, T) of
    rewards.dtype, zero on padding, without gradient; returns = advantages + values.
    """
    _check_same_shape(mask, rewards=rewards, values=values)
    valid = _valid(mask)
    rewards = _zero_padding(rewards.detach(), valid)
    values = _zero_padding(values.detach().to(rewards.dtype), valid)
    B, T = rewards.shape

    # V_{t+1}, with 0 after the last column; with right padding and values zeroed on padding,
    # the value after a row's last valid token is 0: the episode ends there.
    next_values = torch.cat([values[:, 1:], values.new_zeros(B, 1)], dim=1)   # (B, T)
    deltas = rewards + gamma * next_values - values                            # (B, T)

    advantages = torch.zeros_like(rewards)                                     # (B, T)
    running = rewards.new_zeros(B)                                             # (B,)
    for t in reversed(range(T)):
        running = deltas[:, t] + gamma * lam * running
        running = _zero_padding(running, valid[:, t])
        advantages[:, t] = running
    returns = _zero_padding(advantages + values, valid)
    return advantages, returns


def ppo_value_loss(values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor,
                   clip_eps_value: float = 0.2) -> Tensor:
    """0.5 * token mean of max((v - R)^2, (clip(v, old_v -+ eps) - R)^2).

    values, old_values, returns, mask: (B, T); gradients flow to values only. Returns a 0-d
    tensor of values.dtype.
    """
    _check_same_shape(mask, values=values, old_values=old_values, returns=returns)
    valid = _valid(mask)
    values = _zero_padding(values, valid)
    old_values = _zero_padding(old_values.detach(), valid)
    returns = _zero_padding(returns.detach(), valid)

    # The critic may not move more than eps away from its rollout-time value to cut its loss.
    values_clipped = torch.clamp(values, old_values - clip_eps_value,
                                 old_values + clip_eps_value)              # (B, T)
    unclipped = (values - returns) ** 2                                    # (B, T)
    clipped = (values_clipped - returns) ** 2                              # (B, T)
    return 0.5 * masked_mean(torch.maximum(unclipped, clipped), valid)


# ---------------------------------------------------------------------------- level 3


@torch.no_grad()
def kl_shaped_rewards(scores: Tensor, logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor,
                      kl_coef: float) -> Tensor:
    """Per-token rewards: -kl_coef * (logprobs - ref_logprobs), plus scores[b] at the last
    valid token of row b; zero on padding; no gradient.

    scores: (B,); logprobs, ref_logprobs, mask: (B, T). Returns (B, T) of logprobs.dtype.
    """
    _check_same_shape(mask, logprobs=logprobs, ref_logprobs=ref_logprobs)
    if tuple(scores.shape) != (mask.shape[0],):
        raise ValueError(f"scores has shape {tuple(scores.shape)}, expected ({mask.shape[0]},): "
                         "one score per sequence")
    valid = _valid(mask)
    logprobs = _zero_padding(logprobs.detach(), valid)
    ref_logprobs = _zero_padding(ref_logprobs.detach(), valid)
    rewards = -kl_coef * (logprobs - ref_logprobs)                         # (B, T)

    # Right padding: the last valid token of row b sits at num_valid[b] - 1.
    last_ids = valid.sum(dim=1) - 1                                        # (B,)
    positions = torch.arange(mask.shape[1], device=mask.device)            # (T,)
    is_last = positions[None, :] == last_ids[:, None]                      # (B, T)
    scores = scores.detach().to(rewards.dtype)[:, None]                    # (B, 1)
    rewards = rewards + torch.where(is_last, scores, torch.zeros_like(rewards))
    return _zero_padding(rewards, valid)


def masked_whiten(x: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """(x - mean) * rsqrt(var + eps), mean and unbiased variance over the valid entries;
    shift_mean=False adds the mean back; padding is 0. x, mask: same shape."""
    _check_same_shape(mask, x=x)
    valid = _valid(mask)
    num_valid = int(valid.sum())
    if num_valid < 2:
        raise ValueError(f"masked_whiten needs at least 2 valid entries for an unbiased "
                         f"variance, got {num_valid}")
    mean = masked_mean(x, valid)
    centered = _zero_padding(x - mean, valid)
    var = (centered ** 2).sum() / (num_valid - 1)                           # Bessel-corrected
    whitened = centered * torch.rsqrt(var + eps)
    if not shift_mean:
        whitened = whitened + mean
    return _zero_padding(whitened, valid)


def ppo_loss(logprobs: Tensor, old_logprobs: Tensor, values: Tensor, old_values: Tensor,
             rewards: Tensor, mask: Tensor, *, gamma: float = 1.0, lam: float = 0.95,
             clip_eps: float = 0.2, clip_eps_value: float = 0.2, vf_coef: float = 0.1,
             whiten_advantages: bool = True) -> tuple[Tensor, dict[str, Tensor]]:
    """One PPO step's loss: policy loss + vf_coef * value loss.

    All tensors (B, T). GAE runs on values.detach(); the value targets (returns) are taken
    before the advantages are whitened. Stats: policy_loss, value_loss, clipfrac, approx_kl,
    all detached 0-d tensors.
    """
    _check_same_shape(mask, logprobs=logprobs, old_logprobs=old_logprobs, values=values,
                      old_values=old_values, rewards=rewards)
    advantages, returns = compute_gae(rewards, values.detach(), mask, gamma, lam)
    if whiten_advantages:
        advantages = masked_whiten(advantages, mask)
    policy_loss, stats = ppo_policy_loss(logprobs, old_logprobs, advantages, mask, clip_eps)
    value_loss = ppo_value_loss(values, old_values, returns, mask, clip_eps_value)
    total = policy_loss + vf_coef * value_loss
    return total, {"policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(),
                   "clipfrac": stats["clipfrac"], "approx_kl": stats["approx_kl"]}
