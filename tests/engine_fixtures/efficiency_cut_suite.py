"""A suite whose efficiency test gives `add` a workload too big for a slow solution, then a
correctness test calls `add` on small numbers (tests/test_engine.py)."""

from grader.protocol import expect, kata_test


@kata_test(level=1, category="efficiency", description="add(a, b) is fast for big numbers")
def test_add_big(solution):
    expect(solution.add(10**12, 1) == 10**12 + 1, "add of big numbers", got="(no answer)")


@kata_test(level=1, category="correctness", description="add(a, b) returns a + b")
def test_add_small(solution):
    got = solution.add(2, 3)
    expect(got == 5, "add returns the sum", expected=5, got=got)
