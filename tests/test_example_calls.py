"""A failure's snippet replays the example its card shows, and a card names the function that
is not implemented yet when that function's NotImplementedError set off the failure
(grader/engine/example_calls.py).

The engine cases grade tests/engine_fixtures/counter_unfinished.py with
example_calls_suite.py (no torch: about a second each); the last one is the paged-kv failure
that first blamed reference counting for an unwritten allocate_prompt.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.engine.example_calls import failing_calls, not_implemented
from grader.engine.failures import KataTimeout, describe_failure
from grader.engine.runner import run_suite
from grader.engine.transcript import Call, Segment, Transcript
from grader.protocol import PropertyFailure
from tests.kata_testing import REPO_ROOT, grade_file

FIXTURES = Path(__file__).parent / "engine_fixtures"
UNFINISHED = FIXTURES / "counter_unfinished.py"
NOT_IMPLEMENTED = "reset is not implemented yet (your code raised NotImplementedError)"


@pytest.fixture(scope="module")
def graded():
    outcome = run_suite(FIXTURES / "example_calls_suite.py", UNFINISHED, "toy", 3,
                        test_timeout_s=20.0, total_timeout_s=120.0)
    return {t.name: t for t in outcome.tests}


def _calls(snippet: str) -> list[str]:
    """The snippet's calls of add, as written: ["add(0, 0)", "add(2, 1)"]."""
    return re.findall(r"\badd\(-?\d+, -?\d+\)", snippet)


def test_the_reported_explicit_example_is_the_one_replayed(graded):
    """Three explicit examples fail; the card shows one of them, and the snippet replays that
    one: its calls, not those of the example that happened to run last."""
    failure = graded["test_explicit_examples"]
    a = int(re.search(r"'a': (\d+)", failure.details["input"]).group(1))
    calls = _calls(failure.details["snippet"])
    assert calls == [f"add({i}, 0)" for i in range(a)] + [f"add({a}, 1)"], (failure.details, calls)
    assert f"a={a}" in failure.details.get("example", f"a={a}")


def test_a_suites_own_replays_show_the_one_reported(graded):
    failure = graded["test_own_shrinker"]
    assert failure.details["input"] == "{'a': 2, 'b': 1}"
    assert _calls(failure.details["snippet"]) == ["add(0, 0)", "add(1, 0)", "add(2, 1)"]


def test_a_swallowed_not_implemented_error_is_named_not_the_mismatch_after_it(graded):
    failure = graded["test_reset_swallowed"]
    assert failure.message == NOT_IMPLEMENTED
    assert "line 16, in reset" in failure.details["where"]
    assert "got" not in failure.details and "later checks" in failure.details["note"]
    assert "counter.reset()  # raises NotImplementedError" in failure.details["snippet"]


def test_a_state_machines_teardown_after_a_not_implemented_step_is_not_what_the_card_says(graded):
    """The teardown compares totals after reset() raised: hypothesis reports the teardown's
    failure, the card reports the missing function (paged-kv's lockstep did the same)."""
    failure = graded["test_counter_machine"]
    assert failure.message == NOT_IMPLEMENTED, failure.message
    assert "reset" in failure.details["where"]


def test_a_not_implemented_error_itself_names_its_function(tmp_path):
    source = UNFINISHED.read_text().replace("return a + b if a < 2 else a + b + 1", "return a + b")
    candidate = tmp_path / "toy.py"
    candidate.write_text(source)
    outcome = run_suite(FIXTURES / "example_calls_suite.py", candidate, "toy", 3, test_timeout_s=20.0,
                        total_timeout_s=120.0)
    tests = {t.name: t for t in outcome.tests}
    assert tests["test_explicit_examples"].passed and tests["test_own_shrinker"].passed
    assert tests["test_reset_swallowed"].message == NOT_IMPLEMENTED
    assert tests["test_counter_machine"].message == NOT_IMPLEMENTED


# ------------------------------------------------------------------------ in-process


def test_the_card_prefers_the_function_not_implemented_to_what_failed_after_it():
    mismatch = PropertyFailure("num_free_blocks after free('r1')", input="free('r1')", expected=4, got=6)
    which = ("allocate_prompt", [(165, "allocate_prompt", "raise NotImplementedError")])
    message, details = describe_failure(mismatch, not_implemented=which)
    assert message == "allocate_prompt is not implemented yet (your code raised NotImplementedError)"
    assert details["input"] == mismatch.input and "expected" not in details and "got" not in details
    assert "line 165, in allocate_prompt" in details["where"]
    # A timeout is its own verdict: the card says where the code was stuck.
    message, _ = describe_failure(KataTimeout(), timeout_s=2, not_implemented=which)
    assert message.startswith("timed out")
    assert describe_failure(mismatch)[0] == "num_free_blocks after free('r1')"


def test_the_first_call_that_raised_not_implemented_is_named():
    class Remote:  # stands for a proxy of the candidate's object
        pass

    calls = [Call("callmethod", Remote(), "allocate", ("a", 1), ()),
             Call("callmethod", Remote(), "allocate_prompt", ("b", [1]), (), raised="NotImplementedError"),
             Call("callmethod", Remote(), "fork", ("a", "c"), (), raised="NotImplementedError")]
    assert not_implemented(Segment(calls), None, None) == ("allocate_prompt", [])
    assert not_implemented(Segment(calls[:1]), None, None) is None
    error = NotImplementedError()
    error._kata_remote, error._kata_frames = True, [(60, "fork", "raise NotImplementedError")]
    assert not_implemented(Segment(calls[:1]), error, None) == ("fork", error._kata_frames)


def test_the_calls_of_the_exception_the_card_describes_are_taken():
    latest = Transcript([Call("call", object(), None, (9,), ())])
    first, second = ValueError("a"), ValueError("b")
    first._kata_example_calls = Segment([Call("call", object(), None, (1,), ())])
    second._kata_example_calls = Segment([Call("call", object(), None, (2,), ())])
    group = ExceptionGroup("two failures", [first, second])
    assert failing_calls(group, latest) is first._kata_example_calls  # the card describes the first
    assert failing_calls(RuntimeError(), latest) is latest  # nothing attached: the latest calls
    assert failing_calls(None, None) is None


def test_the_paged_kv_lockstep_names_allocate_prompt_not_the_pool_after_free(tmp_path):
    """Seed 10 draws allocate('r1', 1) then allocate_prompt('r2', [5]): the prompt raised, the
    machine's teardown freed r1 and compared the pools, and the card said "num_free_blocks
    after free('r1') — rule: free drops counts". Now it names allocate_prompt."""
    source = (REPO_ROOT / "reference" / "paged_kv.py").read_text()
    start = source.index("    def allocate_prompt(")
    body = source.index('"""', source.index('"""', start) + 3) + 3  # after its docstring
    candidate = tmp_path / "paged_kv.py"
    candidate.write_text(source[:body] + "\n        raise NotImplementedError\n" + source[body:])
    card = grade_file("paged-kv", candidate, seed=10,
                      tests=frozenset({"test_prefix_cache_matches_reference"}))
    failure = next(t for t in card.tests if t.name == "test_prefix_cache_matches_reference")
    assert failure.message == "allocate_prompt is not implemented yet (your code raised NotImplementedError)"
    assert "in allocate_prompt" in failure.details["where"]
