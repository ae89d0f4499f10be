"""A tiny suite for the engine's own tests: `add(a, b)` and `scale(xs, k)`."""

from hypothesis import given
from hypothesis import strategies as st

from grader.protocol import expect, kata_test


@kata_test(level=1, category="correctness", description="add(a, b) returns a + b")
@given(a=st.integers(-5, 5), b=st.integers(-5, 5))
def test_add(solution, a, b):
    got = solution.add(a, b)
    expect(isinstance(got, int), "add returns an int", input={"a": a, "b": b}, expected="int",
           got=type(got).__name__)
    expect(got == a + b, "add returns the sum", input={"a": a, "b": b}, expected=a + b, got=got)


@kata_test(level=2, category="api contract", description="scale(xs, k) returns a new list and leaves xs alone")
@given(xs=st.lists(st.integers(-3, 3), max_size=4), k=st.integers(-2, 2))
def test_scale(solution, xs, k):
    before = list(xs)
    got = solution.scale(xs, k)
    expect(xs == before, "scale must not modify its input", input={"xs": before, "k": k},
           expected=before, got=xs)
    expect(got == [k * x for x in before], "scale multiplies every element",
           input={"xs": before, "k": k}, expected=[k * x for x in before], got=got)


@kata_test(level=2, category="edge cases", description="add(0, 0) is 0")
def test_zero(solution):
    expect(solution.add(0, 0) == 0, "add(0, 0) is 0", got=solution.add(0, 0))
