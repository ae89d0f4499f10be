"""The one output layer: the consoles, error exits, and the primitives every command prints
with (durations, paths, tables sized to the console, the pager). What a command draws lives
beside it or in its own renderable (scorecard.py, mock_view.py)."""

from __future__ import annotations

import functools
import json
import time
import traceback
from pathlib import Path
from typing import Any, Callable, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.progress_bar import ProgressBar
from rich.table import Table

from grader import textsafe
from grader.errors import KataError

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_state = {"debug": False}


def set_debug(value: bool) -> None:
    _state["debug"] = value


def fail(message: str, hint: str | None = None) -> NoReturn:
    """Print an actionable error and exit with code 2."""
    # A message may quote a candidate's file (an import error, a bundle's names).
    err_console.print(f"[bold red]error:[/] {textsafe.markup(message)}")
    err_console.print(f"[yellow]next:[/] {textsafe.markup(hint or _help_hint())}")
    raise typer.Exit(EXIT_USAGE)


def command_name() -> str | None:
    """The running subcommand as typed after `kata` ("grade", "homework review"), or None."""
    try:  # Typer vendors click; older Typers use click itself
        from typer._click.globals import get_current_context
    except ImportError:
        try:
            from click import get_current_context  # type: ignore[no-redef]  # the same function
        except ImportError:
            return None
    names = []
    ctx = get_current_context(silent=True)
    while ctx is not None and ctx.parent is not None:  # the root's name is the program's
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names)) or None


def _help_hint() -> str:
    """The next step when an error names none: the command's own help."""
    command = command_name()
    return f"`kata {command + ' ' if command else ''}--help` says what it takes"


def handle_errors(fn: Callable) -> Callable:
    """Turn domain errors into messages and exit code 2; tracebacks only under --debug."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KataError as exc:
            if _state["debug"]:
                err_console.print(textsafe.text(traceback.format_exc()))
            fail(exc.message, exc.hint)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:  # the edge of the program
            if _state["debug"]:
                raise
            fail(f"internal error: {type(exc).__name__}: {exc}",
                 "this is a bug in kata; run again with `kata --debug ...` and report the traceback")

    wrapper.__doc__ = reflowed(fn.__doc__)
    return wrapper


def reflowed(doc: str | None) -> str | None:
    """A docstring with each paragraph on one line: Typer's help keeps single line breaks,
    which at 80 columns leave a stub line after every source line."""
    if not doc:
        return doc
    import inspect

    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def print_json(data: Any) -> None:
    # Plain print: rich would wrap long lines and break the JSON for scripts.
    print(json.dumps(data, indent=2, default=str))


def fmt_duration(seconds: float | None) -> str:
    """Unambiguous: "20 s", "12 min 5 s", "1 h 3 min" (never "0:20")."""
    if seconds is None:
        return "-"
    sign = "-" if seconds < 0 else ""
    seconds = abs(int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{sign}{h} h {m} min"
    if m:
        return f"{sign}{m} min {s} s" if s else f"{sign}{m} min"
    return f"{sign}{s} s"


def shown_path(path: Path | str) -> str:
    """A path as short as it can be said: relative to the current folder when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def fmt_when(timestamp: float | None) -> str:
    if not timestamp:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


COMPACT_BELOW_COLUMNS = 100


def is_compact() -> bool:
    """Below 100 columns, tables drop their borders and shorten what they can."""
    return console.width < COMPACT_BELOW_COLUMNS


def table(title: str | None = None) -> Table:
    """A table for this console's width: boxed when wide, borderless when compact (the
    borders cost a column each, and a wrapped title column needs them)."""
    if is_compact():
        return Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    return Table(title=title)


def time_bar(elapsed_s: float, total_s: float) -> ProgressBar:
    over = elapsed_s > total_s
    return ProgressBar(total=total_s, completed=min(elapsed_s, total_s), width=12 if is_compact() else 30,
                       complete_style="red" if over else "green",
                       finished_style="red" if over else "green")


# less: -R shows colours, -F quits at once when the text fits on one screen, -X leaves what
# was read on the screen after quitting (and keeps old lesses from clearing it with -F).
LESS_FLAGS = "-FRX"


def page(renderable: Any) -> None:
    """Show `renderable` in the pager ($PAGER, else less) with its colours. pydoc picks the
    pager, and prints instead when stdin or stdout is not a terminal."""
    import os

    os.environ.setdefault("LESS", LESS_FLAGS)  # a LESS the user set is theirs to keep
    with console.pager(styles=True):
        console.print(renderable)


def print_long(renderable: Any) -> None:
    """A long text (a statement, a reference): paged on a terminal, so that at 80x40 its
    first screen is not scrolled away; printed when piped or redirected (`| tail`, scripts)."""
    if console.is_terminal:
        page(renderable)
    else:
        console.print(renderable)
