"""The commands that grade nothing start fast (issue 42, item 2): `kata list`, `show`, `status`,
`history`, `hint`, `ask` and `--help` import neither torch nor the grading engine (nor
hypothesis or pytest, which only the judge needs). Each runs in a fresh interpreter, as a
user's `kata` does, and the test reads that interpreter's sys.modules: an eager import of
the engine added anywhere on the way (a command module, grader.sessions, ...) fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.kata_testing import REPO_ROOT

# Imported by a grading only (the CLI's judge and worker import them, not the CLI itself).
GRADING_ONLY = ("torch", "hypothesis", "pytest", "_pytest", "grader.engine", "grader.grading")
# rank_bm25 imports numpy: `kata ask` matches a question with it, no other command needs it.
ASK_ONLY = ("rank_bm25", "numpy")

# Runs each command in this one interpreter, in order, and prints which of the watched
# modules each command had imported by its end (cumulative, so a command is blamed for
# what it added only if every command before it was clean).
DRIVER = """
import json, sys
from grader.cli.app import build_app, commands_for
watched = json.loads(sys.argv[1])
def loaded():
    return sorted(m for m in sys.modules if m in watched or m.startswith(tuple(w + "." for w in watched)))
seen = {"import grader.cli.app": loaded()}
for args in json.loads(sys.argv[2]):
    try:
        build_app(commands_for(args))(args, standalone_mode=False, prog_name="kata")  # as main() does
    except SystemExit:
        pass
    seen[" ".join(args)] = loaded()
print(json.dumps(seen))
"""


def _kata(*args: str) -> subprocess.CompletedProcess[str]:
    """`kata ...` as the console script runs it (grader.cli.app:run)."""
    return subprocess.run([sys.executable, "-c", "from grader.cli.app import run; run()", *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)


def _modules_after(commands: list[list[str]], watched: list[str] | None = None) -> dict[str, list[str]]:
    watched = watched or [*GRADING_ONLY, *ASK_ONLY]
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(watched), json.dumps(commands)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _heavy(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if m in names or any(m.startswith(n + ".") for n in names)]


def test_commands_that_grade_nothing_import_neither_torch_nor_the_engine():
    started = _kata("start", "paged-kv", "--quiet")  # a session, so that hint, ask and status have one
    assert started.returncode == 0, started.stdout + started.stderr
    commands = [["list"], ["--help"], ["show", "paged-kv"], ["status"], ["history"], ["hint", "paged-kv"],
                ["list", "--json"], ["ask", "what happens when the pool runs out of blocks?"]]
    seen = _modules_after(commands)
    for command, modules in seen.items():
        assert not _heavy(modules, GRADING_ONLY), f"`{command}` imported {_heavy(modules, GRADING_ONLY)[:5]}"
        if not command.startswith("ask"):
            assert not _heavy(modules, ASK_ONLY), f"`{command}` imported {_heavy(modules, ASK_ONLY)[:5]}"
    assert "rank_bm25" in seen[" ".join(commands[-1])], "the driver did not reach `kata ask`'s matcher"


def test_a_command_imports_its_own_module_only():
    """`kata list` wires the list command alone: no other command's module is imported."""
    seen = _modules_after([["list"]], watched=["grader.cli.commands"])
    assert seen["list"] == ["grader.cli.commands", "grader.cli.commands.list_cmd"]


def test_the_check_sees_an_eager_import():
    """The driver itself: a command that imports the engine is reported."""
    seen = _modules_after([["list"]])
    assert not _heavy(seen["list"], GRADING_ONLY)
    import_engine = DRIVER.replace("import build_app, commands_for", "import build_app, commands_for\nimport grader.grading")
    done = subprocess.run([sys.executable, "-c", import_engine, json.dumps(list(GRADING_ONLY)), json.dumps([["list"]])],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert "grader.engine.runner" in json.loads(done.stdout.splitlines()[-1])["list"]


def test_the_kata_command_skips_the_teardown_but_loses_nothing(tmp_path):
    """run() ends the process without the interpreter's teardown once the output is flushed
    and the exit handlers ran: what a command wrote is in the store, its output is whole,
    its exit code is kept, and a temporary folder left for the exit handlers is removed."""
    started = _kata("start", "rope", "--quiet")
    assert started.returncode == 0, started.stdout + started.stderr
    status = _kata("status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["sessions"][0]["kata"] == "rope", status.stdout
    listed = _kata("list", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["katas"]) >= 14
    unknown = _kata("show", "no-such-kata")
    assert unknown.returncode == 2 and "unknown kata" in unknown.stderr  # an error: its code, its message
    assert _kata("grde").returncode == 2  # a usage error
    code = ("import tempfile, sys; from grader.cli import app; "
            f"d = tempfile.TemporaryDirectory(dir={str(tmp_path)!r}); print(d.name, file=sys.stderr); "
            "sys.argv = ['kata', 'list']; app.run()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0 and "paged-kv" in done.stdout, done.stderr
    left = done.stderr.strip().splitlines()[0]
    assert left.startswith(str(tmp_path)) and not os.path.exists(left)  # its finalizer ran, as at a usual exit
