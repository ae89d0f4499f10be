"""Correct `ppo` solution written differently from the reference: every loss is a
torch.where over explicit branch conditions (no torch.maximum / torch.clamp), masks are
converted with `mask > 0.5`, and clipfrac is read off the ratio and the sign of the advantage.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _check(mask: Tensor, *tensors: Tensor) -> None:
    if any(t.shape != mask.shape for t in tensors):
        raise ValueError("shape mismatch")


def _as_bool(mask: Tensor) -> Tensor:
    return mask if mask.dtype == torch.bool else mask > 0.5


def _clean(x: Tensor, valid: Tensor) -> Tensor:
    return torch.where(valid, x, 0.0)


def _mean(x: Tensor, valid: Tensor) -> Tensor:
    return _clean(x, valid).sum() / valid.sum()


def ppo_policy_loss(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    _check(mask, logprobs, old_logprobs, advantages)
    if clip_eps <= 0:
        raise ValueError("clip_eps must be positive")
    valid = _as_bool(mask)
    lp = _clean(logprobs, valid)
    old = _clean(old_logprobs, valid).detach()
    adv = _clean(advantages, valid).detach()
    ratio = torch.exp(lp - old)
    high, low = 1.0 + clip_eps, 1.0 - clip_eps
    # Clipped branch active exactly when the ratio left the range in the direction A pushes.
    clipped_active = ((adv > 0) & (ratio > high)) | ((adv < 0) & (ratio < low))
    bound = torch.where(ratio > high, torch.full_like(ratio, high), torch.full_like(ratio, low))
    per_token = torch.where(clipped_active, -adv * bound, -adv * ratio)
    loss = _mean(per_token, valid)
    with torch.no_grad():
        clipfrac = _mean(clipped_active.to(lp.dtype), valid)
        approx_kl = _mean(0.5 * (lp - old) ** 2, valid)
    return loss, {"clipfrac": clipfrac, "approx_kl": approx_kl}


def compute_gae(rewards, values, mask, gamma, lam):
    _check(mask, rewards, values)
    valid = _as_bool(mask)
    with torch.no_grad():
        r = _clean(rewards, valid)
        v = _clean(values, valid).to(r.dtype)
        B, T = r.shape
        adv = torch.zeros_like(r)
        last = torch.zeros(B, dtype=r.dtype)
        next_v = torch.zeros(B, dtype=r.dtype)
        for t in range(T - 1, -1, -1):
            delta = r[:, t] + gamma * next_v - v[:, t]
            last = torch.where(valid[:, t], delta + gamma * lam * last, 0.0)
            adv[:, t] = last
            next_v = v[:, t]
        return adv, torch.where(valid, adv + v, 0.0)


def ppo_value_loss(values, old_values, returns, mask, clip_eps_value=0.2):
    _check(mask, values, old_values, returns)
    valid = _as_bool(mask)
    v = _clean(values, valid)
    old = _clean(old_values, valid).detach()
    ret = _clean(returns, valid).detach()
    high, low = old + clip_eps_value, old - clip_eps_value
    v_clipped = torch.where(v > high, high, torch.where(v < low, low, v))
    err, err_clipped = (v - ret) ** 2, (v_clipped - ret) ** 2
    per_token = torch.where(err_clipped > err, err_clipped, err)
    return 0.5 * _mean(per_token, valid)


def kl_shaped_rewards(scores, logprobs, ref_logprobs, mask, kl_coef):
    _check(mask, logprobs, ref_logprobs)
    if scores.shape != (mask.shape[0],):
        raise ValueError("scores must be (B,)")
    valid = _as_bool(mask)
    with torch.no_grad():
        kl = _clean(logprobs, valid) - _clean(ref_logprobs, valid)
        rewards = -kl_coef * kl
        lengths = valid.long().sum(1)
        rewards[torch.arange(mask.shape[0]), lengths - 1] += scores.to(rewards.dtype)
        return torch.where(valid, rewards, 0.0)


def masked_whiten(x, mask, shift_mean=True, eps=1e-8):
    _check(mask, x)
    valid = _as_bool(mask)
    n = int(valid.sum())
    if n < 2:
        raise ValueError("need at least two valid entries")
    mean = _mean(x, valid)
    var = _mean((x - mean) ** 2, valid) * n / (n - 1)
    out = (x - mean) / torch.sqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return torch.where(valid, out, 0.0)


def ppo_loss(logprobs, old_logprobs, values, old_values, rewards, mask, *, gamma=1.0,
             lam=0.95, clip_eps=0.2, clip_eps_value=0.2, vf_coef=0.1, whiten_advantages=True):
    _check(mask, logprobs, old_logprobs, values, old_values, rewards)
    adv, returns = compute_gae(rewards, values.detach(), mask, gamma, lam)
    if whiten_advantages:
        adv = masked_whiten(adv, mask)
    pg, stats = ppo_policy_loss(logprobs, old_logprobs, adv, mask, clip_eps)
    vl = ppo_value_loss(values, old_values, returns, mask, clip_eps_value)
    return pg + vf_coef * vl, {"policy_loss": pg.detach(), "value_loss": vl.detach(), **stats}
