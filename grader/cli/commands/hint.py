"""kata hint: the next staged hint for the lowest level you have not passed (counted)."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.panel import Panel

from grader.catalog import Kata
from grader.cli import output
from grader.cli.common import OptionalSlugArg, kata_for
from grader.store import Session, Store


def hint(slug: OptionalSlugArg = None) -> None:
    """Show the next hint for the lowest level not yet passed. Hints used are recorded."""
    with Store() as store:
        kata, session = kata_for(slug, store)
        level = lowest_unpassed_level(kata, store, session)
        if level is None:
            output.console.print(f"your last attempt at {kata.slug} passed every level; no hint needed")
            return
        session_id = session.id if session else None
        stage = store.hints_shown(kata.slug, session_id, level.level)
        if stage >= len(level.hints):
            output.console.print(f"no more hints for level {level.level} ({escape(level.name)}): "
                                 f"all {len(level.hints)} were shown. `kata check` runs the examples; "
                                 f"`kata reveal {kata.slug}` shows the reference after your attempt")
            return
        store.record_hint(kata.slug, level.level, stage, session_id)
        total = store.hints_shown(kata.slug, session_id)
    output.console.print(Panel(escape(level.hints[stage]),
                               title=f"hint {stage + 1}/{len(level.hints)} for level {level.level}: {escape(level.name)}",
                               title_align="left", expand=False))
    output.console.print(f"[dim]hints used {'in this session' if session else 'outside a session'}: {total}[/]")


def lowest_unpassed_level(kata: Kata, store: Store, session: Session | None):
    """The lowest level the latest relevant attempt did not pass (level 1 if none)."""
    attempts = store.attempts_for_session(session.id) if session else store.attempts(kata.slug, limit=1)
    if not attempts:
        return kata.levels[0]
    card = attempts[0].scorecard(store)
    passed = {lv["level"] for lv in card["levels"] if lv["passed"]}
    return next((lv for lv in kata.levels if lv.level not in passed), None)


def register(app: typer.Typer) -> None:
    app.command("hint")(output.handle_errors(hint))
