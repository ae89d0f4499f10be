"""kata list: the catalog with your best scores (your own timed attempts; untimed apart)."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from grader.cli import output
from grader.cli.common import JsonOpt, catalog
from grader.store import Store


def list_katas(as_json: JsonOpt = False) -> None:
    """List the katas: slug, title, levels, minutes, difficulty, your best timed score, the
    best untimed `--file` grade, your last attempt."""
    cat = catalog()
    rows = []
    with Store() as store:
        for kata in cat.katas.values():
            last = store.attempts(kata.slug, limit=1, timed=True)
            rows.append({"slug": kata.slug, "title": kata.title, "levels": len(kata.levels),
                         "minutes": kata.minutes, "difficulty": kata.difficulty,
                         # A mock's early grades score only its revealed levels: not a kata's best.
                         "best_score": store.best_score(kata.slug, timed=True, num_levels=len(kata.levels)),
                         "best_untimed": store.best_score(kata.slug, timed=False),
                         "last_attempt": last[0].graded_at if last else None})
    if as_json:
        output.print_json({"katas": rows, "problems": [p.message for p in cat.problems]})
        return
    table = Table(title="katas")
    for col in ("slug", "title", "levels", "minutes", "difficulty", "best", "untimed", "last attempt"):
        table.add_column(col)
    for r in rows:
        best = "-" if r["best_score"] is None else str(r["best_score"])
        untimed = "-" if r["best_untimed"] is None else str(r["best_untimed"])
        table.add_row(r["slug"], escape(r["title"]), str(r["levels"]), str(r["minutes"]),
                      r["difficulty"], best, untimed, output.fmt_when(r["last_attempt"]))
    output.console.print(table)
    output.console.print("[dim]best: your own timed attempts (sessions and mocks) that graded every "
                         "level; untimed: `kata grade --file` runs[/]")
    for problem in cat.problems:
        output.err_console.print(f"[yellow]skipped a kata:[/] {escape(problem.message)}"
                                 + (f" ({escape(problem.hint)})" if problem.hint else ""))
    fresh = [r["slug"] for r in rows if r["last_attempt"] is None]
    if fresh:
        suggestion = "paged-kv" if "paged-kv" in fresh else fresh[0]
        output.console.print(f"start one with [bold]kata start {suggestion}[/], or let "
                             "[bold]kata mock[/] pick one for an interview")


def register(app: typer.Typer) -> None:
    app.command("list")(output.handle_errors(list_katas))
