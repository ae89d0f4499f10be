"""Every command rendered at 80 and 120 columns against stored snapshots, with a fixed clock,
UTC and fake scorecards (no real grading): what a candidate reads in a narrow terminal.

Regenerate after an intended change of output with

    KATA_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_cli_layout.py

and read the diff of tests/snapshots/ before committing it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader.cli import output
from grader import clock
from grader.catalog import load_catalog
from grader.cli.app import app
from grader.engine.report import Scorecard
from grader.engine.runner import TestResult
from tests.kata_testing import REPO_ROOT, kata

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE = os.environ.get("KATA_UPDATE_SNAPSHOTS") == "1"
FIXED_NOW = 1_800_000_000.0  # 2027-01-15 08:00 UTC
WIDTHS = (80, 120)
runner = CliRunner()


@pytest.fixture(autouse=True)
def short_fixed_length_home(isolated_home, monkeypatch, tmp_path):
    """KATA_HOME, the workspace and the working folder under /tmp/kl<7-digit pid>: a path short
    enough that rich never folds it mid-way, and of a fixed length, so that the wrapping of
    every line around it is the same on every run and `<TMP>` can stand in for it."""
    base = Path("/tmp") / f"kl{os.getpid():07d}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir()
    monkeypatch.setenv("KATA_HOME", str(base / "home"))
    monkeypatch.setenv("KATA_WORKSPACE", str(base / "solutions"))
    # With this interpreter's environment activated (as the README sets up), `kata repro`
    # says "python", else the interpreter's path (also when another venv is activated: its
    # python links the same binary, not the same packages): the snapshots hold the path,
    # whatever the caller's PATH and VIRTUAL_ENV are.
    monkeypatch.setenv("PATH", os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and os.path.realpath(p) != os.path.realpath(os.path.dirname(sys.executable))))
    monkeypatch.chdir(base)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def fixed_clock_and_zone(short_fixed_length_home, monkeypatch):
    now = {"now": FIXED_NOW}
    monkeypatch.setattr(time, "time", lambda: now["now"])
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    # A COLUMNS set when rich's consoles were made would pin their width: let each run's win.
    monkeypatch.setattr(output.console, "_width", None)
    monkeypatch.setattr(output.err_console, "_width", None)
    with clock.use(lambda: now["now"]):  # sessions and history read grader.clock
        yield now
    monkeypatch.undo()
    time.tzset()


def run(columns: int, *args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": str(columns), "LINES": "50"},
                         catch_exceptions=False)


def normalized(text: str, tmp_path: Path) -> str:
    base = Path("/tmp") / f"kl{os.getpid():07d}"
    for path in (tmp_path.resolve(), tmp_path, base.resolve(), base):
        text = text.replace(str(path), "<TMP>")
    # The interpreter first: a virtual environment inside the checkout holds the repo path.
    text = text.replace(sys.executable, "<PYTHON>").replace(str(REPO_ROOT), "<REPO>")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def check_snapshot(name: str, columns: int, text: str) -> None:
    path = SNAPSHOTS / f"{name}-{columns}.txt"
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"no snapshot {path.name}; run with KATA_UPDATE_SNAPSHOTS=1 to write it")
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8")
    assert text == expected, (f"{path.name} changed; if intended, regenerate with "
                              f"KATA_UPDATE_SNAPSHOTS=1\n--- got ---\n{text}")


def assert_fits(text: str, columns: int) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > columns]
    assert not too_wide, f"lines wider than {columns} columns: {too_wide[:3]}"


def render(name: str, tmp_path: Path, *args: str, exit_code: int = 0) -> dict[int, str]:
    """Run the command at each width, compare with its snapshots, and return the texts."""
    texts = {}
    for columns in WIDTHS:
        result = run(columns, *args)
        assert result.exit_code == exit_code, result.output
        text = normalized(result.output, tmp_path)
        assert_fits(text, columns)
        check_snapshot(name, columns, text)
        texts[columns] = text
    return texts


# ---------------------------------------------------------------------------- fake scorecards


def _test(name: str, level: int, passed: bool, message: str = "", category: str = "correctness",
          description: str | None = None, detail: bool = False, **details) -> TestResult:
    return TestResult(nodeid=f"paged_kv/test_level{level}.py::{name}", name=name, level=level,
                      category=category, weight=1.0, description=description or name.replace("_", " "),
                      passed=passed, message=message, details=details, duration_s=0.1, detail=detail)


def fake_card(solution: Path) -> Scorecard:
    snippet = ("import paged_kv\n\nallocator = paged_kv.PagedKVCacheAllocator(4, 2)\n"
               "print(allocator.allocate('a', 3))\n")
    printed = "\n".join(f"allocating block {i}" for i in range(40)) + "\n... 25 more lines"
    hang_where = ("where your code was when it was stopped (innermost first):\n"
                  "  line 31, in allocate: while True:")
    wrong = dict(input="PagedKVCacheAllocator(4, 2); allocate('a', 3)", expected="True", got="False",
                 snippet=snippet)
    tests = [
        _test("test_allocate_fits", 1, False, "return value of allocate('a', 3)", output=printed, **wrong),
        _test("test_allocate_exactly", 1, False, "return value of allocate('a', 3)", category="edge cases", **wrong),
        _test("test_allocate_again", 1, False, "return value of allocate('a', 3)", **wrong),
        _test("test_free_restores", 1, True),
        _test("test_block_table_matches_reference", 1, False,
              "timed out after 10.1 s: an infinite loop, or code far slower than the reference",
              description="random allocate and free sequences behave like the reference, and every "
                          "block table lists the blocks in the order they were handed out to the request",
              where=hang_where, snippet=snippet),
        _test("test_free_everything", 1, False, "stuck where test_block_table_matches_reference was stuck "
              "(an infinite loop?): stopped early instead of waiting out its 3.2 s limit", where=hang_where),
        _test("test_fork_shares_blocks", 2, False, "not implemented yet (your code raised NotImplementedError)",
              where="in your file:\n  line 60, in fork: raise NotImplementedError"),
        _test("test_copy_on_write", 2, False, "not implemented yet (your code raised NotImplementedError)",
              where="in your file:\n  line 60, in fork: raise NotImplementedError"),
        _test("test_prefix_hits", 3, True),
        _test("test_prefix_constant_time", 3, False, "allocate_prompt makes 40 dictionary lookups per "
              "block where the reference makes 2", category="efficiency",
              note="measured in the process that runs your code, around its own calls"),
    ]
    return Scorecard(kata="paged-kv", title="Paged KV-cache block allocator", seed=7, solution=str(solution),
                     solution_sha256="0" * 64, tests=tests, duration_s=12.34, output_bytes=2_000,
                     level_names={1: "Allocate and free", 2: "Fork and copy-on-write", 3: "Prefix caching"},
                     level_minutes={1: 30, 2: 25, 3: 20}, contained=True)


def fake_card_with_details_missed(solution: Path) -> Scorecard:
    """Levels 1 and 2 pass with details missed (one, then two); level 3 fails a core test."""
    wrong = dict(input="PagedKVCacheAllocator(4, 2); allocate('a', 0)", expected="[]", got="ValueError")
    tests = [
        _test("test_allocate_fits", 1, True),
        _test("test_allocate_zero_tokens", 1, False, "allocate('a', 0) returns no blocks, not an error",
              category="edge cases", description="a request of zero tokens holds no blocks", detail=True, **wrong),
        _test("test_fork_shares_blocks", 2, True),
        _test("test_fork_of_an_empty_request", 2, False, "fork('a', 'b') of an empty request",
              category="edge cases", description="forking a request that holds no blocks", detail=True),
        _test("test_pop_copies_is_empty_after_reading", 2, False, "pop_copies() twice",
              category="api contract", description="pop_copies empties the list of pending copies", detail=True),
        _test("test_prefix_hits", 3, False, "allocate_prompt('b', [1, 2, 3, 4])", expected="[0, 1]", got="[2, 3]"),
    ]
    return Scorecard(kata="paged-kv", title="Paged KV-cache block allocator", seed=7, solution=str(solution),
                     solution_sha256="0" * 64, tests=tests, duration_s=2.5,
                     level_names={1: "Allocate and free", 2: "Fork and copy-on-write", 3: "Prefix caching"},
                     level_minutes={1: 30, 2: 25, 3: 20}, contained=True)


@pytest.fixture
def fake_grading(monkeypatch, tmp_path):
    """grade and check return the fake scorecard instead of running a suite."""
    from grader.cli.commands import check as check_cmd
    from grader.cli.commands import grade as grade_cmd

    solution = Path(os.environ["KATA_WORKSPACE"]) / "paged_kv.py"
    solution.parent.mkdir(parents=True, exist_ok=True)
    solution.write_text(kata("paged-kv").stub_path.read_text())
    monkeypatch.setattr(grade_cmd, "grade_file", lambda kata_, path, **kw: fake_card(path))
    monkeypatch.setattr(check_cmd, "run_examples", lambda kata_, path, **kw: fake_card(path))
    return solution


# ---------------------------------------------------------------------------- the commands


def test_list(tmp_path, fake_grading):
    run(80, "grade", "paged-kv", "--file", str(fake_grading))
    texts = render("list", tmp_path, "list")
    # Compact at 80 columns: one or two rows per kata, not five.
    num_katas = len(load_catalog().katas)
    assert len(texts[80].splitlines()) <= 2 * num_katas + 4
    assert re.search(r"paged-kv +Paged KV-cache block allocator +75 +- +20 ", texts[80])  # untimed


def test_show(tmp_path):
    texts = render("show", tmp_path, "show", "ppo")
    assert "PPO" in texts[80]


def test_start_and_status(tmp_path, fixed_clock_and_zone):
    for columns, slug in zip(WIDTHS, ("rope", "lora")):  # a session each: start once per kata
        text = normalized(run(columns, "start", slug, "-q").output, tmp_path)
        assert_fits(text, columns)
        check_snapshot("start", columns, text)
    fixed_clock_and_zone["now"] += 30 * 60 + 5
    render("status", tmp_path, "status")


def test_check(tmp_path, fake_grading):
    texts = render("check", tmp_path, "check", "paged-kv", exit_code=1)
    assert "your code printed" in texts[80] and "... and 25 more lines not shown" in texts[80]


def test_grade_scorecard(tmp_path, fake_grading):
    texts = render("grade", tmp_path, "grade", "paged-kv", "--seed", "7", exit_code=1)
    text = texts[80]
    # one box per distinct failure: the three same failures, the two hangs
    assert "same failure in 2 more tests: test_allocate_exactly, test_allocate_again" in text
    assert "same failure in 1 more test: test_free_everything" in text
    assert text.count("╭─ ✗") == 3  # wrong value, hang, efficiency
    # an unimplemented level is one line
    assert re.search(r"L2\s+Fork and copy-on-write: not implemented yet, all 2 tests raised", text)
    # the printed output: 40 lines shown, the rest counted
    assert "allocating block 39" in text and "... and 25 more lines not shown" in text
    # titles wrap rather than being cut: every word of the long description is there
    flat = " ".join(text.replace("│", " ").split())
    assert "in the order they were handed out to the request" in flat


def test_grade_scorecard_with_details_missed(tmp_path, fake_grading, monkeypatch):
    """A level passed with details missed says so under the levels table, in the signal and
    in the summary line; the detail's box says the level still passes."""
    from grader.cli.commands import grade as grade_cmd

    monkeypatch.setattr(grade_cmd, "grade_file", lambda kata_, path, **kw: fake_card_with_details_missed(path))
    texts = render("grade-details", tmp_path, "grade", "paged-kv", "--seed", "7", exit_code=1)
    flat = " ".join(texts[80].replace("│", " ").split())
    assert "level 1 passed with 1 detail missed: a request of zero tokens holds no blocks" in flat
    assert ("level 2 passed with 2 details missed: forking a request that holds no blocks; pop_copies "
            "empties the list of pending copies") in flat
    assert "interview signal: Hire, 3 details missed (untimed)" in flat
    assert "levels passed 2/3 (3 details missed)" in flat
    assert texts[80].count("· detail (the level still passes)") == 3


