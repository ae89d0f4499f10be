"""What `kata grade` and `kata check` show while a suite runs.

Three audiences, one event feed (the runner's on_event, called as the judge reports):

- a candidate at a terminal: one live line (tests done/total, failures so far, the test
  running and for how long, elapsed), and a line above it the moment a test hangs, saying
  where the code is stuck, so a candidate on a clock need not wait for the scorecard;
- a tool, with ``--json-stream``: one JSON object per line on stdout: ``start``,
  ``collected``, ``running`` and ``result`` per test, ``end`` with the scorecard (or
  ``error``);
- a pipe or a log file: nothing, so redirected output stays plain.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable

from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.table import Column
from rich.text import Text

from grader import textsafe
from grader.cli import output

WIDE_COLUMNS = 100        # from this width on, the live line has room for a bar
SHOW_TEST_TIME_AFTER_S = 2.0


class _ElapsedColumn(ProgressColumn):
    """Elapsed time as "12 s" / "1 min 5 s" (the house format, never "0:00:12")."""

    def render(self, task: Task) -> Text:
        return Text(output.fmt_duration(task.elapsed or 0.0), style="dim")


class _CountColumn(ProgressColumn):
    """"12/44 tests, 3 failed" (nothing until the suite is collected)."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        text = Text(f"{int(task.completed)}/{int(task.total)}")
        failed = task.fields.get("failed", 0)
        if failed:
            text.append(f" {failed} ✗", style="red")
        return text


class _CurrentTestColumn(ProgressColumn):
    """The test running now, with its own time once it is slow (a hang shows as it grows)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__(table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"))
        self.clock = clock

    def render(self, task: Task) -> Text:
        name, started = task.fields.get("current"), task.fields.get("current_started")
        if not name:
            return Text(task.fields.get("note", ""), style="dim")
        text = Text(name)
        running_s = self.clock() - started if started is not None else 0.0
        if running_s >= SHOW_TEST_TIME_AFTER_S:
            text.append(f" ({output.fmt_duration(running_s)})", style="yellow")
        return text


class RunProgress:
    """Follows one run of a suite; `on_event` is the runner's callback.

    Use as a context manager around the run, then call `end(card)` with the scorecard (the
    JSON stream's last event).
    """

    def __init__(self, *, kata: str, suite: str, file: str, seed: int | None, json_stream: bool = False,
                 quiet: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.kata, self.suite, self.file, self.seed = kata, suite, file, seed
        self.json_stream = json_stream
        self.live = not json_stream and not quiet and output.console.is_terminal
        self.clock = clock
        self.t0 = clock()
        self.num_tests: int | None = None
        self.num_done = 0
        self.num_failed = 0
        self.stuck_places: set[str] = set()
        self.progress: Progress | None = None
        self.task: Any = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> "RunProgress":
        if self.json_stream:
            self._emit("start", kata=self.kata, suite=self.suite, file=self.file, seed=self.seed,
                       time=time.time())
        if self.live:
            self.progress = self._live_line()
            self.progress.start()
            self.task = self.progress.add_task(f"{escape(self.kata)} {self.suite}", total=None, current=None,
                                               current_started=None, failed=0, note="starting the suite")
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.progress is not None:
            self.progress.stop()
        if self.json_stream and exc is not None and not isinstance(exc, (KeyboardInterrupt, SystemExit)):
            self._emit("error", message=getattr(exc, "message", str(exc)), hint=getattr(exc, "hint", None))

    def end(self, card: dict[str, Any]) -> None:
        if self.json_stream:
            self._emit("end", score=card.get("score"), passed=card.get("passed"), scorecard=card)

    # ------------------------------------------------------------------ events

    def on_event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "collected":
            self.num_tests = len(data["tests"])
            if self.json_stream:
                self._emit("collected", num_tests=self.num_tests, tests=[
                    {k: t.get(k) for k in ("name", "level", "category", "description")} for t in data["tests"]])
            self._update(total=self.num_tests, note="")
        elif kind == "note":
            self._update(note=str(data.get("text", "")))
        elif kind == "start":
            if self.json_stream:
                self._emit("running", test=data["name"], level=data["level"])
            self._update(current=f"L{data['level']} {data['name']}", current_started=self.clock())
        elif kind == "result":
            self.num_done += 1
            self.num_failed += not data["passed"]
            if self.json_stream:
                self._emit("result", test=data["name"], num_done=self.num_done, num_tests=self.num_tests,
                           **{k: v for k, v in data.items() if k != "name"})
            self._update(completed=self.num_done, current=None, current_started=None,
                         failed=self.num_failed)
            if self.live and not data["passed"]:
                self._announce_hang(data)

    def _announce_hang(self, test: dict[str, Any]) -> None:
        """Say where a hang is stuck as soon as it is known (once per place)."""
        where = (test.get("details") or {}).get("where") or ""
        message = test.get("message") or ""
        if not where or not ("timed out" in message or "stuck" in message):
            return
        place = where.splitlines()[1].strip() if len(where.splitlines()) > 1 else where
        if place in self.stuck_places:
            return
        self.stuck_places.add(place)
        assert self.progress is not None
        self.progress.console.print(
            f"[red]✗ hang[/] in L{test['level']} {textsafe.markup(test['name'])} "
            f"after {output.fmt_duration(test.get('duration_s'))}; your code was at:\n"
            f"  [bold]{textsafe.markup(place)}[/]\n"
            "  [dim]later tests stuck at the same place are stopped after about a second[/]")

    # ------------------------------------------------------------------ helpers

    def _live_line(self) -> Progress:
        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}"), _CountColumn()]
        if output.console.width >= WIDE_COLUMNS:
            columns.append(BarColumn(bar_width=20))
        columns += [_ElapsedColumn(), _CurrentTestColumn(self.clock)]
        return Progress(*columns, console=output.console, transient=True)

    def _update(self, **fields: Any) -> None:
        if self.progress is not None:
            self.progress.update(self.task, **fields)

    def _emit(self, event: str, **fields: Any) -> None:
        record = {"event": event, "elapsed_s": round(self.clock() - self.t0, 3), **fields}
        # Plain print, one object per line: rich would wrap long lines and break the stream.
        sys.stdout.write(json.dumps(record, default=str) + "\n")
        sys.stdout.flush()
