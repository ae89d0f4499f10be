"""kata history: your graded attempts (timed apart from untimed), or your mocks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from grader import textsafe
from grader.cli import mock_view, output
from grader.cli.common import JsonOpt, OptionalSlugArg, catalog
from grader.sessions import mock_rows
from grader.store import Store

LimitOpt = Annotated[int, typer.Option("--limit", min=1, help="Show at most this many attempts.")]
MockOpt = Annotated[bool, typer.Option("--mock", help="List your mock interviews, with their debriefs.")]
AllOpt = Annotated[bool, typer.Option("--all", help="Every kata, even during a session.")]


def history(slug: OptionalSlugArg = None, limit: LimitOpt = 50, mock: MockOpt = False,
            every_kata: AllOpt = False, as_json: JsonOpt = False) -> None:
    """List attempts: date, kind (timed, mock, or an untimed --file grade), score, levels
    passed, time used, hints, the file graded (--json adds the seed). Without a slug: the kata of your active
    session, or every kata when none is active (or with --all)."""
    cat = catalog()
    with Store() as store:
        kata_slug = cat.get(slug).slug if slug else None
        if kata_slug is None and not every_kata:
            active = store.active_sessions()
            if len({s.kata for s in active}) == 1:
                kata_slug = active[0].kata
        if mock:
            rows = mock_rows(store, cat, kata_slug)[:limit]
        else:
            attempts = store.attempts(kata_slug, limit=limit)
            modes = {s: store.session(s).mode for s in {a.session_id for a in attempts if a.session_id}}
    if mock:
        if as_json:
            output.print_json({"kata": kata_slug, "mocks": rows})
        else:
            mock_view.print_mock_list(rows)
        return
    kind = {None: "untimed"} | modes
    if as_json:
        output.print_json({"kata": kata_slug, "attempts": [
            {"id": a.id, "kata": a.kata, "graded_at": a.graded_at, "kind": kind[a.session_id],
             "timed": a.timed, "score": a.score, "passed": a.passed,
             "levels_passed": a.levels_passed, "num_levels": a.num_levels, "time_used_s": a.time_used_s,
             "time_limit_s": a.time_limit_s, "hints_used": a.hints_used, "seed": a.seed,
             "file": a.solution_path, "solution_sha256": a.source_sha256, "only_level": a.only_level}
            for a in attempts]})
        return
    if not attempts:
        output.console.print("no attempts yet; `kata start <slug>` then `kata grade`")
        return
    title = f"attempts at {kata_slug}" if kata_slug else "attempts"
    table = output.table(title)
    # The seed is in --json (and in each grade's replay line): the file graded matters more here.
    # Below 100 columns: the date without its year, shorter headers; only the file wraps.
    compact = output.is_compact()
    columns = ("date", "kind", "score", "levels", "used" if compact else "time used", "hints", "file")
    for col in columns if kata_slug else ("date", "kata", *columns[1:]):
        table.add_column(col, overflow="fold", no_wrap=col != "file")
    for a in attempts:
        used = "-" if a.time_used_s is None else output.fmt_duration(a.time_used_s)
        if a.time_used_s is not None and a.time_limit_s and a.time_used_s > a.time_limit_s:
            used = f"[red]{used}[/]"
        levels = f"{a.levels_passed}/{a.num_levels}" if a.only_level is None else f"L{a.only_level} only"
        cells = [kind[a.session_id], str(a.score), levels, used,
                 str(a.hints_used), textsafe.markup(_short(a.solution_path))]
        when = output.fmt_when(a.graded_at)
        table.add_row(when[5:] if compact else when, *([] if kata_slug else [a.kata]), *cells)
    output.console.print(table)
    if kata_slug and not slug:
        output.console.print("[dim]the kata of your active session; `kata history --all` shows every kata[/]")


def _short(path: str) -> str:
    """The file as the candidate knows it: its name and folder."""
    p = Path(path)
    return str(Path(p.parent.name) / p.name) if p.parent.name else p.name
