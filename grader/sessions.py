"""A session's clock per level, what a grade does to its session, and the interview signal
from the levels' pass times.

A session stays open across grades. Each level has a clock: it starts when the level is
revealed (at the session's start, or in a mock when the levels before it pass) and every
level before it has passed, and stops at the first grade that passes it. The signal counts
the levels passed in order before the deadline, so fixing a bug after a first grade is worth
it, and a grade after the deadline is overtime: recorded, never counted as in time.

A level passes when its core tests pass (grader/engine/report.py, the pass rule): a grade that
misses only details of a level passes it, starts the next level's clock and reveals it in a
mock. The details a passed level missed are those of the latest grade before the deadline that
passed it (fixed in time, they are no longer missed), and the signal names them.

Which mock is running, which waits for its follow-up answers, and the list of mocks that
`kata history --mock` shows are asked here too; what a command may do while one runs is
grader/mock.py's COMMAND_POLICY.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader import clock
from grader.catalog import Catalog, Kata
from grader.interview_signal import LevelScore, interview_signal
from grader.store import Session, SessionLevel, Store

WARN_BEFORE_DEADLINE_S = 5 * 60  # `kata status` warns when this little time is left


@dataclass(frozen=True)
class LevelClock:
    level: int
    minutes: int
    revealed_at: float | None  # None: a mock has not revealed it yet
    started_at: float | None   # revealed and every level before it passed; None: not started
    passed_at: float | None    # the first grade that passed it

    @property
    def revealed(self) -> bool:
        return self.revealed_at is not None

    def used_s(self, until: float) -> float | None:
        """Seconds spent on this level: to its first pass, or to `until` while it is open."""
        if self.started_at is None:
            return None
        return max(0.0, (self.passed_at if self.passed_at is not None else until) - self.started_at)

    def over_pace(self, until: float) -> bool:
        used = self.used_s(until)
        return used is not None and used > 60 * self.minutes


def level_clocks(store: Store, session: Session, kata: Kata) -> list[LevelClock]:
    """The clocks of every level of the session (a session from before levels were tracked
    shows every level revealed at its start)."""
    rows = store.session_levels(session.id) or [
        SessionLevel(lv.level, lv.minutes, session.started_at, None, None) for lv in kata.levels]
    return _clocks(rows)


def _clocks(rows: list[SessionLevel]) -> list[LevelClock]:
    out: list[LevelClock] = []
    previous_passed: float | None = None
    all_before_passed = True
    for row in sorted(rows, key=lambda r: r.level):
        started = None
        if row.revealed_at is not None and all_before_passed:
            started = max(row.revealed_at, previous_passed or row.revealed_at)
        out.append(LevelClock(row.level, row.minutes, row.revealed_at, started, row.passed_at))
        if row.passed_at is None:
            all_before_passed = False
        else:
            previous_passed = max(previous_passed or row.passed_at, row.passed_at)
    return out


def revealed_levels(store: Store, session: Session | None) -> set[int] | None:
    """The levels a mock has revealed (the levels to grade and check); None outside a mock."""
    if session is None or not session.is_mock:
        return None
    return {row.level for row in store.session_levels(session.id) if row.revealed_at is not None}


def current_level(clocks: list[LevelClock]) -> LevelClock | None:
    """The lowest revealed level not passed yet (None when every revealed level passed)."""
    return next((c for c in clocks if c.revealed and c.passed_at is None), None)


def session_signal(clocks: list[LevelClock], deadline: float,
                   details_missed: dict[int, list[str]] | None = None) -> str:
    """The interview signal from the pass times: levels count in order, and only when passed
    before the deadline (the rule of grader.interview_signal); `details_missed`
    (session_details_missed) adds the details the counted levels missed."""
    missed = details_missed or {}
    in_time = [LevelScore(c.level, "", c.passed_at is not None and c.passed_at <= deadline, 0, 0, 0,
                          details_missed=list(missed.get(c.level, []))) for c in clocks]
    signal = interview_signal(in_time, overtime=False, timed=True)
    late = [c.level for c in clocks if c.passed_at is not None and c.passed_at > deadline]
    if late and not any(lv.passed for lv in in_time[:1]):
        return "No hire (overtime: level 1 passed after the time ran out)"
    if late:
        return f"{signal} (level{'s' if len(late) > 1 else ''} {', '.join(map(str, late))} passed in overtime)"
    return signal


def session_details_missed(store: Store, session: Session,
                           current: dict[str, Any] | None = None) -> dict[int, list[str]]:
    """level -> the details missed by the latest grade at or before the deadline that passed
    it (`current`: a grade not recorded yet, graded now)."""
    graded = [(a.graded_at, a.scorecard(store)) for a in reversed(store.attempts_for_session(session.id))]
    if current is not None:
        graded.append((clock.now(), current))
    out: dict[int, list[str]] = {}
    for graded_at, card in graded:  # oldest first: a later passing grade replaces an earlier one
        if graded_at > session.deadline:
            continue
        for lv in card.get("levels", []):
            if lv.get("passed"):
                out[lv["level"]] = [str(d) for d in lv.get("details_missed") or []]
    return out


# ----------------------------------------------------------------------------- a grade


@dataclass(frozen=True)
class GradeEffect:
    """What one grade does to its session."""

    newly_passed: tuple[int, ...]  # levels this grade passed first: their pass time is now
    revealed: int | None           # the level a mock reveals (every revealed level passed in time)
    ended: str | None              # 'passed' (every level), 'time' (a mock graded after its deadline)
    overtime: bool
    signal: str                    # the session's signal, this grade counted
    clocks: tuple[LevelClock, ...]


def plan_grade(store: Store, session: Session, kata: Kata, card: dict[str, Any]) -> GradeEffect:
    """Work out what grading `card` now does to the session (store.record_attempt applies it)."""
    now = clock.now()
    rows = store.session_levels(session.id) or [
        SessionLevel(lv.level, lv.minutes, session.started_at, None, None) for lv in kata.levels]
    graded = {lv["level"]: bool(lv["passed"]) for lv in card["levels"]}
    newly = tuple(r.level for r in rows if graded.get(r.level) and r.passed_at is None)
    overtime = now > session.deadline
    revealed = [r.level for r in rows if r.revealed_at is not None]
    every_revealed_passes = bool(revealed) and all(graded.get(level) for level in revealed)
    ended = reveal = None
    if every_revealed_passes and len(revealed) == len(rows):
        ended = "passed"
    elif session.is_mock and overtime:
        ended = "time"
    elif session.is_mock and every_revealed_passes:
        reveal = max(revealed) + 1
    updated = [SessionLevel(r.level, r.minutes, now if r.level == reveal else r.revealed_at,
                            now if r.level in newly else r.passed_at, r.passed_attempt_id) for r in rows]
    clocks = _clocks(updated)
    signal = session_signal(clocks, session.deadline, session_details_missed(store, session, card))
    return GradeEffect(newly, reveal, ended, overtime, signal, tuple(clocks))


def pacing(clocks: list[LevelClock] | tuple[LevelClock, ...], until: float,
           names: dict[int, str]) -> list[dict[str, Any]]:
    """Per revealed level: minutes, time used, passed, over pace (JSON-ready). Levels not
    revealed yet appear as a number only: their names stay hidden."""
    out: list[dict[str, Any]] = []
    for c in clocks:
        if not c.revealed:
            out.append({"level": c.level, "revealed": False})
            continue
        used = c.used_s(until)
        out.append({"level": c.level, "revealed": True, "name": names.get(c.level, ""),
                    "minutes": c.minutes, "passed": c.passed_at is not None, "passed_at": c.passed_at,
                    "used_s": None if used is None else round(used, 1), "over_pace": c.over_pace(until)})
    return out


def deadline_warning(session: Session) -> str | None:
    """A line for the candidate as the deadline nears or passes (None while time is ample)."""
    left = session.remaining_s
    if left < 0:
        then = ("the mock ends at your next command" if session.is_mock
                else f"grades from now on are recorded as overtime; `kata stop {session.kata}` ends the session")
        return f"time is up ({_minutes(-left)} over): {then}"
    if left <= WARN_BEFORE_DEADLINE_S:
        return f"{_minutes(left)} left: grade what works now (`kata grade`)"
    return None


def _minutes(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def expire_if_due(store: Store, session: Session | None) -> Session | None:
    """End a mock whose time ran out (at its deadline); returns the session as it now is.
    A timed session stays open after its deadline: later grades are overtime."""
    if session is None or not session.is_mock or session.status != "active":
        return session
    if clock.now() <= session.deadline:
        return session
    store.end_session(session.id, "time", at=session.deadline)
    return store.session(session.id)


# ----------------------------------------------------------------------------- mocks


def running_mock(store: Store, slug: str | None) -> Session | None:
    """The newest active mock of `slug` (of any kata when None); its time may have run out
    (expire_if_due ends it)."""
    mocks = [s for s in store.active_sessions() if s.is_mock and (slug is None or s.kata == slug)]
    return mocks[-1] if mocks else None


def waiting_mock(store: Store, slug: str | None) -> Session | None:
    """The newest ended mock whose follow-ups are not answered, or not marked yet."""
    for session in store.mock_sessions(slug):
        record = store.mock_record(session.id)
        if session.status == "ended" and (record.answers is None or record.marks is None):
            return session
        if session.status == "ended":
            return None
    return None


def mock_rows(store: Store, cat: Catalog, slug: str | None = None) -> list[dict[str, Any]]:
    """`kata history --mock`: every mock with its signal, coverage and debrief."""
    rows = []
    for session in store.mock_sessions(slug):
        if session.kata not in cat.katas:
            continue
        kata = cat.katas[session.kata]
        record = store.mock(session.id)
        clocks = level_clocks(store, session, kata)
        debrief = record.debrief if record else None
        passed = 0
        for c in clocks:
            if c.passed_at is None:
                break
            passed += 1
        state = ("running" if session.status == "active" else "done" if debrief
                 else "awaiting answers")
        rows.append({"session_id": session.id, "kata": kata.slug, "started_at": session.started_at,
                     "minutes": session.minutes, "levels_passed": passed, "num_levels": len(kata.levels),
                     "signal": debrief["signal"] if debrief else session_signal(
                         clocks, session.deadline, session_details_missed(store, session)),
                     "coverage": debrief["coverage"] if debrief else None, "state": state,
                     "debrief": debrief})
    return rows
