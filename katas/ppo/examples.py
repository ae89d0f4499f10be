"""Visible examples for the `ppo` kata: small fixed inputs whose answers can be checked by
hand. `kata check` runs them against your file; the hidden suite checks much more."""

from __future__ import annotations

import math

import torch

from grader.protocol import expect, kata_test

NAN = float("nan")


def close(got, want, tol=1e-5) -> bool:
    got = torch.as_tensor(got, dtype=torch.float64)
    return bool(torch.allclose(got, torch.as_tensor(want, dtype=torch.float64), atol=tol, rtol=tol))


# ---------------------------------------------------------------------------- level 1


@kata_test(level=1, category="correctness", description="the worked example of the statement")
def test_policy_loss_worked_example(solution):
    logprobs = torch.tensor([[0.0, 0.5, 9.9]], requires_grad=True)
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, 1.0, 7.0]])
    mask = torch.tensor([[True, True, False]])
    loss, stats = solution.ppo_policy_loss(logprobs, old, adv, mask, clip_eps=0.2)
    expect(close(loss.detach(), -1.1), "loss = mean(-1.0, -1.2) = -1.1", expected=-1.1, got=loss)
    expect(close(stats["clipfrac"], 0.5), "clipfrac: token 1 is clipped", expected=0.5,
           got=stats["clipfrac"])
    expect(close(stats["approx_kl"], 0.0625), "approx_kl = (0 + 0.5 * 0.25) / 2", expected=0.0625,
           got=stats["approx_kl"])
    loss.backward()
    expect(close(logprobs.grad, [[-0.5, 0.0, 0.0]]),
           "gradient: -A * ratio / n on token 0, 0 on the clipped token and on padding",
           expected=[[-0.5, 0.0, 0.0]], got=logprobs.grad)


@kata_test(level=1, category="correctness", description="at ratio 1 the loss is -mean(A)")
def test_policy_loss_at_old_policy(solution):
    logprobs = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]])
    adv = torch.tensor([[2.0, -1.0], [3.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])          # a 0/1 float mask
    loss, stats = solution.ppo_policy_loss(logprobs, logprobs.clone(), adv, mask)
    expect(close(loss, -(2.0 - 1.0 + 3.0) / 3), "loss = -(2 - 1 + 3) / 3 over 3 valid tokens",
           expected=-4 / 3, got=loss)
    expect(close(stats["clipfrac"], 0.0) and close(stats["approx_kl"], 0.0),
           "clipfrac and approx_kl are 0", expected="0, 0", got=stats)


@kata_test(level=1, category="edge cases", description="NaN padding changes nothing")
def test_policy_loss_nan_padding(solution):
    logprobs = torch.tensor([[0.1, NAN]], requires_grad=True)
    loss, _ = solution.ppo_policy_loss(logprobs, torch.tensor([[0.0, NAN]]),
                                       torch.tensor([[-1.0, NAN]]), torch.tensor([[True, False]]))
    want = 1.0 * math.exp(0.1)                              # -A * ratio, inside the clip range
    expect(close(loss.detach(), want), "loss = exp(0.1) from the one valid token", expected=want,
           got=loss)
    loss.backward()
    expect(close(logprobs.grad, [[want, 0.0]]), "gradient 0 on padding, not NaN",
           expected=[[want, 0.0]], got=logprobs.grad)


@kata_test(level=1, category="api contract", description="ValueError on a shape mismatch")
def test_policy_loss_shape_mismatch(solution):
    try:
        solution.ppo_policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 2),
                                 torch.ones(2, 3, dtype=torch.bool))
    except ValueError:
        return
    expect(False, "advantages (2, 2) against mask (2, 3) raises ValueError")


# ---------------------------------------------------------------------------- level 2


