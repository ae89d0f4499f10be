"""The coach's review of a cohort: check every bundle, then grade every bundle × kata unit
(unit.py) in parallel, with the coach's seed, and never trust the bundle's claims.

A bundle that cannot be trusted (malformed zip, a manifest that breaks the schema, another
homework) becomes one "rejected" result and is not graded; nothing in one bundle can stop
the review of the others. Each grading is its own judge process with its own contained
worker, so units run side by side in threads that mostly wait on their processes.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, cast

from grader.catalog import Catalog
from grader.errors import KataError
from grader.homework.bundle import BundleError
from grader.homework.spec import Homework
from grader.homework.unit import GradingCache, check_bundle, grade_unit, rejected_result


@dataclass
class ReviewRun:
    seed: int
    results: list[dict[str, Any]]  # unit results, in bundle order then homework kata order
    num_gradings: int               # judge runs actually started (shared gradings counted once)


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def review(bundles: list[Path], homework: Homework, catalog: Catalog, *, seed: int, jobs: int | None = None,
           allow_uncontained: bool = False, on_planned: Callable[[int], None] | None = None,
           on_done: Callable[[dict[str, Any]], None] | None = None) -> ReviewRun:
    """Grade every kata of every bundle with `seed`. on_planned(number of units) is called
    once before grading; on_done(unit result) after each unit, from the calling thread."""
    plan: list[tuple[int, Path, str] | tuple[int, dict[str, Any]]] = []
    for index, path in enumerate(bundles):
        problem = _bundle_problem(path, homework, catalog)
        if problem is not None:
            plan.append((index, rejected_result(homework, path, "-", seed, problem)))
        else:
            plan.extend((index, path, hw_kata.slug) for hw_kata in homework.katas)
    units = [p for p in plan if len(p) == 3]
    if on_planned:
        on_planned(len(units))
    cache = GradingCache()
    results: dict[int, dict[str, Any]] = {i: p[1] for i, p in enumerate(plan) if len(p) == 2}
    # Every judge of the review forked from one process that has imported torch, hypothesis
    # and pytest once (about 1.5 s of CPU less per grading): grader/engine/zygote.py.
    from grader.engine import zygote  # here, not at the top: the CLI imports this module at start

    with zygote.many_gradings(), \
            ThreadPoolExecutor(max_workers=max(1, jobs or default_jobs()), thread_name_prefix="kata-unit") as pool:
        futures = {pool.submit(grade_unit, homework, catalog, p[1], p[2], seed,
                               allow_uncontained=allow_uncontained, cache=cache): i
                   for i, p in enumerate(plan) if len(p) == 3}
        for future in as_completed(futures):
            index = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 - one unit's bug must not lose the roster
                _, path, slug = cast("tuple[int, Path, str]", plan[index])  # a unit to grade
                result = {**rejected_result(homework, path, slug, seed, ""), "status": "error",
                          "problem": f"internal error while grading: {type(exc).__name__}: {exc}"}
            results[index] = result
            if on_done:
                on_done(result)
    return ReviewRun(seed=seed, results=[results[i] for i in range(len(plan))], num_gradings=cache.num_gradings)


def _bundle_problem(path: Path, homework: Homework, catalog: Catalog) -> str | None:
    with tempfile.TemporaryDirectory(prefix="kata-check-") as tmp:
        try:
            check_bundle(path, homework, catalog, Path(tmp) / "solutions")
        except BundleError as exc:
            return exc.message
        except KataError as exc:  # e.g. a kata the coach's catalog does not know
            return exc.message
    return None
