"""A mock's timeline, from what the store holds: the reveal of each level, the questions
asked, the Specs opened, the example checks, the grades with each level's result and the
details it missed, the hints, the nudges, the end of the coding part and the follow-up
scores, in time order with the minutes from the start.

Built when it is read (it is the store's record, not a copy), so a debrief recorded before
a kind of event existed gets its timeline too. Only revealed levels appear: a grade of a
mock grades those alone, `kata ask` names no later level's clarification, hints are of a
revealed level.
"""

from __future__ import annotations

import json
from typing import Any

from grader.catalog import Kata
from grader.errors import CatalogError
from grader.nudges import HOLD_TO_THIS, interviewer_question
from grader.statement import load_statement
from grader.store import Session, Store

# Events at the same second (a fake clock; a grade that reveals the next level) read in the
# order they happen: a grade, then its nudges, then the level it reveals.
_ORDER = ("start", "ask", "spec", "hint", "check", "grade", "nudge", "reveal", "end", "followup")
_ENDED = {"passed": "every level passed", "stopped": "stopped", "time": "the time ran out"}


Entry = tuple[float, str, int | None, str]  # (at, kind, level, text)


def build_timeline(store: Store, session: Session, kata: Kata) -> list[dict[str, Any]]:
    """Every entry {at, minute, kind, level, text} of the mock, oldest first. Nudges of one
    grade that say the same (two rules one clarification settles) are one entry."""
    entries = _reveals(store, session, kata) + _events(store, session, kata) + _grades(store, session)
    entries += [(at, "check", None, text) for at, text in _checks(store, session.id)]
    entries += [(at, "hint", level, f"hint {stage + 1} of level {level}") for at, level, stage in _hints(store, session.id)]
    if session.ended_at is not None and session.status == "ended":
        entries.append((session.ended_at, "end", None,
                        f"the coding part ends ({_ENDED.get(session.end_reason or '', session.end_reason)})"))
    entries.sort(key=lambda e: (e[0], _ORDER.index(e[1]) if e[1] in _ORDER else len(_ORDER)))
    out: list[dict[str, Any]] = []
    num_rules: dict[tuple[float, str], int] = {}  # a nudge's line -> the rules it stands for
    for at, kind, level, text in entries:
        if kind == "nudge":
            num_rules[(at, text)] = num_rules.get((at, text), 0) + 1
            if num_rules[(at, text)] > 1:
                continue
        out.append({"at": at, "minute": round((at - session.started_at) / 60, 1), "kind": kind, "level": level,
                    "text": text})
    for entry in out:
        if entry["kind"] == "nudge" and (n := num_rules[(entry["at"], entry["text"])]) > 1:
            entry["text"] += f" ({n} rules)"
    return out


def _reveals(store: Store, session: Session, kata: Kata) -> list[Entry]:
    names = {lv.level: lv.name for lv in kata.levels}
    out: list[Entry] = []
    for row in store.session_levels(session.id):
        if row.revealed_at is not None:
            said = "the mock starts: level 1" if row.level == 1 else f"level {row.level}"
            out.append((row.revealed_at, "start" if row.level == 1 else "reveal", row.level,
                        f"{said} ({names.get(row.level, '')}) revealed"))
    return out


def _events(store: Store, session: Session, kata: Kata) -> list[Entry]:
    """The asks, Specs opened, nudges and follow-up scores (the store's events)."""
    try:
        questions = {c.id: c.question for c in load_statement(kata).clarifications()}
    except CatalogError:
        questions = {}
    followups: list[str] = []  # numbered as asked (a later self-mark re-scores a question)
    out: list[Entry] = []
    for event in store.events(kata.slug, session_id=session.id):
        asked = str(event.data.get("question"))
        if event.kind == "followup" and asked not in followups:
            followups.append(asked)
        number = followups.index(asked) + 1 if event.kind == "followup" else 0
        text = _event_text(event.kind, event.level, event.data, questions, number)
        if text is not None:
            out.append((event.at, event.kind, event.level, text))
    return out


