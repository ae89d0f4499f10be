"""The `dpo` kata's hidden suite rejects each realistic buggy solution of the corpus at the
level its rules break, with the property a reader would expect (tests/corpus/dpo/corpus.toml),
and gives full marks to correct solutions written differently; the suite's oracle agrees with
the reference on the statement's worked examples."""

from __future__ import annotations

import pytest
import torch

from tests.kata_testing import (assert_rejected_at_level, assert_scores_full, buggy_params,
                                correct_params)

SLUG = "dpo"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


def test_oracle_and_reference_agree_on_the_worked_examples():
    """The suite's oracle and the reference are written independently; they agree on the
    statement's numbers."""
    from grader.suites.dpo import oracle
    from reference import dpo as ref

    logits = torch.tensor([[[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [1.0, 1.0, 1.0], [5.0, 5.0, 5.0]]])
    labels = torch.tensor([[-100, 2, 0, -100]])
    mask = torch.tensor([[0, 1, 1, 0]])
    for average, want in ((False, -1.3382), (True, -0.6691)):
        got_oracle, _ = oracle.sequence_logprobs(logits, labels, mask, average)
        got_ref = ref.sequence_logprobs(logits, labels, mask, average=average)
        assert abs(got_oracle.item() - want) < 1e-4 and abs(got_ref.item() - want) < 1e-4
    args = (torch.tensor([-10.0]), torch.tensor([-12.0]), torch.tensor([-11.0]), torch.tensor([-11.0]))
    for loss_type, beta, eps, want in (("sigmoid", 0.5, 0.0, 0.3133), ("sigmoid", 0.5, 0.1, 0.4133),
                                       ("ipo", 0.5, 0.0, 1.0), ("hinge", 0.25, 0.0, 0.5)):
        got_oracle = oracle.dpo(*args, beta, loss_type, eps)["loss"].item()
        got_ref = ref.dpo_loss(*args, beta=beta, loss_type=loss_type, label_smoothing=eps)[0].item()
        assert abs(got_oracle - want) < 1e-4 and abs(got_ref - want) < 1e-4, loss_type
    chosen, rejected = torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, 3.0])
    assert abs(oracle.bradley_terry(chosen, rejected, 1.0)["loss"].item() - 1.3778) < 1e-4
    assert abs(ref.bradley_terry_loss(chosen, rejected, 1.0)[0].item() - 1.3778) < 1e-4
