"""Timing for the efficiency test, through the engine's measurement API.

These are `grader.suites._common.best_time_s` and `growth_exponent`, on the same primitive
(`grader.engine.measure.measuring("time")`, which `_common.exec_time_s` wraps): the
candidate's share is measured in its own process after the judge/worker split. They are
repeated here only because importing `_common` imports torch (about 1.3 s of CPU, most of
this suite's grading time), which paged-kv never needs; once `_common` imports torch lazily,
import them from there instead.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from grader.engine.measure import measuring


def exec_time_s(fn: Callable[[], Any]) -> float:
    """Seconds `fn()` spends executing (the candidate's calls as its process timed them)."""
    with measuring("time") as m:
        fn()
    return m.time_s


def best_time_s(fn: Callable[[], Any], *, repeats: int = 5, min_time_s: float = 0.002) -> float:
    """Best (minimum) per-call execution time of fn() over `repeats` samples."""
    fn()  # warm-up
    best = math.inf
    for _ in range(repeats):
        loops, elapsed = 0, 0.0
        while elapsed < min_time_s:
            elapsed += exec_time_s(fn)
            loops += 1
        best = min(best, elapsed / loops)
    return best


def growth_exponent(run_at: Callable[[int], Callable[[], Any]], sizes: Sequence[int], *,
                    timer: Callable[[Callable[[], Any]], float]) -> float:
    """Slope of log(time) against log(size): about 0 for O(1) work, 1 for linear."""
    xs, ys = [], []
    for n in sizes:
        xs.append(math.log(n))
        ys.append(math.log(max(timer(run_at(n)), 1e-9)))
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    num = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den
