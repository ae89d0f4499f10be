"""Visible examples for the `dpo` kata: the worked examples of the statement, small enough to
check by hand. `kata check` runs them against your file; the hidden suite checks much more."""

from __future__ import annotations

import torch

from grader.protocol import expect, kata_test


def close(got, want, tol=1e-4) -> bool:
    got = torch.as_tensor(got.detach() if isinstance(got, torch.Tensor) else got, dtype=torch.float64)
    return bool(torch.allclose(got, torch.as_tensor(want, dtype=torch.float64), atol=tol, rtol=tol))


@kata_test(level=1, category="correctness", description="the worked example: a masked row with -100 padding")
def test_sequence_logprobs_worked_example(solution):
    logits = torch.tensor([[[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [1.0, 1.0, 1.0], [5.0, 5.0, 5.0]]],
                          requires_grad=True)
    labels = torch.tensor([[-100, 2, 0, -100]])
    mask = torch.tensor([[0, 1, 1, 0]])
    call = ("sequence_logprobs(logits, labels, loss_mask) with logits [[[0, 0, 0], [2, 0, 0], "
            "[1, 1, 1], [5, 5, 5]]] (float32), labels [[-100, 2, 0, -100]], loss_mask [[0, 1, 1, 0]]")
    total = solution.sequence_logprobs(logits, labels, mask)
    expect(close(total, [-1.3382]), "the value sequence_logprobs returns", input=call,
           expected=[-1.3382], got=total)
    expect(total.dtype == torch.float32, "the dtype of what sequence_logprobs returns", input=call,
           expected="torch.float32", got=total.dtype)
    mean = solution.sequence_logprobs(logits, labels, mask, average=True)
    expect(close(mean, [-0.6691]), "the value sequence_logprobs returns with average=True",
           input=call.replace("loss_mask)", "loss_mask, average=True)", 1), expected=[-0.6691], got=mean)
    total.sum().backward()
    expect(logits.grad is not None and close(logits.grad[0, 2:], torch.zeros(2, 3)),
           "logits.grad[0, 2:] after sequence_logprobs(...).sum().backward()", input=call,
           expected=torch.zeros(2, 3), got=None if logits.grad is None else logits.grad[0, 2:])


@kata_test(level=1, category="edge cases", description="float16 logits of magnitude 1e4: float32, finite")
def test_sequence_logprobs_large_half_logits(solution):
    logits = torch.tensor([[[1e4, -1e4, 0.0], [0.0, 0.0, 0.0]]], dtype=torch.float16)
    out = solution.sequence_logprobs(logits, torch.tensor([[0, 2]]), torch.tensor([[False, True]]))
    expect(out.dtype == torch.float32 and close(out, [-1e4]),
           "the value and dtype sequence_logprobs returns",
           input="sequence_logprobs(logits, labels, loss_mask) with logits [[[1e4, -1e4, 0], [0, 0, 0]]] "
                 "(float16), labels [[0, 2]], loss_mask [[False, True]]",
           expected="[-10000.] float32", got=out)


@kata_test(level=2, category="correctness", description="the worked example of dpo_loss and its stats")
def test_dpo_worked_example(solution):
    pc = torch.tensor([-10.0], requires_grad=True)
    pr = torch.tensor([-12.0], requires_grad=True)
    rc = torch.tensor([-11.0], requires_grad=True)
    rr = torch.tensor([-11.0], requires_grad=True)
    call = "dpo_loss(policy_chosen=[-10.], policy_rejected=[-12.], ref_chosen=[-11.], ref_rejected=[-11.], beta=0.5)"
    loss, stats = solution.dpo_loss(pc, pr, rc, rr, beta=0.5)
    expect(close(loss, 0.3133), "the loss dpo_loss returns", input=call, expected=0.3133, got=loss)
    expect(close(stats["chosen_rewards"], [0.5]) and close(stats["rejected_rewards"], [-0.5])
           and close(stats["reward_accuracy"], 1.0) and close(stats["reward_margin"], 1.0),
           "the stats dpo_loss returns", input=call,
           expected={"chosen_rewards": [0.5], "rejected_rewards": [-0.5], "reward_accuracy": 1.0,
                     "reward_margin": 1.0}, got=stats)
    loss.backward()
    expect(rc.grad is None or bool((rc.grad == 0).all()),
           "ref_chosen.grad after loss.backward()", input=call, expected="None (or zeros)", got=rc.grad)
    smoothed, _ = solution.dpo_loss(pc, pr, rc, rr, beta=0.5, label_smoothing=0.1)
    expect(close(smoothed, 0.4133), "the loss dpo_loss returns with label_smoothing=0.1",
           input=call.replace("beta=0.5)", "beta=0.5, label_smoothing=0.1)"), expected=0.4133, got=smoothed)


@kata_test(level=2, category="correctness",
           description="Bradley–Terry on three pairs, one of them a tie, with and without a margin")
def test_bradley_terry_worked_example(solution):
    chosen, rejected = torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, 3.0])
    call = "bradley_terry_loss(chosen_rewards=[1., 0., 2.], rejected_rewards=[0., 0., 3.])"
    loss, stats = solution.bradley_terry_loss(chosen, rejected)
    expect(close(loss, 0.7732) and close(stats["accuracy"], 1 / 3) and close(stats["mean_difference"], 0.0),
           "the loss and stats bradley_terry_loss returns", input=call,
           expected={"loss": 0.7732, "accuracy": 0.3333, "mean_difference": 0.0}, got=(loss, stats))
    shifted, stats = solution.bradley_terry_loss(chosen, rejected, margin=1.0)
    expect(close(shifted, 1.3778) and close(stats["accuracy"], 1 / 3),
           "the loss and accuracy bradley_terry_loss returns with margin=1.0",
           input=call.replace("3.])", "3.], margin=1.0)"), expected={"loss": 1.3778, "accuracy": 0.3333},
           got=(shifted, stats))


@kata_test(level=3, category="correctness", description="ipo and hinge on the worked example")
def test_variants_worked_example(solution):
    args = (torch.tensor([-10.0]), torch.tensor([-12.0]), torch.tensor([-11.0]), torch.tensor([-11.0]))
    call = "dpo_loss(policy_chosen=[-10.], policy_rejected=[-12.], ref_chosen=[-11.], ref_rejected=[-11.], "
    ipo, _ = solution.dpo_loss(*args, beta=0.5, loss_type="ipo")
    expect(close(ipo, 1.0), "the loss dpo_loss returns with loss_type='ipo'",
           input=call + "beta=0.5, loss_type='ipo')", expected=1.0, got=ipo)
    hinge, _ = solution.dpo_loss(*args, beta=0.25, loss_type="hinge")
    expect(close(hinge, 0.5), "the loss dpo_loss returns with loss_type='hinge'",
           input=call + "beta=0.25, loss_type='hinge')", expected=0.5, got=hinge)
    try:
        solution.dpo_loss(*args, loss_type="kto")
    except ValueError:
        return
    expect(False, "an unknown loss_type raises ValueError", input=call + "loss_type='kto')",
           expected="ValueError", got="no exception")
