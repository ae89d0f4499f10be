"""The CLI end to end with Typer's CliRunner, in a temporary KATA_HOME and workspace."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from typer.testing import CliRunner

from grader.cli.app import app
from grader.store import DB_NAME, SCHEMA_VERSION, Store
from tests.kata_testing import REPO_ROOT, kata

runner = CliRunner()
REFERENCE = REPO_ROOT / "reference" / "paged_kv.py"


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def workspace_file() -> Path:
    return Path(os.environ["KATA_WORKSPACE"]) / "paged_kv.py"


def test_every_command_has_help():
    for command in ("init", "list", "show", "start", "status", "check", "grade", "hint", "reveal",
                    "reset", "history", "notebook", "mock", "stop", "watch", "progress"):
        result = invoke(command, "--help")
        assert result.exit_code == 0 and "Usage" in result.output, command


def test_list_shows_paged_kv_with_no_score_yet():
    result = invoke("list")
    assert result.exit_code == 0
    assert "paged-kv" in result.output and "Paged" in result.output
    data = json.loads(invoke("list", "--json").output)
    row = next(r for r in data["katas"] if r["slug"] == "paged-kv")
    assert row["levels"] == 3 and row["minutes"] == 75 and row["best_score"] is None


def test_show_renders_the_statement():
    result = invoke("show", "paged-kv")
    assert result.exit_code == 0 and "PagedKVCacheAllocator" in result.output


def test_unknown_slug_is_a_usage_error_with_a_suggestion():
    result = invoke("show", "paged-kvv")
    assert result.exit_code == 2
    assert "unknown kata 'paged-kvv'" in result.output and "did you mean paged-kv" in result.output


def test_start_writes_the_stub_and_records_a_session():
    result = invoke("start", "paged-kv", "--quiet")
    assert result.exit_code == 0, result.output
    assert workspace_file().read_text() == kata("paged-kv").stub_path.read_text()
    assert "kata grade" in result.output and "deadline" in result.output
    status = json.loads(invoke("status", "--json").output)["sessions"]
    assert [s["kata"] for s in status] == ["paged-kv"] and 0 <= status[0]["elapsed_s"] < 60
    assert 74 * 60 < status[0]["remaining_s"] <= 75 * 60


def test_start_with_custom_minutes_and_status_flags_overtime():
    assert invoke("start", "paged-kv", "--minutes", "1", "-q").exit_code == 0
    with Store() as store:
        session = store.active_session("paged-kv")
        store.conn.execute("UPDATE sessions SET started_at = ?, deadline = ? WHERE id = ?",
                           (time.time() - 120, time.time() - 60, session.id))
    result = invoke("status")
    assert result.exit_code == 0 and "OVERTIME" in result.output


def test_start_again_says_a_session_is_active_and_changes_nothing():
    invoke("start", "paged-kv", "-q")
    workspace_file().write_text("# my work\n")
    result = invoke("start", "paged-kv", "-q")
    assert result.exit_code == 0 and "already has an active session" in result.output
    assert workspace_file().read_text() == "# my work\n"


def test_start_refuses_to_overwrite_changes_without_force_and_backs_up_with_force():
    workspace_file().parent.mkdir(parents=True, exist_ok=True)
    workspace_file().write_text("# my earlier work\n")
    refused = invoke("start", "paged-kv", "-q")
    assert refused.exit_code == 2 and "already holds your changes" in refused.output
    assert workspace_file().read_text() == "# my earlier work\n"
    forced = invoke("start", "paged-kv", "-q", "--force")
    assert forced.exit_code == 0 and "backed up" in forced.output
    backups = list((workspace_file().parent / ".backups").glob("paged_kv.*.py"))
    assert len(backups) == 1 and backups[0].read_text() == "# my earlier work\n"
    assert workspace_file().read_text() == kata("paged-kv").stub_path.read_text()


def test_invalid_minutes_is_a_usage_error():
    result = invoke("start", "paged-kv", "--minutes", "0")
    assert result.exit_code == 2


def test_check_runs_the_visible_examples():
    invoke("start", "paged-kv", "-q")
    stub = invoke("check")
    assert stub.exit_code == 1 and "examples pass" in stub.output
    workspace_file().write_text(REFERENCE.read_text())
    ok = invoke("check", "paged-kv")
    assert ok.exit_code == 0, ok.output


def test_check_and_grade_without_a_session_need_a_slug():
    for command in ("check", "grade", "hint"):
        result = invoke(command)
        assert result.exit_code == 2 and "no active session" in result.output, command


def test_grade_the_reference_by_file_scores_100_as_json():
    result = invoke("grade", "paged-kv", "--file", str(REFERENCE), "--json", "--seed", "3")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["kata"] == "paged-kv" and data["seed"] == 3 and data["score"] == 100 and data["passed"]
    assert [lv["level"] for lv in data["levels"]] == [1, 2, 3] and all(lv["passed"] for lv in data["levels"])
    assert all({"name", "level", "category", "passed", "message"} <= set(t) for t in data["tests"])


def test_grade_infers_the_kata_from_the_file_name(tmp_path):
    copy = tmp_path / "paged_kv.py"
    copy.write_text(REFERENCE.read_text())
    result = invoke("grade", "--file", str(copy), "--json", "--seed", "1")
    assert result.exit_code == 0 and json.loads(result.output)["score"] == 100


def test_grade_the_stub_in_a_session_scores_0_records_and_keeps_the_session_open_until_stop():
    invoke("start", "paged-kv", "-q")
    result = invoke("grade", "--seed", "5")
    assert result.exit_code == 1
    assert "0/100" in result.output and "not implemented" in result.output
    assert "interview signal" in result.output and "the session stays open" in result.output
    [session] = json.loads(invoke("status", "--json").output)["sessions"]
    assert session["kata"] == "paged-kv" and [lv["passed"] for lv in session["levels"]] == [False] * 3
    history = json.loads(invoke("history", "--json").output)["attempts"]
    assert len(history) == 1 and history[0]["score"] == 0 and history[0]["seed"] == 5
    assert history[0]["time_used_s"] is not None and history[0]["time_used_s"] < 120
    assert history[0]["kind"] == "timed" and history[0]["file"] == str(workspace_file())
    stopped = json.loads(invoke("stop", "--json").output)
    assert stopped["ended"] == "stopped" and stopped["grades"] == 1 and stopped["signal"] == "No hire"
    assert json.loads(invoke("status", "--json").output)["sessions"] == []
    assert invoke("stop").exit_code == 2  # nothing left to stop


def test_a_session_ends_when_a_grade_passes_every_level():
    invoke("start", "paged-kv", "-q")
    workspace_file().write_text(REFERENCE.read_text())
    result = invoke("grade", "--json", "--seed", "2")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["signal"] == "Strong hire" and data["session"]["ended"] == "passed"
    assert [lv["passed"] for lv in data["session"]["levels"]] == [True] * 3
    assert json.loads(invoke("status", "--json").output)["sessions"] == []


def test_grade_missing_file_and_bad_file_are_usage_errors(tmp_path):
    missing = invoke("grade", "paged-kv", "--file", str(tmp_path / "nope.py"))
    # the message wraps at 80 columns wherever the temporary path's length puts the break
    assert missing.exit_code == 2 and "does not exist" in " ".join(missing.output.split())
    odd = tmp_path / "mystery.py"
    odd.write_text("x = 1\n")
    unknown = invoke("grade", "--file", str(odd))
    assert unknown.exit_code == 2 and "cannot tell which kata" in unknown.output


def test_grade_of_a_broken_file_is_a_verdict_not_a_crash():
    invoke("start", "paged-kv", "-q")
    workspace_file().write_text("def broken(:\n")
    result = invoke("grade", "--json", "--seed", "0")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["score"] == 0 and "syntax error at line 1" in data["import_error"]


def test_hints_are_staged_and_counted_then_run_out():
    invoke("start", "paged-kv", "-q")
    hints = kata("paged-kv").levels[0].hints
    for i, text in enumerate(hints):
        result = invoke("hint")
        assert result.exit_code == 0 and f"hint {i + 1}/{len(hints)} for level 1" in result.output
        assert text.split()[0] in result.output
    assert "no more hints for level 1" in invoke("hint").output
    result = invoke("grade", "--json", "--seed", "0")
    assert json.loads(result.output)["hints_used"] == len(hints)


def test_hint_targets_the_lowest_unpassed_level():
    invoke("start", "paged-kv", "-q")
    workspace_file().write_text(REFERENCE.read_text())
    assert invoke("grade", "--json", "--seed", "0").exit_code == 0
    assert "passed every level" in invoke("hint", "paged-kv").output


NO_FORK = """

