# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The PPO loss for RLHF
#
# A walkthrough of `reference/ppo.py`: the clipped objective and where its gradient
# vanishes, GAE's bias–variance trade-off over `lam`, and the four models of an RLHF step.
# Everything graded is imported from the reference; this notebook only plots it.

# %%
import matplotlib.pyplot as plt  # figures show inline in a notebook; run headless with MPLBACKEND=Agg
import torch

from reference.ppo import compute_gae, kl_shaped_rewards, masked_whiten, ppo_loss, ppo_policy_loss

torch.manual_seed(0)

# %% [markdown]
# ## 1. The clipped objective as a function of the ratio
#
# For one token, the loss is `max(-A * r, -A * clip(r, 1 - eps, 1 + eps))`. With `A > 0` the
# policy wants a larger ratio, but past `1 + eps` the clipped term wins and the loss is flat:
# the gradient is exactly zero, so one batch cannot push the policy far from the rollout
# policy. With `A < 0` the flat region is below `1 - eps`. On the other side the unclipped term
# wins and the gradient stays: a bad move is always corrected.

# %%
eps = 0.2
ratios = torch.linspace(0.3, 2.0, 341)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=False)
for ax, adv in zip(axes, (1.0, -1.0)):
    logprobs = ratios.log()[None, :].clone().requires_grad_(True)         # (1, N)
    per_token = []
    for i in range(ratios.numel()):  # one token at a time: the per-token loss and gradient
        lp = logprobs[:, i:i + 1]
        loss, _ = ppo_policy_loss(lp, torch.zeros(1, 1), torch.full((1, 1), adv),
                                  torch.ones(1, 1, dtype=torch.bool), clip_eps=eps)
        per_token.append(loss)
    losses = torch.stack(per_token)
    losses.sum().backward()
    ax.plot(ratios, losses.detach(), label="loss")
    ax.plot(ratios, logprobs.grad[0], "--", label="d loss / d logprob")
    ax.axvspan(1 - eps, 1 + eps, color="grey", alpha=0.15, label="trust region")
    ax.set_title(f"A = {adv:+.0f}")
    ax.set_xlabel("ratio pi / pi_old")
    ax.legend(fontsize=8)
fig.suptitle("PPO clipped loss: flat (zero gradient) where the advantage pushes past the clip")
fig.tight_layout()

# %% [markdown]
# ## 2. GAE: bias versus variance over lambda
#
# A toy episode of 12 tokens whose only reward is a score at the end, plus noise, and a
# critic that is right on average but noisy. `lam = 0` uses one TD step (low variance,
# biased by the critic's error); `lam = 1` is the Monte-Carlo return minus V (unbiased,
# high variance). We estimate both over many sampled episodes, at the first token.

# %%
T, num_episodes = 12, 2000
true_values = torch.full((num_episodes, T), 1.0)                            # the score is 1
rewards = torch.zeros(num_episodes, T)
rewards[:, -1] = 1.0
rewards += 0.3 * torch.randn(num_episodes, T)                               # noisy rewards
critic_bias = 0.3
values = true_values + critic_bias + 0.1 * torch.randn(num_episodes, T)    # biased critic
mask = torch.ones(num_episodes, T, dtype=torch.bool)

lams = [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0]
bias, std = [], []
for lam in lams:
    adv, _ = compute_gae(rewards, values, mask, gamma=1.0, lam=lam)
    true_adv = 1.0 - values[:, 0]                                           # true return - V
    err = adv[:, 0] - true_adv
    bias.append(err.mean().abs().item())
    std.append(adv[:, 0].std().item())

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(lams, bias, "o-", label="|bias| of A_0")
ax.plot(lams, std, "s-", label="std of A_0")
ax.set_xlabel("lambda")
ax.set_title("GAE: bias falls and variance grows with lambda")
ax.legend()
fig.tight_layout()

# %% [markdown]
# ## 3. The four models of an RLHF step
#
# | model | trained? | gives | enters the loss as |
# |---|---|---|---|
# | actor (policy) | yes | `logprobs` | the ratio in the clipped policy loss |
# | critic (value head) | yes | `values` | GAE baseline (detached) and the clipped value loss |
# | reference (frozen SFT) | no | `ref_logprobs` | the per-token KL penalty in the rewards |
# | reward model | no | `scores` (B,) | added on the last valid token of each row |
#
# One step on a toy batch: rewards from the reward model and the reference, then the loss.

# %%
B, T = 3, 6
mask = torch.arange(T)[None, :] < torch.tensor([[6], [4], [2]])            # right-padded
old_logprobs = -torch.rand(B, T)                                            # actor at rollout
ref_logprobs = old_logprobs + 0.1 * torch.randn(B, T)                       # frozen reference
scores = torch.tensor([1.0, -0.5, 2.0])                                     # reward model
old_values = torch.randn(B, T) * 0.1                                        # critic at rollout

rewards = kl_shaped_rewards(scores, old_logprobs, ref_logprobs, mask, kl_coef=0.05)
print("shaped rewards (score on the last valid token):\n", rewards)

logprobs = (old_logprobs + 0.05 * torch.randn(B, T)).requires_grad_(True)   # actor now
values = (old_values + 0.05 * torch.randn(B, T)).requires_grad_(True)       # critic now
total, stats = ppo_loss(logprobs, old_logprobs, values, old_values, rewards, mask)
total.backward()
print({k: round(v.item(), 4) for k, v in stats.items()})
print("gradient on padding is zero:", bool((logprobs.grad[~mask] == 0).all()))

adv, _ = compute_gae(rewards, old_values, mask, gamma=1.0, lam=0.95)
white = masked_whiten(adv, mask)
print("whitened advantages: masked mean", round(white[mask].mean().item(), 6),
      "unbiased var", round(white[mask].var().item(), 6))

fig, ax = plt.subplots(figsize=(5, 3))
ax.bar(["actor\n(policy loss)", "critic\n(0.1 x value loss)"],
       [stats["policy_loss"].item(), 0.1 * stats["value_loss"].item()])
ax.set_title("What each trained model contributes to the total")
fig.tight_layout()
