"""The part of a roster row that comes from the candidate's machine: time used, the number of
grades, each level's first-pass time, hints, reveals, lateness. None of it can be checked, and
every renderer labels it self-reported; it is still what a coach asks about ("100 in nine
seconds?"), so a level first passed in under ``FAST_SHARE`` of its minutes is flagged FAST.
The minutes are the kata's own (kata.toml), not a figure from the bundle.
"""

from __future__ import annotations

from typing import Any

from grader.catalog import Kata
from grader.homework.row import RosterRow
from grader.homework.spec import Homework

FAST_SHARE = 0.10  # a level passed in under this share of its minutes is flagged FAST


def duration(seconds: float | None) -> str:
    """"9 s", "12 min 5 s", "1 h 3 min": seconds stay visible under a minute (never "0 min")."""
    if seconds is None:
        return "-"
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


def self_reported_into(row: RosterRow, reported: dict[str, Any], homework: Homework, kata: Kata,
                       now: float) -> None:
    """The row's self-reported fields, from a unit result's "self_reported" block."""
    row.time_used_s = reported.get("time_used_s")
    row.hints_used = int(reported.get("hints_used") or 0)
    reveals = reported.get("reveals") or []
    row.reveal_times = [r["at"] for r in reveals]
    row.reveals = max(len(reveals), int(reported.get("reveal_count") or 0))
    started = reported.get("session_started_at")
    row.reveals_before_start = sum(1 for t in row.reveal_times if started is not None and t < started)
    graded_at = reported.get("graded_at")
    row.late = homework.is_late(graded_at if graded_at is not None else now)
    _level_times(row, reported, kata)


def _level_times(row: RosterRow, reported: dict[str, Any], kata: Kata) -> None:
    """Each level's first pass, timed from the session's start, against the minutes of the
    levels up to it (kata.toml): FAST under 10 %. Cumulative, so that writing every level and
    grading once (level 1 takes all the time, the others none of their own) is not FAST,
    while 100 in nine seconds is FAST at every level."""
    grades = reported.get("num_grades")
    row.num_grades = int(grades) if grades is not None else None
    levels, started = reported.get("levels"), reported.get("session_started_at")
    if levels is None:
        return
    passed = {int(lv["level"]): lv for lv in levels if lv.get("passed_at") is not None}
    row.level_times, budget_min = [], 0
    for level in kata.levels:
        budget_min += level.minutes
        first = passed.get(level.level)
        after_s = None if first is None or started is None else max(0.0, float(first["passed_at"]) - started)
        fast = after_s is not None and after_s < FAST_SHARE * budget_min * 60
        row.level_times.append({"level": level.level, "budget_min": budget_min, "passed_after_s": after_s,
                                "used_s": None if first is None else first.get("used_s"), "fast": fast})
        if fast:
            row.fast_levels.append(level.level)
