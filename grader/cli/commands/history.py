"""kata history: your graded attempts."""

from __future__ import annotations

from typing import Annotated

import typer

from grader.cli import output
from grader.cli.common import JsonOpt, OptionalSlugArg, catalog
from grader.store import Store

LimitOpt = Annotated[int, typer.Option("--limit", min=1, help="Show at most this many attempts.")]


def history(slug: OptionalSlugArg = None, limit: LimitOpt = 50, as_json: JsonOpt = False) -> None:
    """List attempts: date, kata, score, levels passed, time used, hints."""
    kata_slug = catalog().get(slug).slug if slug else None
    with Store() as store:
        attempts = store.attempts(kata_slug, limit=limit)
    if as_json:
        output.print_json({"attempts": [
            {"id": a.id, "kata": a.kata, "graded_at": a.graded_at, "score": a.score, "passed": a.passed,
             "levels_passed": a.levels_passed, "num_levels": a.num_levels, "time_used_s": a.time_used_s,
             "time_limit_s": a.time_limit_s, "hints_used": a.hints_used, "seed": a.seed,
             "solution_sha256": a.source_sha256} for a in attempts]})
        return
    if not attempts:
        output.console.print("no attempts yet; `kata start <slug>` then `kata grade`")
        return
    table = output.table("attempts")
    for col in ("date", "kata", "score", "levels", "time used", "hints", "seed"):
        table.add_column(col)
    for a in attempts:
        used = "untimed" if a.time_used_s is None else output.fmt_duration(a.time_used_s)
        if a.time_used_s is not None and a.time_limit_s and a.time_used_s > a.time_limit_s:
            used = f"[red]{used}[/]"
        table.add_row(output.fmt_when(a.graded_at), a.kata, str(a.score),
                      f"{a.levels_passed}/{a.num_levels}", used, str(a.hints_used), str(a.seed))
    output.console.print(table)


def register(app: typer.Typer) -> None:
    app.command("history")(output.handle_errors(history))
