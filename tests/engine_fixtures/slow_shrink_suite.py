"""A suite whose failing example takes hypothesis long to shrink (for the engine's tests):
each example costs 60 ms, and a wrong `add` fails on nearly every list of pairs, so the
shrinker would run for many seconds, past the test's limit, if nothing bounded it."""

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from grader.protocol import expect, kata_test


@kata_test(level=1, category="correctness", description="add(a, b) returns a + b for every pair")
@settings(max_examples=20)
@given(pairs=st.lists(st.tuples(st.integers(-1000, 1000), st.integers(-1000, 1000)), min_size=20, max_size=40))
def test_sums(solution, pairs):
    time.sleep(0.06)
    got = [solution.add(a, b) for a, b in pairs]
    expect(got == [a + b for a, b in pairs], "add returns the sum of every pair",
           input={"pairs": pairs}, expected=[a + b for a, b in pairs], got=got)
