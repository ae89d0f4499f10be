"""Four tests for the split grading's engine tests: each fails saying what it drew from the
global random state and, as `got`, which judge (process id) ran it."""

import os
import random

from grader.protocol import expect, kata_test


def _report(solution, name):
    drew = random.random()
    random.random()  # the next test must not start from what this one left
    expect(solution.add(1, 2) == 0, f"{name} drew {drew!r}", got=os.getpid())


@kata_test(level=1, category="correctness", description="a")
def test_a(solution):
    _report(solution, "a")


@kata_test(level=1, category="correctness", description="b")
def test_b(solution):
    _report(solution, "b")


@kata_test(level=2, category="correctness", description="c")
def test_c(solution):
    _report(solution, "c")


@kata_test(level=2, category="correctness", description="d")
def test_d(solution):
    _report(solution, "d")
