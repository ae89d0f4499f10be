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
    call = ("loss, stats = ppo_policy_loss(logprobs=[[0.0, 0.5, 9.9]], old_logprobs=[[0., 0., 0.]], "
            "advantages=[[1., 1., 7.]], mask=[[True, True, False]], clip_eps=0.2)")
    loss, stats = solution.ppo_policy_loss(logprobs, old, adv, mask, clip_eps=0.2)
    expect(close(loss.detach(), -1.1), "the loss ppo_policy_loss returns", input=call, expected=-1.1,
           got=loss)
    expect(close(stats["clipfrac"], 0.5), "stats['clipfrac']", input=call, expected=0.5,
           got=stats["clipfrac"])
    expect(close(stats["approx_kl"], 0.0625), "stats['approx_kl']", input=call, expected=0.0625,
           got=stats["approx_kl"])
    loss.backward()
    expect(close(logprobs.grad, [[-0.5, 0.0, 0.0]]), "logprobs.grad after loss.backward()",
           input=call, expected=[[-0.5, 0.0, 0.0]], got=logprobs.grad)


@kata_test(level=1, category="correctness", description="at ratio 1 (logprobs equal old_logprobs)")
def test_policy_loss_at_old_policy(solution):
    logprobs = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]])
    adv = torch.tensor([[2.0, -1.0], [3.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])          # a 0/1 float mask
    call = ("loss, stats = ppo_policy_loss(logprobs=[[-1., -2.], [-0.5, -0.5]], old_logprobs=the same, "
            "advantages=[[2., -1.], [3., 100.]], mask=[[1., 1.], [1., 0.]] (float))")
    loss, stats = solution.ppo_policy_loss(logprobs, logprobs.clone(), adv, mask)
    expect(close(loss, -(2.0 - 1.0 + 3.0) / 3), "the loss ppo_policy_loss returns", input=call,
           expected=-4 / 3, got=loss)
    expect(close(stats["clipfrac"], 0.0) and close(stats["approx_kl"], 0.0),
           "stats['clipfrac'] and stats['approx_kl']", input=call,
           expected={"clipfrac": 0.0, "approx_kl": 0.0}, got=stats)


@kata_test(level=1, category="edge cases", description="NaN in the padding")
def test_policy_loss_nan_padding(solution):
    logprobs = torch.tensor([[0.1, NAN]], requires_grad=True)
    call = ("loss, stats = ppo_policy_loss(logprobs=[[0.1, nan]], old_logprobs=[[0.0, nan]], "
            "advantages=[[-1.0, nan]], mask=[[True, False]])")
    loss, _ = solution.ppo_policy_loss(logprobs, torch.tensor([[0.0, NAN]]),
                                       torch.tensor([[-1.0, NAN]]), torch.tensor([[True, False]]))
    want = 1.0 * math.exp(0.1)
    expect(close(loss.detach(), want), "the loss ppo_policy_loss returns", input=call, expected=want,
           got=loss)
    loss.backward()
    expect(close(logprobs.grad, [[want, 0.0]]), "logprobs.grad after loss.backward()", input=call,
           expected=[[want, 0.0]], got=logprobs.grad)


@kata_test(level=1, category="api contract", description="ValueError on a shape mismatch")
def test_policy_loss_shape_mismatch(solution):
    try:
        got = solution.ppo_policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 2),
                                       torch.ones(2, 3, dtype=torch.bool))
    except ValueError:
        return
    expect(False, "advantages (2, 2) against mask (2, 3) raises ValueError",
           input="ppo_policy_loss(logprobs=zeros(2, 3), old_logprobs=zeros(2, 3), advantages=zeros(2, 2), "
                 "mask=ones(2, 3, dtype=bool))",
           expected="ValueError", got=f"no exception (returned {type(got).__name__})")


# ---------------------------------------------------------------------------- level 2


