"""PPO loss for RLHF: clipped policy loss, GAE, clipped value loss, KL-shaped rewards and
masked whitening.

Every (B, T) tensor covers the response tokens of B sequences, right-padded by `mask`:
each row holds its valid tokens first, then padding; every row has at least one valid token.

    mask   1 1 1 0        row 0: 3 valid tokens, then padding
           1 1 0 0        row 1: 2 valid tokens

`mask` is bool, or float holding 0.0 / 1.0. Aggregation everywhere is the token mean over
the valid tokens of the whole batch, sum(x * mask) / sum(mask), computed so that padding
holding ANY value (huge numbers, inf, NaN) changes nothing: neither results nor gradients.
Hint: NaN * 0 is NaN; look at torch.where.

Every function raises ValueError when a (B, T) argument's shape differs from mask's.
Stats are detached 0-d tensors.

Worked example (level 1), clip_eps = 0.2, one row, mask [1, 1, 0]:
    logprobs     [0.0, 0.5, 9.9]     old_logprobs [0.0, 0.0, 0.0]     advantages [1.0, 1.0, 7.0]
    ratio        [1.0, 1.6487]       (padding ignored)
    per token    max(-A * ratio, -A * clip(ratio, 0.8, 1.2)) = [-1.0, -1.2]
    loss         (-1.0 - 1.2) / 2 = -1.1
    clipfrac     1 / 2 = 0.5          (token 1: the clipped term -1.2 > -1.6487)
    approx_kl    (0 + 0.5 * 0.5 ** 2) / 2 = 0.0625
    d loss / d logprobs = [-0.5, 0.0, 0.0]   (token 1 is clipped: no gradient)

Levels: 1 ppo_policy_loss; 2 compute_gae and ppo_value_loss; 3 kl_shaped_rewards,
masked_whiten and ppo_loss.

Constraints: PyTorch only; ppo_policy_loss has no Python loop; compute_gae may loop over
time steps, never over batch rows; inputs are never modified.
"""

from __future__ import annotations

import torch
from torch import Tensor


# ---------------------------------------------------------------------------- level 1


def ppo_policy_loss(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor,
                    clip_eps: float = 0.2) -> tuple[Tensor, dict[str, Tensor]]:
    """The PPO clipped surrogate loss.

    Args:
        logprobs: (B, T) float, log pi(a_t | s_t) under the current policy (has gradient).
        old_logprobs: (B, T) float, the same under the rollout policy; a constant.
        advantages: (B, T) float, a constant.
        mask: (B, T) bool or 0/1 float, right-padded.
        clip_eps: the clip range, > 0.

    Per valid token: ratio = exp(logprobs - old_logprobs) and
        loss_t = max(-A_t * ratio_t, -A_t * clip(ratio_t, 1 - clip_eps, 1 + clip_eps)).

    Returns:
        (loss, stats): loss is the token mean of loss_t over the valid tokens of the whole
        batch, a 0-d tensor of logprobs.dtype whose gradient flows to logprobs only (none to
        old_logprobs or advantages; exactly 0 on padding). stats is a dict of detached 0-d
        tensors:
          "clipfrac": the fraction of valid tokens where the clipped term is strictly larger;
          "approx_kl": the token mean of 0.5 * (logprobs - old_logprobs) ** 2.

    Raises:
        ValueError: a shape differs from mask's, or clip_eps <= 0.
    """
    # TODO: check shapes and clip_eps; keep padding out of values AND gradients.
    raise NotImplementedError


# ---------------------------------------------------------------------------- level 2