def _no_fork(self, parent_id, child_id):
    raise NotImplementedError("fork")


PagedKVCacheAllocator.fork = _no_fork
"""


def test_hint_follows_the_last_check_and_level_picks_one():
    invoke("start", "paged-kv", "-q")
    first = invoke("hint")
    assert "hint 1/3 for level 1" in first.output and "the lowest level you have not passed yet" in first.output
    workspace_file().write_text(REFERENCE.read_text() + NO_FORK)  # level 1 works, level 2 does not
    assert invoke("check").exit_code == 1
    after_check = invoke("hint")
    assert "hint 1/3 for level 2" in after_check.output
    assert "the lowest level failing in your last check" in " ".join(after_check.output.split())
    chosen = invoke("hint", "--level", "3")
    assert "hint 1/3 for level 3" in chosen.output
    assert invoke("hint", "--level", "4").exit_code == 2
    with Store() as store:
        session = store.active_session("paged-kv")
        assert [store.hints_shown("paged-kv", session.id, n) for n in (1, 2, 3)] == [1, 1, 1]


def test_reveal_asks_for_force_during_a_session_and_is_recorded():
    invoke("start", "paged-kv", "-q")
    refused = invoke("reveal", "paged-kv")
    assert refused.exit_code == 2 and "--force" in refused.output
    shown = invoke("reveal", "paged-kv", "--force")
    assert shown.exit_code == 0 and "class PagedKVCacheAllocator" in shown.output
    with Store() as store:
        assert store.reveals("paged-kv") == 1


def test_reset_backs_up_then_restores_the_stub():
    invoke("start", "paged-kv", "-q")
    workspace_file().write_text("# half done\n")
    result = invoke("reset", "paged-kv")
    assert result.exit_code == 0 and "backed up" in result.output
    assert workspace_file().read_text() == kata("paged-kv").stub_path.read_text()
    backups = list((workspace_file().parent / ".backups").iterdir())
    assert [b.read_text() for b in backups] == ["# half done\n"]


def test_untimed_file_grades_are_kept_apart_from_the_candidates_own_best(tmp_path):
    mine = tmp_path / "someone_else" / "paged_kv.py"
    mine.parent.mkdir()
    mine.write_text(REFERENCE.read_text())
    assert invoke("grade", "paged-kv", "--file", str(mine), "--seed", "1").exit_code == 0
    table = invoke("history", "paged-kv")
    assert table.exit_code == 0 and "100" in table.output and "untimed" in table.output
    assert "someone_el" in table.output  # the file graded (folded at 80 columns)
    [graded] = json.loads(invoke("history", "--json").output)["attempts"]
    assert graded["file"] == str(mine) and graded["kind"] == "untimed" and not graded["timed"]
    row = next(r for r in json.loads(invoke("list", "--json").output)["katas"] if r["slug"] == "paged-kv")
    assert row["best_score"] is None and row["best_untimed"] == 100  # not the candidate's own best
    invoke("start", "paged-kv", "-q")
    assert invoke("grade", "--seed", "1").exit_code == 1  # the stub, timed
    row = next(r for r in json.loads(invoke("list", "--json").output)["katas"] if r["slug"] == "paged-kv")
    assert row["best_score"] == 0 and row["best_untimed"] == 100
    listed = invoke("list")
    assert "untimed" in listed.output


def test_history_without_a_slug_during_a_session_shows_that_kata():
    assert invoke("grade", "rope", "--file", str(REPO_ROOT / "reference" / "rope.py"), "--seed", "1").exit_code == 0
    assert [a["kata"] for a in json.loads(invoke("history", "--json").output)["attempts"]] == ["rope"]
    invoke("start", "paged-kv", "-q")
    during = json.loads(invoke("history", "--json").output)
    assert during["kata"] == "paged-kv" and during["attempts"] == []
    assert [a["kata"] for a in json.loads(invoke("history", "--all", "--json").output)["attempts"]] == ["rope"]


def test_notebook_writes_the_paired_ipynb_in_the_workspace():
    notebooks = Path(os.environ["KATA_WORKSPACE"]) / "notebooks"
    result = invoke("notebook", "paged-kv")
    assert result.exit_code == 0, result.output
    assert (notebooks / "paged_kv.py").read_text() == kata("paged-kv").notebook_path.read_text()
    nb = json.loads((notebooks / "paged_kv.ipynb").read_text())
    assert nb["metadata"]["jupytext"]["formats"] == "ipynb,py:percent" and len(nb["cells"]) > 3


def test_notebook_keeps_your_walkthrough_and_backs_up_your_notebook():
    notebooks = Path(os.environ["KATA_WORKSPACE"]) / "notebooks"
    assert invoke("notebook", "paged-kv").exit_code == 0
    mine = notebooks / "paged_kv.py"
    mine.write_text(mine.read_text() + "\n# %%\nprint('my own cell')\n")
    (notebooks / "paged_kv.ipynb").write_text('{"cells": [], "my": "edits"}')
    result = invoke("notebook", "paged-kv")
    assert result.exit_code == 0 and "backed up your previous notebook" in result.output
    assert "my own cell" in mine.read_text() and "my own cell" in (notebooks / "paged_kv.ipynb").read_text()
    (saved,) = (notebooks / ".backups").iterdir()
    assert '"my": "edits"' in saved.read_text()
    assert "backed up" not in invoke("notebook", "paged-kv").output  # unchanged: nothing to save


def test_corrupt_database_gives_a_clear_error():
    home = Path(os.environ["KATA_HOME"])
    home.mkdir(parents=True)
    (home / DB_NAME).write_bytes(b"this is not sqlite" * 100)
    result = invoke("history")
    assert result.exit_code == 2 and "cannot be read" in result.output and "move it aside" in result.output


def test_newer_schema_gives_a_clear_error():
    home = Path(os.environ["KATA_HOME"])
    home.mkdir(parents=True)
    conn = sqlite3.connect(home / DB_NAME)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    result = invoke("list")
    assert result.exit_code == 2 and "newer kata" in result.output


def test_debug_shows_tracebacks_only_when_asked(monkeypatch):
    import grader.cli.commands.show as show_module

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(show_module, "catalog", boom)
    result = runner.invoke(app, ["show", "paged-kv"])
    assert result.exit_code == 2 and "internal error: RuntimeError: kaboom" in result.output
    assert "Traceback" not in result.output
    debug = runner.invoke(app, ["--debug", "show", "paged-kv"])
    assert isinstance(debug.exception, RuntimeError)


def test_usage_errors_say_what_is_wrong_and_what_next(tmp_path):
    """The installed entry point (main) prints Typer's usage errors like kata's own: an
    `error:` line and a `next:` line naming the command's help, exit 2."""
    import subprocess
    import sys

    cases = [(["grade", "--bogus"], "No such option: --bogus", "next: kata grade --help"),
             (["grde"], "Did you mean 'grade'?", "next: kata --help"),
             (["start"], "Missing argument", "next: kata start --help"),
             (["homework", "review", "--nope"], "No such option", "next: kata homework review --help")]
    for argv, what, hint in cases:
        ran = subprocess.run([sys.executable, "-m", "grader.cli.app", *argv], cwd=tmp_path,
                             capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
        assert ran.returncode == 2, (argv, ran.stderr)
        assert ran.stderr.startswith("error: ") and what in ran.stderr, (argv, ran.stderr)
        assert hint in ran.stderr, (argv, ran.stderr)


def test_entry_point_ends_quietly_on_a_closed_pipe_and_on_an_abort(tmp_path, monkeypatch, capsys):
    """`kata list | head -1` closes the pipe under kata: it exits 1 with no traceback (it
    once raised AttributeError, looking for Abort where Typer 0.29 no longer keeps it).
    An Abort (end of input at a prompt) prints `aborted`, exit 1."""
    import subprocess
    import sys

    import typer

    from grader.cli import app as app_module

    proc = subprocess.Popen([sys.executable, "-m", "grader.cli.app", "--help"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "COLUMNS": "80"})
    proc.stdout.close()  # no reader: kata's first write fails with EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1, err
    assert "Traceback" not in err and "Error" not in err, err

    def aborting(**_kwargs):
        raise typer.Abort()

    monkeypatch.setattr(app_module, "app", aborting)
    with pytest.raises(SystemExit) as ended:
        app_module.main()
    assert ended.value.code == 1
    assert "aborted" in capsys.readouterr().err


def test_check_stops_at_the_first_failing_example_and_all_runs_every_one():
    """Issue 42, item 3: the stub fails its first example; the others are not run (a note
    counts them), and --all runs every revealed level's examples."""
    invoke("start", "paged-kv", "-q")
    stopped = invoke("check", "--json")
    card = json.loads(stopped.stdout)
    assert stopped.exit_code == 1 and len(card["tests"]) == 1 and not card["tests"][0]["passed"]
    assert "stopped at the first failing test: 3 more not run" in card["notes"]
    assert "then a failure: stopped there (3 more not run" in " ".join(invoke("check").output.split())
    every = json.loads(invoke("check", "--all", "--json").stdout)
    assert len(every["tests"]) == 4 and not any("stopped" in n for n in every["notes"])


def test_check_starts_at_the_current_level():
    """Level 1 passed by a grade of the session: the check runs levels 2 and 3's examples."""
    invoke("start", "paged-kv", "-q")
    workspace_file().write_text(REFERENCE.read_text())
    with Store() as store:
        session = store.active_session("paged-kv")
        card = {"kata": "paged-kv", "seed": 1, "score": 40, "passed": False, "solution": "x.py",
                "solution_sha256": "0", "levels": [{"level": 1, "passed": True}]}
        store.record_attempt(card, source="", session_id=session.id, passed_levels=(1,))
    result = invoke("check", "--json")
    assert result.exit_code == 0, result.output
    assert sorted({t["level"] for t in json.loads(result.stdout)["tests"]}) == [2, 3]
    assert "from level 2, your current level" in " ".join(invoke("check").output.split())


def test_grade_one_level_is_recorded_as_such_and_passes_no_level_of_the_session():
    invoke("start", "paged-kv", "-q")
    workspace_file().write_text(REFERENCE.read_text())
    result = invoke("grade", "--level", "2", "--json", "--seed", "3")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [lv["level"] for lv in data["levels"]] == [2] and data["only_level"] == 2
    assert "session" not in data  # a session's level times count full grades only
    with Store() as store:
        session = store.active_session("paged-kv")
        assert session is not None and session.status == "active"
        assert [row.passed_at for row in store.session_levels(session.id)] == [None, None, None]
        (attempt,) = store.attempts("paged-kv")
        assert attempt.only_level == 2 and attempt.num_levels == 1
        assert store.best_score("paged-kv", timed=True) is None
    history = json.loads(invoke("history", "paged-kv", "--json").stdout)
    assert history["attempts"][0]["only_level"] == 2
    assert "L2 only" in invoke("history", "paged-kv").output
    missing = invoke("grade", "--level", "4")
    assert missing.exit_code == 2 and "paged-kv has no level 4" in missing.output
