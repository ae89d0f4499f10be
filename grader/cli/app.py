"""The `kata` Typer app: the root only wires the commands together."""

from __future__ import annotations

from typing import Annotated

import typer

from grader.cli import output
from grader.cli.commands import (ask, bench, check, grade, hint, history, homework, init_cmd, list_cmd, mock,
                                 notebook, progress, repro, reset, reveal, show, start, status, stop, watch)

app = typer.Typer(
    name="kata",
    help="Timed interview katas for ML and LLM-systems engineers, graded by hidden property-based suites.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


@app.callback()
def root(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False) -> None:
    output.set_debug(debug)


for command in (init_cmd, list_cmd, show, start, mock, status, check, watch, grade, repro, hint, ask, stop, reveal, reset,
                history, progress, notebook, bench, homework):
    command.register(app)


def main() -> None:
    """Run the app; a usage error (an unknown option or command, a missing argument) is
    printed like every other error of kata: what is wrong, and a `next:` line."""
    import sys

    try:  # Typer vendors click; older Typers use click itself
        from typer._click import exceptions as click_exc
    except ImportError:  # pragma: no cover - depends on the Typer installed
        from click import exceptions as click_exc  # type: ignore[no-redef]
    try:
        code = app(standalone_mode=False, prog_name="kata")
    except click_exc.UsageError as exc:
        if not exc.format_message().strip():  # `kata` alone: the help was the answer
            sys.exit(output.EXIT_USAGE)
        ctx = exc.ctx
        where = ctx.command_path if ctx is not None else "kata"
        output.err_console.print(f"[bold red]error:[/] {output.escape(exc.format_message())}")
        output.err_console.print(f"[yellow]next:[/] {output.escape(where)} --help  "
                                 "(what it takes, with examples)")
        sys.exit(output.EXIT_USAGE)
    except click_exc.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except typer.Abort:  # Typer 0.29 keeps Abort in typer.exceptions, not in its vendored click
        output.err_console.print("aborted")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