def compute_gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float,
                lam: float) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation, computed backwards over each row's valid tokens.

    Args:
        rewards: (B, T) float, per-token rewards.
        values: (B, T) float, the critic's V(s_t).
        mask: (B, T) bool or 0/1 float, right-padded.
        gamma: discount, lam: GAE lambda, both in [0, 1].

    delta_t = r_t + gamma * V_{t+1} - V_t and A_t = delta_t + gamma * lam * A_{t+1}, where
    the value (and the advantage) after a row's last valid token is 0: the episode ends there.

    Returns:
        (advantages, returns), both (B, T) of rewards.dtype, returns = advantages + values,
        both 0 on padding and without gradient.

    Raises:
        ValueError: a shape differs from mask's.
    """
    # TODO: the backward recursion, vectorised over the batch.
    raise NotImplementedError


def ppo_value_loss(values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor,
                   clip_eps_value: float = 0.2) -> Tensor:
    """The clipped value loss.

    Args:
        values: (B, T) float, the critic's current V(s_t) (has gradient).
        old_values: (B, T) float, V(s_t) at rollout time; a constant.
        returns: (B, T) float, the value targets; a constant.
        mask: (B, T) bool or 0/1 float, right-padded.
        clip_eps_value: how far values may move from old_values.

    Returns:
        0.5 * token mean over valid tokens of
        max((v - R)^2, (clip(v, old_v - clip_eps_value, old_v + clip_eps_value) - R)^2),
        a 0-d tensor of values.dtype; gradient flows to values only (exactly 0 on padding).

    Raises:
        ValueError: a shape differs from mask's.
    """
    # TODO
    raise NotImplementedError


# ---------------------------------------------------------------------------- level 3


def kl_shaped_rewards(scores: Tensor, logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor,
                      kl_coef: float) -> Tensor:
    """Per-token RLHF rewards: a KL penalty against the reference model plus the
    reward model's score on the last token.

    Args:
        scores: (B,) float, one reward-model score per sequence.
        logprobs: (B, T) float, the policy's log-probabilities.
        ref_logprobs: (B, T) float, the frozen reference model's log-probabilities.
        mask: (B, T) bool or 0/1 float, right-padded.
        kl_coef: the KL penalty coefficient.

    Returns:
        (B, T) of logprobs.dtype, without gradient: -kl_coef * (logprobs - ref_logprobs) on
        valid tokens, plus scores[b] at the last valid token of row b; 0 on padding.

    Raises:
        ValueError: a (B, T) shape differs from mask's, or scores is not (B,).
    """
    # TODO
    raise NotImplementedError


def masked_whiten(x: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Whiten x over its valid entries.

    Args:
        x: (B, T) float.
        mask: (B, T) bool or 0/1 float.
        shift_mean: when False, the mean is added back (only the scale changes).
        eps: added to the variance.

    Returns:
        (x - mean) * rsqrt(var + eps), of x's shape and dtype, where mean and the unbiased
        variance (divide by n - 1) are over the n valid entries of the whole batch; with
        shift_mean=False, mean is added back. Padding positions are 0 either way.

    Raises:
        ValueError: fewer than 2 valid entries, or x's shape differs from mask's.
    """
    # TODO
    raise NotImplementedError


def ppo_loss(logprobs: Tensor, old_logprobs: Tensor, values: Tensor, old_values: Tensor,
             rewards: Tensor, mask: Tensor, *, gamma: float = 1.0, lam: float = 0.95,
             clip_eps: float = 0.2, clip_eps_value: float = 0.2, vf_coef: float = 0.1,
             whiten_advantages: bool = True) -> tuple[Tensor, dict[str, Tensor]]:
    """One PPO step's loss.

    Args:
        logprobs, old_logprobs, values, old_values, rewards: (B, T) float.
        mask: (B, T) bool or 0/1 float, right-padded.

    Steps: GAE on values.detach() (advantages, returns); the returns are the value targets,
    taken BEFORE any whitening; advantages whitened with masked_whiten when
    whiten_advantages; then the policy loss and the value loss.

    Returns:
        (total, stats): total = policy loss + vf_coef * value loss, a 0-d tensor with
        gradient; stats: "policy_loss", "value_loss", "clipfrac", "approx_kl", all detached
        0-d tensors.

    Raises:
        ValueError: a shape differs from mask's (or anything the parts raise).
    """
    # TODO: compose the functions above.
    raise NotImplementedError
