"""kata show: the statement as the candidate may see it now.

- In a mock: the Ask of each revealed level (clarifications come through `kata ask`; the
  Spec opens when the mock is over).
- Otherwise (practice): every level's Ask and clarifications, and the Spec of the levels
  the active session has passed (open without cost). `--spec` opens the others too and is
  recorded, as a reveal of each such level (an event 'spec' in the history), unless they
  were revealed in a mock that is over.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markdown import Markdown

from grader.catalog import Kata
from grader.cli import output
from grader.cli.common import OptionalSlugArg, catalog, kata_for
from grader.errors import KataError
from grader.sessions import expire_if_due, revealed_levels
from grader.statement import render
from grader.store import Session, Store

SpecOpt = Annotated[bool, typer.Option(
    "--spec", help="Also show the Spec (the editorial: every rule, formulas, worked examples). "
                   "Recorded for each level not passed yet.")]
LevelOpt = Annotated[Optional[int], typer.Option(
    "--level", help="With --spec: this level's Spec only.", show_default=False)]


def show(slug: OptionalSlugArg = None, spec: SpecOpt = False, level: LevelOpt = None) -> None:
    """Render a kata's statement: in a pager on a terminal ($PAGER, else less; PAGER=cat
    prints it). During a mock: the revealed levels' Asks only."""
    with Store() as store:
        kata, session = kata_for(slug, store, catalog())
        session = expire_if_due(store, session) if session else None
        revealed = revealed_levels(store, session)
        if level is not None and not (spec and any(lv.level == level for lv in kata.levels)):
            raise KataError(f"--level {level}: " + ("it goes with --spec" if not spec else
                                                    f"{kata.slug} has levels 1..{len(kata.levels)}"),
                            hint=f"`kata show {kata.slug} --spec --level N` shows level N's Spec")
        if revealed:  # a mock
            if spec:
                raise KataError("the Spec opens when the mock is over",
                                hint="`kata ask \"...\"` answers a clarifying question; `kata mock --stop` ends the mock")
            text = render(kata, revealed, clarifications=False)
        else:
            text = render(kata, spec_levels=_open_specs(store, kata, session, spec, level))
    output.print_long(Markdown(text))


def _open_specs(store: Store, kata: Kata, session: Session | None, spec: bool,
                level: int | None) -> set[int]:
    """The levels whose Spec shows without cost: those the active (or else the latest)
    session passed, and every level a mock that is over revealed; with --spec also the ones
    asked for, each recorded when it was not open."""
    free: set[int] = set()
    latest = session or store.latest_session(kata.slug)
    if latest is not None:
        rows = store.session_levels(latest.id)
        free = {row.level for row in rows if row.passed_at is not None}
        if latest.is_mock and latest.status == "ended":
            free |= {row.level for row in rows if row.revealed_at is not None}
    if not spec:
        return free
    wanted = {level} if level is not None else {lv.level for lv in kata.levels}
    for number in sorted(wanted - free):
        store.record_event(kata.slug, "spec", session.id if session else None, level=number)
    return free | wanted
