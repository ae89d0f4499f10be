"""The `kata` Typer app: the root only wires the commands together."""

from __future__ import annotations

from typing import Annotated

import typer

from grader.cli import output
from grader.cli.commands import (bench, check, grade, hint, history, homework, init_cmd, list_cmd, mock,
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


for command in (init_cmd, list_cmd, show, start, mock, status, check, watch, grade, repro, hint, stop, reveal, reset,
                history, progress, notebook, bench, homework):
    command.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
