"""kata show: the statement (during a mock, only the levels revealed so far)."""

from __future__ import annotations

import typer
from rich.markdown import Markdown

from grader.cli import output
from grader.cli.common import OptionalSlugArg, catalog, kata_for
from grader.sessions import expire_if_due, revealed_levels
from grader.statement import render
from grader.store import Store


def show(slug: OptionalSlugArg = None) -> None:
    """Render a kata's statement: in a pager on a terminal ($PAGER, else less; PAGER=cat
    prints it). During a mock: the framing and the revealed levels only."""
    with Store() as store:
        kata, session = kata_for(slug, store, catalog())
        revealed = revealed_levels(store, expire_if_due(store, session) if session else None)
    if revealed:  # a mock: the Asks of the revealed levels
        output.print_long(Markdown(render(kata, revealed, clarifications=False)))
        return
    output.print_long(Markdown(render(kata)))  # practice: every Ask and clarification


def register(app: typer.Typer) -> None:
    app.command("show")(output.handle_errors(show))
