"""The scheduler suite rejects each realistic buggy solution at the level its corpus.toml
declares, by the targeted test it names, under two seeds; it accepts correct solutions
written differently from the reference; shrunk failures found while building the suite
stay pinned as regression tests."""

from __future__ import annotations

import importlib.util
import sys

import pytest

import reference.scheduler as reference
from grader.protocol import PropertyFailure
from grader.suites.scheduler.lockstep import compare_script
from grader.suites.scheduler.strategies import config, multi_victim_case
from grader.suites.scheduler.test_level2 import LEAST_URGENT_VICTIM, SKIP_BLOCKED
from grader.suites.scheduler.trace import drive
from tests.kata_testing import (assert_rejected_at_level, assert_scores_full, buggy_params,
                                corpus_file, correct_params, failed_tests, grade_file)

SLUG = "scheduler"


@pytest.mark.parametrize("entry,seed", buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize("name,seed", correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


def test_trace_diff_names_the_step_the_rule_and_the_request():
    """A lockstep failure names the first diverging step, the field with the statement rule
    that decides it, and the request, and shows the calls that led there."""
    card = grade_file(SLUG, corpus_file(SLUG, "buggy_decodes_in_admission_order.py"),
                      levels=frozenset({1}))
    result = next(t for t in card.tests if t.name == "test_decode_list_in_urgency_order")
    assert not result.passed
    assert "is the first whose Batch differs" in result.message
    assert "decode list — rule 1a" in result.message
    assert "wrong order" in result.message or "request '" in result.message
    assert "step()" in result.details["input"] and "add_request" in result.details["input"]


def test_lock_free_add_only_fails_the_concurrency_property():
    """A missing lock is a level-3 concern: every single-threaded property still holds."""
    card = grade_file(SLUG, corpus_file(SLUG, "buggy_add_without_lock.py"))
    assert set(failed_tests(card)) == {"test_concurrent_add_and_abort"}


@pytest.mark.parametrize("seed", [1, 7, 20261205])
def test_an_add_lost_inside_step_fails_the_thread_test_under_every_seed(seed):
    """add_request without a lock while step() rebuilds the waiting queue from a snapshot:
    the producers run in the candidate's own process (threads.py), where an add lands
    inside step() on every run (from the judge's threads, one message at a time, it never
    did: this file scored 100 under three seeds)."""
    card = grade_file(SLUG, corpus_file(SLUG, "buggy_step_rebuilds_waiting_queue.py"), seed=seed,
                      tests=frozenset({"test_concurrent_add_and_abort"}))
    assert failed_tests(card).keys() == {"test_concurrent_add_and_abort"}


def test_a_crowded_trial_counts_its_backlog_once():
    """The backlog (requests that never finish) keeps every step long while the producers
    run, and is aborted once they are done: each request is still finished or aborted
    exactly once, and the trial ends."""
    from grader.suites.scheduler.threads import concurrent_trial
    got = concurrent_trial(reference, config(8192, 8192, 10**6, 16, aging=2), 6, 40, 2, 300)
    assert got["errors"] == []
    assert {f"b{i}" for i in range(300)} <= set(got["aborted"])
    assert sorted(got["finished"] + got["aborted"]) == sorted(got["added"])
    assert len(got["added"]) == 300 + 6 * 40


def test_under_thread_sanitizer_the_thread_test_adds_crowded_trials(monkeypatch):
    """`--sanitize thread` (the worker's runtime says so) runs the crowded trials after the
    plain two; a plain grade runs the plain two only."""
    import grader.suites.scheduler.test_level3 as level3
    seen: list[tuple[int, int]] = []

    def trial(mod, cfg, producers, adds, abort_every, backlog=0):
        seen.append((abort_every, backlog))
        return {"added": [], "aborted": [], "finished": [], "errors": [], "steps": 1}

    monkeypatch.setattr(level3, "concurrent_trial", trial)
    level3.test_concurrent_add_and_abort(reference)
    assert seen == [(level3._ABORT_EVERY, 0)] * 2
    assert not level3.under_thread_sanitizer(reference)  # this process preloads no libtsan
    seen.clear()
    monkeypatch.setattr(level3, "under_thread_sanitizer", lambda mod: True)
    level3.test_concurrent_add_and_abort(reference)
    assert seen[:2] == [(level3._ABORT_EVERY, 0)] * 2
    assert seen[2:] == [(2, 2000)] * 6


# ----------------------------------------------------------------------------- pinned shrunk failures


def _load(name: str):
    module_name = f"_scheduler_corpus_{name.removesuffix('.py')}"
    spec = importlib.util.spec_from_file_location(module_name, corpus_file(SLUG, name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def test_regression_admission_skips_blocked_request():
    drive(reference, SKIP_BLOCKED, "order")
    with pytest.raises(PropertyFailure, match="more urgent waiting request"):
        drive(_load("buggy_skips_blocked_request.py"), SKIP_BLOCKED, "order")


def test_regression_victim_is_least_urgent():
    drive(reference, LEAST_URGENT_VICTIM, "victim")
    with pytest.raises(PropertyFailure, match="least urgent"):
        drive(_load("buggy_preempts_most_urgent.py"), LEAST_URGENT_VICTIM, "victim")


def test_regression_refund_enlarges_the_retried_chunk():
    """Step 3: urgent's chunk of 1 needs a block; low0 (decoded this step) is preempted and
    its token refunded, so the retried chunk is min(2 remaining, 2 budget) = 2."""
    ops = [("add", "low0", 1, 3, 1), ("step", 1), ("add", "urgent", 3, 1, 0), ("step", 2)]
    compare_script(reference, reference, config(2, 3, 4, 1), ops)
    with pytest.raises(PropertyFailure, match="prefill of request 'urgent': expected 2, got 1"):
        compare_script(_load("buggy_victim_tokens_not_refunded.py"), reference, config(2, 3, 4, 1), ops)


def test_regression_one_victim_then_overcommit():
    """The audit's escape: one chunk needs two victims while f (finishing) holds its blocks;
    preempting once and taking the blocks anyway over-commits the pool."""
    cfg, ops = multi_victim_case(2, 2, False, 8, 11)
    pair = compare_script(reference, reference, cfg, ops)
    assert pair.num_steps == 4
    with pytest.raises(PropertyFailure, match=r"step 3 .*preempted list — rule 3"):
        compare_script(_load("buggy_preempts_once_then_overcommits.py"), reference, cfg, ops)


def test_regression_later_but_urgent_prompt_under_tight_budget():
    """The audit's level-1 escape: a later, more urgent long prompt must not take the budget
    of the running decodes."""
    ops = [("add", "a", 1, 6, 2, 0.0), ("add", "b", 1, 6, 1, 0.0), ("step", 1),
           ("add", "u", 9, 2, 0), ("step", 4)]
    compare_script(reference, reference, config(3, 4), ops)
    with pytest.raises(PropertyFailure, match=r"decode list — rule 1a"):
        compare_script(_load("buggy_interleaves_decodes_and_chunks.py"), reference, config(3, 4), ops)


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
