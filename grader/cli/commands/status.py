"""kata status: the active sessions, their clocks, and the pace of each level."""

from __future__ import annotations

from rich.markup import escape

from grader import clock
from grader.cli import mock_view, output
from grader.cli.common import JsonOpt, catalog
from grader.sessions import deadline_warning, expire_if_due, level_clocks, pacing
from grader.store import Store


def status(as_json: JsonOpt = False) -> None:
    """Show active sessions: elapsed, remaining, a progress bar, overtime flagged, and per
    level the time spent against its minutes; warns as the deadline nears."""
    cat = catalog()
    rows = []
    with Store() as store:
        for active in store.active_sessions():
            s = expire_if_due(store, active)
            if s is None or s.status != "active" or s.kata not in cat.katas:
                continue
            kata = cat.katas[s.kata]
            levels = pacing(level_clocks(store, s, kata), clock.now(), {lv.level: lv.name for lv in kata.levels})
            rows.append((s, levels, deadline_warning(s)))
    if as_json:
        output.print_json({"sessions": [
            {"kata": s.kata, "mode": s.mode, "file": s.solution_path, "started_at": s.started_at,
             "deadline": s.deadline, "elapsed_s": round(s.elapsed_s, 1),
             "remaining_s": round(s.remaining_s, 1), "overtime": s.remaining_s < 0,
             "levels": levels, "warning": warning}
            for s, levels, warning in rows]})
        return
    if not rows:
        output.console.print("no active session; `kata start <slug>` begins one (`kata list` shows the katas)")
        return
    table = output.table("active sessions")
    for col in ("kata", "file", "elapsed", "remaining", "time"):
        table.add_column(col, overflow="fold" if col == "file" else "ellipsis", no_wrap=col != "file")
    for s, _, _ in rows:
        total = s.minutes * 60
        remaining = (output.fmt_duration(s.remaining_s) if s.remaining_s >= 0
                     else f"[bold red]OVERTIME {output.fmt_duration(-s.remaining_s)}[/]")
        name = f"{s.kata} (mock)" if s.is_mock else s.kata
        table.add_row(name, output.shown_path(s.solution_path), output.fmt_duration(s.elapsed_s), remaining,
                      output.time_bar(s.elapsed_s, total))
    output.console.print(table)
    for s, levels, warning in rows:
        output.console.print(f"[bold]{s.kata}[/] by level:")
        mock_view.print_pacing(levels)
        if warning:
            output.console.print(f"[bold yellow]warning:[/] {escape(warning)}")
