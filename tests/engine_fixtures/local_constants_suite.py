"""A suite that checks, inside the judge, that hypothesis draws no constants parsed out of
the grader's own modules (for the engine's tests)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from grader.protocol import expect, kata_test


@kata_test(level=1, category="correctness", description="no local constants")
@settings(max_examples=5)
@given(n=st.integers())
def test_no_local_constants(solution, n):
    from hypothesis.internal.conjecture import providers

    found = len(providers._get_local_constants())
    expect(found == 0, "hypothesis parses no local module for constants", got=found)