def test_grade_in_a_session_ends_with_a_summary_under_the_cards(tmp_path, fake_grading, monkeypatch,
                                                                fixed_clock_and_zone):
    """At 80x40 a partial grade is longer than the screen: its last lines, under the cards,
    say the score, the levels passed, the time used and each level's clock."""
    import dataclasses

    from grader.cli.commands import grade as grade_cmd

    session = ("time_used_s", "time_limit_s", "hints_used")
    monkeypatch.setattr(grade_cmd, "grade_file", lambda kata_, path, **kw: dataclasses.replace(
        fake_card(path), **{k: kw[k] for k in session if k in kw}))
    for columns in WIDTHS:
        run(columns, "start", "paged-kv", "-q", "--force")
        fixed_clock_and_zone["now"] += 12 * 60 + 5
        result = run(columns, "grade", "paged-kv", "--seed", "7")
        assert result.exit_code == 1, result.output
        text = normalized(result.output, tmp_path)
        assert_fits(text, columns)
        check_snapshot("grade-session", columns, text)
        last = text.splitlines()[-8:]
        assert "20/100 · levels passed 0/3 · time used 12 min 5 s of 1 h 15 min" in last, last
        assert any(line.strip().startswith("level 1 (Allocate and free)") for line in last), last


def test_repro(tmp_path, fake_grading):
    run(80, "grade", "paged-kv")
    render("repro", tmp_path, "repro")


