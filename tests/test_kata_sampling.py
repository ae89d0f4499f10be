"""The `sampling` kata's hidden suite rejects realistic mistakes with the property a reader
would expect, accepts correct solutions written differently, and its statistical tests keep
their stated false-alarm rate."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

from tests.kata_testing import (assert_rejected_at_level, assert_scores_full, buggy_params,
                                correct_params)

SLUG = "sampling"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


# ----------------------------------------------------------------------- statistics


LEVEL_MODULES = ("test_level1", "test_level2", "test_level3")


def chi_square():
    return importlib.import_module("grader.suites.sampling.chi_square")


def test_chi_square_tail_matches_known_quantiles():
    """The tail function is the chi-square survival function (textbook 5% quantiles)."""
    tail = chi_square().chi_square_tail
    for dof, quantile in ((1, 3.841459), (2, 5.991465), (4, 9.487729)):
        assert math.isclose(tail(quantile, dof), 0.05, rel_tol=1e-5)


def test_pooled_bins_give_every_group_the_minimum_expected_count():
    mod = chi_square()
    probs = [0.5, 0.3, 0.15, 0.03, 0.015, 0.005, 0.0]
    groups = mod.pooled_bins(probs, 4000)
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3, 4, 5]
    assert all(4000 * sum(probs[i] for i in g) >= mod.MIN_EXPECTED_COUNT for g in groups)


def test_false_alarm_rate_per_run_is_below_one_in_a_million():
    """Worst case of one evaluation: two bins, the smaller at the minimum expected count. The
    exact binomial probability that Pearson's statistic passes the 1e-9 chi-square quantile
    stays below 1e-8, and the suite runs at most MAX_CHI_SQUARE_EVALUATIONS evaluations."""
    mod = chi_square()
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

    calls = []
    original = chi_square().check_frequencies
    counting = lambda *a, **k: (calls.append(a), original(*a, **k))  # noqa: E731 - a one-line spy
    for level in LEVEL_MODULES:
        mod = importlib.import_module(f"grader.suites.sampling.{level}")
        if not hasattr(mod, "check_frequencies"):
            continue
        monkeypatch.setattr(mod, "check_frequencies", counting)
        for name, fn in vars(mod).items():
            if not name.startswith("test_") or "check_frequencies" not in inspect.getsource(fn):
                continue
            assert not hasattr(fn, "hypothesis"), f"{name} would run a chi-square test per example"
            params = inspect.signature(fn).parameters
            fn(**{k: ref for k in params})
    assert 0 < len(calls) <= chi_square().MAX_CHI_SQUARE_EVALUATIONS


def test_every_level_names_its_rules():
    """Each level's RULES map names tests of that module (tests/test_katas.py checks levels)."""
    for level in LEVEL_MODULES:
        mod = importlib.import_module(f"grader.suites.sampling.{level}")
        for tests in mod.RULES.values():
            for name in ([tests] if isinstance(tests, str) else tests):
                assert callable(getattr(mod, name, None)), f"{level}: RULES names {name}"


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

    from grader.suites.sampling.beam_models import TinyModel

    import reference.sampling as ref
    buggy = _load(corpus_file(SLUG, "buggy_eos_at_any_rank.py"))
    table = {(): [0.05, 0.5, 0.4, 0.05], (1,): [0.6, 0.2, 0.1, 0.1], (2,): [0.3, 0.5, 0.1, 0.1],
             (2, 1): [0.4, 0.3, 0.2, 0.1], (1, 1): [0.45, 0.25, 0.2, 0.1]}

    def run(impl):
        return [t for t, _ in impl.beam_search(TinyModel(4, 0, table=table), [], 2, 3, 0, 0.0)]

    assert run(ref) == [[1, 0], [2, 1, 0]]
    assert run(buggy) == [[1, 0], [2, 0]]


def test_regression_exact_boundary_probabilities_are_exact_in_float32():
    """The boundary cases rely on log(.5/.25/.125) giving exactly dyadic softmax values."""
    for probs in ([0.5, 0.25, 0.25], [0.5, 0.25, 0.125, 0.125]):
        got = torch.tensor(probs, dtype=torch.float32).log().softmax(-1).tolist()
        assert got == probs


def test_regression_independence_prompt_is_never_drawn_elsewhere():
    """test_beam_search_calls_are_independent relies on its first call being the first with
    its prompt in a grading run (a cache kept across calls is then still empty for it): the
    random beam cases draw prompts of at most 3 tokens, that prompt has 4."""
    from hypothesis import given, settings

    from grader.suites.sampling.beam_models import beam_cases

    @settings(max_examples=200, database=None)
    @given(case=beam_cases())
    def check(case):
        assert len(case["prompt"]) < 4

    check()
