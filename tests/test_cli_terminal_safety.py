"""A solution's words never act on the terminal of whoever grades it (issue 37, item 4).

tests/hostile/attacks/terminal_escapes.py raises, prints and returns text holding a window
title, a screen clear, an OSC 8 hyperlink, the same in 8-bit C1 controls, BEL, backspaces, a
bidi override and Rich markup. `kata grade --file` and `kata check --file` on it, piped and on
a forced terminal, and `kata repro -o -`, print none of it raw: every ESC on screen is one of
Rich's own styles, and the attack is still there to read, as Python escapes (``\\x1b[2J``).
`--json` keeps every string exact.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from grader.cli import output
from grader.cli.app import app
from tests.kata_testing import REPO_ROOT

ATTACK = Path(__file__).parent / "hostile" / "attacks" / "terminal_escapes.py"
# What the candidate's text may never put on screen raw: C0 but newline and tab (CR, BS, BEL,
# ESC alone are checked below), C1, the bidi controls.
RAW = re.compile("[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Rich's own sequences on a forced terminal: SGR styles, the live line's cursor moves.
RICH_OWN = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[2K|\x1b\[\d*[AG]|\r")
# The attack, as it must still be readable: the sequences as escapes, the markup as text.
READABLE = (r"\x1b]0;PWNED-TITLE\x07\x1b[2J", r"\x9b2J", "CLICK-ME", r"\u202eevil-rtl",
            "[link=https://evil.example/]LINKED[/link][bold red]PAINTED[/]")
runner = CliRunner()


@pytest.fixture
def hostile_file(tmp_path) -> Path:
    """The attack as paged_kv.py, with its @RAW@ placeholder made the hostile text itself,
    raw in the source (a traceback quotes that line)."""
    source = ATTACK.read_text(encoding="utf-8")
    namespace: dict = {}
    exec(source.split("# A class named")[0], namespace)  # our own fixture's HOSTILE
    raw = namespace["HOSTILE"].replace("\\", "\\\\").replace('"', '\\"')
    path = tmp_path / "candidate" / "paged_kv.py"
    path.parent.mkdir()
    path.write_text(source.replace("@RAW@", raw), encoding="utf-8")
    return path


def assert_safe(text: str) -> None:
    """No sequence of the candidate's acts: nothing raw, every ESC one of Rich's own."""
    rest = RICH_OWN.sub("", text)
    found = sorted(set(RAW.findall(rest)))
    assert not found, f"raw control characters reached the terminal: {found}"
    assert "\x1b" not in rest, f"an escape sequence that is not Rich's: {rest[rest.index(chr(27)):][:40]!r}"
    flat = "".join(rest.split())  # wrapping at 80 columns splits words
    for shown in READABLE:
        assert "".join(shown.split()) in flat, f"the attack is not shown: {shown!r}"


@pytest.fixture
def forced_terminal(monkeypatch) -> io.StringIO:
    """The console of every command a colour terminal 80 columns wide, written to a buffer."""
    screen = io.StringIO()
    monkeypatch.setattr(output, "console", Console(file=screen, force_terminal=True, color_system="truecolor",
                                                    width=80, highlight=False))
    return screen


def cleared(screen: io.StringIO) -> None:
    screen.seek(0)
    screen.truncate()


def test_grade_piped_prints_no_escape_of_the_candidate(hostile_file, tmp_path):
    """A real `kata grade --file` in a subprocess, stdout and stderr pipes (no TTY)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(COLUMNS="80", PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([sys.executable, "-m", "grader.cli.app", "grade", "--file", str(hostile_file),
                           "--seed", "1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    # Piped, Rich adds no style and no live line: any ESC or CR would be the candidate's.
    assert "\x1b" not in done.stdout + done.stderr and "\r" not in done.stdout + done.stderr
    assert_safe(done.stdout + done.stderr)


def test_grade_and_repro_on_a_terminal_print_no_escape_of_the_candidate(hostile_file, forced_terminal):
    result = runner.invoke(app, ["grade", "--file", str(hostile_file), "--seed", "1"])
    assert result.exit_code == 1, result.output
    shown = forced_terminal.getvalue()
    assert "\x1b[" in shown  # Rich did style it: the terminal was a terminal
    assert_safe(shown)
    assert "\x1b]8;" not in shown  # no hyperlink at all: the candidate's markup was not parsed

    cleared(forced_terminal)
    result = runner.invoke(app, ["repro", "paged-kv", "--test", "test_pop_copies_in_order_then_clears"])
    assert result.exit_code == 0, result.output
    written = next(hostile_file.parent.glob("repro_*.py")).read_text(encoding="utf-8")
    shown = RICH_OWN.sub("", forced_terminal.getvalue())
    assert "\x1b" not in shown and not RAW.search(shown)
    assert r"\x1b]0;PWNED-TITLE" in "".join(shown.split())  # "the test reported: ... got ..."
    assert compile(written, "repro.py", "exec")  # the file itself stays runnable Python


def test_repro_to_stdout_is_exact_in_a_pipe_and_clean_on_a_terminal(hostile_file, monkeypatch):
    assert runner.invoke(app, ["grade", "--file", str(hostile_file), "--seed", "1", "--json"]).exit_code == 1
    repro = ["repro", "paged-kv", "--test", "test_pop_copies_in_order_then_clears", "-o", "-"]
    piped = runner.invoke(app, repro)
    assert piped.exit_code == 0, piped.output
    assert "\x1b]0;PWNED-TITLE\x07" in piped.output  # the snippet exactly, as the file would hold it
    monkeypatch.setattr(output, "console", Console(file=io.StringIO(), force_terminal=True))
    to_terminal = runner.invoke(app, repro)
    assert not RAW.search(to_terminal.output) and "\x1b" not in to_terminal.output
    assert r"\x1b]0;PWNED-TITLE\x07" in to_terminal.output


def test_check_on_a_terminal_prints_no_escape_of_the_candidate(hostile_file, forced_terminal):
    result = runner.invoke(app, ["check", "--file", str(hostile_file)])
    assert result.exit_code == 1, result.output
    shown = forced_terminal.getvalue()
    assert not RAW.search(RICH_OWN.sub("", shown)) and "\x1b" not in RICH_OWN.sub("", shown)
    assert r"\x1b]0;PWNED-TITLE" in "".join(shown.split())


def test_json_and_json_stream_keep_the_candidates_text_exact_and_escaped(hostile_file):
    result = runner.invoke(app, ["grade", "--file", str(hostile_file), "--seed", "1", "--json"])
    assert result.exit_code == 1
    assert not RAW.search(result.stdout) and "\x1b" not in result.stdout  # JSON escapes them itself
    card = json.loads(result.stdout)
    messages = [t["message"] for t in card["tests"]]
    assert any("raised:\x1b]0;PWNED-TITLE\x07\x1b[2J" in m for m in messages)  # exact, not cleaned
    streamed = runner.invoke(app, ["check", "--file", str(hostile_file), "--json-stream"])
    assert not RAW.search(streamed.stdout) and "\x1b" not in streamed.stdout
    last = json.loads(streamed.stdout.splitlines()[-1])
    assert any("PWNED-TITLE\x07" in t["message"] for t in last["scorecard"]["tests"])


HOSTILE = "\x1b]0;PWNED-TITLE\x07\x1b[2J\x9b2J\u202eevil-rtl[bold red]PAINTED[/]"


def test_watch_hang_line_and_debrief_print_no_escape_of_the_candidate(forced_terminal, monkeypatch, tmp_path):
    """The screens no grade above reaches: watch's first failure, the live line's hang
    notice, a mock's debrief (its first failing property quotes the candidate's message)."""
    from grader.cli import mock_view
    from grader.cli.commands import watch
    from grader.cli.progress import RunProgress
    from tests.kata_testing import kata

    monkeypatch.setattr(mock_view, "console", output.console)
    test = {"name": "test_x", "level": 1, "passed": False, "description": "d", "category": "correctness",
            "message": f"timed out {HOSTILE}", "duration_s": 2.0,
            "details": {k: HOSTILE for k in ("input", "expected", "got", "note")}
            | {"where": f"stuck at:\n  line 3, in f: {HOSTILE}"}}
    watch._print_result(kata("paged-kv"), tmp_path / f"x{HOSTILE}.py", {"tests": [test]}, 0.1)
    with RunProgress(kata="paged-kv", suite="hidden", file="f", seed=1) as progress:
        progress.on_event("result", test)
    level = {"level": 1, "name": "n", "revealed": True, "passed": False, "used_s": 60.0, "minutes": 30,
             "over_pace": False, "grade_attempts": 1, "hints": 0,
             "failed_attempts": [{"score": 0, "first_failure": f"L1 {HOSTILE}"}]}
    mock_view.print_debrief({"kata": "paged-kv", "end_reason": "time", "time_used_s": 60.0, "minutes": 75,
                             "levels": [level], "signal": "No hire", "coverage": None, "followups": [],
                             "practise_next": f"level 1: your last grade failed 'L1 {HOSTILE}'"})
    shown = RICH_OWN.sub("", forced_terminal.getvalue())
    assert not RAW.search(shown) and "\x1b" not in shown
    flat = "".join(shown.split())
    assert flat.count(r"\x1b]0;PWNED-TITLE\x07") >= 8 and "[boldred]PAINTED[/]" in flat


def test_bench_notes_and_history_paths_print_no_escape(hostile_file, forced_terminal, monkeypatch):
    """A bench row's note quotes what the candidate's code raised; history lists the file
    graded, whose name a stranger chose."""
    import grader.bench

    monkeypatch.setattr(grader.bench, "run_bench", lambda *a, **kw: [
        {"impl": "yours", "workload": "w", "median_ms": None, "note": f"raised ValueError: {HOSTILE}"}])
    assert runner.invoke(app, ["bench", "paged-kv", "--file", str(hostile_file)]).exit_code == 0
    named = hostile_file.with_name(f"x{HOSTILE}.py".replace("/", "_"))
    named.write_text("x = 1\n")
    assert runner.invoke(app, ["grade", "paged-kv", "--file", str(named), "--seed", "1"]).exit_code == 1
    assert runner.invoke(app, ["history", "paged-kv"]).exit_code == 0
    shown = RICH_OWN.sub("", forced_terminal.getvalue())
    assert not RAW.search(shown) and "\x1b" not in shown
    assert "".join(shown.split()).count(r"\x1b]0;PWNED-TITLE\x07") >= 3  # bench, grade's lines, history
