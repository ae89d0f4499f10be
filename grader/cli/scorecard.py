"""The scorecard as a candidate reads it: summary, levels (with the details a passed level
missed), categories, then one box per distinct failure.

Failures with the same message at the same place in the candidate's file are one box ("same
failure in 14 more tests: ..."), hangs stuck at the same line are one box whatever their
limits, and a level whose every test raised NotImplementedError is one line. Under a box
comes what the code printed in that test (the first 40 lines, marked), and the command that
writes its reproduction snippet. Everything wraps: nothing is cut at 80 columns.

ScorecardView is a rich renderable (as rich's own Rule or Panel): it draws at the width of
the console that prints it, so a test draws it onto ``Console(record=True, width=80)``.

Every string of a test (messages, details, printed output, names) may come from the
candidate's code, so it reaches the console through grader.textsafe: as plain Text, never
markup, with no control sequence left in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from grader import textsafe
from grader.cli.output import COMPACT_BELOW_COLUMNS, fmt_duration

MAX_PRINTED_LINES = 40
MAX_NAMES_LISTED = 6
_DETAIL_LABELS = (("input", "input"), ("expected", "expected"), ("got", "got"), ("where", "where"),
                  ("note", "note"), ("example", "shrunk example"))
_FRAME = re.compile(r"line (\d+), in (\w+)")


@dataclass
class FailureGroup:
    """Failed tests that failed the same way: the first one stands for all."""

    first: dict[str, Any]
    others: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tests(self) -> list[dict[str, Any]]:
        return [self.first, *self.others]


class ScorecardView:
    """A scorecard dict (Scorecard.to_dict()) as a rich renderable: `console.print(view)`
    draws it at that console's width; nothing here prints on its own.

    `show_passed` adds a line per passed test; `title` (markup) replaces the kata's title.
    """

    def __init__(self, card: dict[str, Any], *, show_passed: bool = False, title: str | None = None) -> None:
        self.card = card
        self.show_passed = show_passed
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        card = self.card
        yield _summary_panel(card, self.title)
        yield _levels_table(card, compact=options.max_width < COMPACT_BELOW_COLUMNS)
        yield from details_missed_lines(card)
        yield _categories_line(card)
        import_error = card.get("import_error")
        if import_error:
            yield Panel(textsafe.text(import_error), title="your file could not be loaded",
                        title_align="left", border_style="red")
        # With an import error, the tests that failed for it are that panel; the others (run
        # before a restarted worker failed to import) still get their boxes.
        failures = [t for t in card["tests"] if not t["passed"]
                    and not (import_error and t["message"].strip() == import_error.strip())]
        if failures:
            yield from _failures(card, failures)
            yield summary_line(card)  # the cards scroll the summary panel away
        if self.show_passed:
            for test in card["tests"]:
                if test["passed"]:
                    yield f"  [green]✓[/] L{test['level']} {textsafe.markup(test['description'])}"
        if card.get("output_bytes", 0) > 100_000:
            yield (f"[yellow]note:[/] your code printed {card['output_bytes']:,} bytes while graded; "
                   "remove debug prints, they slow grading down")


def _failures(card: dict[str, Any], failures: list[dict[str, Any]]) -> Iterator[RenderableType]:
    """The count of failures, the unimplemented levels' lines, then one box per group."""
    unimplemented = unimplemented_levels(card)
    rest = [t for t in failures if t["level"] not in unimplemented]
    groups = group_failures(rest)
    num_boxes = len(groups) + len(unimplemented)
    yield Text(f"\n{len(failures)} failing test{'s' if len(failures) != 1 else ''}, "
               f"{num_boxes} distinct failure{'s' if num_boxes != 1 else ''}:", style="bold red")
    if unimplemented:
        yield unimplemented_lines(unimplemented)
    for group in groups:
        yield from failure_box(group)


# ---------------------------------------------------------------------------- grouping


def is_unimplemented(test: dict[str, Any]) -> bool:
    got = str((test.get("details") or {}).get("got", ""))
    return not test["passed"] and ("NotImplementedError" in test["message"] or "NotImplementedError" in got)


def unimplemented_lines(lines: dict[int, str], indent: int = 0) -> Table:
    """The one-liners of unimplemented_levels, wrapped with a hanging indent."""
    grid = Table.grid(padding=(0, 1), pad_edge=False)
    grid.add_column(no_wrap=True)
    grid.add_column()
    for level, line in lines.items():
        grid.add_row(Text.assemble(" " * indent, ("✗", "red"), f" L{level}"), line)
    return grid


