"""kata hint: the next staged hint for the level you are stuck on (counted).

The level is the lowest one failing in your most recent `kata check` or `kata grade` of this
session (`--level N` picks one); during a mock, only a revealed level."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.panel import Panel

from grader.catalog import Kata, Level
from grader.cli import output
from grader.cli.common import OptionalSlugArg, kata_for
from grader.errors import KataError
from grader.sessions import expire_if_due, level_clocks, revealed_levels
from grader.store import Session, Store

LevelOpt = Annotated[Optional[int], typer.Option(
    "--level", min=1, help="A hint for this level (default: the lowest failing in your last check or grade).")]


def hint(slug: OptionalSlugArg = None, level: LevelOpt = None) -> None:
    """Show the next hint for the level you are on. Hints used are recorded."""
    with Store() as store:
        kata, session = kata_for(slug, store)
        session = expire_if_due(store, session) if session else None
        if session is not None and session.status != "active":
            session = None
        revealed = revealed_levels(store, session)
        if level is not None:
            target: Level | None = _chosen_level(kata, level, revealed)
            why = "as asked"
        else:
            target, why = target_level(kata, store, session)
        if target is None:
            output.console.print(f"your last attempt at {kata.slug} passed every level; no hint needed")
            return
        session_id = session.id if session else None
        stage = store.hints_shown(kata.slug, session_id, target.level)
        if stage >= len(target.hints):
            output.console.print(f"no more hints for level {target.level} ({escape(target.name)}): "
                                 f"all {len(target.hints)} were shown. `kata check` runs the examples; "
                                 f"`kata reveal {kata.slug}` shows the reference once the session is over")
            return
        store.record_hint(kata.slug, target.level, stage, session_id)
        total = store.hints_shown(kata.slug, session_id)
    output.console.print(Panel(escape(target.hints[stage]),
                               title=f"hint {stage + 1}/{len(target.hints)} for level {target.level}: "
                                     f"{escape(target.name)}",
                               title_align="left", expand=False))
    output.console.print(f"[dim]level {target.level}: {escape(why)}. Hints used "
                         f"{'in this session' if session else 'outside a session'}: {total}[/]")


def _chosen_level(kata: Kata, number: int, revealed: set[int] | None) -> Level:
    chosen = kata.level(number)
    if chosen is None:
        raise KataError(f"{kata.slug} has levels 1 to {len(kata.levels)}, not {number}",
                        hint=f"`kata hint --level 1` ... `--level {len(kata.levels)}`")
    if revealed is not None and number not in revealed:
        raise KataError(f"level {number} is not revealed yet in this mock",
                        hint=f"hints exist for the revealed levels: {', '.join(map(str, sorted(revealed)))}")
    return chosen


def target_level(kata: Kata, store: Store, session: Session | None) -> tuple[Level | None, str]:
    """The level to hint at, and why: the lowest failing in the most recent check or grade of
    the session (of the kata's latest attempt outside one); else the lowest not passed yet."""
    revealed = revealed_levels(store, session)
    allowed = [lv for lv in kata.levels if revealed is None or lv.level in revealed]
    runs = []
    attempts = store.attempts_for_session(session.id) if session else store.attempts(kata.slug, limit=1)
    if attempts:
        card = attempts[0].scorecard(store)
        runs.append((attempts[0].graded_at, "grade", {lv["level"]: lv["passed"] for lv in card["levels"]}))
    check = store.latest_check(kata.slug, session.id if session else None)
    if check is not None:
        runs.append((check[0], "check", check[1]))
    if runs:
        at, kind, passed = max(runs, key=lambda run: run[0])
        failing = next((lv for lv in allowed if passed.get(lv.level) is False), None)
        if failing is not None:
            return failing, f"the lowest level failing in your last {kind}"
    if session is not None:
        clocks = {c.level: c for c in level_clocks(store, session, kata)}
        open_level = next((lv for lv in allowed if clocks.get(lv.level) and clocks[lv.level].passed_at is None), None)
        return open_level, "the lowest level you have not passed yet"
    if attempts:
        passed_levels = {lv["level"] for lv in card["levels"] if lv["passed"]}
        return next((lv for lv in allowed if lv.level not in passed_levels), None), "the lowest level your last grade did not pass"
    return allowed[0], "nothing graded or checked yet"
