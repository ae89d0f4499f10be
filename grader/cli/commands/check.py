"""kata check: run the visible examples against your solution (not graded; during a mock,
only the revealed levels' examples). Which levels passed is remembered for `kata hint`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from grader.cli import output
from grader.cli.common import JsonOpt, OptionalSlugArg, catalog, kata_for, kata_for_file
from grader.grading import check as run_examples
from grader.sessions import expire_if_due, revealed_levels
from grader.store import Store
from grader.workspace import solution_path

FileOpt = Annotated[Optional[Path], typer.Option("--file", "-f", help="Check this file instead.")]


def check(slug: OptionalSlugArg = None, file: FileOpt = None, as_json: JsonOpt = False) -> None:
    """Run the kata's visible examples against your solution; fast, and not graded.

    During a mock, only the revealed levels' examples run."""
    cat = catalog()
    with Store() as store:
        if file is not None and slug is None:
            kata, session = kata_for_file(file, cat), None
        else:
            kata, session = kata_for(slug, store, cat)
        session = expire_if_due(store, session or store.active_session(kata.slug))
        levels = revealed_levels(store, session if session and session.status == "active" else None)
        path = file or (Path(session.solution_path) if session else solution_path(kata))
        card = run_examples(kata, path, levels=levels).to_dict()
        if session is not None and session.status == "active" and \
                path.resolve() == Path(session.solution_path).resolve():
            store.record_check(kata.slug, session.id, {lv["level"]: lv["passed"] for lv in card["levels"]})
    if as_json:
        output.print_json(card)
    else:
        output.console.print(f"visible examples of {kata.slug} on [bold]{escape(str(path))}[/]:")
        if card.get("import_error"):
            output.console.print(f"[red]✗[/] {escape(card['import_error'])}")
        else:
            for test in card["tests"]:
                mark = "[green]✓[/]" if test["passed"] else "[red]✗[/]"
                output.console.print(f"{mark} L{test['level']} {escape(test['description'])}")
                if not test["passed"]:
                    output.console.print(f"    {escape(test['message'])}")
                    for key in ("input", "expected", "got", "where", "note"):
                        if test["details"].get(key):
                            output.console.print(f"    [cyan]{key}:[/] {escape(str(test['details'][key]))}")
        passed = sum(t["passed"] for t in card["tests"])
        output.console.print(f"{passed}/{len(card['tests'])} examples pass. The hidden suite checks much "
                             "more: `kata grade` when you are ready.")
    raise typer.Exit(output.EXIT_OK if card["passed"] else output.EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.command("check")(output.handle_errors(check))
