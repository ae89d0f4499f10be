"""`kata watch`: a save of the solution re-runs the check within a second, and the screen
shows the first failing example (during a mock, of the revealed levels only)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader.cli.app import app
from grader.cli.commands import watch as watch_module
from tests.kata_testing import REPO_ROOT

pytest.importorskip("watchfiles")

runner = CliRunner()
REFERENCE = REPO_ROOT / "reference" / "paged_kv.py"
SAVE_TO_CHECK_S = 1.0


def workspace_file() -> Path:
    return Path(os.environ["KATA_WORKSPACE"]) / "paged_kv.py"


def _wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_watch_saves_yields_within_a_second_of_a_save_and_ignores_other_files(tmp_path):
    target = tmp_path / "paged_kv.py"
    target.write_text("x = 1\n")
    stop, ready = threading.Event(), threading.Event()
    seen: list[float] = []

    def watch() -> None:
        for _ in watch_module.watch_saves(target, stop=stop, ready=ready):
            seen.append(time.monotonic())

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        assert ready.wait(10), "the watcher never started"
        (tmp_path / "notes.txt").write_text("not the solution\n")
        time.sleep(0.5)
        assert seen == []  # another file of the folder is not a save of the solution
        saved_at = time.monotonic()
        target.write_text("x = 2\n")
        assert _wait_for(lambda: seen, 5.0), "no save was seen"
        assert seen[0] - saved_at < SAVE_TO_CHECK_S
        # An editor's save: write a new file, rename it over the solution.
        count = len(seen)
        (tmp_path / "paged_kv.py.swp").write_text("x = 3\n")
        saved_at = time.monotonic()
        os.replace(tmp_path / "paged_kv.py.swp", target)
        assert _wait_for(lambda: len(seen) > count, 5.0), "a rename over the file was not seen"
        assert seen[count] - saved_at < SAVE_TO_CHECK_S
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_kata_watch_rechecks_on_save_and_shows_the_first_failing_example(monkeypatch):
    assert runner.invoke(app, ["start", "paged-kv", "-q"]).exit_code == 0
    stop, ready = threading.Event(), threading.Event()
    real_watch, real_check = watch_module.watch_saves, watch_module.run_examples
    checks: list[tuple[float, float]] = []  # (started, finished)

    def timed_check(*args, **kwargs):
        started = time.monotonic()
        try:
            return real_check(*args, **kwargs)
        finally:
            checks.append((started, time.monotonic()))

    monkeypatch.setattr(watch_module, "watch_saves", lambda path: real_watch(path, stop=stop, ready=ready))
    monkeypatch.setattr(watch_module, "run_examples", timed_check)
    result = {}
    thread = threading.Thread(target=lambda: result.update(out=runner.invoke(app, ["watch"])), daemon=True)
    thread.start()
    try:
        assert _wait_for(lambda: checks and ready.is_set(), 60), "the first check or the watcher never ran"
        saved_at = time.monotonic()
        workspace_file().write_text(REFERENCE.read_text())
        assert _wait_for(lambda: len(checks) >= 2, 60), "the save was not checked"
        assert checks[1][0] - saved_at < SAVE_TO_CHECK_S, f"checked {checks[1][0] - saved_at:.2f} s after the save"
    finally:
        stop.set()
        thread.join(30)
    output = result["out"].output
    assert result["out"].exit_code == 0, output
    first, second = output.split("checked at")[1:3]
    assert "✗ L1" in first and "not implemented" in first.lower()  # the stub: its first failing example
    assert "examples pass" in first and "more failing after this one" in first
    assert "all" in second and "examples pass" in second and "✗" not in second


def test_watch_during_a_mock_checks_the_revealed_levels_only(monkeypatch):
    assert runner.invoke(app, ["mock", "paged-kv"]).exit_code == 0
    levels_checked = []

    def fake_check(kata, path, levels=None):
        levels_checked.append(levels)
        raise KeyboardInterrupt  # Ctrl-C during the check

    monkeypatch.setattr(watch_module, "run_examples", fake_check)
    result = runner.invoke(app, ["watch"])
    assert result.exit_code == 0 and "stopped watching" in result.output
    assert levels_checked == [{1}]
