"""The interview signal: what an interviewer would write down, from the levels passed in time.

Pure rules with no engine behind them, so that the commands that only read the store
(`kata status`, `kata history`, the roster) say the signal without importing the grading
engine; grader.engine.report builds scorecards on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LevelScore:
    level: int
    name: str
    passed: bool  # every core test of the level passed (level_passed)
    score: int
    num_passed: int
    num_tests: int
    details_missed: list[str] = field(default_factory=list)  # descriptions of its failed detail tests


SIGNAL_RULE = (
    "Strong hire: every level passed within the time. Hire: levels 1 and 2 passed within "
    "the time. Lean hire: level 1 passed within the time. No hire: level 1 not passed, or "
    "passed only after the time ran out. A level passes when its core tests pass; the "
    "details a counted level missed are named after the signal (\"Strong hire, 1 detail missed\")."
)


def interview_signal(levels: list[LevelScore], overtime: bool, timed: bool) -> str:
    """The signal an interviewer would write down, from the levels passed in time.

    Levels count in order: passing level 3 without level 2 counts as level 1 only, as in
    an interview where each follow-up builds on the previous part. A level passed with
    details missed counts as passed, and the signal says how many details the counted levels
    missed, as an interviewer notes them.
    """
    passed_in_order = 0
    for lv in levels:
        if not lv.passed:
            break
        passed_in_order += 1
    if overtime:
        return "No hire (overtime: graded after the time ran out)" if passed_in_order else "No hire"
    num_missed = sum(len(lv.details_missed) for lv in levels[:passed_in_order])
    missed = f", {num_missed} detail{'s' if num_missed != 1 else ''} missed" if num_missed else ""
    suffix = missed + ("" if timed else " (untimed)")
    if levels and passed_in_order == len(levels):
        return "Strong hire" + suffix
    if passed_in_order >= 2:
        return "Hire" + suffix
    if passed_in_order == 1:
        return "Lean hire" + suffix
    return "No hire" + suffix
