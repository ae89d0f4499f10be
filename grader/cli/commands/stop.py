"""kata stop: end the active session now (a mock goes on to its follow-ups and debrief)."""

from __future__ import annotations

from rich.markup import escape

from grader import clock
from grader.cli import mock_view, output
from grader.cli.commands import mock as mock_cmd
from grader.cli.common import JsonOpt, OptionalSlugArg, catalog, kata_for
from grader.errors import KataError
from grader.sessions import level_clocks, pacing, session_details_missed, session_signal
from grader.store import Store


def stop(slug: OptionalSlugArg = None, as_json: JsonOpt = False) -> None:
    """End your session now: its levels' pass times and signal stand as they are.

    A session also ends by itself when a grade passes every level. Stopping a mock asks its
    follow-up questions, then prints the debrief (as `kata mock --stop`)."""
    cat = catalog()
    with Store() as store:
        kata, session = kata_for(slug, store, cat)
        if session is None:
            raise KataError(f"{kata.slug} has no active session",
                            hint="`kata status` lists the active sessions")
        if session.is_mock:
            return mock_cmd.mock(kata.slug, stop=True, as_json=as_json)
        store.end_session(session.id, "stopped")
        if not store.active_sessions():  # the last session: its warm grader goes too
            from grader.engine import warm

            warm.stop()
        session = store.session(session.id)
        clocks = level_clocks(store, session, kata)
        signal = session_signal(clocks, session.deadline, session_details_missed(store, session))
        levels = pacing(clocks, session.ended_at or clock.now(), {lv.level: lv.name for lv in kata.levels})
        num_grades = len(store.attempts_for_session(session.id))
    if as_json:
        output.print_json({"kata": kata.slug, "session_id": session.id, "ended": "stopped",
                           "time_used_s": round(session.elapsed_s, 1), "grades": num_grades,
                           "signal": signal, "levels": levels})
        return
    output.console.print(f"stopped {kata.slug} after {output.fmt_duration(session.elapsed_s)} "
                         f"({num_grades} grade{'s' if num_grades != 1 else ''})")
    mock_view.print_pacing(levels)
    output.console.print(f"interview signal: [bold]{escape(signal)}[/]")