def _grades(store: Store, session: Session) -> list[Entry]:
    """Each grade; a passed level's details missed are named when they change."""
    out: list[Entry] = []
    named: dict[int, list[str]] = {}
    for attempt in reversed(store.attempts_for_session(session.id)):  # oldest first
        card = attempt.scorecard(store)
        out.append((attempt.graded_at, "grade", None, grade_text(card, named)))
        named.update({lv["level"]: list(lv.get("details_missed") or []) for lv in card.get("levels", [])
                      if lv.get("passed")})
    return out


def grade_text(card: dict[str, Any], named: dict[int, list[str]] | None = None) -> str:
    """A grade in one line: its score and each level's result with the details it missed
    (by name unless `named` holds the same for that level: an earlier grade said them)."""
    if card.get("import_error"):
        return f"graded {card.get('score', 0)}/100: the file could not be loaded"
    parts = []
    for lv in card.get("levels", []):
        missed = list(lv.get("details_missed") or [])
        if not lv.get("passed"):
            parts.append(f"level {lv['level']} failed")
            continue
        said = f"level {lv['level']} passed"
        if missed:
            said += f" ({len(missed)} detail{'s' if len(missed) != 1 else ''} missed"
            said += ")" if (named or {}).get(lv["level"]) == missed else f": {'; '.join(missed)})"
        parts.append(said)
    return f"graded {card.get('score', 0)}/100: " + ", ".join(parts)


def _event_text(kind: str, level: int | None, data: dict[str, Any], questions: dict[str, str],
                number: int) -> str | None:
    """One event of the store in words (None: a kind the timeline does not show)."""
    if kind == "ask":
        if data.get("list"):
            return "listed the topics (`kata ask --list`)"
        asked = f'asked "{data.get("question", "")}"'
        if data.get("outcome") == "answer":
            topic = questions.get(str(data.get("clarification")))
            return f"{asked}: answered" + (f' as "{topic}"' if topic and topic != data.get("question") else "") + \
                f" (level {level})"
        if data.get("outcome") == "later":
            return f"{asked}: that comes later in the interview"
        return f"{asked}: your call"
    if kind == "spec":
        return f"opened the Spec of level {level}"
    if kind == "nudge":
        question = str(data.get("question", ""))
        said = interviewer_question(question) if data.get("clarification") else f"{HOLD_TO_THIS} {question}"
        return f"nudge on level {level}: {said}" + (" (asked about before)" if data.get("asked_before") else "")
    if kind == "followup":
        found = len(data.get("covered") or [])
        how = " (self-marked)" if data.get("self_marked") is not None else ""
        of_level = f" (level {level})" if level is not None else ""
        return f"follow-up {number}{of_level}: {found} of {data.get('num_points', 0)} points{how}"
    return None


# store.py keeps a reader for the latest check and a count of hints only; the timeline needs
# every row of the session with its time.

def _checks(store: Store, session_id: int) -> list[tuple[float, str]]:
    rows = store.conn.execute("SELECT checked_at, levels FROM checks WHERE session_id = ? ORDER BY checked_at, id",
                              (session_id,)).fetchall()
    out = []
    for at, levels in rows:
        results = {int(k): bool(v) for k, v in json.loads(levels).items()}
        said = ", ".join(f"level {n} {'passed' if ok else 'failed'}" for n, ok in sorted(results.items()))
        out.append((float(at), f"ran the examples: {said}" if said else "ran the examples"))
    return out


def _hints(store: Store, session_id: int) -> list[tuple[float, int, int]]:
    rows = store.conn.execute("SELECT shown_at, level, stage FROM hints WHERE session_id = ? ORDER BY shown_at, id",
                              (session_id,)).fetchall()
    return [(float(at), int(level), int(stage)) for at, level, stage in rows]
