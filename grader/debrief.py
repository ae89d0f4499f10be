"""The debrief of a mock interview, as data: per level the time used against its minutes,
the grade attempts, the hints and the first failing property of each failed attempt, the
clarifying questions asked before its first grade (and how many of its rules they settled)
and the nudges; the interview signal from the levels' pass times; each follow-up's answer
scored point by point (grader/followups.py) with the totals; the interviewer's write-up in
one line ("asked 3 clarifying questions before coding; 2 nudges on level 2; level 3 passed
at 61 min; follow-ups 5 of 8 points"); and one line on what to practise next. Levels the
mock never revealed appear by number only.

How the questions and nudges count, per revealed level:

- *questions before its first grade*: the `kata ask` questions (not `--list`) from the
  level's reveal (level 1: the start) to the first grade that graded it, or to the end;
- *rules settled by questions*: the rules of its RULES map whose SETTLED_BY names a
  clarification answered from the start of the mock to that first grade;
- *nudges*: the rules met first through a failing grade (grader/nudges.py: a "nudge" event
  whose rule no answered clarification had settled before).
"""

from __future__ import annotations

from typing import Any

from grader import clock
from grader.catalog import Catalog, Kata
from grader.followups import coverage, score_mock
from grader.nudges import NUDGE, kata_rules
from grader.progress import most_needed
from grader.sessions import LevelClock, level_clocks, session_details_missed, session_signal
from grader.store import Session, Store


def build_debrief(store: Store, session: Session, kata: Kata, catalog: Catalog) -> dict[str, Any]:
    clocks = level_clocks(store, session, kata)
    until = session.ended_at or clock.now()
    per_level = _attempts_by_level(store, session)
    hints = {lv.level: store.hints_shown(kata.slug, session.id, lv.level) for lv in kata.levels}
    missed = session_details_missed(store, session)  # the details a passed level missed
    counts = interview_counts(store, session, kata, until)
    levels: list[dict[str, Any]] = []
    for c in clocks:
        if not c.revealed:
            levels.append({"level": c.level, "revealed": False})
            continue
        used = c.used_s(until)
        attempts = per_level.get(c.level, [])
        level = kata.level(c.level)
        assert level is not None, "a session's clocks are the kata's levels"
        levels.append({
            "level": c.level, "revealed": True, "name": level.name, "minutes": c.minutes,
            "used_s": None if used is None else round(used, 1), "passed": c.passed_at is not None,
            "over_pace": c.over_pace(until), "grade_attempts": len(attempts), "hints": hints[c.level],
            "failed_attempts": [a for a in attempts if a["first_failure"] is not None],
            "details_missed": missed.get(c.level, []) if c.passed_at is not None else [],
            "passed_at_min": None if c.passed_at is None else round((c.passed_at - session.started_at) / 60, 1),
            **counts.get(c.level, {})})
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
    debrief["summary"] = write_up(debrief)
    return debrief


def debrief_to_reprint(store: Store, session: Session, kata: Kata, catalog: Catalog,
                       stored: dict[str, Any]) -> dict[str, Any]:
    """A recorded debrief as it was said, completed with what it lacks (a debrief recorded
    before questions and nudges were counted) from the store."""
    fresh = build_debrief(store, session, kata, catalog)
    levels = [{**new, **old} for new, old in zip(fresh["levels"], stored.get("levels", []))]
    merged = {**fresh, **stored, "levels": levels or fresh["levels"]}
    merged["summary"] = stored.get("summary") or write_up(merged)
    return merged


