"""The `kata` Typer app: the root only wires the commands, each under its mock policy
(grader/mock.py's COMMAND_POLICY) and the one error path (output.handle_errors).

Commands are deferred entries, (module, function), as hypothesis's pretty-printer keys its
deferred types: `kata list` imports grader.cli.commands.list_cmd and no other command's
module (about 0.15 s of CPU less at every start), so a command that grades nothing starts
without the engine, torch or pytest (tests/test_cli_startup.py). `kata --help`, `kata` alone
and a mistyped command build the whole app, as does the module's `app` (what tests drive).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import inspect
import os
import sys
import threading
from typing import Annotated, Any, Callable

import typer
from rich.markup import escape

from grader.cli import output
from grader.cli.common import catalog
from grader.mock import DuringMock, command_policy, refuse_during_mock
from grader.sessions import running_mock
from grader.store import Store

APP_HELP = "Timed interview katas for ML and LLM-systems engineers, graded by hidden property-based suites."

# Every command as typed after `kata`, in the order `kata --help` lists them ("homework new"
# is `new` of the homework group): the module under grader.cli.commands and its function.
# Each is wired by `wired`: nothing else registers a command.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("init_cmd", "init"), "list": ("list_cmd", "list_katas"), "show": ("show", "show"),
    "start": ("start", "start"), "mock": ("mock", "mock"), "status": ("status", "status"),
    "check": ("check", "check"), "watch": ("watch", "watch"), "grade": ("grade", "grade"),
    "repro": ("repro", "repro"), "hint": ("hint", "hint"), "ask": ("ask", "ask"), "stop": ("stop", "stop"),
    "reveal": ("reveal", "reveal"), "reset": ("reset", "reset"), "history": ("history", "history"),
    "progress": ("progress", "progress"), "notebook": ("notebook", "notebook"), "bench": ("bench", "bench"),
    "warm": ("warm", "warm"),
    "homework new": ("homework_assign", "new"), "homework invite": ("homework_assign", "invite"),
    "homework start": ("homework", "start"), "homework status": ("homework", "status"),
    "homework submit": ("homework", "submit"), "homework review": ("homework_review", "review"),
    "homework grade-one": ("homework_review", "grade_one"), "homework assemble": ("homework_review", "assemble"),
}
# A group's help, shown by `kata --help` beside its name.
GROUPS = {"homework": "Coach homework: new, invite, start, status, submit, review (grade-one and assemble for "
                      "a cluster)."}


def command_function(command: str) -> Callable[..., Any]:
    """The function `kata <command>` runs, its module imported now."""
    module, function = COMMANDS[command]
    return getattr(importlib.import_module(f"grader.cli.commands.{module}"), function)


def wired(command: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as `kata <command>` runs it: under its mock policy (grader/mock.py; a command
    without one fails here, at import) and with the one error path (output.handle_errors)."""
    policy = command_policy(command)
    if policy.during_mock is DuringMock.REFUSED:
        fn = _refused_during_mock(fn, policy.would_show)
    runs = output.handle_errors(fn)
    runs.mock_policy = policy  # type: ignore[attr-defined]  # what tests/test_command_policy.py reads
    return runs


def _refused_during_mock(fn: Callable[..., Any], what: str) -> Callable[..., Any]:
    """`fn`, refused while a mock of the kata named by its `slug` argument runs."""
    signature = inspect.signature(fn)
    slug_param = signature.parameters.get("slug")
    if slug_param is None or slug_param.default is not inspect.Parameter.empty:
        raise TypeError(f"{fn.__name__} is refused during a mock, so it must take the kata's slug")

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        slug = signature.bind(*args, **kwargs).arguments["slug"]
        with Store() as store:
            if running_mock(store, None) is not None:  # no mock, no catalog lookup
                refuse_during_mock(store, catalog().get(slug).slug, what)
        return fn(*args, **kwargs)

    return guarded


def root(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False) -> None:
    output.set_debug(debug)


def build_app(commands: list[str] | None = None) -> typer.Typer:
    """The app with `commands` (None: every command), each wired."""
    built = typer.Typer(name="kata", help=APP_HELP, no_args_is_help=True, add_completion=False,
                        pretty_exceptions_enable=False, rich_markup_mode="rich")
    built.callback()(root)
    groups: dict[str, typer.Typer] = {}
    for name in COMMANDS if commands is None else commands:
        group, _, sub = name.rpartition(" ")
        if group and group not in groups:
            groups[group] = typer.Typer(help=GROUPS[group], no_args_is_help=True)
        (groups[group] if group else built).command(sub)(wired(name, command_function(name)))
    for name, group_app in groups.items():
        built.add_typer(group_app, name=name)
    return built


def commands_for(argv: list[str]) -> list[str] | None:
    """The commands an invocation needs wired: the one it names (a group's: all of the
    group's), or None (every command) for `--help`, no command, or a name kata lacks, whose
    answers list them all."""
    words = [arg for arg in argv if not arg.startswith("-")]
    if not words or "--help" in argv[: argv.index(words[0])]:
        return None
    named = [c for c in COMMANDS if c == words[0] or c.startswith(words[0] + " ")]
    return named or None


def __getattr__(name: str) -> Any:
    """`app`: every command wired, built on first use (what tests drive with CliRunner)."""
    if name == "app":
        globals()["app"] = full = build_app()
        return full
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Run the app; a usage error (an unknown option or command, a missing argument) is
    printed like every other error of kata: what is wrong, and a `next:` line."""
    try:  # Typer vendors click; older Typers use click itself
        from typer._click import exceptions as click_exc
    except ImportError:  # pragma: no cover - depends on the Typer installed
        from click import exceptions as click_exc  # type: ignore[no-redef]
    try:
        # The whole app when this process built it already (`app`), else the command's own.
        runs = globals().get("app") or build_app(commands_for(sys.argv[1:]))
        code = runs(standalone_mode=False, prog_name="kata")
    except click_exc.UsageError as exc:
        if not exc.format_message().strip():  # `kata` alone: the help was the answer
            sys.exit(output.EXIT_USAGE)
        ctx = exc.ctx
        where = ctx.command_path if ctx is not None else "kata"
        output.err_console.print(f"[bold red]error:[/] {escape(exc.format_message())}")
        output.err_console.print(f"[yellow]next:[/] {escape(where)} --help  "
                                 "(what it takes, with examples)")
        sys.exit(output.EXIT_USAGE)
    except click_exc.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except typer.Abort:  # Typer 0.29 keeps Abort in typer.exceptions, not in its vendored click
        output.err_console.print("aborted")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def run() -> None:
    """The `kata` command (the console script, `python -m grader.cli.app`): main(), then an
    exit without the interpreter's teardown of every module and object, which took 30-60 ms
    of each command on the CI machine, once the output is out and the exit handlers have
    run. Nothing is lost: the store commits each write as it makes it, and files and
    temporary folders are closed or removed by then (their finalizers are exit handlers).
    With a thread the usual exit would wait for, or output that cannot be flushed (a closed
    pipe), the exit is the usual one."""
    code: str | int | None = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, (str, int)) else 1 if exc.code is not None else 0
    waited_for = [t for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
    if not isinstance(code, int) or waited_for or not _flushed():
        sys.exit(code)
    atexit._run_exitfuncs()
    if not _flushed():
        sys.exit(code)
    os._exit(code)


def _flushed() -> bool:
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a closed pipe, a closed stream
        return False
    return True


if __name__ == "__main__":
    run()
