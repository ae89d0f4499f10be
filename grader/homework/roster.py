"""The roster: one row per candidate × kata (row.py), built from unit results (see unit.py),
with every size capped and every failure worded for the coach.

Rows hold only what the coach's own grading found, plus the candidate's claims as validated
numbers. Text that comes from the candidate's code (exception messages, reprs, their source)
is cut to a fixed size here, so that a bundle of one kilobyte cannot make a report of
megabytes, and stripped of control and bidirectional-override characters, so that it reads
the same in a terminal and a browser as it does in an editor. Escaping for rich markup and
HTML happens where it is rendered (terminal.py, html.py).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from grader.catalog import Catalog
from grader.errors import KataError
from grader.homework.row import RosterRow
from grader.homework.selfreport import duration, self_reported_into
from grader.homework.similarity import RESEMBLES_THRESHOLD
from grader.homework.spec import Homework
from grader.interview_signal import LevelScore, interview_signal
from grader.textsafe import clean

MAX_MESSAGE_CHARS = 500
MAX_DETAIL_CHARS = 1200
MAX_FAILURES = 20          # per grading run; the rest are counted, not kept
MAX_PROBLEM_CHARS = 300
MAX_NAME_CHARS = 100
MAX_SOURCE_CHARS = 30_000
MAX_SOURCE_LINES = 800
MAX_NOTES = 5
DETAIL_KEYS = ("input", "expected", "got", "example", "where", "note")

_YOURS = ((re.compile(r"\b[Yy]our code\b"), "the solution"),
          (re.compile(r"\b[Yy]our file\b"), "the solution's file"))


def clip(value: Any, max_chars: int) -> str:
    """`value` as text of at most `max_chars` characters, hidden characters made visible."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)[: max_chars + 1]
    text = clean(text[: max_chars * 2])  # control sequences shown, never acting (textsafe)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def for_coach(text: str) -> str:
    """The engine words failures for the candidate ("your code raised …"); a coach reads
    them about someone else ("the solution raised …")."""
    for pattern, replacement in _YOURS:
        text = pattern.sub(replacement, text)
    return text


def clean_failure(test: dict[str, Any], private_suite: str | None = None) -> dict[str, Any]:
    """A failed test as the report keeps it: capped, coach-worded, only the known keys."""
    raw_details = test.get("details")
    details = raw_details if isinstance(raw_details, dict) else {}
    return {"test": clip(test.get("test") or test.get("name") or "", MAX_NAME_CHARS),
            "level": test.get("level") if isinstance(test.get("level"), int) else 0,
            "category": clip(test.get("category") or "", 40),
            "description": clip(test.get("description") or "", 300),
            "message": for_coach(clip(test.get("message") or "failed", MAX_MESSAGE_CHARS)),
            "details": {k: for_coach(clip(details[k], MAX_DETAIL_CHARS)) for k in DETAIL_KEYS
                        if details.get(k) not in (None, "")},
            "private_suite": private_suite}


def clip_source(source: str) -> tuple[str, int, bool]:
    """(what the report shows of the source, its number of lines, whether it was cut)."""
    lines = source.splitlines()
    shown = "\n".join(lines[:MAX_SOURCE_LINES])
    cut = len(lines) > MAX_SOURCE_LINES or len(shown) > MAX_SOURCE_CHARS
    return clean(shown[:MAX_SOURCE_CHARS]), len(lines), cut


def build_rows(homework: Homework, catalog: Catalog, results: list[dict[str, Any]],
               now: float | None = None) -> list[RosterRow]:
    """Rows in the order of the results; a rejected bundle is one row, however many units
    reported it."""
    now = time.time() if now is None else now
    rows: list[RosterRow] = []
    kept: list[dict[str, Any]] = []
    rejected: set[tuple[str, str]] = set()
    for result in results:
        if result.get("status") == "rejected":
            key = (str(result.get("bundle")), str(result.get("bundle_sha256")))
            if key in rejected:
                continue
            rejected.add(key)
        try:
            rows.append(_row(homework, catalog, result, now))
        except (KeyError, TypeError, ValueError, AttributeError, KataError) as exc:
            rows.append(RosterRow(candidate=clip(str(result.get("candidate") or "?"), MAX_NAME_CHARS),
                                  bundle=clip(str(result.get("bundle") or "?"), MAX_NAME_CHARS),
                                  kata=clip(str(result.get("kata") or "-"), 64), status="error",
                                  problem=f"this unit result cannot be read ({type(exc).__name__})"))
        kept.append(result)
    _mark_identical(rows, kept)
    return rows


