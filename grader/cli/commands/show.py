"""kata show: the statement."""

from __future__ import annotations

import typer
from rich.markdown import Markdown

from grader.cli import output
from grader.cli.common import SlugArg, catalog


def show(slug: SlugArg) -> None:
    """Render a kata's statement."""
    kata = catalog().get(slug)
    output.console.print(Markdown(kata.statement_path.read_text(encoding="utf-8")))


def register(app: typer.Typer) -> None:
    app.command("show")(output.handle_errors(show))