def test_hint(tmp_path):
    run(80, "start", "paged-kv", "-q")
    render("hint", tmp_path, "hint")


def test_history(tmp_path, fake_grading, fixed_clock_and_zone):
    run(80, "grade", "paged-kv")
    fixed_clock_and_zone["now"] += 3600
    run(80, "grade", "paged-kv", "--file", str(fake_grading))
    render("history", tmp_path, "history")


def test_reset(tmp_path):
    run(80, "start", "paged-kv", "-q")
    render("reset", tmp_path, "reset", "paged-kv")


def test_init(tmp_path):
    texts = {}
    for columns in WIDTHS:
        result = run(columns, "init", f"practice{columns}")
        texts[columns] = normalized(result.output.replace(f"practice{columns}", "practice"), tmp_path)
        assert_fits(texts[columns], columns)
        check_snapshot("init", columns, texts[columns])


def test_notebook(tmp_path):
    render("notebook", tmp_path, "notebook", "ppo")


def test_errors(tmp_path):
    render("error-unknown-kata", tmp_path, "show", "PPOO", exit_code=2)
    Path("solutions-dir").mkdir()
    render("error-folder-as-file", tmp_path, "grade", "paged-kv", "--file", "solutions-dir", exit_code=2)


def test_mock_and_stop(tmp_path):
    for columns, slug in zip(WIDTHS, ("rope", "lora")):
        text = normalized(run(columns, "mock", slug).output, tmp_path)
        assert_fits(text, columns)
        check_snapshot("mock", columns, text)
    render("mock-where", tmp_path, "mock", "rope")
    for columns, slug in zip(WIDTHS, ("rope", "lora")):
        text = normalized(run(columns, "mock", slug, "--stop").output, tmp_path)
        assert_fits(text, columns)
        check_snapshot("mock-stop", columns, text)


