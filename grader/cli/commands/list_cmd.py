"""kata list: the catalog with your best scores (your own timed attempts; untimed apart)."""

from __future__ import annotations

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
    output.console.print(_table(rows, compact=output.is_compact()))
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


def _table(rows: list[dict], compact: bool) -> Table:
    """Below 100 columns: no borders, no levels or difficulty column (`kata show` has them),
    short headers and the date without the time, so that the title (the only column that
    wraps) keeps nearly half the width."""
    columns = [("slug", "slug"), ("title", "title"), ("levels", "levels"), ("minutes", "minutes"),
               ("difficulty", "difficulty"), ("best", "best"), ("untimed", "untimed"), ("last", "last attempt")]
    table = output.table("katas")
    if compact:
        columns = [("slug", "slug"), ("title", "title"), ("minutes", "min"), ("best", "best"),
                   ("untimed", "untimed"), ("last", "last")]
    for key, header in columns:
        table.add_column(header, no_wrap=key != "title", ratio=1 if key == "title" else None)
    for r in rows:
        last = output.fmt_when(r["last_attempt"])
        cells = {"slug": r["slug"], "title": escape(r["title"]), "levels": str(r["levels"]),
                 "minutes": str(r["minutes"]), "difficulty": r["difficulty"],
                 "best": "-" if r["best_score"] is None else str(r["best_score"]),
                 "untimed": "-" if r["best_untimed"] is None else str(r["best_untimed"]),
                 "last": last.split(" ")[0] if compact else last}
        table.add_row(*(cells[key] for key, _ in columns))
    return table
