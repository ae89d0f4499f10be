"""The debrief of a mock interview, as data: per level the time used against its minutes,
the grade attempts, the hints and the first failing property of each failed attempt; the
interview signal from the levels' pass times; each follow-up's answer scored point by point
(grader/followups.py) with the totals; and one line on what to practise next. Levels the
mock never revealed appear by number only.
"""

from __future__ import annotations

from typing import Any

from grader import clock
from grader.catalog import Catalog, Kata
from grader.followups import coverage, score_mock
from grader.progress import most_needed
from grader.sessions import LevelClock, level_clocks, session_details_missed, session_signal
from grader.store import Session, Store


def build_debrief(store: Store, session: Session, kata: Kata, catalog: Catalog) -> dict[str, Any]:
    clocks = level_clocks(store, session, kata)
    until = session.ended_at or clock.now()
    per_level = _attempts_by_level(store, session)
    hints = {lv.level: store.hints_shown(kata.slug, session.id, lv.level) for lv in kata.levels}
    missed = session_details_missed(store, session)  # the details a passed level missed
    levels: list[dict[str, Any]] = []
    for c in clocks:
        if not c.revealed:
            levels.append({"level": c.level, "revealed": False})
            continue
        used = c.used_s(until)
        attempts = per_level.get(c.level, [])
        levels.append({
            "level": c.level, "revealed": True, "name": kata.level(c.level).name, "minutes": c.minutes,
            "used_s": None if used is None else round(used, 1), "passed": c.passed_at is not None,
            "over_pace": c.over_pace(until), "grade_attempts": len(attempts), "hints": hints[c.level],
            "failed_attempts": [a for a in attempts if a["first_failure"] is not None],
            "details_missed": missed.get(c.level, []) if c.passed_at is not None else []})
    record = store.mock(session.id)
    followups = score_mock(record.followups or [], record.answers, record.marks) if record else []
    debrief = {
        "kata": kata.slug, "session_id": session.id, "started_at": session.started_at,
        "ended_at": session.ended_at, "end_reason": session.end_reason, "minutes": session.minutes,
        "time_used_s": round(until - session.started_at, 1), "levels": levels,
        "signal": session_signal(clocks, session.deadline, missed), "followups": followups,
        "coverage": coverage(followups),
    }
    debrief["practise_next"] = practise_next(debrief, kata, clocks, store, catalog)
    return debrief


def _attempts_by_level(store: Store, session: Session) -> dict[int, list[dict[str, Any]]]:
    """Each grade of the session, filed under the level being worked on when it ran: the lowest
    level it graded that no earlier grade had passed."""
    out: dict[int, list[dict[str, Any]]] = {}
    passed_before: set[int] = set()
    for attempt in reversed(store.attempts_for_session(session.id)):  # oldest first
        card = attempt.scorecard(store)
        graded = sorted(lv["level"] for lv in card["levels"])
        current = next((lv for lv in graded if lv not in passed_before), None)
        passed_before |= {lv["level"] for lv in card["levels"] if lv["passed"]}
        if current is None:
            continue
        out.setdefault(current, []).append({
            "attempt_id": attempt.id, "graded_at": attempt.graded_at, "score": attempt.score,
            "first_failure": None if card["levels"] and all(lv["passed"] for lv in card["levels"])
            else first_failure(card)})
    return out


def first_failure(card: dict[str, Any]) -> str:
    """The first failing property of a scorecard, in words a candidate recognises (a core test
    before a detail of the same level: that is what failed the level)."""
    if card.get("import_error"):
        return f"your file could not be loaded: {card['import_error'].splitlines()[0]}"
    failing = [t for t in card["tests"] if not t["passed"]]
    if not failing:
        return "no test ran"
    first = min(failing, key=lambda t: (t["level"], bool(t.get("detail"))))
    return f"L{first['level']} {first['description']}"


def practise_next(debrief: dict[str, Any], kata: Kata, clocks: list[LevelClock], store: Store,
                  catalog: Catalog) -> str:
    """One line: the level not passed, else the level most over its pace (or the time running
    out before a level), else the follow-ups when under half their points were covered, else
    the next kata by the mock's rule."""
    stuck = next((lv for lv in debrief["levels"] if lv.get("revealed") and not lv["passed"]), None)
    if stuck is not None:
        failures = [a["first_failure"] for a in stuck["failed_attempts"]]
        why = f": your last grade failed '{failures[-1]}'" if failures else ": it was never graded"
        return (f"level {stuck['level']} of {kata.slug} ({stuck['name']}){why}. "
                f"Redo it untimed with `kata start {kata.slug}`, then mock it again")
    slow = [lv for lv in debrief["levels"] if lv.get("over_pace")]
    if slow:
        worst = max(slow, key=lambda lv: lv["used_s"] / (60 * lv["minutes"]))
        return (f"pace on level {worst['level']} ({worst['name']}): {round(worst['used_s'] / 60)} min "
                f"against ~{worst['minutes']}; mock {kata.slug} again in a few days")
    unreached = next((lv for lv in debrief["levels"] if not lv.get("revealed")), None)
    if unreached is not None:
        return (f"pace: the time ran out before level {unreached['level']}; mock {kata.slug} again "
                "and aim for each level's minutes")
    cov = debrief["coverage"]
    if cov and cov["points"] and cov["covered"] * 2 < cov["points"]:
        return (f"the follow-ups: you covered {cov['covered']} of {cov['points']} points; read the "
                "points above and answer them aloud")
    nxt, why = most_needed(catalog, store, exclude=frozenset({kata.slug}))
    return f"`kata mock {nxt.slug}`: {why}"