def _row(homework: Homework, catalog: Catalog, result: dict[str, Any], now: float) -> RosterRow:
    status = str(result.get("status"))
    row = RosterRow(candidate=clip(result.get("candidate") or "?", MAX_NAME_CHARS),
                    bundle=clip(result.get("bundle") or "?", MAX_NAME_CHARS),
                    kata=clip(result.get("kata") or "-", 64) if status != "rejected" else "-",
                    status=status, seed=result.get("seed"),
                    problem=for_coach(clip(result.get("problem") or "", MAX_PROBLEM_CHARS)))
    hw_kata = homework.kata(row.kata)
    if hw_kata is None or status == "rejected":
        return row
    kata = catalog.get(row.kata)
    row.num_levels, row.required_levels = len(kata.levels), hw_kata.required_levels
    row.time_limit_s = hw_kata.minutes * 60.0  # the coach's limit, not the one the bundle states
    row.followups = [f.question for f in kata.followups]  # what str(f) gave the reports
    self_reported_into(row, result.get("self_reported") or {}, homework, kata, now)
    if status != "graded":
        return row
    graded = result["regraded"]
    row.score, row.passed = graded["score"], graded["passed"]
    row.levels_passed = sum(1 for lv in graded["levels"] if lv["passed"])
    levels = [LevelScore(level=lv["level"], name=lv.get("name", ""), passed=lv["passed"], score=0,
                         num_passed=0, num_tests=0, details_missed=list(lv.get("details_missed") or []))
              for lv in graded["levels"]]
    row.signal = interview_signal(levels, row.overtime, timed=True)
    row.contained = graded.get("contained")
    row.notes = [clip(n, 200) for n in graded.get("notes", [])[:MAX_NOTES]]
    row.failures = [clean_failure(f) for f in graded.get("failures", [])[:MAX_FAILURES]]
    row.num_failures = int(graded.get("num_failures", len(row.failures)))
    for suite in result.get("private", []):
        row.private_total += int(suite["total"])
        row.private_passed += int(suite["passed"])
        row.num_failures += int(suite["total"]) - int(suite["passed"])
        row.failures += [clean_failure(f, clip(suite["name"], 100)) for f in suite.get("failures", [])[:MAX_FAILURES]]
    _claim(row, result)
    row.reference_similarity = result.get("reference_similarity")
    row.copy_of_reference = bool(result.get("copy_of_reference"))
    if "similarity_not_measured" in result:
        row.similarity_not_measured = clip(result["similarity_not_measured"] or "", MAX_PROBLEM_CHARS)
    elif row.reference_similarity is None:  # a unit result from before the flag: None meant the same
        row.similarity_not_measured = "not measured (a result from an older kata)"
    row.source, row.source_lines, cut = clip_source(str(result.get("source") or ""))
    row.source_truncated = cut or bool(result.get("source_truncated"))
    return row


def _claim(row: RosterRow, result: dict[str, Any]) -> None:
    claimed, replay = result.get("claimed"), result.get("replay")
    row.mismatch = bool(result.get("mismatch"))
    if not claimed:
        row.claim_note = "no claim (never graded by the candidate)"
        return
    row.claimed_score, row.claimed_seed = claimed["score"], claimed["seed"]
    if row.mismatch:
        got = f"{replay['score']}" if replay else f"{row.score}"
        row.claim_note = (f"MISMATCH: claimed {row.claimed_score} with seed {row.claimed_seed}, "
                          f"but that seed re-grades to {got}")
    elif replay and replay.get("reproduces") and replay["score"] != row.score:
        row.claim_note = (f"claimed {row.claimed_score} reproduces with the candidate's seed "
                          f"{row.claimed_seed}; your seed {row.seed} gives {row.score}")
    else:
        row.claim_note = "claim matches"


def _mark_identical(rows: list[RosterRow], results: list[dict[str, Any]]) -> None:
    """Candidates who handed in byte-identical solutions of a kata name each other."""
    by_source: dict[tuple[str, str], list[RosterRow]] = {}
    for row, result in zip(rows, results):
        sha = result.get("solution_sha256")
        if row.status == "graded" and sha:
            by_source.setdefault((row.kata, sha), []).append(row)
    for same in by_source.values():
        for row in same:
            row.identical_to = sorted({o.candidate for o in same if o is not row and o.bundle != row.bundle})


def candidate_summary(rows: list[RosterRow]) -> str:
    """One line per candidate: what a coach says before opening the details."""
    parts = []
    for r in rows:
        if r.status == "rejected":
            return f"bundle rejected: {r.problem}"
        if r.status != "graded":
            parts.append(f"{r.kata} {r.status}")
            continue
        text = f"{r.kata} {r.score}/100 ({r.signal}"
        text += f", private {r.private_passed}/{r.private_total})" if r.private_total else ")"
        parts.append(text)
    flags = []
    if any(r.mismatch for r in rows):
        flags.append("claims do not reproduce (MISMATCH)")
    if any(r.copy_of_reference for r in rows):
        flags.append("copy of the reference: " + ", ".join(r.kata for r in rows if r.copy_of_reference))
    for r in rows:
        if r.similarity_not_measured:
            flags.append(f"similarity to the reference not measured for {r.kata}: {r.similarity_not_measured}")
    fast = [f"{r.kata} L{lv['level']} at {duration(lv['passed_after_s'])} of {lv['budget_min']} min"
            for r in rows for lv in (r.level_times or []) if lv["fast"]]
    if fast:
        flags.append("FAST, passed in under 10 % of the minutes (self-reported): " + ", ".join(fast))
    close = [r for r in rows if not r.copy_of_reference and (r.reference_similarity or 0) >= RESEMBLES_THRESHOLD]
    if close:
        flags.append("resembles the reference: " + ", ".join(f"{r.kata} ({r.reference_similarity:.0%})" for r in close))
    if any(r.identical_to for r in rows):
        flags.append("identical to another candidate's: " + ", ".join(r.kata for r in rows if r.identical_to))
    if any(r.reveals for r in rows):
        flags.append(f"{sum(r.reveals for r in rows)} reveal(s) of the reference (self-reported)")
    if any(r.late for r in rows):
        flags.append("late (self-reported)")
    if any(r.contained is False for r in rows):
        flags.append("graded uncontained")
    return "; ".join(parts + flags)
