"""How a mock interview reads in the terminal: the running mock, a level as it is revealed,
the follow-up questions, their answer keys, and the debrief. Only revealed levels are named."""

from __future__ import annotations

from typing import Any

from rich.markdown import Markdown
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from grader import textsafe
from grader.cli import output
from grader.mock import ANSWERS_FORMAT

console = output.console


def level_line(entry: dict[str, Any]) -> str:
    """One level of a pacing list (grader.sessions.pacing) as plain words."""
    if not entry["revealed"]:
        return f"level {entry['level']}: not revealed yet"
    used = entry["used_s"]
    if entry["passed"]:
        state = f"passed in {output.fmt_duration(used)} (~{entry['minutes']} min)"
    elif used is None:
        state = f"waits for the levels before it (~{entry['minutes']} min)"
    else:
        state = f"{output.fmt_duration(used)} of ~{entry['minutes']} min"
        if entry["over_pace"]:
            state += " [bold red]over pace[/]"
    return f"level {entry['level']} ({escape(entry['name'])}): {state}"


def print_pacing(levels: list[dict[str, Any]], indent: str = "  ") -> None:
    for entry in levels:  # a wrapped line stays under its level, not at column 0
        console.print(Padding(level_line(entry), (0, 0, 0, len(indent))))


def print_revealed(level: int, markdown: str) -> None:
    console.print(Text(f"\nThe interviewer adds level {level}:", style="bold magenta"))
    console.print(Markdown(markdown))
    console.print(f"its clock starts now; `kata grade` grades levels 1-{level}")


def print_questions(questions: list[dict[str, Any]], answers_hint: bool) -> None:
    if not questions:
        console.print("no follow-up question fits the levels you reached: none is asked")
        return
    console.print(Text(f"\nThe interviewer's follow-up question{'s' if len(questions) > 1 else ''}:",
                       style="bold magenta"))
    console.print(_numbered([(f"{i}.", q["question"]) for i, q in enumerate(questions, start=1)]))
    if answers_hint:
        console.print("\nanswer them in a terminal with [bold]kata mock[/], or write a file and run "
                      "[bold]kata mock --answers FILE[/]:")
        console.print(Text(ANSWERS_FORMAT, style="dim"))


def print_answer_key(questions: list[dict[str, Any]], answers: list[str],
                     marks: list[list[int]] | None, first_number: int = 1) -> None:
    for i, q in enumerate(questions, start=first_number):
        console.print(Text(f"\n{i}. {q['question']}", style="bold"))
        console.print(Text("your answer: ", style="cyan") + textsafe.text(_clip(answers[i - first_number])))
        console.print(Text("what an interviewer listens for:", style="cyan"))
        covered = set(marks[i - first_number]) if marks else set()
        console.print(_numbered([(("✓ " if n in covered else "  ") + f"{n}.", point)
                                 for n, point in enumerate(q["points"], start=1)]))


def _numbered(items: list[tuple[str, str]]) -> Table:
    """A list whose wrapped lines stay indented under their text, not under the number."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, justify="right", style="green")
    grid.add_column(overflow="fold")
    for label, text in items:
        grid.add_row("  " + label, Text(text))
    return grid


def _clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def print_debrief(debrief: dict[str, Any]) -> None:
    reason = {"passed": "every level passed", "stopped": "stopped", "time": "the time ran out"}.get(
        debrief["end_reason"] or "", debrief["end_reason"] or "")
    console.print(Text(f"\nDebrief: mock of {debrief['kata']}", style="bold") +
                  Text(f", {output.fmt_duration(debrief['time_used_s'])} of {debrief['minutes']} min"
                       f" ({reason})"))
    table = Table(show_edge=False, pad_edge=False)
    for col in ("level", "time used", "grades", "hints"):
        table.add_column(col)
    for lv in debrief["levels"]:
        if not lv["revealed"]:
            table.add_row(str(lv["level"]), "not reached", "-", "-")
            continue
        used = "-" if lv["used_s"] is None else output.fmt_duration(lv["used_s"])
        time_text = f"{used} of ~{lv['minutes']} min" + (" [red]over[/]" if lv["over_pace"] else "")
        if not lv["passed"]:
            time_text += " [red](not passed)[/]"
        table.add_row(f"{lv['level']} {escape(lv['name'])}", time_text, str(lv["grade_attempts"]),
                      str(lv["hints"]))
    console.print(table)
    failed = [(lv["level"], a) for lv in debrief["levels"] if lv["revealed"] for a in lv["failed_attempts"]]
    if failed:
        console.print("failed grades, first failing property:")
        for level, attempt in failed:
            console.print(f"  while on level {level} ({attempt['score']}/100): "
                          f"{textsafe.markup(attempt['first_failure'])}")
    console.print(f"interview signal: [bold]{escape(debrief['signal'])}[/]")
    cov = debrief["coverage"]
    if not debrief["followups"]:
        console.print("follow-ups: none asked")
    elif cov is None:
        console.print("follow-ups: answered, not marked yet (add covered = [...] to your answers file "
                      "and run `kata mock --answers FILE` again)" if any(q["answer"] for q in debrief["followups"])
                      else "follow-ups: not answered")
    else:
        console.print(f"follow-ups: you covered {cov['covered']} of {cov['points']} points")
        console.print(_numbered([(f"{i}. {len(q['covered'] or [])}/{len(q['points'])}", q["question"])
                                 for i, q in enumerate(debrief["followups"], start=1)]))
    console.print(f"practise next: {textsafe.markup(debrief['practise_next'])}")  # may quote a failure


def print_mock_list(rows: list[dict[str, Any]]) -> None:
    """`kata history --mock`: one row per mock, newest first."""
    if not rows:
        console.print("no mock interviews yet; `kata mock` starts one")
        return
    table = output.table("mock interviews")
    for col in ("date", "kata", "levels", "signal", "follow-ups", "state"):
        table.add_column(col)
    for r in rows:
        cov = r.get("coverage")
        table.add_row(output.fmt_when(r["started_at"]), r["kata"], f"{r['levels_passed']}/{r['num_levels']}",
                      escape(r["signal"]), "-" if not cov else f"{cov['covered']}/{cov['points']}", r["state"])
    console.print(table)
