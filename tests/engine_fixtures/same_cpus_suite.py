"""Where a judge's worker runs: on the judge's CPUs (grader/engine/cpus.py), whether the judge
started it or the warm grader's zygote forked it."""

import os

from grader.protocol import expect, kata_test


def _on_the_judges_cpus(solution):
    judge, worker = sorted(os.sched_getaffinity(0)), solution.cpus()
    expect(worker == judge, "the worker runs on the judge's CPUs", expected=judge, got=worker)


@kata_test(level=1, category="correctness", description="the first judge's worker")
def test_worker_on_the_judges_cpus_a(solution):
    _on_the_judges_cpus(solution)


@kata_test(level=1, category="correctness", description="the second judge's worker")
def test_worker_on_the_judges_cpus_b(solution):
    _on_the_judges_cpus(solution)
