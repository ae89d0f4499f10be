"""Visible examples for the `dpo` kata: the worked examples of the statement, small enough to
check by hand. `kata check` runs them against your file; the hidden suite checks much more."""

from __future__ import annotations

import torch

from grader.protocol import expect, kata_test


def close(got, want, tol=1e-4) -> bool:
    got = torch.as_tensor(got.detach() if isinstance(got, torch.Tensor) else got, dtype=torch.float64)
    return bool(torch.allclose(got, torch.as_tensor(want, dtype=torch.float64), atol=tol, rtol=tol))


@kata_test(level=1, category="correctness", description="the worked example: shift, mask, -100 padding")
def test_sequence_logprobs_worked_example(solution):
    logits = torch.tensor([[[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [1.0, 1.0, 1.0], [5.0, 5.0, 5.0]]],
                          requires_grad=True)
    labels = torch.tensor([[-100, 2, 0, -100]])
    mask = torch.tensor([[0, 1, 1, 0]])
    total = solution.sequence_logprobs(logits, labels, mask)
    expect(close(total, [-1.3382]), "log(1/3) + (2 - log(e^2 + 2)) = -1.3382",
           expected=[-1.3382], got=total)
    expect(total.dtype == torch.float32, "float32 logits give a float32 result",
           expected="torch.float32", got=total.dtype)
    mean = solution.sequence_logprobs(logits, labels, mask, average=True)
    expect(close(mean, [-0.6691]), "average=True: -1.3382 / 2 scored positions",
           expected=[-0.6691], got=mean)
    total.sum().backward()
    expect(logits.grad is not None and close(logits.grad[0, 2:], torch.zeros(2, 3)),
           "no gradient reaches the logits at t = 2 (they predict an unscored label) or t = 3",
           expected=torch.zeros(2, 3), got=None if logits.grad is None else logits.grad[0, 2:])


@kata_test(level=1, category="edge cases", description="float16 logits of magnitude 1e4: float32, finite")
def test_sequence_logprobs_large_half_logits(solution):
    logits = torch.tensor([[[1e4, -1e4, 0.0], [0.0, 0.0, 0.0]]], dtype=torch.float16)
    out = solution.sequence_logprobs(logits, torch.tensor([[0, 2]]), torch.tensor([[False, True]]))
    expect(out.dtype == torch.float32 and close(out, [-1e4]),
           "log_softmax([1e4, -1e4, 0])[2] = -1e4, as float32", expected="[-10000.] float32",
           got=out)


@kata_test(level=2, category="correctness", description="the worked example of dpo_loss and its stats")
def test_dpo_worked_example(solution):
    pc = torch.tensor([-10.0], requires_grad=True)
    pr = torch.tensor([-12.0], requires_grad=True)
    rc = torch.tensor([-11.0], requires_grad=True)
    rr = torch.tensor([-11.0], requires_grad=True)
    loss, stats = solution.dpo_loss(pc, pr, rc, rr, beta=0.5)
    expect(close(loss, 0.3133), "-logsigmoid(0.5 * 2) = 0.3133", expected=0.3133, got=loss)
    expect(close(stats["chosen_rewards"], [0.5]) and close(stats["rejected_rewards"], [-0.5])
           and close(stats["reward_accuracy"], 1.0) and close(stats["reward_margin"], 1.0),
           "chosen_rewards [0.5], rejected_rewards [-0.5], reward_accuracy 1, reward_margin 1",
           expected="0.5, -0.5, 1, 1", got=stats)
    loss.backward()
    expect(rc.grad is None or bool((rc.grad == 0).all()),
           "the reference log-probs get no gradient", expected=None, got=rc.grad)
    smoothed, _ = solution.dpo_loss(pc, pr, rc, rr, beta=0.5, label_smoothing=0.1)
    expect(close(smoothed, 0.4133), "0.9 * 0.3133 + 0.1 * 1.3133 = 0.4133", expected=0.4133,
           got=smoothed)


@kata_test(level=2, category="correctness", description="Bradley–Terry: a tie is wrong, the margin shifts the loss")
def test_bradley_terry_worked_example(solution):
    chosen, rejected = torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, 3.0])
    loss, stats = solution.bradley_terry_loss(chosen, rejected)
    expect(close(loss, 0.7732) and close(stats["accuracy"], 1 / 3) and close(stats["mean_difference"], 0.0),
           "loss 0.7732, accuracy 1/3 (the tie is wrong), mean_difference 0",
           expected="0.7732, 0.3333, 0", got=(loss, stats))
    shifted, stats = solution.bradley_terry_loss(chosen, rejected, margin=1.0)
    expect(close(shifted, 1.3778) and close(stats["accuracy"], 1 / 3),
           "margin=1.0: loss 1.3778, the accuracy does not change", expected="1.3778, 0.3333",
           got=(shifted, stats))


@kata_test(level=3, category="correctness", description="ipo and hinge on the worked example")
def test_variants_worked_example(solution):
    args = (torch.tensor([-10.0]), torch.tensor([-12.0]), torch.tensor([-11.0]), torch.tensor([-11.0]))
    ipo, _ = solution.dpo_loss(*args, beta=0.5, loss_type="ipo")
    expect(close(ipo, 1.0), "ipo: (2 - 1 / (2 * 0.5))^2 = 1", expected=1.0, got=ipo)
    hinge, _ = solution.dpo_loss(*args, beta=0.25, loss_type="hinge")
    expect(close(hinge, 0.5), "hinge: relu(1 - 0.25 * 2) = 0.5", expected=0.5, got=hinge)
    try:
        solution.dpo_loss(*args, loss_type="kto")
    except ValueError:
        return
    expect(False, "an unknown loss_type raises ValueError", expected="ValueError", got="no exception")