def interview_counts(store: Store, session: Session, kata: Kata, until: float) -> dict[int, dict[str, Any]]:
    """level -> {questions_before_grade, rules_settled_by_questions, num_rules, nudges} for
    each revealed level (see the module docstring; num_rules None where the suite's source
    cannot say, and then no rule counts as settled)."""
    asks = [e for e in store.events(kata.slug, session_id=session.id, kind="ask") if not e.data.get("list")]
    nudged = store.events(kata.slug, session_id=session.id, kind=NUDGE)
    first_graded: dict[int, float] = {}
    for attempt in reversed(store.attempts_for_session(session.id)):  # oldest first
        for lv in attempt.scorecard(store).get("levels", []):
            first_graded.setdefault(lv["level"], attempt.graded_at)
    rules = kata_rules(kata)
    out: dict[int, dict[str, Any]] = {}
    for row in store.session_levels(session.id):
        if row.revealed_at is None:
            continue
        before = first_graded.get(row.level, until)
        since = session.started_at if row.level == 1 else row.revealed_at
        answered = {e.data["clarification"] for e in asks if e.at <= before and e.data.get("clarification")}
        level_rules = rules.get(row.level)
        out[row.level] = {
            "questions_before_grade": sum(1 for e in asks if since <= e.at <= before),
            "rules_settled_by_questions": sum(1 for r in level_rules or () if answered & set(r.settled_by)),
            "num_rules": None if level_rules is None else len(level_rules),
            "nudges": sum(1 for e in nudged if e.level == row.level and not e.data.get("asked_before"))}
    return out


def write_up(debrief: dict[str, Any]) -> str:
    """The interviewer's notes in one line: the questions asked before coding, the nudges,
    when each level passed, the follow-ups' points."""
    revealed = [lv for lv in debrief["levels"] if lv.get("revealed")]
    clauses = [said for lv in revealed if (said := _questions_clause(lv))]
    nudged = [(lv["level"], lv["nudges"]) for lv in revealed if lv.get("nudges")]
    if nudged:
        (level, num), rest = nudged[0], nudged[1:]
        clauses.append(", ".join([f"{_count(num, 'nudge')} on level {level}"] + [f"{n} on level {lv}" for lv, n in rest]))
    elif any(lv.get("grade_attempts") and "nudges" in lv for lv in revealed):
        clauses.append("no nudges")
    passes, said_passed = [], False
    for lv in revealed:
        if not lv.get("passed"):
            passes.append(f"level {lv['level']} not passed")
            continue
        when = lv.get("passed_at_min")
        missed = len(lv.get("details_missed") or [])
        passes.append(f"level {lv['level']}" + (" passed" if not said_passed else "")
                      + (f" at {int(when)} min" if when is not None else "")
                      + (f" ({_count(missed, 'detail')} missed)" if missed else ""))
        said_passed = True
    if passes:
        clauses.append(", ".join(passes))
    cov = debrief.get("coverage")
    if cov:
        clauses.append(f"follow-ups {cov['covered']} of {cov['points']} points")
    elif debrief.get("followups"):
        clauses.append("follow-ups not answered")
    return "; ".join(clauses)


def _questions_clause(lv: dict[str, Any]) -> str | None:
    """Level 1: "asked 3 clarifying questions before coding (settling 5 of level 1's 9
    rules)"; a later level, when asked about before its first grade: "2 more before grading
    level 2 (...)"."""
    asked = lv.get("questions_before_grade")
    if asked is None or (lv["level"] > 1 and not asked):
        return None
    if lv["level"] == 1:
        said = f"asked {_count(asked, 'clarifying question') if asked else 'no clarifying question'} before coding"
    else:
        said = f"{asked} more before grading level {lv['level']}"
    if asked and lv.get("num_rules"):
        whose = "level 1's" if lv["level"] == 1 else "its"
        said += f" (settling {lv['rules_settled_by_questions']} of {whose} {lv['num_rules']} rules)"
    return said


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


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
    before any detail, of its level or an earlier one: a core test is what failed the grade)."""
    if card.get("import_error"):
        return f"your file could not be loaded: {card['import_error'].splitlines()[0]}"
    failing = [t for t in card["tests"] if not t["passed"]]
    if not failing:
        return "no test ran"
    first = min(failing, key=lambda t: (bool(t.get("detail")), t["level"]))
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
