"""PPO loss for RLHF: clipped policy loss, GAE, clipped value loss, KL-shaped rewards and
masked whitening.

Every (B, T) tensor covers the response tokens of B sequences, right-padded by `mask`:
each row holds its valid tokens first, then padding; every row has at least one valid token.

    mask   1 1 1 0        row 0: 3 valid tokens, then padding
           1 1 0 0        row 1: 2 valid tokens

`mask` is bool, or float holding 0.0 / 1.0; both give the same results. Padding may hold
anything (huge numbers, inf, NaN) and must change nothing: neither results nor gradients.

Every function raises ValueError when a (B, T) argument's shape differs from mask's.
Stats are detached 0-d tensors. Inputs are never modified.

Sanity check (level 1): at logprobs == old_logprobs the policy loss is minus the mean
advantage.

Levels: 1 ppo_policy_loss; 2 compute_gae and ppo_value_loss; 3 kl_shaped_rewards,
masked_whiten and ppo_loss.

Constraints: PyTorch only; ppo_policy_loss has no Python loop; compute_gae may loop over
time steps, never over batch rows.
"""

from __future__ import annotations

import torch  # noqa: F401  (for your solution)
from torch import Tensor


# ---------------------------------------------------------------------------- level 1


def ppo_policy_loss(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor,
                    clip_eps: float = 0.2) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO's clipped policy loss (the loss we minimise) over the valid tokens.

    Args:
        logprobs: (B, T) float, log pi(a_t | s_t) under the current policy (has gradient).
        old_logprobs: (B, T) float, the same under the rollout policy.
        advantages: (B, T) float.
        mask: (B, T) bool or 0/1 float, right-padded.
        clip_eps: PPO's clip range, > 0.

    Returns:
        (loss, stats): loss, a 0-d tensor of logprobs.dtype; stats, a dict of detached 0-d
        tensors "clipfrac" and "approx_kl".

    Raises:
        ValueError: a shape differs from mask's, or clip_eps <= 0.
    """
    # TODO: check shapes and clip_eps; keep padding out of values AND gradients.
    raise NotImplementedError


# ---------------------------------------------------------------------------- level 2


def compute_gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float,
                lam: float) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation over each row's valid tokens.

    Args:
        rewards: (B, T) float, per-token rewards.
        values: (B, T) float, the critic's V(s_t) (its dtype may differ from rewards').
        mask: (B, T) bool or 0/1 float, right-padded.
        gamma: discount, lam: GAE lambda, both in [0, 1].

    Returns:
        (advantages, returns), both (B, T) of rewards.dtype, 0 on padding and without
        gradient; returns are the critic's value targets.

    Raises:
        ValueError: a shape differs from mask's.
    """
    # TODO: vectorised over the batch (a loop over time steps is fine).
    raise NotImplementedError


def ppo_value_loss(values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor,
                   clip_eps_value: float = 0.2) -> Tensor:
    """The clipped value loss the critic trains with.

    Args:
        values: (B, T) float, the critic's current V(s_t) (has gradient).
        old_values: (B, T) float, V(s_t) at rollout time.
        returns: (B, T) float, the value targets.
        mask: (B, T) bool or 0/1 float, right-padded.
        clip_eps_value: how far values may move from old_values before clipping.

    Returns:
        A 0-d tensor of values.dtype; the gradient flows to values only.

    Raises:
        ValueError: a shape differs from mask's.
    """
    # TODO
    raise NotImplementedError


# ---------------------------------------------------------------------------- level 3


def kl_shaped_rewards(scores: Tensor, logprobs: Tensor, ref_logprobs: Tensor, mask: Tensor,
                      kl_coef: float) -> Tensor:
    """Per-token RLHF rewards: the reward model's score of each sequence, and a KL penalty
    against the frozen reference model on every token.

    Args:
        scores: (B,) float, one reward-model score per sequence.
        logprobs: (B, T) float, the policy's log-probabilities.
        ref_logprobs: (B, T) float, the frozen reference model's log-probabilities.
        mask: (B, T) bool or 0/1 float, right-padded.
        kl_coef: the weight of the KL penalty.

    Returns:
        (B, T) of logprobs.dtype, 0 on padding.

    Raises:
        ValueError: a (B, T) shape differs from mask's, or scores is not (B,).
    """
    # TODO
    raise NotImplementedError


def masked_whiten(x: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Whiten x over its valid entries: mean 0, variance 1.

    Args:
        x: (B, T) float.
        mask: (B, T) bool or 0/1 float.
        shift_mean: when False, the mean is kept (only the scale changes).
        eps: keeps the division finite.

    Returns:
        x's shape and dtype; padding positions are 0.

    Raises:
        ValueError: fewer than 2 valid entries, or x's shape differs from mask's.
    """
    # TODO
    raise NotImplementedError


def ppo_loss(logprobs: Tensor, old_logprobs: Tensor, values: Tensor, old_values: Tensor,
             rewards: Tensor, mask: Tensor, *, gamma: float = 1.0, lam: float = 0.95,
             clip_eps: float = 0.2, clip_eps_value: float = 0.2, vf_coef: float = 0.1,
             whiten_advantages: bool = True) -> tuple[Tensor, dict[str, Tensor]]:
    """One PPO step's loss, from the parts above.

    Args:
        logprobs, old_logprobs, values, old_values: (B, T) float, as in levels 1 and 2.
        rewards: (B, T) float, per-token rewards (as kl_shaped_rewards gives them).
        mask: (B, T) bool or 0/1 float, right-padded.
        vf_coef: the weight of the value loss in the total.
        whiten_advantages: whiten the advantages before the policy loss.

    Returns:
        (total, stats): total, a 0-d tensor whose gradient reaches logprobs and values only;
        stats: "policy_loss", "value_loss", "clipfrac", "approx_kl", all detached 0-d
        tensors.

    Raises:
        ValueError: a shape differs from mask's (or anything the parts raise).
    """
    # TODO: compose the functions above.
    raise NotImplementedError
