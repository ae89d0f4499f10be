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
from grader.followups import score_words
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


def print_answer_key(entries: list[dict[str, Any]], first_number: int = 1) -> None:
    """Each scored answer (grader/followups.py, score_mock) with its full answer key: every
    point, ✓ where it counts and ✗ where it does not, with the key terms of the points missed."""
    for i, q in enumerate(entries, start=first_number):
        console.print(Text(f"\n{i}. {q['question']}", style="bold"))
        if q.get("answer") is not None:
            console.print(Text("your answer: ", style="cyan") + textsafe.text(_clip(q["answer"])))
        console.print(Text(f"what an interviewer listens for ({score_words(q)}):", style="cyan"))
        console.print(_key_points(q))


def _key_points(q: dict[str, Any]) -> Table:
    covered, found = set(q.get("covered") or []), q.get("found")
    keys = q.get("keys") or []
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, justify="right")
    grid.add_column(overflow="fold")
    for n, point in enumerate(q["points"], start=1):
        text = Text(point)
        if q.get("self_marked") is not None and found is not None and (n in found) != (n in covered):
            text.append(" (the keys found it)" if n in found else " (the keys did not find it)", style="dim")
        if n not in covered and n <= len(keys) and keys[n - 1]:
            text.append("\nkeys: " + key_words(keys[n - 1]), style="dim")
        mark = Text("✓", style="green") if n in covered else Text("✗", style="red")
        grid.add_row(Text("  ") + mark + Text(f" {n}."), text)
    return grid


def key_words(groups: list[list[str]], num_shown: int = 4) -> str:
    """A point's keys as a reader takes them in, the first few alternatives of each group:
    (running max | row max) + rescale."""
    def group(terms: list[str]) -> str:
        shown = " | ".join(terms[:num_shown]) + (" | …" if len(terms) > num_shown else "")
        return shown if len(terms) == 1 else f"({shown})"
    return " + ".join(group(g) for g in groups)