def unimplemented_levels(card: dict[str, Any], noun: str = "tests") -> dict[int, str]:
    """level -> one line, for each level whose every test failed with NotImplementedError."""
    lines: dict[int, str] = {}
    names = {lv["level"]: lv["name"] for lv in card["levels"]}
    for level in sorted(names):
        tests = [t for t in card["tests"] if t["level"] == level]
        if not tests or not all(is_unimplemented(t) for t in tests):
            continue
        places = _unimplemented_places(tests)
        where = f" (in {'; '.join(places)})" if places else ""
        which = f"all {len(tests)} {noun}" if len(tests) > 1 else f"its {noun.rstrip('s')}"
        lines[level] = f"{names[level]}: not implemented yet, {which} raised NotImplementedError{where}"
    return lines


def _unimplemented_places(tests: list[dict[str, Any]]) -> list[str]:
    """The functions that raised, once each: "fork, line 60" where a traceback gives the
    line, else the name a suite's message gives ("rope_inv_freq")."""
    places: dict[str, str] = {}
    for test in tests:
        frame = _FRAME.search(str((test.get("details") or {}).get("where", "")))
        named = re.match(r"(\w+) is not implemented yet", test["message"])
        if frame:
            name = frame.group(2)
            if name not in places or "line" not in places[name]:
                places[name] = f"{name}, line {frame.group(1)}"
        elif named and named.group(1) not in places:
            places[named.group(1)] = named.group(1)
    return list(places.values())


def failure_key(test: dict[str, Any]) -> tuple[str, str]:
    """Tests with the same key failed the same way. A hang's message names its own limit, so
    hangs are keyed by the line they were stuck on alone."""
    details = test.get("details") or {}
    where = str(details.get("where", ""))
    message = test["message"]
    if where and ("timed out" in message or message.startswith("stuck where")):
        frame = _FRAME.search(where)
        return ("hang", frame.group(0) if frame else where)
    return (message, where)


def group_failures(failures: list[dict[str, Any]]) -> list[FailureGroup]:
    """Failures grouped by failure_key, in the order of their first occurrence."""
    groups: dict[tuple[str, str], FailureGroup] = {}
    for test in failures:
        key = failure_key(test)
        if key in groups:
            groups[key].others.append(test)
        else:
            groups[key] = FailureGroup(first=test)
    return list(groups.values())


# ---------------------------------------------------------------------------- one failure


def failure_box(group: FailureGroup) -> list[RenderableType]:
    """The box of a group, then what the first test's code printed, then the repro command."""
    test = group.first
    details = test.get("details") or {}
    body: list[RenderableType] = [textsafe.text(test["description"], style="bold")]
    if test.get("nudge"):  # a mock's: the interviewer's question leads (grader/nudges.py)
        body.insert(0, Text.assemble(("Interviewer: ", "bold magenta"), textsafe.clean(test["nudge"])))
    if test["message"] and test["message"] != test["description"]:
        body.append(textsafe.text(test["message"]))
    body += detail_lines(details)
    if test.get("stdout_bytes", 0) > 10_000:
        body.append(Text(f"your code printed {test['stdout_bytes']:,} bytes in this test", style="yellow"))
    if group.others:
        body.append(_same_failure_line(group.others))
    title = f"[red]✗[/] L{test['level']} {textsafe.markup(test['category'])}"
    if all(t.get("detail") for t in group.tests):
        title += " · detail (the level still passes)"
    out: list[RenderableType] = [Panel(Group(*body), title=title, title_align="left", border_style="red")]
    printed = printed_output(test)
    if printed is not None:
        out.append(printed)
    if details.get("snippet"):
        out.append(Text.assemble(("  reproduce: ", "cyan"), f"kata repro --test {textsafe.clean(test['name'])}"))
    return out


def detail_lines(details: dict[str, Any]) -> list[Text]:
    lines = []
    for key, label in _DETAIL_LABELS:
        value = textsafe.clean(details.get(key) or "")
        if value:
            # "where your code was when it was stopped: ..." needs no "where:" label
            lines.append(Text(value) if value.startswith(f"{label} ") else
                         Text.assemble((f"{label}: ", "cyan"), value))
    return lines


def _same_failure_line(others: list[dict[str, Any]]) -> Text:
    names = [textsafe.clean(t["name"]) for t in others[:MAX_NAMES_LISTED]]
    more = len(others) - len(names)
    listed = ", ".join(names) + (f", and {more} more" if more else "")
    return Text.assemble((f"same failure in {len(others)} more test{'s' if len(others) != 1 else ''}: ", "yellow"),
                         (listed, "dim"))


