"""Follow-up answers scored point by point against the answer key.

Each point of a follow-up carries key terms in groups (kata.toml, grader/catalog.py)::

    keys = [["running max", "row max"], ["rescale", "exp(m - m')"]]

The point counts when every group has one of its alternatives in the answer, matched on
stemmed words (grader/text_match.py: case, spacing, punctuation and inflection do not count,
so "caching", "KV-cache" and "kv caches" all name "kv cache"). A follow-up's score is the
points found over its points. A self-mark (the candidate's own `covered`) overrides what the
keys found, and both stay on record: the debrief says "self-marked: 3 of 4; keys found 2".

Data only: the CLI asks and prints (grader/cli/commands/mock.py, grader/cli/mock_view.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grader.store import Store
from grader.text_match import contains_term, tokens

# A question as a mock records it (grader/mock.py, choose_followups):
# {"index", "question", "points", "keys", "level"}; records older than keys have no "keys".
Question = dict[str, Any]


def point_found(answer_tokens: list[str], groups: Sequence[Sequence[str]]) -> bool:
    """Whether every group of a point's keys has an alternative among the answer's words."""
    return bool(groups) and all(any(contains_term(answer_tokens, term) for term in group) for group in groups)


def points_found(answer: str, keys: Sequence[Sequence[Sequence[str]]]) -> list[int]:
    """The numbers (from 1) of the points whose keys the answer names."""
    said = tokens(answer)
    return [n for n, groups in enumerate(keys, start=1) if point_found(said, groups)]


def score_answer(question: Question, answer: str | None, self_marked: Sequence[int] | None) -> dict[str, Any]:
    """One follow-up's score: the points the keys found (None where the question has no keys),
    the self-mark if any, the points that count (the self-mark, else the keys') and the score."""
    num_points = len(question["points"])
    keys = question.get("keys") or []
    found = points_found(answer or "", keys) if any(keys) else None  # None: no point has keys
    covered = list(self_marked) if self_marked is not None else (found or [])
    return {"found": found, "self_marked": None if self_marked is None else list(self_marked),
            "covered": covered, "num_points": num_points,
            "score": round(len(covered) / num_points, 3) if num_points else 0.0}


def score_mock(questions: list[Question], answers: list[str] | None,
               marks: Sequence[list[int] | None] | None) -> list[dict[str, Any]]:
    """Every asked question with its answer and score (none scored before the answers)."""
    out = []
    for i, question in enumerate(questions):
        answer = answers[i] if answers else None
        mark = marks[i] if marks else None
        entry = {**question, "answer": answer}
        if answers is not None:
            entry.update(score_answer(question, answer, mark))
        out.append(entry)
    return out


def coverage(scored: list[dict[str, Any]]) -> dict[str, int] | None:
    """The totals of a scored mock (None before the answers): points covered (self-marks
    where given), points, points the keys found, and how many answers were self-marked."""
    if not scored or "covered" not in scored[0]:
        return None
    return {"covered": sum(len(q["covered"]) for q in scored),
            "points": sum(q["num_points"] for q in scored),
            "found": sum(len(q["found"] or []) for q in scored),
            "self_marked": sum(q["self_marked"] is not None for q in scored)}


def score_words(entry: dict[str, Any]) -> str:
    """How one answer scored, e.g. "3 of 4" or "self-marked: 3 of 4; keys found 2"."""
    num = entry["num_points"] if "num_points" in entry else len(entry["points"])
    found, marked = entry.get("found"), entry.get("self_marked")
    if marked is None:
        return f"{len(entry.get('covered') or [])} of {num}" + ("" if found is not None else " (no keys)")
    return f"self-marked: {len(marked)} of {num}; " + ("no keys" if found is None else f"keys found {len(found)}")


def record_scores(store: Store, kata: str, session_id: int, scored: list[dict[str, Any]]) -> None:
    """One `followup` event per scored answer (the latest event of a question is its score)."""
    for entry in scored:
        if "covered" not in entry:
            continue
        store.record_event(kata, "followup", session_id, level=entry.get("level"), data={
            "index": entry["index"], "question": entry["question"], "found": entry["found"],
            "self_marked": entry["self_marked"], "covered": entry["covered"],
            "num_points": entry["num_points"], "score": entry["score"]})
