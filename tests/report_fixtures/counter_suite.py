"""A stateful suite for the engine's report tests: a bounded counter driven in lockstep
with a plain-Python model by a RuleBasedStateMachine."""

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from grader.protocol import expect, kata_test


@kata_test(level=1, category="correctness", description="the counter matches a model under any steps")
def test_counter_matches_the_model(solution):
    class CounterMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.counter = solution.Counter()
            self.model = 0
            self.calls = ["Counter()"]

        @rule(k=st.integers(0, 3))
        def add(self, k: int) -> None:
            self.counter.add(k)
            self.model += k
            self.calls.append(f"add({k})")

        @invariant()
        def value_matches(self) -> None:
            expect(self.counter.value == self.model, "value is the sum of everything added",
                   input="; ".join(self.calls), expected=self.model, got=self.counter.value)

    CounterMachine.TestCase().runTest()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
