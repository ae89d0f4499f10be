"""best_time_s (grader.suites._measure): how many calls it makes. A call far too slow is
measured twice and no more; a fast one gets all its samples, even when one call stalls."""

from __future__ import annotations

import time

from grader.suites._measure import best_time_s


def _busy(seconds: float) -> None:
    end = time.thread_time() + seconds  # CPU time: what the measurement counts
    while time.thread_time() < end:
        pass


class Calls:
    def __init__(self, durations: list[float]) -> None:
        self.durations, self.count = durations, 0

    def __call__(self) -> None:
        seconds = self.durations[min(self.count, len(self.durations) - 1)]
        self.count += 1
        _busy(seconds)


def test_a_far_too_slow_call_is_timed_twice_and_no_more():
    calls = Calls([0.06])
    best = best_time_s(calls, repeats=7, budget_s=0.1)
    assert calls.count == 2
    assert 0.05 <= best < 0.1


def test_without_a_budget_every_sample_is_taken():
    calls = Calls([0.06])
    best_time_s(calls, repeats=3)
    assert calls.count == 1 + 3  # the warm-up and one call per sample (each past min_time_s)


def test_a_fast_call_stalled_once_still_gets_its_samples():
    calls = Calls([0.06, 0.0])  # the warm-up stalls, every later call is fast
    best = best_time_s(calls, repeats=5, budget_s=0.1)
    assert calls.count > 2 + 5
    assert best < 0.005


def test_a_fast_call_is_sampled_as_without_a_budget():
    calls = Calls([0.0])
    best = best_time_s(calls, repeats=5, budget_s=0.1)
    assert calls.count >= 1 + 5 * 10  # each sample loops at least MIN_LOOPS times
    assert best < 0.001
