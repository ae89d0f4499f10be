"""A suite for tests/test_example_calls.py: which example a failure's snippet replays, and
which function a card names when the candidate's NotImplementedError set off the failure.
The candidate is `toy`: add(a, b) and a Counter with add(k), total and reset()."""

from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from grader.protocol import PropertyFailure, expect, kata_test, start_replay


@kata_test(level=1, category="correctness", description="add(a, 1) is a + 1, explicit examples first")
@example(a=2)
@example(a=5)
@example(a=9)
@given(a=st.integers(0, 1))
def test_explicit_examples(solution, a):
    for i in range(a):  # calls of their own, so that two examples' snippets differ in length
        solution.add(i, 0)
    got = solution.add(a, 1)
    expect(got == a + 1, "add returns the sum", input={"a": a, "b": 1}, expected=a + 1, got=got)


@kata_test(level=1, category="correctness", description="add(a, 1) is a + 1, shrunk by replays")
def test_own_shrinker(solution):
    """A suite's own shrinker: replays smaller and smaller runs, keeps the last that failed
    (the last replay, a = 1, passes)."""
    best = None
    for n in (5, 4, 3, 2, 1):
        start_replay()
        try:
            for i in range(n):
                solution.add(i, 0)
            got = solution.add(n, 1)
            expect(got == n + 1, "add returns the sum", input={"a": n, "b": 1}, expected=n + 1, got=got)
        except PropertyFailure as failure:
            best = failure
    if best is not None:
        raise best


@kata_test(level=2, category="correctness", description="reset() sets the total to 0")
def test_reset_swallowed(solution):
    counter = solution.Counter()
    counter.add(3)
    try:
        counter.reset()
    except Exception:  # noqa: BLE001 - a suite comparing errors: NotImplementedError lands here too
        pass
    expect(counter.total == 0, "total after reset() is 0", expected=0, got=counter.total)


@kata_test(level=2, category="correctness", description="any sequence of add and reset keeps the total")
def test_counter_machine(solution):
    class Machine(RuleBasedStateMachine):
        @initialize()
        def make(self):
            self.counter, self.total = solution.Counter(), 1
            self.counter.add(1)  # so that a reset() that did nothing leaves a total to compare

        @rule(k=st.integers(1, 3))
        def add(self, k):
            self.counter.add(k)
            self.total += k

        @rule()
        def reset(self):
            self.total = 0
            self.counter.reset()

        def teardown(self):
            """Runs after a failing step too: here it compares a state the step left behind."""
            if hasattr(self, "counter"):
                expect(self.counter.total == self.total, "total matches the sum since the last reset",
                       expected=self.total, got=self.counter.total)

    run_state_machine_as_test(Machine, settings=settings(max_examples=30, stateful_step_count=5))