@kata_test(level=2, category="correctness", description="GAE on a two-row batch")
def test_gae_small_batch(solution):
    rewards = torch.tensor([[0.0, 0.0, 1.0, 5.0], [1.0, 1.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, 0.5, 0.5, 9.0], [0.25, 0.5, 7.0, 7.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    call = ("advantages, returns = compute_gae(rewards=[[0., 0., 1., 5.], [1., 1., 0., 0.]], "
            "values=[[0.5, 0.5, 0.5, 9.], [0.25, 0.5, 7., 7.]], mask=[[1, 1, 1, 0], [1, 1, 0, 0]] (bool), ")
    adv, ret = solution.compute_gae(rewards, values, mask, gamma=1.0, lam=1.0)
    want_ret = [[1.0, 1.0, 1.0, 0.0], [2.0, 1.0, 0.0, 0.0]]
    want_adv = [[0.5, 0.5, 0.5, 0.0], [1.75, 0.5, 0.0, 0.0]]
    expect(close(adv, want_adv), "the advantages compute_gae returns", input=call + "gamma=1.0, lam=1.0)",
           expected=want_adv, got=adv)
    expect(close(ret, want_ret), "the returns tensor of compute_gae", input=call + "gamma=1.0, lam=1.0)",
           expected=want_ret, got=ret)
    adv0, _ = solution.compute_gae(rewards, values, mask, gamma=0.5, lam=0.0)
    want0 = [[-0.25, -0.25, 0.5, 0.0], [1.0, 0.5, 0.0, 0.0]]
    expect(close(adv0, want0), "the advantages compute_gae returns", input=call + "gamma=0.5, lam=0.0)",
           expected=want0, got=adv0)


@kata_test(level=2, category="correctness", description="clipped value loss")
def test_value_loss_small(solution):
    values = torch.tensor([[1.0, 0.0, 3.0]], requires_grad=True)
    old = torch.tensor([[0.0, 0.0, 0.0]])
    returns = torch.tensor([[1.0, 2.0, 0.0]])
    mask = torch.tensor([[True, True, False]])
    call = ("loss = ppo_value_loss(values=[[1., 0., 3.]], old_values=[[0., 0., 0.]], returns=[[1., 2., 0.]], "
            "mask=[[True, True, False]], clip_eps_value=0.5)")
    loss = solution.ppo_value_loss(values, old, returns, mask, clip_eps_value=0.5)
    expect(close(loss.detach(), 1.0625), "the loss ppo_value_loss returns", input=call, expected=1.0625,
           got=loss)
    loss.backward()
    expect(close(values.grad, [[0.0, -1.0, 0.0]]), "values.grad after loss.backward()", input=call,
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
    expect(close(got, want), "the rewards kl_shaped_rewards returns",
           input="kl_shaped_rewards(scores=[3., 4.], logprobs=[[-1., -1., -1., nan], [-1., -2., 0., 0.]], "
                 "ref_logprobs=[[-2., -1., -1., 0.], [-1., -1., 0., 0.]], mask=[[1, 1, 1, 0], [1, 1, 0, 0]] "
                 "(bool), kl_coef=0.1)", expected=want, got=got)


@kata_test(level=3, category="correctness", description="masked whitening")
def test_masked_whiten_small(solution):
    x = torch.tensor([[1.0, 2.0, 3.0, NAN], [4.0, 5.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    call = "masked_whiten(x=[[1., 2., 3., nan], [4., 5., 0., 0.]] (float64), mask=[[1, 1, 1, 0], [1, 1, 0, 0]] (bool)"
    got = solution.masked_whiten(x, mask)
    s = math.sqrt(2.5)
    want = [[-2 / s, -1 / s, 0.0, 0.0], [1 / s, 2 / s, 0.0, 0.0]]
    expect(close(got, want), "the output of masked_whiten", input=call + ")", expected=want, got=got)
    kept = solution.masked_whiten(x, mask, shift_mean=False)
    want_kept = [[-2 / s + 3, -1 / s + 3, 3.0, 0.0], [1 / s + 3, 2 / s + 3, 0.0, 0.0]]
    expect(close(kept, want_kept), "the output of masked_whiten with shift_mean=False",
           input=call + ", shift_mean=False)", expected=want_kept, got=kept)


@kata_test(level=3, category="correctness", description="ppo_loss at the old policy")
def test_ppo_loss_at_old_policy(solution):
    logprobs = torch.tensor([[-1.0, -1.0, 0.0]], requires_grad=True)
    values = torch.tensor([[0.0, 0.0, 0.0]], requires_grad=True)
    rewards = torch.tensor([[0.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, False]])
    call = ("total, stats = ppo_loss(logprobs=[[-1., -1., 0.]], old_logprobs=the same, values=[[0., 0., 0.]], "
            "old_values=the same, rewards=[[0., 1., 0.]], mask=[[True, True, False]], gamma=1.0, lam=1.0, "
            "whiten_advantages=False)")
    total, stats = solution.ppo_loss(logprobs, logprobs.detach().clone(), values,
                                     values.detach().clone(), rewards, mask, gamma=1.0, lam=1.0,
                                     whiten_advantages=False)
    expect(close(stats["policy_loss"], -1.0) and close(stats["value_loss"], 0.5),
           "stats['policy_loss'] and stats['value_loss']", input=call,
           expected={"policy_loss": -1.0, "value_loss": 0.5}, got=stats)
    expect(close(total.detach(), -1.0 + 0.1 * 0.5), "the total ppo_loss returns", input=call,
           expected=-0.95, got=total)