def test_stop(tmp_path):
    for columns, slug in zip(WIDTHS, ("rope", "lora")):
        run(columns, "start", slug, "-q")
        text = normalized(run(columns, "stop", slug).output, tmp_path)
        assert_fits(text, columns)
        check_snapshot("stop", columns, text)


def test_progress(tmp_path, fake_grading):
    run(80, "grade", "paged-kv", "--file", str(fake_grading))
    render("progress", tmp_path, "progress")


@pytest.mark.parametrize("command", ["bench", "homework", "grade", "repro", "watch"])
def test_help_fits(command, tmp_path):
    render(f"help-{command}", tmp_path, command, "--help")


# ---------------------------------------------------------------------------- reveal


def test_reveal_piped_is_the_reference_file_exactly(tmp_path):
    for columns in WIDTHS:
        result = run(columns, "reveal", "scheduler")
        assert result.exit_code == 0
        assert result.output == kata("scheduler").reference_path.read_text(encoding="utf-8")


def test_reveal_on_a_terminal_pages_and_wraps_instead_of_cropping(monkeypatch):
    from rich.console import Console

    reference = kata("rope").reference_path.read_text(encoding="utf-8")
    assert max(len(line) for line in reference.splitlines()) > 70  # something to wrap at 80
    terminal = Console(force_terminal=True, width=80, color_system=None, record=True)
    paged = []
    monkeypatch.setattr(output, "console", terminal)
    monkeypatch.setattr(output, "page", lambda renderable: (paged.append(1), terminal.print(renderable)))
    assert runner.invoke(app, ["reveal", "rope"], catch_exceptions=False).exit_code == 0
    assert paged == [1]
    shown = terminal.export_text()
    assert max(len(line) for line in shown.splitlines()) <= 80
    # Every character of the reference is on screen: strip the line numbers and compare.
    body = "".join(re.sub(r"^\s*\d*\s", "", line, count=1) for line in shown.splitlines())
    assert "".join(body.split()) == "".join(reference.split())


