"""Level 3 — DPO's IPO and hinge variants and the argument checks of dpo_loss.

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome.
"""

from __future__ import annotations

import torch
from hypothesis import assume, given, settings, strategies as st

from grader.protocol import kata_test
from grader.suites.dpo import oracle
from grader.suites.dpo.strategies import (DPO_STATS, POLICY, REFERENCE, check_grad, check_stats,
                                          check_value, expect_accepted, expect_value_error,
                                          magnitude, preference_batches, run_dpo)

RULES = {
    "ipo: loss = mean of (logits - 1 / (2 beta))^2": "test_ipo_matches_oracle",
    "hinge: loss = mean of relu(1 - beta logits)": "test_hinge_matches_oracle",
    "label_smoothing is used by the sigmoid loss only": "test_label_smoothing_is_ignored_by_ipo_and_hinge",
    "ValueError: an unknown loss_type": "test_unknown_loss_type_raises",
    "ValueError: beta not finite or <= 0 (any loss type)": "test_beta_must_be_finite_and_positive",
    "ValueError: label_smoothing outside [0, 0.5), NaN included, for every loss type":
        "test_label_smoothing_is_validated_for_every_type",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'ipo: loss = mean of (logits - 1 / (2 beta))^2':
        'ipo',
    'hinge: loss = mean of relu(1 - beta logits)':
        'hinge',
    'label_smoothing is used by the sigmoid loss only':
        'smoothing-types',
    'ValueError: an unknown loss_type':
        'ask',
    'ValueError: beta not finite or <= 0 (any loss type)':
        'arg-ranges',
    'ValueError: label_smoothing outside [0, 0.5), NaN included, for every loss type':
        ('arg-ranges', 'smoothing-types'),
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# None: the level is the two variants and the argument checks its name promises.
DETAILS: set[str] = set()

FAST = settings(max_examples=8)
FEW = settings(max_examples=4)
VARIANT_BETAS = st.sampled_from((0.1, 0.25, 2.0))   # 1 / (2 beta) != beta / 2 for each


def _check_variant(solution, batch, options, prop):
    got = run_dpo(solution, batch, **options)
    shown = dict(batch, **options)
    want = oracle.dpo(*(batch[n] for n in POLICY + REFERENCE), options["beta"],
                      options["loss_type"], options.get("label_smoothing", 0.0))
    dtype = batch["policy_chosen"].dtype
    scale = magnitude(*batch.values(), factor=4)
    check_value(got["loss"], want["loss"], f"{prop}: the loss", shown, dtype, scale)
    for name in POLICY:
        check_grad(got[f"grad_{name}"], want[f"grad_{name}"], f"{prop}: d loss / d {name}", shown, dtype)
    for name in REFERENCE:
        grad = got[f"grad_{name}"]
        if grad is not None and not bool((grad == 0).all()):
            check_grad(grad, torch.zeros_like(want["grad_policy_chosen"]),
                       f"{prop}: no gradient reaches {name}", shown, dtype)
    check_stats(got["stats"], want, DPO_STATS, f"{prop}: the stats are the same for every loss type",
                shown, dtype, scale)


@kata_test(level=3, category="correctness", weight=3,
           description="loss_type='ipo': mean of (logits - 1/(2 beta))^2, with its gradients")
@FAST
@given(batch=preference_batches(), beta=VARIANT_BETAS)
def test_ipo_matches_oracle(solution, batch, beta):
    _check_variant(solution, batch, {"beta": beta, "loss_type": "ipo"},
                   "ipo: mean of (logits - 1 / (2 beta))^2 (1 / (2 * beta), not 1 / 2 * beta)")


@kata_test(level=3, category="correctness", weight=3,
           description="loss_type='hinge': mean of relu(1 - beta logits), with its gradients")
@FAST
@given(batch=preference_batches(), beta=VARIANT_BETAS)
def test_hinge_matches_oracle(solution, batch, beta):
    assume(oracle.hinge_kink_free(*(batch[n] for n in POLICY + REFERENCE), beta))
    _check_variant(solution, batch, {"beta": beta, "loss_type": "hinge"},
                   "hinge: mean of relu(1 - beta logits); 0 (and no gradient) past the margin")


@kata_test(level=3, category="correctness", weight=1,
           description="label_smoothing changes the sigmoid loss only")
@FEW
@given(batch=preference_batches(), beta=VARIANT_BETAS, loss_type=st.sampled_from(("ipo", "hinge")))
def test_label_smoothing_is_ignored_by_ipo_and_hinge(solution, batch, beta, loss_type):
    assume(oracle.hinge_kink_free(*(batch[n] for n in POLICY + REFERENCE), beta))
    _check_variant(solution, batch, {"beta": beta, "loss_type": loss_type, "label_smoothing": 0.3},
                   f"{loss_type} with label_smoothing = 0.3 is the same loss as without: "
                   f"label smoothing enters the sigmoid loss only")


def _pair() -> tuple[torch.Tensor, ...]:
    return (torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -1.0]),
            torch.tensor([-1.25, -1.5]), torch.tensor([-1.25, -1.5]))


@kata_test(level=3, category="api contract", weight=1,
           description="an unknown loss_type raises ValueError")
def test_unknown_loss_type_raises(solution):
    args = _pair()
    for loss_type in ("kto", "robust", "Sigmoid", "", "hinge "):
        expect_value_error(lambda: solution.dpo_loss(*args, loss_type=loss_type),
                           f"dpo_loss(..., loss_type={loss_type!r}) raises ValueError: the types "
                           f"are 'sigmoid', 'ipo' and 'hinge'", {"loss_type": loss_type})


@kata_test(level=3, category="api contract", weight=2,
           description="beta must be finite and > 0, for every loss type")
def test_beta_must_be_finite_and_positive(solution):
    args = _pair()
    for loss_type in ("sigmoid", "ipo", "hinge"):
        for beta in (0.0, -0.1, float("nan"), float("inf"), float("-inf")):
            expect_value_error(lambda: solution.dpo_loss(*args, beta=beta, loss_type=loss_type),
                               f"dpo_loss(..., beta={beta}, loss_type={loss_type!r}) raises "
                               f"ValueError: beta must be finite and > 0",
                               {"beta": beta, "loss_type": loss_type})
        expect_accepted(lambda: solution.dpo_loss(*args, beta=1e-3, loss_type=loss_type),
                        "a small positive beta (1e-3) is legal", {"beta": 1e-3, "loss_type": loss_type})


@kata_test(level=3, category="api contract", weight=2,
           description="label_smoothing outside [0, 0.5) raises ValueError, for every loss type")
def test_label_smoothing_is_validated_for_every_type(solution):
    args = _pair()
    for loss_type in ("sigmoid", "ipo", "hinge"):
        for eps in (-0.01, 0.5, 0.75, 1.0, float("nan")):
            expect_value_error(lambda: solution.dpo_loss(*args, loss_type=loss_type, label_smoothing=eps),
                               f"dpo_loss(..., loss_type={loss_type!r}, label_smoothing={eps}) "
                               f"raises ValueError: label_smoothing must be in [0, 0.5)",
                               {"loss_type": loss_type, "label_smoothing": eps})
        for eps in (0.0, 0.49):
            expect_accepted(lambda: solution.dpo_loss(*args, loss_type=loss_type, label_smoothing=eps),
                            f"label_smoothing = {eps} is legal",
                            {"loss_type": loss_type, "label_smoothing": eps})
