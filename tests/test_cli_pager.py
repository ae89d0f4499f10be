"""`kata start` and `kata show` page their statement on a terminal, as `kata reveal` pages the
reference (issue 37, item 11): at 80x40 a statement is about 200 lines, and its first screen
scrolled away. $PAGER, else less with -FRX (colours, no paging for text that fits, the text
left on screen); PAGER=cat prints. Piped or redirected, nothing pages.
"""

from __future__ import annotations

import io
import os
import pty
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text
from typer.testing import CliRunner

from grader.cli import output
from grader.cli.app import app
from tests.kata_testing import REPO_ROOT

runner = CliRunner()
STATEMENT_LINE = "Paged KV-cache block allocator"  # the statement's title


@pytest.fixture
def terminal(monkeypatch) -> list:
    """The console a terminal; output.page records what it was given and prints it."""
    screen = Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None, record=True)
    paged: list = []
    monkeypatch.setattr(output, "console", screen)
    monkeypatch.setattr(output, "page", lambda renderable: (paged.append(renderable), screen.print(renderable)))
    return paged


@pytest.mark.parametrize("argv", [["start", "paged-kv"], ["show", "paged-kv"]])
def test_the_statement_is_paged_on_a_terminal(argv, terminal):
    result = runner.invoke(app, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert len(terminal) == 1  # the statement, once; start's next steps are printed after it
    shown = output.console.export_text()
    assert STATEMENT_LINE in shown
    if argv[0] == "start":
        assert shown.index("started") > shown.index(STATEMENT_LINE)


@pytest.mark.parametrize("argv", [["start", "paged-kv"], ["show", "paged-kv"]])
def test_nothing_is_paged_when_piped(argv, monkeypatch):
    monkeypatch.setattr(output, "page", lambda renderable: pytest.fail("paged into a pipe"))
    result = runner.invoke(app, argv, catch_exceptions=False)
    assert result.exit_code == 0 and STATEMENT_LINE in result.output


def test_the_pager_is_less_with_colours_that_quits_on_a_short_text(monkeypatch):
    """pydoc picks $PAGER, else less; kata sets LESS unless the user did."""
    import pydoc

    shown: list = []
    monkeypatch.setattr(pydoc, "pager", lambda text: shown.append((text, os.environ.get("LESS"))))
    monkeypatch.setattr(output, "console", Console(file=io.StringIO(), force_terminal=True, width=80))
    monkeypatch.delenv("LESS", raising=False)
    output.page(Text("in colour", style="bold red"))
    monkeypatch.setenv("LESS", "-S")
    output.page(Text("theirs"))
    assert shown[0][1] == "-FRX" and "\x1b[" in shown[0][0] and "in colour" in shown[0][0]
    assert shown[1][1] == "-S"


def _run_on_a_pty(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    """`kata ARGV` with stdin, stdout and stderr a pseudo-terminal of 80x40; what it showed."""
    import fcntl
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 80, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "grader.cli.app", *argv], stdin=slave, stdout=slave,
                            stderr=slave, env=env, cwd=cwd, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_show_on_a_real_terminal_goes_through_PAGER_and_a_pipe_does_not(tmp_path):
    paged = tmp_path / "paged.txt"
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "LESS", "MANPAGER", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")}
    env.update(PAGER=f"cat > {paged}", TERM="xterm-256color", PYTHONPATH=str(REPO_ROOT))
    on_screen = _run_on_a_pty(["show", "paged-kv"], env, tmp_path)
    assert STATEMENT_LINE in paged.read_text(encoding="utf-8") and STATEMENT_LINE not in on_screen
    assert "\x1b[" in paged.read_text(encoding="utf-8")  # the pager got the colours

    paged.unlink()
    piped = subprocess.run([sys.executable, "-m", "grader.cli.app", "show", "paged-kv"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and STATEMENT_LINE in piped.stdout and not paged.exists()


def test_pager_cat_prints_on_a_terminal(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "MANPAGER")}
    env.update(PAGER="cat", TERM="xterm-256color", PYTHONPATH=str(REPO_ROOT))
    on_screen = _run_on_a_pty(["show", "paged-kv"], env, tmp_path)
    assert STATEMENT_LINE in on_screen
