"""Correct `ppo` solution written differently from the reference: GAE as a discounted
cumulative sum by one (T, T) matrix product instead of a backward loop; masks applied by
torch.where on sanitised inputs; the last valid token found by argmax over a reversed mask.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _valid(mask: Tensor, *tensors: Tensor) -> Tensor:
    for t in tensors:
        if tuple(t.shape) != tuple(mask.shape):
            raise ValueError(f"shape {tuple(t.shape)} does not match mask {tuple(mask.shape)}")
    return mask.bool()


def _zero(x: Tensor, valid: Tensor) -> Tensor:
    return torch.where(valid, x, torch.zeros_like(x))


def _token_mean(x: Tensor, valid: Tensor) -> Tensor:
    return _zero(x, valid).sum() / valid.sum()


def ppo_policy_loss(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
    valid = _valid(mask, logprobs, old_logprobs, advantages)
    if not clip_eps > 0:
        raise ValueError("clip_eps must be > 0")
    lp = _zero(logprobs, valid)
    log_ratio = lp - _zero(old_logprobs.detach(), valid)
    adv = _zero(advantages.detach(), valid)
    ratio = log_ratio.exp()
    surr1 = ratio * adv
    surr2 = ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv
    per_token = -torch.min(surr1, surr2)          # -min(x, y) == max(-x, -y)
    loss = _token_mean(per_token, valid)
    stats = {"clipfrac": _token_mean((surr2 < surr1).double(), valid).detach(),
             "approx_kl": _token_mean(0.5 * log_ratio.square(), valid).detach()}
    return loss, stats


def compute_gae(rewards, values, mask, gamma, lam):
    valid = _valid(mask, rewards, values)
    r = _zero(rewards.detach(), valid)
    v = _zero(values.detach(), valid).to(r.dtype)
    T = r.shape[1]
    next_v = torch.nn.functional.pad(v[:, 1:], (0, 1))
    delta = _zero(r + gamma * next_v - v, valid)                       # (B, T)
    steps = torch.arange(T)
    k = steps[None, :] - steps[:, None]                                # k[t, s] = s - t
    decay = torch.tensor(gamma * lam, dtype=r.dtype) ** k.clamp(min=0).to(r.dtype)
    discount = torch.where(k >= 0, decay, torch.zeros_like(decay))    # (T, T), upper triangle
    adv = _zero(delta @ discount.T, valid)                             # A_t = sum_s (gl)^(s-t) delta_s
    return adv, _zero(adv + v, valid)


def ppo_value_loss(values, old_values, returns, mask, clip_eps_value=0.2):
    valid = _valid(mask, values, old_values, returns)
    v = _zero(values, valid)
    old = _zero(old_values.detach(), valid)
    ret = _zero(returns.detach(), valid)
    v_clip = old + (v - old).clamp(-clip_eps_value, clip_eps_value)
    loss = torch.max((v - ret).square(), (v_clip - ret).square())
    return 0.5 * _token_mean(loss, valid)


def kl_shaped_rewards(scores, logprobs, ref_logprobs, mask, kl_coef):
    valid = _valid(mask, logprobs, ref_logprobs)
    if scores.dim() != 1 or scores.shape[0] != mask.shape[0]:
        raise ValueError("scores must have shape (B,)")
    kl = _zero(logprobs.detach(), valid) - _zero(ref_logprobs.detach(), valid)
    T = mask.shape[1]
    last = T - 1 - valid.flip(1).int().argmax(dim=1)                  # (B,)
    onehot = torch.nn.functional.one_hot(last, T).bool()
    bonus = torch.where(onehot, scores.detach()[:, None].to(kl.dtype), torch.zeros_like(kl))
    return _zero(-kl_coef * kl + bonus, valid)


def masked_whiten(x, mask, shift_mean=True, eps=1e-8):
    valid = _valid(mask, x)
    n = valid.sum()
    if n < 2:
        raise ValueError("masked_whiten needs at least 2 valid entries")
    mean = _token_mean(x, valid)
    var = _zero((x - mean) ** 2, valid).sum() / (n - 1)
    out = (x - mean) * torch.rsqrt(var + eps)
    return _zero(out if shift_mean else out + mean, valid)


def ppo_loss(logprobs, old_logprobs, values, old_values, rewards, mask, *, gamma=1.0,
             lam=0.95, clip_eps=0.2, clip_eps_value=0.2, vf_coef=0.1, whiten_advantages=True):
    _valid(mask, logprobs, old_logprobs, values, old_values, rewards)
    adv, ret = compute_gae(rewards, values.detach(), mask, gamma, lam)
    if whiten_advantages:
        adv = masked_whiten(adv, mask)
    pg, pstats = ppo_policy_loss(logprobs, old_logprobs, adv, mask, clip_eps)
    vf = ppo_value_loss(values, old_values, ret, mask, clip_eps_value)
    stats = {"policy_loss": pg.detach(), "value_loss": vf.detach(), **pstats}
    return pg + vf_coef * vf, stats
