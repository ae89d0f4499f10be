"""The `sampling` kata's hidden suite rejects realistic mistakes with the property a reader
would expect, accepts correct solutions written differently, and its statistical tests keep
their stated false-alarm rate."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

from tests.kata_testing import assert_rejected_by, assert_scores_full

SLUG = "sampling"

BUGGY = {
    "buggy_top_p_drops_crossing_token.py": "test_top_p_keeps_the_crossing_token",
    "buggy_top_p_strict_boundary.py": "test_top_p_exact_boundary",
    "buggy_top_p_before_top_k.py": "test_top_p_applied_after_top_k",
    "buggy_top_p_empty_row.py": "test_at_least_min_tokens_to_keep_survive",
    "buggy_top_k_exactly_k.py": "test_top_k_keeps_every_token_at_least_kth_value",
    "buggy_temperature_on_probabilities.py": "test_temperature_scales_logits_before_softmax",
    "buggy_sample_ignores_generator.py": "test_sample_uses_the_generator",
    "buggy_length_penalty_on_live_beams.py": "test_beam_matches_reference",
    "buggy_prompt_in_length.py": "test_scores_recomputable_from_step_fn",
    "buggy_eos_at_any_rank.py": "test_eos_counts_only_below_rank_num_beams",
    "buggy_stop_at_first_finished.py": "test_keeps_searching_while_a_live_beam_can_win",
    "buggy_ties_by_token_first.py": "test_ties_broken_by_beam_then_token",
    "buggy_acceptance_ratio_inverted.py": "test_first_token_follows_target_distribution",
    "buggy_residual_not_normalized.py": "test_first_token_follows_target_distribution",
    "buggy_residual_from_target.py": "test_first_token_follows_target_distribution",
    "buggy_no_bonus_token.py": "test_draft_equal_to_target_accepts_all_plus_bonus",
}

CORRECT = ["correct_sort_free_top_k.py", "correct_python_ranking.py"]


@pytest.mark.parametrize("name, expected_test", sorted(BUGGY.items()))
def test_buggy_solution_is_rejected_by_expected_property(name, expected_test):
    assert_rejected_by(SLUG, name, expected_test)


@pytest.mark.parametrize("name", CORRECT)
def test_correct_alternative_scores_full(name):
    assert_scores_full(SLUG, name)


# ----------------------------------------------------------------------- statistics


def suite():
    return importlib.import_module("grader.suites.sampling")


def test_chi_square_tail_matches_known_quantiles():
    """The tail function is the chi-square survival function (textbook 5% quantiles)."""
    tail = suite().chi_square_tail
    for dof, quantile in ((1, 3.841459), (2, 5.991465), (4, 9.487729)):
        assert math.isclose(tail(quantile, dof), 0.05, rel_tol=1e-5)


def test_pooled_bins_give_every_group_the_minimum_expected_count():
    mod = suite()
    probs = [0.5, 0.3, 0.15, 0.03, 0.015, 0.005, 0.0]
    groups = mod.pooled_bins(probs, 4000)
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3, 4, 5]
    assert all(4000 * sum(probs[i] for i in g) >= mod.MIN_EXPECTED_COUNT for g in groups)


def test_false_alarm_rate_per_run_is_below_one_in_a_million():
    """Worst case of one evaluation: two bins, the smaller at the minimum expected count. The
    exact binomial probability that Pearson's statistic passes the 1e-9 chi-square quantile
    stays below 1e-8, and the suite runs at most MAX_CHI_SQUARE_EVALUATIONS evaluations."""
    mod = suite()
    lo, hi = 0.0, 200.0
    for _ in range(100):  # the 1 - ALPHA quantile of chi-square(1) by bisection
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mod.chi_square_tail(mid, 1) > mod.ALPHA_PER_TEST else (lo, mid)
    threshold = hi
    worst = 0.0
    for num_draws in (4000, 20000):
        p = mod.MIN_EXPECTED_COUNT / num_draws
        k = torch.arange(num_draws + 1, dtype=torch.float64)
        log_pmf = (torch.lgamma(torch.tensor(num_draws + 1.0, dtype=torch.float64))
                   - torch.lgamma(k + 1) - torch.lgamma(num_draws - k + 1)
                   + k * math.log(p) + (num_draws - k) * math.log1p(-p))
        statistic = (k - num_draws * p) ** 2 / (num_draws * p * (1 - p))
        worst = max(worst, float(log_pmf[statistic >= threshold].exp().sum()))
    assert worst < 1e-8
    assert mod.MAX_CHI_SQUARE_EVALUATIONS * 1e-8 < 1e-6


def test_suite_stays_within_its_chi_square_budget(monkeypatch):
    """Run every test that calls check_frequencies (all of them on fixed cases, none under
    @given) on the reference and count the evaluations."""
    import inspect

    import reference.sampling as ref

    mod = suite()
    calls = []
    original = mod.check_frequencies
    monkeypatch.setattr(mod, "check_frequencies", lambda *a, **k: (calls.append(a), original(*a, **k)))
    for name, fn in vars(mod).items():
        if not name.startswith("test_") or "check_frequencies" not in inspect.getsource(fn):
            continue
        assert not hasattr(fn, "hypothesis"), f"{name} would run a chi-square test per example"
        params = inspect.signature(fn).parameters
        fn(**{k: ref for k in params})
    assert 0 < len(calls) <= mod.MAX_CHI_SQUARE_EVALUATIONS


# ----------------------------------------------------------------------- regressions


def _load(path):
    spec = importlib.util.spec_from_file_location(f"_corpus_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    import sys
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_regression_eos_rank_needs_an_earlier_eos_to_matter():
    """Found while writing the suite: an EOS ranked num_beams after num_beams live candidates
    is never reached (the walk has already stopped), so the targeted case needs an earlier
    EOS in the same ranking. The table of test_eos_counts_only_below_rank_num_beams has one."""
    from tests.kata_testing import corpus_file

    mod = suite()
    import reference.sampling as ref
    buggy = _load(corpus_file(SLUG, "buggy_eos_at_any_rank.py"))
    table = {(): [0.05, 0.5, 0.4, 0.05], (1,): [0.6, 0.2, 0.1, 0.1], (2,): [0.3, 0.5, 0.1, 0.1],
             (2, 1): [0.4, 0.3, 0.2, 0.1], (1, 1): [0.45, 0.25, 0.2, 0.1]}
    run = lambda impl: [t for t, _ in impl.beam_search(mod.TinyModel(4, 0, table=table), [], 2, 3, 0, 0.0)]
    assert run(ref) == [[1, 0], [2, 1, 0]]
    assert run(buggy) == [[1, 0], [2, 0]]


def test_regression_exact_boundary_probabilities_are_exact_in_float32():
    """The boundary cases rely on log(.5/.25/.125) giving exactly dyadic softmax values."""
    for probs in ([0.5, 0.25, 0.25], [0.5, 0.25, 0.125, 0.125]):
        got = torch.tensor(probs, dtype=torch.float32).log().softmax(-1).tolist()
        assert got == probs