def printed_output(test: dict[str, Any], indent: str = "  ") -> Text | None:
    """What the candidate's code printed in a failing test, marked as theirs; the first
    MAX_PRINTED_LINES lines, the rest counted."""
    text = (test.get("details") or {}).get("output")
    if not text:
        return None
    lines = textsafe.clean(text).splitlines()
    counted = re.fullmatch(r"\.\.\. (\d+) more lines", lines[-1]) if lines else None
    more = int(counted.group(1)) if counted else 0
    if counted:
        lines = lines[:-1]
    more += max(len(lines) - MAX_PRINTED_LINES, 0)
    lines = lines[:MAX_PRINTED_LINES]
    shown = Text(f"{indent}your code printed (in {textsafe.clean(test['name'])}):\n", style="yellow")
    for line in lines:
        shown.append(f"{indent}│ ", style="yellow")
        shown.append(line + "\n", style="dim")
    if more:
        shown.append(f"{indent}│ ... and {more} more line{'s' if more != 1 else ''} not shown\n", style="yellow")
    shown.rstrip()
    return shown


# ---------------------------------------------------------------------------- summary


def _summary_panel(card: dict[str, Any], title: str | None) -> Panel:
    score = card["score"]
    style = "green" if card["passed"] else ("yellow" if score >= 50 else "red")
    # The title is the first line of the body, not the panel's own title: a panel title is
    # cut at the panel's width, a line of the body wraps.
    lines = [f"[bold]{title or escape(card['title'] + ' (' + card['kata'] + ')')}[/]",
             f"[bold {style}]{score}/100[/]  "
             f"{'all hidden tests passed' if card['passed'] else 'some hidden tests failed'}"]
    if card.get("time_limit_s") is not None:
        over = " [red](overtime)[/]" if card.get("overtime") else ""
        lines.append(f"time used {fmt_duration(card.get('time_used_s'))} of "
                     f"{fmt_duration(card['time_limit_s'])}{over}")
    lines.append(f"hints used {card.get('hints_used', 0)}   seed {card['seed']}   "
                 f"graded in {card['duration_s']:.1f} s")
    if card.get("signal"):
        lines.append(f"interview signal: [bold]{escape(card['signal'])}[/]")
    return Panel("\n".join(lines), expand=False)


def summary_line(card: dict[str, Any]) -> Text:
    """One line under the cards: score, levels passed, time used ("untimed" for a --file
    grade outside a session)."""
    score = card["score"]
    levels = card["levels"]
    num_missed = sum(len(lv.get("details_missed") or ()) for lv in levels if lv["passed"])
    missed = f" ({num_missed} detail{'s' if num_missed != 1 else ''} missed)" if num_missed else ""
    line = Text.assemble((f"{score}/100", "bold " + ("green" if card["passed"] else
                                                     "yellow" if score >= 50 else "red")),
                         f" · levels passed {sum(lv['passed'] for lv in levels)}/{len(levels)}{missed} · ")
    if card.get("time_limit_s") is None:
        line.append("untimed")
    else:
        line.append(f"time used {fmt_duration(card.get('time_used_s'))} of "
                    f"{fmt_duration(card['time_limit_s'])}")
        if card.get("overtime"):
            line.append(" (overtime)", style="red")
    return line


def _levels_table(card: dict[str, Any], compact: bool) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("L" if compact else "level", no_wrap=True)
    table.add_column("name", ratio=1)
    for col in ("result", "score", "tests"):
        table.add_column(col, no_wrap=True)
    for lv in card["levels"]:
        result = "[green]passed[/]" if lv["passed"] else "[red]failed[/]"
        table.add_row(str(lv["level"]), escape(lv["name"]), result, str(lv["score"]),
                      f"{lv['num_passed']}/{lv['num_tests']}")
    return table


def details_missed_lines(card: dict[str, Any]) -> list[Text]:
    """"level 3 passed with 1 detail missed: <its description>", for each passed level whose
    detail tests did not all pass (a failed level's boxes say it all)."""
    lines = []
    for lv in card["levels"]:
        missed = [textsafe.clean(d) for d in lv.get("details_missed") or ()]
        if lv["passed"] and missed:
            lines.append(Text.assemble(
                (f"level {lv['level']} passed with {len(missed)} detail{'s' if len(missed) != 1 else ''} "
                 "missed: ", "yellow"), "; ".join(missed)))
    return lines


def _categories_line(card: dict[str, Any]) -> Text:
    parts = [f"{name} {c['passed']}/{c['total']}" for name, c in card["categories"].items()]
    return Text("by category: " + ", ".join(parts), style="dim")
