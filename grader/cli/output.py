"""The one output layer: consoles, error exits, and the renderers of tables and scorecards."""

from __future__ import annotations

import functools
import json
import time
import traceback
from typing import Any, Callable, NoReturn

import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from grader.errors import KataError

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_state = {"debug": False}


def set_debug(value: bool) -> None:
    _state["debug"] = value


def fail(message: str, hint: str | None = None) -> NoReturn:
    """Print an actionable error and exit with code 2."""
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    if hint:
        err_console.print(f"[yellow]next:[/] {escape(hint)}")
    raise typer.Exit(EXIT_USAGE)


def handle_errors(fn: Callable) -> Callable:
    """Turn domain errors into messages and exit code 2; tracebacks only under --debug."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KataError as exc:
            if _state["debug"]:
                err_console.print(traceback.format_exc())
            fail(exc.message, exc.hint)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - the edge of the program
            if _state["debug"]:
                raise
            fail(f"internal error: {type(exc).__name__}: {exc}",
                 "this is a bug in kata; run again with `kata --debug ...` and report the traceback")

    return wrapper


def print_json(data: Any) -> None:
    # Plain print: rich would wrap long lines and break the JSON for scripts.
    print(json.dumps(data, indent=2, default=str))


def fmt_duration(seconds: float | None) -> str:
    """Unambiguous: "20 s", "12 min 5 s", "1 h 3 min" (never "0:20")."""
    if seconds is None:
        return "-"
    sign = "-" if seconds < 0 else ""
    seconds = abs(int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{sign}{h} h {m} min"
    if m:
        return f"{sign}{m} min {s} s" if s else f"{sign}{m} min"
    return f"{sign}{s} s"


def fmt_when(timestamp: float | None) -> str:
    if not timestamp:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def time_bar(elapsed_s: float, total_s: float) -> ProgressBar:
    over = elapsed_s > total_s
    return ProgressBar(total=total_s, completed=min(elapsed_s, total_s), width=30,
                       complete_style="red" if over else "green",
                       finished_style="red" if over else "green")


# ---------------------------------------------------------------------------- scorecard


def render_scorecard(card: dict[str, Any], *, show_passed: bool = False, title: str | None = None) -> None:
    """Print a scorecard dict (Scorecard.to_dict()): summary, levels, categories, failures."""
    console.print(_summary_panel(card, title))
    console.print(_levels_table(card))
    console.print(_categories_line(card))
    failures = [t for t in card["tests"] if not t["passed"]]
    if card.get("import_error"):
        console.print(Panel(escape(card["import_error"]), title="your file could not be loaded",
                            border_style="red"))
    elif failures:
        console.print(Text(f"\n{len(failures)} failing propert{'y' if len(failures) == 1 else 'ies'}:",
                           style="bold red"))
        for test in failures:
            console.print(_failure(test))
    if show_passed:
        for test in card["tests"]:
            if test["passed"]:
                console.print(f"  [green]✓[/] L{test['level']} {escape(test['description'])}")
    if card.get("output_bytes", 0) > 100_000:
        console.print(f"[yellow]note:[/] your code printed {card['output_bytes']:,} bytes while graded; "
                      "remove debug prints, they slow grading down")


def _summary_panel(card: dict[str, Any], title: str | None) -> Panel:
    score = card["score"]
    style = "green" if card["passed"] else ("yellow" if score >= 50 else "red")
    lines = [f"[bold {style}]{score}/100[/]  {'all hidden tests passed' if card['passed'] else 'some hidden tests failed'}"]
    if card.get("time_limit_s") is not None:
        over = " [red](overtime)[/]" if card.get("overtime") else ""
        lines.append(f"time used {fmt_duration(card.get('time_used_s'))} of "
                     f"{fmt_duration(card['time_limit_s'])}{over}")
    lines.append(f"hints used {card.get('hints_used', 0)}   seed {card['seed']}   "
                 f"graded in {card['duration_s']:.1f} s")
    if card.get("signal"):
        lines.append(f"interview signal: [bold]{escape(card['signal'])}[/]")
    return Panel("\n".join(lines), title=title or escape(f"{card['title']} ({card['kata']})"), expand=False)


def _levels_table(card: dict[str, Any]) -> Table:
    table = Table(title=None, show_edge=False, pad_edge=False)
    for col in ("level", "name", "result", "score", "tests"):
        table.add_column(col)
    for lv in card["levels"]:
        result = "[green]passed[/]" if lv["passed"] else "[red]failed[/]"
        table.add_row(str(lv["level"]), escape(lv["name"]), result, str(lv["score"]),
                      f"{lv['num_passed']}/{lv['num_tests']}")
    return table


def _categories_line(card: dict[str, Any]) -> Text:
    parts = [f"{name} {c['passed']}/{c['total']}" for name, c in card["categories"].items()]
    return Text("by category: " + ", ".join(parts), style="dim")


def _failure(test: dict[str, Any]) -> Panel:
    details = test.get("details") or {}
    body: list[Any] = [Text(test["message"] or "failed", style="bold")]
    for key, label in (("input", "input"), ("expected", "expected"), ("got", "got"),
                       ("where", "where"), ("note", "note"), ("example", "shrunk example")):
        if details.get(key):
            body.append(Text.assemble((f"{label}: ", "cyan"), str(details[key])))
    if test.get("stdout_bytes", 0) > 10_000:
        body.append(Text(f"your code printed {test['stdout_bytes']:,} bytes in this test", style="yellow"))
    title = f"[red]✗[/] L{test['level']} {escape(test['category'])}: {escape(test['description'])}"
    return Panel(Group(*body), title=title, title_align="left", border_style="red")


class GradingProgress:
    """A live progress bar over the hidden tests (only on a terminal)."""

    def __init__(self, label: str, enabled: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.enabled = enabled and console.is_terminal
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=True)
        self.label = label
        self.task: Any = None
        self.failed = 0

    def __enter__(self) -> "GradingProgress":
        if self.enabled:
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=None)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self.progress.stop()

    def on_event(self, kind: str, data: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if kind == "collected":
            self.progress.update(self.task, total=len(data["tests"]))
        elif kind == "note":
            self.progress.update(self.task, description=data["text"])
        elif kind == "result":
            self.failed += 0 if data["passed"] else 1
            note = f" ({self.failed} failed)" if self.failed else ""
            self.progress.update(self.task, advance=1, description=f"{self.label}{note}")
