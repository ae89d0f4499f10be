"""What grade and check show while they run: JSON lines with --json-stream, a live line and
an early word on hangs on a terminal, nothing extra when piped."""

from __future__ import annotations

import json
import shutil

from rich.console import Console
from typer.testing import CliRunner

from grader.cli import output
from grader.cli.app import app
from grader.cli.progress import RunProgress
from tests.kata_testing import kata

runner = CliRunner()
HANG_WHERE = "where your code was when it was stopped (innermost first):\n  line 31, in allocate: while True:"


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_json_stream_is_one_event_per_line_ending_with_the_scorecard(tmp_path):
    stub = tmp_path / "paged_kv.py"
    shutil.copy(kata("paged-kv").stub_path, stub)
    result = invoke("check", "--file", str(stub), "--all", "--json-stream")  # (without --all: the first only)
    assert result.exit_code == 1
    events = [json.loads(line) for line in result.output.splitlines()]  # every line is JSON
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[1] == "collected" and kinds[-1] == "end"
    num_tests = events[1]["num_tests"]
    results = [e for e in events if e["event"] == "result"]
    assert len(results) == num_tests == kinds.count("running") > 0
    assert [r["num_done"] for r in results] == list(range(1, num_tests + 1))
    assert all(not r["passed"] and "NotImplementedError" in r["message"] for r in results)
    card = events[-1]["scorecard"]
    assert card["kata"] == "paged-kv" and card["score"] == 0 and len(card["tests"]) == num_tests
    assert events[0]["suite"] == "examples" and events[0]["file"] == str(stub)
    elapsed = [e["elapsed_s"] for e in events]
    assert elapsed == sorted(elapsed)


def test_json_and_json_stream_together_is_a_usage_error():
    result = invoke("grade", "paged-kv", "--json", "--json-stream")
    assert result.exit_code == 2 and "next:" in result.output


def test_grade_json_carries_a_snippet_for_each_failure_with_calls(tmp_path):
    stub = tmp_path / "paged_kv.py"
    shutil.copy(kata("paged-kv").stub_path, stub)
    card = json.loads(invoke("grade", "--file", str(stub), "--json", "--seed", "3").output)
    failed = [t for t in card["tests"] if not t["passed"]]
    with_snippet = [t for t in failed if t["details"].get("snippet")]
    assert len(with_snippet) >= len(failed) - 1  # the efficiency test measures, it has no calls
    assert all("import paged_kv" in t["details"]["snippet"] for t in with_snippet)


def test_piped_grade_prints_no_progress(tmp_path):
    stub = tmp_path / "paged_kv.py"
    shutil.copy(kata("paged-kv").stub_path, stub)
    text = invoke("check", "--file", str(stub)).output
    assert "starting the suite" not in text and "⠋" not in text


def _feed(progress: RunProgress) -> None:
    tests = [{"name": n, "level": 1, "category": "correctness", "description": n} for n in ("test_a", "test_b", "test_c")]
    progress.on_event("collected", {"tests": tests})
    for name, message in (("test_a", "timed out after 10.1 s: an infinite loop, or code far slower than the reference"),
                          ("test_b", "stuck where test_a was stuck (an infinite loop?): stopped early"),
                          ("test_c", "expected 1, got 2")):
        progress.on_event("start", {"name": name, "level": 1})
        progress.on_event("result", {"name": name, "level": 1, "passed": False, "message": message,
                                     "details": {"where": HANG_WHERE} if "stuck" in message or "timed" in message else {},
                                     "duration_s": 10.1})


def test_on_a_terminal_a_hang_is_announced_once_per_place(monkeypatch):
    terminal = Console(force_terminal=True, width=80, record=True, color_system=None)
    monkeypatch.setattr(output, "console", terminal)
    with RunProgress(kata="paged-kv", suite="hidden", file="paged_kv.py", seed=1) as progress:
        assert progress.live
        _feed(progress)
    shown = terminal.export_text()
    assert shown.count("✗ hang in L1 test_a after 10 s") == 1
    assert shown.count("line 31, in allocate: while True:") == 1
    assert "test_b" not in shown.split("✗ hang")[1].split("\n")[0]
    assert progress.num_done == 3 and progress.num_failed == 3


def test_off_a_terminal_or_in_json_mode_nothing_is_drawn(monkeypatch, capsys):
    piped = Console(force_terminal=False, width=80, record=True)
    monkeypatch.setattr(output, "console", piped)
    with RunProgress(kata="paged-kv", suite="hidden", file="paged_kv.py", seed=1) as progress:
        assert not progress.live
        _feed(progress)
    assert piped.export_text() == ""
    assert capsys.readouterr().out == ""
