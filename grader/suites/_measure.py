"""Measurements for efficiency tests, without importing torch (a suite that never needs
torch, like paged-kv's, saves over a second of every grading run).

Efficiency tests measure only through these helpers (grader.worker.measure): the
candidate's code runs in a worker process, and its share is measured there, around its own
calls, with the transport left out.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

from grader.worker.measure import measuring




def count_ops(fn: Callable[[], Any]) -> int:
    """Number of torch operations `fn()` calls (functions, methods, operators): exact and
    immune to machine noise, so "no Python loop over rows/heads" is checked by comparing
    counts at two sizes. Counted at the torch-function level: a dispatch-level mode would
    import torch._dynamo on first use, about a second of every grading run."""
    import torch

    with torch.no_grad(), measuring("ops") as m:
        fn()
    return m.ops


def count_flops(fn: Callable[[], Any]) -> int:
    """FLOPs of `fn()` as torch.utils.flop_counter.FlopCounterMode counts them."""
    with measuring("flops") as m:
        fn()
    return m.flops


def count_syncs(fn: Callable[[], Any]) -> int:
    """Device-to-host synchronisations `fn()` makes (item, tolist, cpu, boolean-mask
    indexing, ...; see grader.engine.measure)."""
    with measuring("syncs") as m:
        fn()
    return m.syncs


def new_storages(fn: Callable[[], Any]) -> list[tuple[int, tuple[int, ...], str]]:
    """Every tensor storage `fn()` creates: (numel of the storage, shape, dtype name)."""
    with measuring("storages") as m:
        fn()
    return m.storages


def peak_bytes(fn: Callable[[], Any]) -> int:
    """The most bytes of tensor storages created during `fn()` that were alive at once
    (what existed before stays out). Measure one call into the candidate's code at a time:
    the peaks of several calls add up."""
    with measuring("peak_bytes") as m:
        fn()
    return m.peak_bytes


def exec_time_s(fn: Callable[[], Any]) -> float:
    """Seconds `fn()` spends executing: its own code here plus the candidate's calls as the
    worker timed them (the transport between the two does not count)."""
    with measuring("time") as m:
        fn()
    return m.time_s


def median_time_s(fn: Callable[[], Any], *, repeats: int = 5, min_time_s: float = 0.002) -> float:
    """Median execution time of fn(), each sample looping until it lasts at least min_time_s."""
    fn()  # warm-up
    samples = sorted(_sample(fn, min_time_s) for _ in range(repeats))
    return samples[len(samples) // 2]


def best_time_s(fn: Callable[[], Any], *, repeats: int = 5, min_time_s: float = 0.002,
                budget_s: float | None = None) -> float:
    """Best (minimum) per-call execution time of fn() over `repeats` samples: the least
    noisy estimate when other work shares the machine.

    With `budget_s`, a call so slow that two of them (the timed warm-up and one more) already
    executed for budget_s in all stops there, and the faster of the two is the estimate: a
    far too slow solution fails in two calls instead of 1 + repeats, while a fast one that
    the machine stalls once still gets its full samples."""
    if budget_s is None:
        fn()  # warm-up
        return min(_sample(fn, min_time_s) for _ in range(repeats))
    calls = [exec_time_s(fn)]  # warm-up, timed
    if calls[0] * 2 >= budget_s:
        calls.append(exec_time_s(fn))
        if sum(calls) >= budget_s:
            return min(calls)
    return min(_sample(fn, min_time_s) for _ in range(repeats))


WALL_FACTOR = 3  # a sample stops after this many times min_time_s of wall time ...
MIN_LOOPS = 10   # ... once it has made this many calls


def _sample(fn: Callable[[], Any], min_time_s: float) -> float:
    """Mean execution time of fn() over calls lasting min_time_s of execution in all, or
    WALL_FACTOR times that of wall time: a cheap call into the worker executes for a few
    microseconds of the hundred its round trip takes."""
    loops, elapsed = 0, 0.0
    deadline = time.perf_counter() + WALL_FACTOR * min_time_s
    while elapsed < min_time_s and (loops < MIN_LOOPS or time.perf_counter() < deadline):
        elapsed += exec_time_s(fn)
        loops += 1
    return elapsed / loops


def growth_exponent(run_at: Callable[[int], Any], sizes: Sequence[int], *,
                    timer: Callable[[Any], float] = median_time_s) -> float:
    """Slope of log(time) against log(size): about 1 for linear work, 2 for quadratic.
    `run_at(n)` prepares a workload of size n and returns the callable to time (or what
    `timer` takes: a suite with its own timer may return a pair to compare)."""
    xs, ys = [], []
    for n in sizes:
        xs.append(math.log(n))
        ys.append(math.log(max(timer(run_at(n)), 1e-9)))
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    num = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den