def test_an_unimplemented_level_names_each_function_once():
    """One level's tests reach the stub through a traceback ("line 60, in rope_inv_freq") or a
    suite's message ("rope_inv_freq is not implemented yet"): each function is named once,
    with its line where one is known (it read "rope_inv_freq, rope_inv_freq, line 60, ...")."""
    from grader.cli.scorecard import unimplemented_levels

    def stub(message: str, where: str = "") -> dict:
        return {"level": 1, "passed": False, "message": message, "details": {"where": where}}

    card = {"levels": [{"level": 1, "name": "Frequencies"}],
            "tests": [stub("rope_inv_freq is not implemented yet (NotImplementedError)"),
                      stub("NotImplementedError", 'File "rope.py", line 60, in rope_inv_freq'),
                      stub("apply_rope is not implemented yet (NotImplementedError)"),
                      stub("NotImplementedError", 'File "rope.py", line 92, in apply_rope'),
                      stub("NotImplementedError", 'File "rope.py", line 92, in apply_rope'),
                      stub("RotaryEmbedding is not implemented yet (NotImplementedError)")]}
    line = unimplemented_levels(card)[1]
    assert line.endswith("all 6 tests raised NotImplementedError "
                         "(in rope_inv_freq, line 60; apply_rope, line 92; RotaryEmbedding)"), line


def test_ask(tmp_path, fixed_clock_and_zone):
    """In a mock of kv-budget at level 1: a question answered, one of level 3 ("later"),
    one the statement leaves open, and the topics."""
    run(80, "mock", "kv-budget")
    render("ask", tmp_path, "ask", "Does the output projection share weights with the token embedding?")
    texts = render("ask-later", tmp_path, "ask", "Do memory time and compute time overlap?")
    assert "That comes later in the interview." in texts[80]
    render("ask-open", tmp_path, "ask", "Can I use numpy?")
    render("ask-list", tmp_path, "ask", "--list")


def test_mock_debrief(tmp_path, monkeypatch, fixed_clock_and_zone):
    """`kata mock --debrief` of a scripted kv-budget mock (questions, nudges, a level passed
    with a detail missed, stopped on level 2, answered): the notes, the levels with their
    questions and nudges, the details missed, and the timeline."""
    from grader.cli.commands import grade as grade_cmd
    from grader.cli.commands import mock as mock_cmd
    from tests.test_nudges_and_debrief import card_of, scripted_mock

    failing: set[str] = set()
    monkeypatch.setattr(grade_cmd, "grade_file", lambda kata_, path, *, seed, levels=None, **kw: card_of(
        kata_, levels, failing, path))
    # One follow-up of our own: the snapshot follows this file, not kata.toml's list.
    monkeypatch.setattr(mock_cmd, "choose_followups", lambda *a: [{
        "index": 0, "level": 1, "question": "Where does the KV cache of a long context go, and what bounds the batch?",
        "points": ["K and V of every layer, per token", "KV capacity, not weights, bounds the batch"],
        "keys": [[["every layer", "each layer"]], [["batch"], ["capacity"]]]}])

    class Clock:
        def advance(self, *, minutes: float) -> None:
            fixed_clock_and_zone["now"] += 60 * minutes

    scripted_mock(Clock(), failing, tmp_path)
    texts = render("mock-debrief", tmp_path, "mock", "--debrief")
    flat = " ".join(texts[80].split())
    assert "the interviewer's notes: asked 3 clarifying questions before coding" in flat
    assert "18 min nudge on level 2: with a paged cache, do partial blocks count?" in flat
