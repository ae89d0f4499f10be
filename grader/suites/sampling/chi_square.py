"""Pearson chi-square goodness-of-fit tests for the sampling suite.

Sampling is checked by its distribution on fixed generator seeds (the grade is
reproducible). Bins whose expected count is below MIN_EXPECTED_COUNT are pooled; a test fails
when the chi-square tail probability of the statistic is below ALPHA_PER_TEST = 1e-9
(computed exactly from the chi-square distribution with torch.special.gammaincc, no
approximation of the quantile). Because counts are discrete, the true tail of the Pearson
statistic is heavier than the chi-square tail; for the worst case (a two-bin split with
expected count 200) the exact binomial tail is 5.3e-9, so each evaluation raises a false
alarm with probability below 1e-8. The suite evaluates at most MAX_CHI_SQUARE_EVALUATIONS = 20
such tests per run: a correct solution is rejected with probability below 2e-7 per run.
Anything sampled with probability exactly 0 fails at once.
"""

from __future__ import annotations

from typing import Any

import torch

from grader.protocol import expect

ALPHA_PER_TEST = 1e-9
MIN_EXPECTED_COUNT = 200
MAX_CHI_SQUARE_EVALUATIONS = 20


def chi_square_tail(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X ~ chi-square(dof): the regularized upper incomplete gamma."""
    a = torch.tensor(dof / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(a, torch.tensor(statistic / 2, dtype=torch.float64)))


def pooled_bins(probs: list[float], num_draws: int) -> list[list[int]]:
    """Group token ids so that every group's expected count is >= MIN_EXPECTED_COUNT:
    large bins alone, the small ones pooled (and the pool merged into the smallest large bin
    when it is still too small). Zero-probability tokens are left out (checked separately)."""
    ids = sorted((i for i, p in enumerate(probs) if p > 0), key=lambda i: probs[i])
    small = [i for i in ids if probs[i] * num_draws < MIN_EXPECTED_COUNT]
    groups = [[i] for i in ids if probs[i] * num_draws >= MIN_EXPECTED_COUNT]
    if small:
        if sum(probs[i] for i in small) * num_draws >= MIN_EXPECTED_COUNT or not groups:
            groups.append(small)
        else:
            groups[0] = groups[0] + small
    return groups


def check_frequencies(counts: list[int], probs: list[float], prop: str, *, input: Any) -> None:
    """Chi-square goodness of fit of `counts` (per token id) against `probs`."""
    num_draws = sum(counts)
    impossible = [i for i, (c, p) in enumerate(zip(counts, probs)) if c > 0 and p <= 0]
    expect(not impossible, prop + " (a token with probability 0 was drawn)", input=input,
           expected=f"probabilities {[round(p, 4) for p in probs]}",
           got=f"counts {counts} over {num_draws} draws; token(s) {impossible} are impossible")
    groups = pooled_bins(probs, num_draws)
    if len(groups) < 2:
        return
    statistic = 0.0
    for group in groups:
        expected = num_draws * sum(probs[i] for i in group)
        observed = sum(counts[i] for i in group)
        statistic += (observed - expected) ** 2 / expected
    tail = chi_square_tail(statistic, len(groups) - 1)
    expect(tail >= ALPHA_PER_TEST, prop, input=input,
           expected=f"frequencies {[round(num_draws * p) for p in probs]} (probabilities "
                    f"{[round(p, 4) for p in probs]}) over {num_draws} draws",
           got=f"counts {counts}",
           note=f"chi-square = {statistic:.1f} with {len(groups) - 1} degrees of freedom, "
                f"p-value {tail:.2g} < {ALPHA_PER_TEST:g} (false-alarm rate per run < 1e-6)")