def _numbered(items: list[tuple[str, str]], label_style: str = "green") -> Table:
    """A list whose wrapped lines stay indented under their text, not under the number."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, justify="right", style=label_style)
    grid.add_column(overflow="fold")
    for label, text in items:
        grid.add_row("  " + label, Text(text))
    return grid


def _clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def print_debrief(debrief: dict[str, Any], answer_keys: bool = True, reprint: bool = False) -> None:
    """The debrief; `answer_keys=False` where each answer key was shown moments before;
    `reprint`: `kata mock --debrief` (the timeline follows)."""
    reason = {"passed": "every level passed", "stopped": "stopped", "time": "the time ran out"}.get(
        debrief["end_reason"] or "", debrief["end_reason"] or "")
    console.print(Text(f"\nDebrief: mock of {debrief['kata']}", style="bold") +
                  Text(f", {output.fmt_duration(debrief['time_used_s'])} of {debrief['minutes']} min"
                       f" ({reason})"))
    if debrief.get("summary"):
        console.print(Text("the interviewer's notes: ", style="cyan") + Text(debrief["summary"]))
    console.print(_levels_table(debrief["levels"]))
    for lv in debrief["levels"]:
        missed = [textsafe.clean(d) for d in lv.get("details_missed") or ()]
        if lv.get("revealed") and lv.get("passed") and missed:
            console.print(Text.assemble((f"level {lv['level']} passed with {len(missed)} detail"
                                         f"{'s' if len(missed) != 1 else ''} missed: ", "yellow"), "; ".join(missed)))
    failed = [(lv["level"], a) for lv in debrief["levels"] if lv["revealed"] for a in lv["failed_attempts"]]
    if failed:
        console.print("failed grades, first failing property:")
        console.print(_numbered([(f"on level {level} ({attempt['score']}/100):", textsafe.clean(attempt["first_failure"]))
                                 for level, attempt in failed], label_style="default"))
    console.print(f"interview signal: [bold]{escape(debrief['signal'])}[/]")
    _print_followups(debrief, answer_keys or reprint)
    console.print(f"practise next: {textsafe.markup(debrief['practise_next'])}")  # may quote a failure
    if not reprint and debrief.get("session_id") is not None:
        console.print(f"[dim]`kata mock --debrief {debrief['session_id']}` reprints this debrief with its "
                      "timeline[/]")


def _levels_table(levels: list[dict[str, Any]]) -> Table:
    """One row per level: time used, grades, hints; the questions asked before its first
    grade and the nudges where the debrief counted them."""
    counted = any("nudges" in lv for lv in levels)
    table = Table(show_edge=False, pad_edge=False)
    for col in ("level", "time used", "grades", "hints", *(("asked", "nudges") if counted else ())):
        table.add_column(col)
    for lv in levels:
        if not lv["revealed"]:
            table.add_row(str(lv["level"]), "not reached", "-", "-", *(("-", "-") if counted else ()))
            continue
        used = "-" if lv["used_s"] is None else output.fmt_duration(lv["used_s"])
        time_text = f"{used} of ~{lv['minutes']} min" + (" [red]over[/]" if lv["over_pace"] else "")
        if not lv["passed"]:
            time_text += " [red](not passed)[/]"
        counts = (str(lv.get("questions_before_grade", "-")), str(lv.get("nudges", "-"))) if counted else ()
        table.add_row(f"{lv['level']} {escape(lv['name'])}", time_text, str(lv["grade_attempts"]),
                      str(lv["hints"]), *counts)
    return table


def print_timeline(timeline: list[dict[str, Any]]) -> None:
    """`kata mock --debrief`: the mock's timeline, minutes from the start in the margin."""
    console.print(Text("\ntimeline (minutes from the start):", style="bold"))
    if not timeline:
        console.print("  nothing recorded")
        return
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, justify="right", style="cyan")
    grid.add_column(overflow="fold")
    for entry in timeline:
        grid.add_row(f"  {int(entry['minute'])} min", textsafe.text(entry["text"]))
    console.print(grid)


def _print_followups(debrief: dict[str, Any], answer_keys: bool) -> None:
    cov, entries = debrief["coverage"], debrief["followups"]
    if not entries:
        console.print("follow-ups: none asked")
        return
    if cov is None:
        console.print("follow-ups: not answered")
        return
    num_marked = cov.get("self_marked", 0)
    if "found" not in cov:  # a debrief recorded before answers were scored by their keys
        how = "self-marked"
    elif not num_marked:
        how = "scored by the answer keys"
    else:
        how = f"{num_marked} answer{'s' if num_marked > 1 else ''} self-marked; keys found {cov['found']}"
    console.print(f"follow-ups: you covered {cov['covered']} of {cov['points']} points ({how})")
    if answer_keys:
        print_answer_key(entries)
    else:
        console.print(_numbered([(f"{i}.", f"{score_words(q)}: {q['question']}")
                                 for i, q in enumerate(entries, start=1)]))


def print_mock_list(rows: list[dict[str, Any]]) -> None:
    """`kata history --mock`: one row per mock, newest first."""
    if not rows:
        console.print("no mock interviews yet; `kata mock` starts one")
        return
    table = output.table("mock interviews")
    for col in ("id", "date", "kata", "levels", "signal", "follow-ups", "state"):
        table.add_column(col)
    for r in rows:
        cov = r.get("coverage")
        table.add_row(str(r["session_id"]), output.fmt_when(r["started_at"]), r["kata"],
                      f"{r['levels_passed']}/{r['num_levels']}",
                      escape(r["signal"]), "-" if not cov else f"{cov['covered']}/{cov['points']}", r["state"])
    console.print(table)
    console.print(Text("`kata mock --debrief ID` reprints a finished mock's debrief with its timeline",
                       style="dim"))
