"""The scheduler suite rejects each realistic buggy solution with the property a reader
would expect, and accepts correct solutions written differently from the reference."""

from __future__ import annotations

from functools import lru_cache

import pytest

from tests.kata_testing import assert_scores_full, corpus_file, failed_tests, grade_file

SLUG = "scheduler"

REJECTED_BY = {
    "buggy_budget_counts_requests.py": "test_token_budget_respected",
    "buggy_exceeds_max_num_seqs.py": "test_running_never_exceeds_max_num_seqs",
    "buggy_admits_after_preemption.py": "test_no_admission_in_a_step_that_preempted",
    "buggy_inverted_priority.py": "test_batches_match_reference",
    "buggy_latest_arrival_tiebreak.py": "test_batches_match_reference",
    "buggy_preempts_most_urgent.py": "test_preemption_evicts_least_urgent",
    "buggy_keeps_progress_on_preemption.py": "test_preempted_request_restarts_from_zero",
    "buggy_requeue_new_arrival.py": "test_admission_never_skips_a_more_urgent_request",
    "buggy_whole_prompt_advanced.py": "test_prompt_fully_computed_before_decoding",
    "buggy_blocks_leak_on_finish.py": "test_blocks_freed_on_finish",
    "buggy_blocks_leak_on_abort.py": "test_blocks_freed_on_abort",
    "buggy_victim_tokens_not_refunded.py": "test_preempted_victim_tokens_refunded",
    "buggy_skips_blocked_request.py": "test_admission_never_skips_a_more_urgent_request",
    "buggy_aging_never_resets.py": "test_aging_restarts_after_preemption",
    "buggy_add_without_lock.py": "test_concurrent_add_and_abort",
    "buggy_quadratic_queue_scan.py": "test_step_cost_grows_at_most_n_log_n",
}

CORRECT = ["correct_block_table.py", "correct_sorted_lists.py"]


@lru_cache(maxsize=None)
def _card(name: str):
    """Each corpus file is graded once per session (grading is deterministic per seed)."""
    return grade_file(SLUG, corpus_file(SLUG, name))


@pytest.mark.parametrize("name,expected_test", sorted(REJECTED_BY.items()))
def test_buggy_solution_is_rejected(name, expected_test):
    failed = failed_tests(_card(name))
    assert expected_test in failed, (
        f"{name} should be rejected by {expected_test}; failed tests were: "
        f"{failed or 'none (it scored 100)'}")


@pytest.mark.parametrize("name", CORRECT)
def test_correct_alternative_scores_full(name):
    assert_scores_full(SLUG, name)


def test_lock_free_add_only_fails_the_concurrency_property():
    """A missing lock is a level-3 concern: every single-threaded property still holds."""
    card = _card("buggy_add_without_lock.py")
    assert set(failed_tests(card)) == {"test_concurrent_add_and_abort"}


def test_trace_diff_names_the_step_and_the_request():
    """The lockstep failure names the first diverging step, the field and the request,
    and shows the calls that led there."""
    card = _card("buggy_preempts_most_urgent.py")
    result = next(t for t in card.tests if t.name == "test_batches_match_reference_with_preemption")
    assert not result.passed
    assert "is the first whose Batch differs" in result.message
    assert "request '" in result.message
    assert "step()" in result.details["input"] and "add_request" in result.details["input"]


# ----------------------------------------------------------------------------- pinned shrunk failures

import importlib.util  # noqa: E402
import sys  # noqa: E402

import reference.scheduler as reference  # noqa: E402
from grader.protocol import PropertyFailure  # noqa: E402
from grader.suites import scheduler as suite  # noqa: E402


def _load(name: str):
    module_name = f"_scheduler_corpus_{name.removesuffix('.py')}"
    spec = importlib.util.spec_from_file_location(module_name, corpus_file(SLUG, name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _cfg(budget, seqs, num_blocks, block_size, aging=None):
    return {"max_num_batched_tokens": budget, "max_num_seqs": seqs, "num_blocks": num_blocks,
            "block_size": block_size, "aging_steps": aging}


# q99 (priority 0) takes 2 of 3 blocks; q98 (priority 1) needs 2 and does not fit, so q97
# (priority 2, needs 1) must not be admitted ahead of it.
SKIP_BLOCKED = (_cfg(4, 3, 3, 1), [("add", 2, 1, 0), ("add", 2, 1, 1), ("add", 1, 1, 2)])
# Two equal requests on a 2-block pool: q99 (same priority and arrival, larger id) is the victim.
LEAST_URGENT_VICTIM = (_cfg(2, 2, 2, 1), [("add", 1, 1, 0), ("add", 1, 1, 0)])


def test_regression_admission_skips_blocked_request():
    suite.drive(reference, SKIP_BLOCKED, "order")
    with pytest.raises(PropertyFailure, match="more urgent waiting request"):
        suite.drive(_load("buggy_skips_blocked_request.py"), SKIP_BLOCKED, "order")


def test_regression_victim_is_least_urgent():
    suite.drive(reference, LEAST_URGENT_VICTIM, "victim")
    with pytest.raises(PropertyFailure, match="least urgent"):
        suite.drive(_load("buggy_preempts_most_urgent.py"), LEAST_URGENT_VICTIM, "victim")


def test_regression_refund_enlarges_the_retried_chunk():
    """Step 3: urgent's chunk of 1 needs a block; low0 (decoded this step) is preempted and
    its token refunded, so the retried chunk is min(2 remaining, 2 budget) = 2."""
    ops = [("add", "low0", 1, 8, 1), ("step", 1), ("add", "urgent", 3, 1, 0), ("step", 2)]
    suite.compare_script(reference, reference, _cfg(2, 3, 4, 1), ops)
    with pytest.raises(PropertyFailure, match="prefill of request 'urgent': expected 2, got 1"):
        suite.compare_script(_load("buggy_victim_tokens_not_refunded.py"), reference,
                             _cfg(2, 3, 4, 1), ops)


def test_worked_example_of_the_statement():
    """The README's trace, step by step, from the reference."""
    s = reference.Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=4, block_size=2)
    s.add_request(reference.Request("a", 3, 2, priority=1, arrival_time=0.0))
    s.add_request(reference.Request("b", 5, 2, priority=0, arrival_time=1.0))
    got = []
    for step in range(1, 9):
        if step == 3:
            s.add_request(reference.Request("c", 2, 1, priority=0, arrival_time=2.0))
        b = s.step()
        got.append((b.prefill, b.decode, b.preempted, b.finished))
    assert got == [({"b": 4}, [], [], []), ({"b": 1}, [], [], []),
                   ({"c": 2}, ["b"], [], []), ({}, ["b"], ["c"], ["b"]),
                   ({"c": 2, "a": 2}, [], [], []), ({"a": 1}, ["c"], [], ["c"]),
                   ({}, ["a"], [], []), ({}, ["a"], [], ["a"])]
    assert not s.has_unfinished()
