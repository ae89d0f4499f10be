"""kata status: the active sessions and their clocks."""

from __future__ import annotations

import typer

from grader.cli import output
from grader.cli.common import JsonOpt
from grader.store import Store


def status(as_json: JsonOpt = False) -> None:
    """Show active sessions: elapsed, remaining, a progress bar, overtime flagged."""
    with Store() as store:
        sessions = store.active_sessions()
    if as_json:
        output.print_json({"sessions": [
            {"kata": s.kata, "file": s.solution_path, "started_at": s.started_at,
             "deadline": s.deadline, "elapsed_s": round(s.elapsed_s, 1),
             "remaining_s": round(s.remaining_s, 1), "overtime": s.remaining_s < 0}
            for s in sessions]})
        return
    if not sessions:
        output.console.print("no active session; `kata start <slug>` begins one (`kata list` shows the katas)")
        return
    table = output.table("active sessions")
    for col in ("kata", "file", "elapsed", "remaining", "time"):
        table.add_column(col, overflow="fold" if col == "file" else "ellipsis", no_wrap=col != "file")
    for s in sessions:
        total = s.minutes * 60
        remaining = (output.fmt_duration(s.remaining_s) if s.remaining_s >= 0
                     else f"[bold red]OVERTIME {output.fmt_duration(-s.remaining_s)}[/]")
        table.add_row(s.kata, output.shown_path(s.solution_path), output.fmt_duration(s.elapsed_s), remaining,
                      output.time_bar(s.elapsed_s, total))
    output.console.print(table)


def register(app: typer.Typer) -> None:
    app.command("status")(output.handle_errors(status))
