"""Scoring: turn a suite run into a scorecard (scores per level and category, the failures,
time used and the interview signal). Pure data; the CLI renders it.

The pass rule: a level passes when its core tests pass. A detail test (its level's RULES map
names it under DETAILS only: an edge an interviewer notes, not one you fail on) that fails
lowers the score like any test and is listed as a detail missed, and the level still passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grader.engine.runner import RunOutcome, TestResult
from grader.interview_signal import SIGNAL_RULE, LevelScore, interview_signal

__all__ = ["SIGNAL_RULE", "LevelScore", "Scorecard", "build_scorecard", "details_missed", "interview_signal",
           "level_passed", "weighted_score"]


@dataclass
class Scorecard:
    kata: str
    title: str
    seed: int
    solution: str
    solution_sha256: str
    tests: list[TestResult]
    duration_s: float
    import_error: str | None = None
    output_bytes: int = 0
    time_used_s: float | None = None
    time_limit_s: float | None = None
    hints_used: int = 0
    level_names: dict[int, str] = field(default_factory=dict)
    level_minutes: dict[int, int] = field(default_factory=dict)
    contained: bool | None = None  # the candidate's code ran in the sandbox
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> int:
        return weighted_score(self.tests)

    @property
    def passed(self) -> bool:
        """Every test passed, details too (the score is 100); levels pass by level_passed."""
        return bool(self.tests) and all(t.passed for t in self.tests)

    @property
    def levels(self) -> list[LevelScore]:
        out = []
        for level in sorted({t.level for t in self.tests}):
            tests = [t for t in self.tests if t.level == level]
            out.append(LevelScore(level=level, name=self.level_names.get(level, f"Level {level}"),
                                  passed=level_passed(tests), score=weighted_score(tests),
                                  num_passed=sum(t.passed for t in tests), num_tests=len(tests),
                                  details_missed=details_missed(tests)))
        return out

    @property
    def categories(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for t in self.tests:
            entry = out.setdefault(t.category, {"passed": 0, "total": 0})
            entry["total"] += 1
            entry["passed"] += int(t.passed)
        return out

    @property
    def overtime(self) -> bool:
        return (self.time_used_s is not None and self.time_limit_s is not None
                and self.time_used_s > self.time_limit_s)

    @property
    def signal(self) -> str:
        return interview_signal(self.levels, self.overtime, timed=self.time_limit_s is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kata": self.kata,
            "title": self.title,
            "seed": self.seed,
            "score": self.score,
            "passed": self.passed,
            "solution": self.solution,
            "solution_sha256": self.solution_sha256,
            "levels": [lv.__dict__ for lv in self.levels],
            "categories": self.categories,
            "tests": [t.to_dict() for t in self.tests],
            "import_error": self.import_error,
            "duration_s": round(self.duration_s, 3),
            "time_used_s": None if self.time_used_s is None else round(self.time_used_s, 1),
            "time_limit_s": self.time_limit_s,
            "overtime": self.overtime,
            "hints_used": self.hints_used,
            "signal": self.signal,
            "output_bytes": self.output_bytes,
            "contained": self.contained,
            "notes": list(self.notes),
        }


def level_passed(tests: Sequence[TestResult]) -> bool:
    """The pass rule: a level passes when every one of its core tests passes. (Every level of
    a suite has core tests; a grading of some tests only, such as the corpus checks' rejecting
    tests, may hold none of a level's, and then its details decide nothing.)"""
    return bool(tests) and all(t.passed for t in tests if not t.detail)


def details_missed(tests: Sequence[TestResult]) -> list[str]:
    """The descriptions of the failed detail tests, in the suite's order."""
    return [t.description for t in tests if t.detail and not t.passed]


def weighted_score(tests: list[TestResult]) -> int:
    """0-100, weighted by each test's weight; 100 only when every test passed."""
    total = sum(t.weight for t in tests)
    if total <= 0:
        return 0
    if all(t.passed for t in tests):
        return 100
    return int(100 * sum(t.weight for t in tests if t.passed) / total)


def build_scorecard(outcome: RunOutcome, *, kata: str, title: str, seed: int, solution: str,
                    solution_sha256: str, **extra: Any) -> Scorecard:
    return Scorecard(kata=kata, title=title, seed=seed, solution=solution,
                     solution_sha256=solution_sha256, tests=outcome.tests,
                     duration_s=outcome.duration_s, import_error=outcome.import_error,
                     output_bytes=outcome.output_bytes, contained=outcome.contained,
                     notes=list(outcome.notes), **extra)
