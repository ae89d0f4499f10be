"""Level 2 — the Bradley–Terry loss and the sigmoid DPO loss (label smoothing included): values,
statistics, ties, gradients (to the policy only), large log-ratios, shape errors.

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import example, given, settings, strategies as st

from grader.protocol import expect, kata_test
from grader.suites.dpo import oracle
from grader.suites.dpo.strategies import (BETAS, BT_STATS, DPO_STATS, EXACT_BETAS, POLICY,
                                          REFERENCE, SMOOTHINGS, check_grad, check_stats,
                                          check_value, expect_unchanged, expect_value_error,
                                          magnitude, preference_batches, run_bt, run_dpo)

RULES = {
    "Bradley–Terry loss = mean of -logsigmoid(chosen - rejected - margin), gradients to both":
        "test_bt_loss_matches_oracle",
    "margin is None, a float (0.0 is a margin of 0) or a (B,) tensor, one per pair":
        "test_bt_margin_forms",
    "accuracy = fraction with chosen > rejected (ties wrong, margin ignored); mean_difference; "
    "both 0-d and detached": "test_bt_stats_count_ties_as_wrong",
    "the Bradley–Terry loss is stable for reward differences of any size":
        "test_bt_stable_for_large_differences",
    "sigmoid DPO: logits = (pc - pr) - (rc - rr), loss = mean of -(1 - eps) logsigmoid(beta "
    "logits) - eps logsigmoid(-beta logits)": ("test_dpo_sigmoid_matches_oracle",
                                               "test_dpo_label_smoothing_weighs_both_directions"),
    "defaults: beta = 0.1, loss_type = 'sigmoid', label_smoothing = 0": "test_dpo_defaults",
    "gradients flow to the policy log-probs only; the reference inputs' .grad stays None or zero":
        "test_dpo_reference_gets_no_gradient",
    "stats chosen_rewards / rejected_rewards (B,), reward_accuracy (ties wrong) and "
    "reward_margin (0-d), all detached": "test_dpo_stats_count_ties_as_wrong",
    "the DPO loss is stable for log-ratios of any size": "test_dpo_stable_for_large_log_ratios",
    "ValueError: per-sequence tensors (a tensor margin too) of different shapes; an empty batch":
        "test_shape_mismatch_and_empty_batch_raise",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'Bradley–Terry loss = mean of -logsigmoid(chosen - rejected - margin), gradients to '
    'both':
        'bt-loss',
    'margin is None, a float (0.0 is a margin of 0) or a (B,) tensor, one per pair':
        'ask',
    'accuracy = fraction with chosen > rejected (ties wrong, margin ignored); '
    'mean_difference; both 0-d and detached':
        ('ask', 'accuracy'),
    'the Bradley–Terry loss is stable for reward differences of any size':
        'large-gaps',
    'sigmoid DPO: logits = (pc - pr) - (rc - rr), loss = mean of -(1 - eps) '
    'logsigmoid(beta logits) - eps logsigmoid(-beta logits)':
        'dpo-sigmoid',
    "defaults: beta = 0.1, loss_type = 'sigmoid', label_smoothing = 0":
        'ask',
    "gradients flow to the policy log-probs only; the reference inputs' .grad stays None "
    'or zero':
        'ref-grad',
    'stats chosen_rewards / rejected_rewards (B,), reward_accuracy (ties wrong) and '
    'reward_margin (0-d), all detached':
        ('ask', 'implicit-rewards', 'accuracy'),
    'the DPO loss is stable for log-ratios of any size':
        'large-gaps',
    'ValueError: per-sequence tensors (a tensor margin too) of different shapes; an empty'
    ' batch':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS: set[str] = set()

FAST = settings(max_examples=8)
FEW = settings(max_examples=4)

MARGINS = st.sampled_from((None, 0.0, 0.5, -1.0, "tensor"))


def _margin(kind: object, like: torch.Tensor) -> object:
    if kind != "tensor":
        return kind
    return torch.linspace(-1.0, 2.0, like.shape[0], dtype=like.dtype)


def _check_bt(got: dict, chosen: torch.Tensor, rejected: torch.Tensor, margin: Any,
              prop: str, scale: float = 1.0) -> None:
    shown = {"chosen_rewards": chosen, "rejected_rewards": rejected, "margin": margin}
    want = oracle.bradley_terry(chosen, rejected, margin)
    dtype = chosen.dtype
    check_value(got["loss"], want["loss"], f"{prop}: the loss", shown, dtype, scale)
    expect(got["loss"].requires_grad, f"{prop}: the loss carries gradients to the rewards",
           input=shown, expected="requires_grad=True", got="requires_grad=False")
    check_grad(got["grad_chosen"], want["grad_chosen"], f"{prop}: d loss / d chosen_rewards", shown, dtype)
    check_grad(got["grad_rejected"], want["grad_rejected"], f"{prop}: d loss / d rejected_rewards",
               shown, dtype)
    check_stats(got["stats"], want, BT_STATS, prop, shown, dtype, scale)


def _check_dpo(got: dict, batch: dict, options: dict, prop: str, scale: float = 1.0) -> None:
    shown = dict(batch, **options)
    beta = options.get("beta", 0.1)
    want = oracle.dpo(batch["policy_chosen"], batch["policy_rejected"], batch["ref_chosen"], batch["ref_rejected"],
                      beta, options.get("loss_type", "sigmoid"), options.get("label_smoothing", 0.0))
    dtype = batch["policy_chosen"].dtype
    check_value(got["loss"], want["loss"], f"{prop}: the loss", shown, dtype, scale)
    for name in POLICY:
        check_grad(got[f"grad_{name}"], want[f"grad_{name}"], f"{prop}: d loss / d {name}", shown, dtype)
    check_stats(got["stats"], want, DPO_STATS, prop, shown, dtype, scale)


# ------------------------------------------------------------------ Bradley–Terry


@kata_test(level=2, category="correctness", weight=2,
           description="bradley_terry_loss: loss, gradients and stats match the oracle")
@FAST
@given(batch=preference_batches(), margin=MARGINS)
def test_bt_loss_matches_oracle(solution, batch, margin):
    chosen, rejected = batch["policy_chosen"], batch["policy_rejected"]
    margin = _margin(margin, chosen)
    before = {"chosen": chosen.clone(), "rejected": rejected.clone()}
    got = run_bt(solution, chosen, rejected, margin)
    _check_bt(got, chosen, rejected, margin, "mean of -logsigmoid(chosen - rejected - margin)",
              scale=magnitude(chosen, rejected))
    expect_unchanged(before, {"chosen": chosen, "rejected": rejected}, "bradley_terry_loss", batch)


@kata_test(level=2, category="api contract", weight=2,
           description="margin may be None, 0.0, a float or a (B,) tensor")
def test_bt_margin_forms(solution):
    chosen = torch.tensor([0.5, -1.0, 2.0])
    rejected = torch.tensor([0.0, 0.25, 2.5])
    for margin in (None, 0.0, 1.5, torch.tensor([0.0, 1.0, -2.0]), torch.tensor([0.75, 0.75, 0.75])):
        got = run_bt(solution, chosen, rejected, margin)
        _check_bt(got, chosen, rejected, margin,
                  "margin None or 0.0 shifts nothing, a float shifts every pair, a (B,) tensor "
                  "shifts pair i by margin[i]")


@kata_test(level=2, category="correctness", weight=2,
           description="accuracy counts ties as wrong and ignores the margin; stats are detached")
@FAST
@example(batch={"policy_chosen": torch.tensor([1.0, 0.0, 2.0]),
                "policy_rejected": torch.tensor([0.0, 0.0, 3.0]),
                "ref_chosen": torch.zeros(3), "ref_rejected": torch.zeros(3)}, margin=1.0)
@given(batch=preference_batches(grid=True), margin=MARGINS)
def test_bt_stats_count_ties_as_wrong(solution, batch, margin):
    chosen, rejected = batch["policy_chosen"].clone(), batch["policy_rejected"].clone()
    rejected[0] = chosen[0]                 # at least one tie
    margin = _margin(margin, chosen)
    got = run_bt(solution, chosen, rejected, margin)
    want = oracle.bradley_terry(chosen, rejected, margin)
    check_stats(got["stats"], want, BT_STATS, "accuracy = fraction with chosen > rejected (a tie "
                "is wrong; the margin plays no part), mean_difference = mean(chosen - rejected)",
                {"chosen_rewards": chosen, "rejected_rewards": rejected, "margin": margin},
                chosen.dtype)


@kata_test(level=2, category="numerics", weight=1,
           description="bradley_terry_loss is finite and exact for reward gaps of 1e3 to 1e4")
@FEW
@given(batch=preference_batches(scale=1e3))
def test_bt_stable_for_large_differences(solution, batch):
    chosen, rejected = batch["policy_chosen"], batch["policy_rejected"]
    got = run_bt(solution, chosen, rejected, None)
    _check_bt(got, chosen, rejected, None, "-logsigmoid(x) = softplus(-x) stays finite for "
              "large gaps; log(sigmoid(x)) is -inf below about -88 in float32",
              scale=magnitude(chosen, rejected, factor=2))


# ------------------------------------------------------------------ DPO, sigmoid


@kata_test(level=2, category="correctness", weight=3,
           description="sigmoid dpo_loss: loss, policy gradients and stats match the oracle")
@FAST
@given(batch=preference_batches(), beta=BETAS, eps=SMOOTHINGS)
def test_dpo_sigmoid_matches_oracle(solution, batch, beta, eps):
    before = {n: t.clone() for n, t in batch.items()}
    options = {"beta": beta, "loss_type": "sigmoid", "label_smoothing": eps}
    got = run_dpo(solution, batch, **options)
    _check_dpo(got, batch, options, "-(1 - eps) logsigmoid(beta logits) - eps logsigmoid(-beta "
               "logits), logits = (pc - pr) - (rc - rr)", scale=magnitude(*batch.values(), factor=4 * beta))
    expect_unchanged(before, batch, "dpo_loss", batch)


@kata_test(level=2, category="correctness", weight=2,
           description="label smoothing weighs -logsigmoid(beta z) by 1 - eps and -logsigmoid(-beta z) by eps")
@FEW
@given(batch=preference_batches(), eps=st.sampled_from((0.1, 0.25, 0.4)))
def test_dpo_label_smoothing_weighs_both_directions(solution, batch, eps):
    options = {"beta": 1.0, "loss_type": "sigmoid", "label_smoothing": eps}
    got = run_dpo(solution, batch, **options)
    _check_dpo(got, batch, options, f"with label_smoothing = {eps}: mean of -(1 - {eps}) "
               f"logsigmoid(beta logits) - {eps} logsigmoid(-beta logits)",
               scale=magnitude(*batch.values(), factor=4))


@kata_test(level=2, category="api contract", weight=1,
           description="dpo_loss defaults: beta = 0.1, sigmoid, no label smoothing")
@FEW
@given(batch=preference_batches())
def test_dpo_defaults(solution, batch):
    got = run_dpo(solution, batch)
    _check_dpo(got, batch, {}, "dpo_loss(pc, pr, rc, rr) uses beta = 0.1, loss_type = 'sigmoid' "
               "and label_smoothing = 0.0", scale=magnitude(*batch.values(), factor=0.4))


@kata_test(level=2, category="correctness", weight=2,
           description="no gradient reaches the reference log-probs, even when they require grad")
@FAST
@given(batch=preference_batches(), beta=BETAS, eps=SMOOTHINGS)
def test_dpo_reference_gets_no_gradient(solution, batch, beta, eps):
    options = {"beta": beta, "loss_type": "sigmoid", "label_smoothing": eps}
    got = run_dpo(solution, batch, **options)
    shown = dict(batch, **options)
    expect(got["loss"].requires_grad, "the DPO loss carries gradients to the policy log-probs",
           input=shown, expected="requires_grad=True", got="requires_grad=False")
    for name in REFERENCE:
        grad = got[f"grad_{name}"]
        expect(grad is None or bool((grad == 0).all()),
               f"the reference model is frozen: {name}.grad stays None (or zero) even though "
               f"{name} requires grad (detach it)", input=shown, expected="None or zeros", got=grad)
    want = oracle.dpo(*(batch[n] for n in POLICY + REFERENCE), beta, "sigmoid", eps)
    for name in POLICY:
        check_grad(got[f"grad_{name}"], want[f"grad_{name}"], f"d loss / d {name}", shown,
                   batch[name].dtype)


@kata_test(level=2, category="correctness", weight=2,
           description="chosen/rejected rewards, reward_accuracy (ties wrong) and reward_margin")
@FAST
@given(batch=preference_batches(grid=True), beta=EXACT_BETAS)
def test_dpo_stats_count_ties_as_wrong(solution, batch, beta):
    batch = {n: t.clone() for n, t in batch.items()}
    # pair 0 is a tie: the policy moved both answers by the same amount from the reference
    batch["policy_rejected"][0] = batch["ref_rejected"][0] + (batch["policy_chosen"][0] - batch["ref_chosen"][0])
    options = {"beta": beta}
    got = run_dpo(solution, batch, **options)
    want = oracle.dpo(*(batch[n] for n in POLICY + REFERENCE), beta, "sigmoid", 0.0)
    check_stats(got["stats"], want, DPO_STATS, "chosen_rewards = beta (pc - rc), rejected_rewards "
                "= beta (pr - rr) (B,); reward_accuracy = mean(chosen > rejected), a tie is wrong; "
                "reward_margin = mean(chosen - rejected)", dict(batch, **options),
                batch["policy_chosen"].dtype, scale=magnitude(*batch.values(), factor=2 * beta))


@kata_test(level=2, category="numerics", weight=1,
           description="dpo_loss is finite and exact for log-ratios of 1e3 to 1e4")
@FEW
@given(batch=preference_batches(scale=1e3), beta=st.sampled_from((0.1, 1.0)), eps=SMOOTHINGS)
def test_dpo_stable_for_large_log_ratios(solution, batch, beta, eps):
    options = {"beta": beta, "loss_type": "sigmoid", "label_smoothing": eps}
    got = run_dpo(solution, batch, **options)
    _check_dpo(got, batch, options, "logsigmoid stays finite for large beta * logits; "
               "log(sigmoid(x)) is -inf below about -88 in float32",
               scale=magnitude(*batch.values(), factor=4 * beta))


@kata_test(level=2, category="api contract", weight=2,
           description="shapes that differ and an empty batch raise ValueError")
def test_shape_mismatch_and_empty_batch_raise(solution):
    three, two = torch.zeros(3), torch.zeros(2)
    empty = torch.zeros(0)
    cases = [
        ("bradley_terry_loss", (three, two), {}),
        ("bradley_terry_loss", (three, three), {"margin": two}),
        # A tensor margin of B elements but not of shape (B,) would broadcast, not raise.
        ("bradley_terry_loss", (three, three), {"margin": torch.zeros(3, 1)}),
        ("bradley_terry_loss", (three, three), {"margin": torch.zeros(1, 3)}),
        ("bradley_terry_loss", (empty, empty), {}),
        ("dpo_loss", (three, three, three, two), {}),
        ("dpo_loss", (three, two, three, three), {}),
        ("dpo_loss", (three, three, three, torch.zeros(3, 1)), {}),
        ("dpo_loss", (empty, empty, empty, empty), {}),
    ]
    for name, args, kwargs in cases:
        shown = f"{name}({', '.join(f'shape {tuple(a.shape)}' for a in args)}" + \
                "".join(f", {k}=shape {tuple(v.shape)}" for k, v in kwargs.items()) + ")"
        expect_value_error(lambda: getattr(solution, name)(*args, **kwargs),
                           f"{name} raises ValueError for per-sequence tensors of different "
                           f"shapes or an empty batch", shown)
