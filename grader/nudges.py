"""Interviewer nudges: in a mock, a failing hidden test's box leads with the question an
interviewer would ask to point the candidate at the rule they missed.

The question is that of the first clarification settling the test's rules (its metadata's
``settled_by``, from the level's SETTLED_BY map) that belongs to a revealed level: "when is
a tp degree invalid?". A test whose rules the Ask states (or that no rule names) gets its
own description under "does your code hold to this?". Nothing of a level not revealed is
ever quoted: a clarification of a later level is skipped.

Each rule is recorded once per mock, as an event "nudge", the first grade in which one of
its tests fails: {rule, test, clarification, question, asked_before}. `asked_before` says
whether a clarification settling the rule had been answered before that grade: a rule met
*first* through a failing grade is one nobody asked about (grader/debrief.py counts those).
A test that failed because the file could not load, or because its code raised
NotImplementedError, meets no rule: it gets no nudge.

Data only: `kata grade` puts each nudge on its test (``test["nudge"]``), the scorecard draws
it (grader/cli/scorecard.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader import clock
from grader.catalog import Kata
from grader.statement import Clarification, Statement
from grader.store import Store

if TYPE_CHECKING:  # the CLI imports this module at start, and the engine only when it grades
    from grader.engine.suite_listing import Rule

NUDGE = "nudge"  # the event's kind
HOLD_TO_THIS = "does your code hold to this?"  # a rule the Ask states: its description follows
_FIRST_PERSON = re.compile(r"\b(?:I|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself)\b")


@dataclass(frozen=True)
class Nudge:
    """What the interviewer says on one failing test."""

    line: str                   # after "Interviewer: " in the box
    clarification: str | None   # the clarification quoted (None: the test's description follows)
    question: str               # the clarification's question, or the test's description


def interviewer_question(question: str) -> str:
    """A clarification's question as the interviewer puts it: "When is a tp degree invalid?"
    becomes "when is a tp degree invalid?"; one in the candidate's voice ("Can I fork ...?")
    is quoted: 'did you ask "Can I fork ...?"'."""
    if _FIRST_PERSON.search(question):
        return f'did you ask "{question}"'
    first, _, rest = question.partition(" ")
    if first[:1].isupper() and first[1:].islower() and first.isalpha():  # not GQA, KV, Llama-3
        first = first.lower()
    return f"{first} {rest}".strip()


def nudge_for(test: dict[str, Any], clarifications: dict[str, Clarification], revealed: set[int]) -> Nudge:
    """The nudge of a failing test: its first settling clarification of a revealed level,
    else its description."""
    for clarification_id in test.get("settled_by") or ():
        found = clarifications.get(clarification_id)
        if found is not None and found.level in revealed:
            return Nudge(interviewer_question(found.question), found.id, found.question)
    return Nudge(HOLD_TO_THIS, None, str(test.get("description", "")))


def meets_a_rule(test: dict[str, Any], import_error: str | None) -> bool:
    """Whether a failing test met a rule: its code ran and answered wrongly (or hung), not a
    file that cannot load, nor a function still raising NotImplementedError."""
    if test["passed"]:
        return False
    message = str(test.get("message", ""))
    if import_error and message.strip() == import_error.strip():
        return False
    got = str((test.get("details") or {}).get("got", ""))
    return "NotImplementedError" not in message and "NotImplementedError" not in got


def nudges(card: dict[str, Any], statement: Statement, revealed: set[int]) -> dict[str, Nudge]:
    """nodeid -> the nudge of each failing test of a revealed level that met a rule."""
    clarifications = {c.id: c for c in statement.clarifications()}
    return {t["nodeid"]: nudge_for(t, clarifications, revealed) for t in card["tests"]
            if t["level"] in revealed and meets_a_rule(t, card.get("import_error"))}


def rules_path(kata: Kata, level: int) -> Path:
    """The file holding the RULES map of a level: test_level<N>.py of a package suite, else
    the suite's one module."""
    suite = kata.suite_path
    return suite / f"test_level{level}.py" if suite.is_dir() else suite


def kata_rules(kata: Kata) -> dict[int, list[Rule] | None]:
    """level -> its rules (None where the source cannot say)."""
    from grader.engine.suite_listing import level_rules

    return {lv.level: level_rules(rules_path(kata, lv.level)) for lv in kata.levels}


def answered_clarifications(store: Store, kata: str, session_id: int, until: float) -> set[str]:
    """The ids of the clarifications `kata ask` answered in the session up to `until`."""
    return {e.data["clarification"] for e in store.events(kata, session_id=session_id, kind="ask")
            if e.at <= until and e.data.get("clarification")}


def record_nudges(store: Store, kata: Kata, statement: Statement, session_id: int, card: dict[str, Any],
                  shown: dict[str, Nudge], revealed: set[int]) -> list[dict[str, Any]]:
    """One "nudge" event per rule met for the first time in this mock through a failing test
    of this grade (`shown`: its nudges; a test no rule names stands for itself); returns
    their data. Call it once the grade is recorded."""
    rules = kata_rules(kata)
    seen = {_key(e.data.get("rule"), e.data.get("test"))
            for e in store.events(kata.slug, session_id=session_id, kind=NUDGE)}
    asked = answered_clarifications(store, kata.slug, session_id, clock.now())
    clarifications = {c.id: c for c in statement.clarifications()}
    recorded = []
    for test in card["tests"]:
        if test["nodeid"] not in shown:
            continue
        naming: list[Rule | None] = [r for r in rules.get(test["level"]) or () if test["name"] in r.tests]
        for rule in naming or [None]:
            text = rule.text if rule is not None else None
            if _key(text, test["name"]) in seen:
                continue
            seen.add(_key(text, test["name"]))
            settled = rule.settled_by if rule is not None else tuple(test.get("settled_by") or ())
            quoted = next((clarifications[i] for i in settled
                           if i in clarifications and clarifications[i].level in revealed), None)
            data = {"rule": text, "test": test["name"], "clarification": quoted.id if quoted else None,
                    "question": quoted.question if quoted else str(test.get("description", "")),
                    "asked_before": bool(asked & set(settled))}
            store.record_event(kata.slug, NUDGE, session_id, level=test["level"], data=data)
            recorded.append(data)
    return recorded


def _key(rule: str | None, test: str | None) -> tuple[str, str | None]:
    """What a nudge is recorded once for: its rule, or its test where no rule names it."""
    return ("rule", rule) if rule is not None else ("test", test)
