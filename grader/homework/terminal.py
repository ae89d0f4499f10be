"""The review in the terminal: a roster that reads at 80 columns, then one summary line per
candidate and their first failures.

Everything that came from a bundle (names, file names, messages the solution raised) is put
on screen as ``rich.text.Text``, never parsed as markup: a name like
``[green]100 (verified)[/]`` prints as those characters and cannot paint a cell or hide a
MISMATCH; and through grader.textsafe.clean, so no escape sequence in it reaches the
coach's terminal (a title, a cleared screen, a hyperlink).
"""

from __future__ import annotations

from itertools import groupby

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from grader.homework.roster import candidate_summary
from grader.homework.row import RosterRow
from grader.homework.selfreport import duration
from grader.homework.spec import Homework
from grader.textsafe import clean

MAX_FAILURES_SHOWN = 3
MAX_LINE_CHARS = 160


def render_roster(console: Console, homework: Homework, rows: list[RosterRow], seed: int | None) -> None:
    console.print(Text.assemble((clean(homework.title), "bold"), f"  ({clean(homework.id)}; your seed {seed})"))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("candidate", overflow="fold", max_width=18)
    table.add_column("kata", overflow="fold", max_width=10)
    table.add_column("score", no_wrap=True)
    table.add_column("signal", no_wrap=True)
    table.add_column("claim", no_wrap=True)
    table.add_column("flags")  # one a line: several fit in 80 columns
    for row in rows:
        who = row.candidate if row.status != "rejected" else row.bundle
        table.add_row(Text(clean(who)), Text(clean(row.kata)), _score(row), Text(clean(_short_signal(row.signal))),
                      _claim(row), _flags(row))
    console.print(table)
    console.print(Text("score: your re-grading, levels passed (p: private tests). claim: the "
                       "candidate's own score, replayed with their seed when it differs from yours. "
                       "flags: COPY of the reference; UNMEASURED: similarity to the reference not "
                       "measured; FAST: a level passed in under 10 % of its minutes (self-reported); "
                       "SAME source as another candidate; UNCONTAINED.", style="dim"))
    for candidate, group in groupby(rows, key=lambda r: (r.candidate, r.bundle)):
        mine = list(group)
        who = candidate[0] if mine[0].status != "rejected" else "bundle"
        console.print(Text.assemble("\n", (clean(who), "bold"), f" ({clean(candidate[1])}): ",
                                    clean(candidate_summary(mine))))
        reported = [_self_reported(r) for r in mine if r.status != "rejected"]
        if reported:
            console.print(Text(clean("  self-reported: " + "; ".join(reported)), style="dim"))
        for row in mine:
            _failures(console, row)


def _score(row: RosterRow) -> Text:
    if row.status != "graded":
        return Text(row.status, style="bold red")
    text = Text(f"{row.score:>3}", style="bold green" if row.score == 100 else "bold red")
    text.append(f" {row.levels_passed}/{row.num_levels}")
    if row.private_total:
        text.append(f"\np {row.private_passed}/{row.private_total}",
                    style=None if row.private_passed == row.private_total else "red")
    return text


def _short_signal(signal: str) -> str:
    return signal.split(" (")[0] + (" (overtime)" if "overtime" in signal else "")


def _claim(row: RosterRow) -> Text:
    if row.mismatch:
        return Text("MISMATCH", style="bold red reverse")
    if row.claimed_score is None:
        return Text("-")
    if row.claim_note.startswith("claimed") and "reproduces" in row.claim_note:
        return Text(f"{row.claimed_score} seed≠", style="yellow")
    return Text(f"{row.claimed_score} ok")


def _self_reported(row: RosterRow) -> str:
    text = f"{row.kata} {duration(row.time_used_s)} of {duration(row.time_limit_s)}"
    grades = "grades not recorded" if row.num_grades is None else \
        f"{row.num_grades} grade{'' if row.num_grades == 1 else 's'}"
    text += f", {grades}, {row.hints_used} hints, {row.reveals} reveals"
    if row.reveals_before_start:
        text += f" ({row.reveals_before_start} before the session)"
    text += ", late" if row.late else ""
    return text + "; first passes: " + level_times(row)


def level_times(row: RosterRow) -> str:
    """"L1 at 9 s of 30 min (FAST), L2 at 40 min of 55 min, L3 not passed": each level's first
    pass from the session's start, against the minutes of the levels up to it."""
    if row.level_times is None:
        return "not in this bundle (made by an older kata)"
    return ", ".join(level_time(lv) + (" (FAST)" if lv["fast"] else "") for lv in row.level_times)


def level_time(lv: dict) -> str:
    if lv["passed_after_s"] is None:
        return f"L{lv['level']} not passed"
    return f"L{lv['level']} at {duration(lv['passed_after_s'])} of {lv['budget_min']} min"


def _flags(row: RosterRow) -> Text:
    shown = [flag for flag in row.flags if flag != "MISMATCH"]  # the claim column says MISMATCH
    return Text("\n".join(shown), style="bold magenta")


def _failures(console: Console, row: RosterRow) -> None:
    if row.problem and row.kata != "-":
        console.print(Text.assemble(("  ! ", "red"), clean(f"{row.kata}: {row.problem}")))
    if row.mismatch or "reproduces" in row.claim_note:
        console.print(Text.assemble(("  ! ", "red" if row.mismatch else "yellow"), clean(f"{row.kata}: {row.claim_note}")))
    for failure in row.failures[:MAX_FAILURES_SHOWN]:
        where = f" (private {failure['private_suite']})" if failure.get("private_suite") else ""
        console.print(Text.assemble(("  ✗ ", "red"),
                                    clean(f"{row.kata} L{failure['level']}{where}: {failure['description']}")))
        console.print(Padding(Text(clean(_first_line(failure["message"]))), (0, 0, 0, 4)))
    more = row.num_failures - min(len(row.failures), MAX_FAILURES_SHOWN)
    if more > 0:
        console.print(Text(clean(f"    … {more} more failing for {row.kata} (see --html or --json)"), style="dim"))


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    return first[:MAX_LINE_CHARS] + (" …" if len(lines) > 1 or len(first) > MAX_LINE_CHARS else "")
