"""The shrunk example survives hypothesis's changes of wording (grader/engine/hypothesis_report.py).

Canned notes pin both wordings hypothesis has used; the live tests run a real failure under the
installed hypothesis and fail loudly when its header is one no known wording matches, so the
list is extended before a scorecard loses its example.
"""

from __future__ import annotations

from pathlib import Path

import hypothesis
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from grader.engine.hypothesis_report import HEADER, falsifying_example, header_kind, notes_of
from grader.engine.runner import run_suite

FIXTURES = Path(__file__).parent / "report_fixtures"

# What the grading child's profile runs: no database, no blob, no explain phase.
KATA_SETTINGS = settings(database=None, derandomize=True, print_blob=False, deadline=None,
                         phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink])


def _with_notes(*notes: str, exc: BaseException | None = None) -> BaseException:
    exc = exc or AssertionError("add returns the sum")
    for note in notes:
        exc.add_note(note)
    return exc


# ------------------------------------------------------------------ both wordings, pinned


OLD_GIVEN = "Falsifying example: test_add(\n    solution=<module 'toy' from '/tmp/x/toy.py'>,\n    a=2,\n    b=1,\n)"
NEW_GIVEN = "Failing test case: test_add(\n    solution=<module 'toy' from '/tmp/x/toy.py'>,\n    a=2,\n    b=1,\n)"
STEPS = ("state = CounterMachine()", "state.add(k=3)", "state.teardown()")


@pytest.mark.parametrize("note", [OLD_GIVEN, NEW_GIVEN], ids=["falsifying-example", "failing-test-case"])
def test_both_wordings_of_a_given_failure_give_the_same_example(note):
    example = falsifying_example(_with_notes(note))
    assert example == "Falsifying example: test_add(\n    a=2,\n    b=1,\n)"


@pytest.mark.parametrize("header", ["Falsifying example:", "Failing test case: <state machine>"],
                         ids=["falsifying-example", "failing-test-case"])
def test_both_wordings_of_a_state_machine_failure_keep_every_step(header):
    example = falsifying_example(_with_notes(header, *STEPS))
    assert example == "\n".join((HEADER, *STEPS))


def test_explicit_example_wordings_are_known():
    for note in ("Falsifying explicit example: test_add(a=0, b=0)",
                 "Failing explicit example: test_add(a=0, b=0)", "Trying example: test_add(a=0, b=0)"):
        assert header_kind(note) == "known", note
        assert falsifying_example(_with_notes(note)) == "Falsifying example: test_add(a=0, b=0)"


def test_advice_after_the_example_is_left_out():
    exc = _with_notes(NEW_GIVEN, "Explanation:\n    These lines were always and only run by failing examples:",
                      "You can reproduce this example by temporarily adding @reproduce_failure(...)")
    assert falsifying_example(exc) == "Falsifying example: test_add(\n    a=2,\n    b=1,\n)"


def test_a_group_shows_the_example_of_the_failure_it_describes():
    first = _with_notes("Failing test case: test_add(a=2, b=1)")
    second = _with_notes("Failing test case: test_add(a=-1, b=0)", exc=ValueError("x"))
    group = ExceptionGroup("Hypothesis found 2 distinct failures.", [first, second])
    assert falsifying_example(group) == "Falsifying example: test_add(a=2, b=1)"
    assert notes_of(group) == ["Failing test case: test_add(a=2, b=1)"]


def test_a_wording_not_seen_yet_is_still_read_by_its_shape():
    exc = _with_notes("Minimal failing input: test_add(\n    a=2,\n)")
    assert header_kind(exc.__notes__[0]) == "shape"
    assert falsifying_example(exc) == "Falsifying example: test_add(\n    a=2,\n)"
    steps = _with_notes("Smallest run found: <state machine>", *STEPS)
    assert falsifying_example(steps) == "\n".join((HEADER, *STEPS))


def test_steps_without_any_header_are_kept():
    assert falsifying_example(_with_notes(*STEPS)) == "\n".join((HEADER, *STEPS))


def test_no_notes_or_unrelated_notes_give_no_example():
    assert falsifying_example(AssertionError("x")) is None
    assert falsifying_example(_with_notes("while grading level 2", "see the statement")) is None


# ------------------------------------------------------------------ the installed hypothesis


def _failure_of(run) -> BaseException:
    try:
        run()
    except BaseException as exc:  # noqa: BLE001 - the failure is what is inspected
        return exc
    raise AssertionError("the property was expected to fail")


def _assert_header_is_known(exc: BaseException) -> None:
    notes = notes_of(exc)
    kinds = [header_kind(n) for n in notes]
    assert "known" in kinds, (
        f"hypothesis {hypothesis.__version__} wrote a failing-example header that no wording in "
        "grader/engine/hypothesis_report.py KNOWN_HEADERS matches; add it there. "
        f"Its notes were: {notes!r}")


def test_the_installed_hypothesis_writes_a_known_header_for_a_given_failure():
    @KATA_SETTINGS
    @given(a=st.integers(0, 10), b=st.integers(0, 10))
    def test_add(a, b):
        assert a < 2 or b == 0

    exc = _failure_of(test_add)
    _assert_header_is_known(exc)
    example = falsifying_example(exc)
    assert example is not None and example.startswith(HEADER + " test_add(")
    assert "a=2" in example and "b=1" in example, example


def test_the_installed_hypothesis_writes_a_known_header_and_the_steps_for_a_state_machine():
    class Bounded(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.total = 0

        @rule(k=st.integers(0, 3))
        def push(self, k: int) -> None:
            self.total += k
            assert self.total < 3

    Bounded.TestCase.settings = KATA_SETTINGS
    exc = _failure_of(lambda: Bounded.TestCase("runTest").runTest())
    _assert_header_is_known(exc)
    example = falsifying_example(exc)
    assert example is not None and example.startswith(HEADER + "\nstate = Bounded()")
    assert "state.push(k=3)" in example and example.endswith("state.teardown()"), example


# ------------------------------------------------------------------ through the engine


def test_a_state_machine_failure_shows_its_steps_on_the_scorecard():
    outcome = run_suite(FIXTURES / "counter_suite.py", FIXTURES / "counter_wrong.py", "counter", seed=1)
    (test,) = outcome.tests
    assert not test.passed and test.message == "value is the sum of everything added"
    example = test.details["example"]
    assert example.startswith(HEADER + "\nstate = CounterMachine()"), example
    assert "state.add(k=3)" in example and "<module" not in example and "def " not in example


def test_the_same_suite_passes_a_correct_counter():
    outcome = run_suite(FIXTURES / "counter_suite.py", FIXTURES / "counter_good.py", "counter", seed=1)
    assert [t.passed for t in outcome.tests] == [True]