@kata_test(level=2, category="correctness", description="GAE on a two-row batch")
def test_gae_small_batch(solution):
    rewards = torch.tensor([[0.0, 0.0, 1.0, 5.0], [1.0, 1.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, 0.5, 0.5, 9.0], [0.25, 0.5, 7.0, 7.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    adv, ret = solution.compute_gae(rewards, values, mask, gamma=1.0, lam=1.0)
    want_ret = [[1.0, 1.0, 1.0, 0.0], [2.0, 1.0, 0.0, 0.0]]          # Monte-Carlo returns
    want_adv = [[0.5, 0.5, 0.5, 0.0], [1.75, 0.5, 0.0, 0.0]]         # returns - V
    expect(close(adv, want_adv), "lam = gamma = 1: A = Monte-Carlo return - V, 0 on padding",
           expected=want_adv, got=adv)
    expect(close(ret, want_ret), "returns = A + V, 0 on padding", expected=want_ret, got=ret)
    adv0, _ = solution.compute_gae(rewards, values, mask, gamma=0.5, lam=0.0)
    want0 = [[-0.25, -0.25, 0.5, 0.0], [1.0, 0.5, 0.0, 0.0]]         # r + 0.5 V' - V
    expect(close(adv0, want0), "lam = 0: A = r + gamma * V_next - V (V after the row end is 0)",
           expected=want0, got=adv0)


@kata_test(level=2, category="correctness", description="clipped value loss")
def test_value_loss_small(solution):
    values = torch.tensor([[1.0, 0.0, 3.0]], requires_grad=True)
    old = torch.tensor([[0.0, 0.0, 0.0]])
    returns = torch.tensor([[1.0, 2.0, 0.0]])
    mask = torch.tensor([[True, True, False]])
    loss = solution.ppo_value_loss(values, old, returns, mask, clip_eps_value=0.5)
    # token 0: max(0, (0.5 - 1)^2) = 0.25; token 1: max(4, 4) = 4 -> 0.5 * (0.25 + 4) / 2
    expect(close(loss.detach(), 1.0625), "0.5 * mean(max(unclipped, clipped))", expected=1.0625,
           got=loss)
    loss.backward()
    expect(close(values.grad, [[0.0, -1.0, 0.0]]),
           "gradient 0 where the clipped term wins, (v - R) / n elsewhere, 0 on padding",
           expected=[[0.0, -1.0, 0.0]], got=values.grad)


# ---------------------------------------------------------------------------- level 3


@kata_test(level=3, category="correctness", description="KL-shaped rewards")
def test_kl_shaped_rewards_small(solution):
    scores = torch.tensor([3.0, 4.0])
    logprobs = torch.tensor([[-1.0, -1.0, -1.0, NAN], [-1.0, -2.0, 0.0, 0.0]])
    ref = torch.tensor([[-2.0, -1.0, -1.0, 0.0], [-1.0, -1.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    got = solution.kl_shaped_rewards(scores, logprobs, ref, mask, kl_coef=0.1)
    want = [[-0.1, 0.0, 3.0, 0.0], [0.0, 4.1, 0.0, 0.0]]
    expect(close(got, want), "-0.1 * (logprobs - ref), plus the score on the last valid token",
           expected=want, got=got)


@kata_test(level=3, category="correctness", description="masked whitening")
def test_masked_whiten_small(solution):
    x = torch.tensor([[1.0, 2.0, 3.0, NAN], [4.0, 5.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    got = solution.masked_whiten(x, mask)
    # mean 3, unbiased variance (4 + 1 + 0 + 1 + 4) / 4 = 2.5
    s = math.sqrt(2.5)
    want = [[-2 / s, -1 / s, 0.0, 0.0], [1 / s, 2 / s, 0.0, 0.0]]
    expect(close(got, want), "(x - 3) / sqrt(2.5) on valid entries, 0 on padding",
           expected=want, got=got)
    kept = solution.masked_whiten(x, mask, shift_mean=False)
    want_kept = [[-2 / s + 3, -1 / s + 3, 3.0, 0.0], [1 / s + 3, 2 / s + 3, 0.0, 0.0]]
    expect(close(kept, want_kept), "shift_mean=False adds the mean 3 back", expected=want_kept,
           got=kept)


@kata_test(level=3, category="correctness", description="ppo_loss at the old policy")
def test_ppo_loss_at_old_policy(solution):
    logprobs = torch.tensor([[-1.0, -1.0, 0.0]], requires_grad=True)
    values = torch.tensor([[0.0, 0.0, 0.0]], requires_grad=True)
    rewards = torch.tensor([[0.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, False]])
    total, stats = solution.ppo_loss(logprobs, logprobs.detach().clone(), values,
                                     values.detach().clone(), rewards, mask, gamma=1.0, lam=1.0,
                                     whiten_advantages=False)
    # GAE: A = returns = [1, 1]; policy loss -1; value loss 0.5 * mean((0 - 1)^2) = 0.5
    expect(close(stats["policy_loss"], -1.0) and close(stats["value_loss"], 0.5),
           "policy_loss = -mean(A) = -1 and value_loss = 0.5", expected={"policy_loss": -1.0,
           "value_loss": 0.5}, got=stats)
    expect(close(total.detach(), -1.0 + 0.1 * 0.5), "total = policy_loss + 0.1 * value_loss",
           expected=-0.95, got=total)
