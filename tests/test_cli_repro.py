"""kata repro: the snippet of a failure of the last grade or check, written next to the graded
file, runnable as it is, never replacing a file of the candidate without a backup."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from grader.cli import last_run
from grader.cli.app import app
from grader.cli.commands.repro import runnable
from tests.kata_testing import corpus_file, kata

runner = CliRunner()
BUGGY = corpus_file("paged-kv", "buggy_block_count_floor_plus_one.py")
TEST = "test_block_count_is_ceil_of_tokens"


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def run_python(script: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the script alone finds the module
    return subprocess.run([sys.executable, script.name], cwd=script.parent, capture_output=True, text=True,
                          timeout=120, env=env)


def test_repro_before_any_run_says_what_to_do_first():
    result = invoke("repro")
    assert result.exit_code == 2
    assert "nothing to reproduce" in result.output and "next: `kata check` or `kata grade` first" in result.output


def test_repro_of_a_file_named_otherwise_loads_it_under_the_module_name(tmp_path):
    buggy = tmp_path / "my_attempt.py"
    shutil.copy(BUGGY, buggy)
    card = json.loads(invoke("grade", "paged-kv", "--file", str(buggy), "--json", "--seed", "1").output)
    failure = next(t for t in card["tests"] if t["name"] == TEST)
    assert not failure["passed"] and failure["details"]["snippet"]

    result = invoke("repro", "--test", TEST)
    assert result.exit_code == 0, result.output
    script = tmp_path / "repro_block_count_is_ceil_of_tokens.py"
    assert script.is_file() and "run it:" in result.output and script.name in result.output
    text = script.read_text()
    assert "spec_from_file_location('paged_kv'" in text and "my_attempt.py" in text
    ran = run_python(script)
    assert ran.returncode == 0, ran.stderr
    # the buggy count: the request holds a block after allocate(r, 0)
    assert "[0]" in ran.stdout.splitlines()


def test_a_second_repro_backs_up_a_changed_file_and_never_writes_over_the_solution(tmp_path):
    solution = Path(os.environ["KATA_WORKSPACE"]) / "paged_kv.py"
    solution.parent.mkdir(parents=True)
    shutil.copy(BUGGY, solution)
    assert invoke("grade", "paged-kv", "--file", str(solution), "--seed", "1").exit_code == 1
    assert invoke("repro", "paged-kv", "--test", TEST).exit_code == 0
    script = solution.parent / "repro_block_count_is_ceil_of_tokens.py"
    script.write_text(script.read_text() + "print('my own line')\n")
    again = invoke("repro", "paged-kv", "--test", TEST)
    assert again.exit_code == 0 and "backed up" in again.output
    backups = list((solution.parent / ".backups").glob("repro_block_count_is_ceil_of_tokens.*.py"))
    assert len(backups) == 1 and "my own line" in backups[0].read_text()
    assert "my own line" not in script.read_text()

    refused = invoke("repro", "paged-kv", "--test", TEST, "-o", str(solution))
    assert refused.exit_code == 2 and "next:" in refused.output
    assert solution.read_bytes() == BUGGY.read_bytes()


def test_unknown_or_passing_tests_get_a_suggestion(tmp_path):
    stub = tmp_path / "paged_kv.py"
    shutil.copy(kata("paged-kv").stub_path, stub)
    invoke("check", "--all", "--file", str(stub))  # --all: past the first failing example
    typo = invoke("repro", "paged-kv", "--test", "test_error")
    assert typo.exit_code == 2 and "did you mean test_errors?" in typo.output
    printed = invoke("repro", "paged-kv", "--test", "test_errors", "-o", "-")
    assert printed.exit_code == 0 and printed.output.startswith("# Replays the calls")
    assert not list(tmp_path.glob("repro_*.py"))  # -o - writes nothing


def test_repro_without_a_slug_takes_the_most_recent_run(tmp_path):
    stub = tmp_path / "paged_kv.py"
    shutil.copy(kata("paged-kv").stub_path, stub)
    invoke("check", "--file", str(stub))
    run = last_run.load("paged-kv")
    assert run is not None and run.kind == "check" and run.solution_path == stub.resolve()
    result = invoke("repro")
    assert result.exit_code == 0 and "last check of paged-kv" in result.output


def test_a_call_that_raised_does_not_stop_the_script():
    snippet = ("import m\n\nobj = m.Thing()\nobj.free('zz')  # raises KeyError\nprint(obj.count())\n")
    script = runnable(snippet)
    assert "try:  # raised KeyError when graded\n    obj.free('zz')\nexcept Exception as exc:" in script
    assert script.endswith("print(obj.count())\n")
    compile(script, "repro.py", "exec")


def test_run_it_says_python_only_when_that_finds_this_environment(tmp_path, monkeypatch):
    """`python` on PATH may be another virtual environment's: a link to the same binary, with
    other packages (no torch). Only a `python` beside this interpreter is "python"."""
    from grader.cli.commands.repro import _python

    binary = os.path.realpath(sys.executable)
    mine, other = tmp_path / "mine" / "bin", tmp_path / "other" / "bin"
    for folder in (mine, other):
        folder.mkdir(parents=True)
        (folder / "python").symlink_to(binary)
    (mine / "python3").symlink_to(binary)
    monkeypatch.setattr(sys, "executable", str(mine / "python3"))
    monkeypatch.setenv("PATH", str(other))  # another venv activated
    assert _python() == str(mine / "python3")
    monkeypatch.setenv("PATH", os.pathsep.join([str(mine), str(other)]))  # this one activated
    assert _python() == "python"
    monkeypatch.setenv("PATH", "/nonexistent")  # no venv at all
    assert _python() == str(mine / "python3")
