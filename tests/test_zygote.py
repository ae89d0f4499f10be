"""Judges forked from a zygote (grader/engine/zygote.py, KATA_JUDGE_ZYGOTE=1): the same
verdicts as judges started as usual, the same interpreter as far as a suite can see, and the
same handling of hangs, crashes and the total limit; a zygote that dies is replaced by the
usual start."""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

import pytest

from grader.engine import zygote
from grader.engine.runner import run_suite

FIXTURES = Path(__file__).parent / "engine_fixtures"
CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture
def fresh_zygote(monkeypatch):
    """A zygote of this test's own, closed after it."""
    monkeypatch.setattr(zygote, "_zygote", None)
    monkeypatch.setattr(zygote, "_failed", False)
    yield
    if zygote._zygote is not None:
        zygote._zygote.close()


def _graded(monkeypatch, use_zygote: bool, grade, *args, **kwargs):
    if use_zygote:
        monkeypatch.setenv(zygote.ENV_ZYGOTE, "1")
    else:
        monkeypatch.delenv(zygote.ENV_ZYGOTE, raising=False)
    return grade(*args, **kwargs)


def _forked() -> bool:
    return zygote._zygote is not None and not zygote._failed


def test_a_forked_judge_sees_the_interpreter_a_started_one_does(fresh_zygote, monkeypatch):
    def facts(use: bool) -> dict:
        outcome = _graded(monkeypatch, use, run_suite, FIXTURES / "judge_facts_suite.py",
                          FIXTURES / "good.py", "toy", 1)
        (test,) = outcome.tests
        assert not test.passed and test.message.startswith("facts "), test.message
        return ast.literal_eval(test.message[len("facts "):])

    started, forked = facts(False), facts(True)
    assert _forked()
    assert forked == started
    assert forked["safe_path"] and not forked["cwd_on_path"] and forked["session_leader"]
    assert forked["add"] == 5 and "grader.engine.plugin" in forked["grader_modules"]


@pytest.mark.parametrize("slug,bug,jobs", [
    ("mha", "buggy_scale_zero_means_default.py", 1),
    ("paged-kv", "buggy_newest_cached_evicted_first.py", 2),
])
def test_a_forked_judge_gives_the_same_scorecard(fresh_zygote, monkeypatch, slug, bug, jobs):
    from grader.catalog import load_catalog
    from grader.grading import grade

    kata = load_catalog().get(slug)
    path = CORPUS / kata.module / bug
    started = _graded(monkeypatch, False, grade, kata, path, seed=5, jobs=jobs)
    forked = _graded(monkeypatch, True, grade, kata, path, seed=5, jobs=jobs)
    assert _forked()
    assert 0 < started.score < 100
    assert [(t.nodeid, t.passed, t.message, t.details.get("input")) for t in started.tests] == \
        [(t.nodeid, t.passed, t.message, t.details.get("input")) for t in forked.tests]


def _toy(name: str, **kwargs):
    return {t.name: t for t in run_suite(FIXTURES / "toy_suite.py", FIXTURES / f"{name}.py", "toy", 1,
                                         **kwargs).tests}


def test_hangs_crashes_and_the_total_limit_through_the_zygote(fresh_zygote, monkeypatch):
    from tests.test_engine import _workers_running

    monkeypatch.setenv(zygote.ENV_ZYGOTE, "1")
    hung = _toy("infinite_loop", test_timeout_s=2.0)
    assert _forked()
    assert not hung["test_scale"].passed and "timed out after 2 s" in hung["test_scale"].message
    assert hung["test_add"].passed and hung["test_zero"].passed  # a new judge went on
    crashed = _toy("segfault", test_timeout_s=3.0)
    assert "crashed the process it runs in" in crashed["test_scale"].message
    assert "SIGSEGV" in crashed["test_scale"].message and crashed["test_add"].passed
    t0 = time.monotonic()
    cut = _toy("infinite_loop", test_timeout_s=30.0, total_timeout_s=4.0)
    assert time.monotonic() - t0 < 15
    assert any("whole run passed its 4 s limit" in t.message for t in cut.values() if not t.passed)
    deadline = time.monotonic() + 5
    while _workers_running("infinite_loop.py") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _workers_running("infinite_loop.py")
    assert _forked()


def test_a_dead_zygote_is_replaced_by_the_usual_start(fresh_zygote, monkeypatch):
    monkeypatch.setenv(zygote.ENV_ZYGOTE, "1")
    assert all(t.passed for t in _toy("good").values()) and _forked()
    zygote._zygote.proc.kill()
    zygote._zygote.proc.wait()
    assert all(t.passed for t in _toy("good").values())
    assert zygote._failed


def test_a_judge_that_would_start_differently_is_started(fresh_zygote, monkeypatch):
    monkeypatch.setenv(zygote.ENV_ZYGOTE, "1")
    assert all(t.passed for t in _toy("good").values()) and _forked()
    calls = []
    real = zygote.Zygote.spawn
    monkeypatch.setattr(zygote.Zygote, "spawn", lambda self, *a: calls.append(a) or real(self, *a))
    monkeypatch.setenv("PYTHONHASHSEED", "1")  # the runner sets 0 for every judge: still forked
    assert all(t.passed for t in _toy("good").values()) and len(calls) == 1
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")]))
    assert all(t.passed for t in _toy("good").values()) and len(calls) == 1  # started


def test_many_gradings_forks_its_judges_and_closes_the_zygote_after(fresh_zygote, monkeypatch):
    """A coach's review grades inside many_gradings(), without the environment variable."""
    monkeypatch.delenv(zygote.ENV_ZYGOTE, raising=False)
    assert all(t.passed for t in _toy("good").values()) and zygote._zygote is None
    with zygote.many_gradings():
        assert all(t.passed for t in _toy("good").values()) and _forked()
        proc = zygote._zygote.proc
        with zygote.many_gradings():  # nested: the outer block still needs it
            assert all(t.passed for t in _toy("good").values())
        assert zygote._zygote is not None
    assert zygote._zygote is None and proc.poll() is not None  # closed, not left running
