"""One row of the roster: a candidate × kata, as the coach's grading found it, plus the
candidate's own claims as numbers (built by roster.py and selfreport.py; rendered by
terminal.py and html.py).

Text in a row is already capped and cleaned where the row is built (roster.py); escaping
for rich markup or HTML happens where it is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RosterRow:
    candidate: str
    bundle: str
    kata: str
    status: str  # graded | missing | rejected | uncontained | error
    seed: int | None = None
    score: int | None = None
    passed: bool = False
    levels_passed: int = 0
    num_levels: int = 0
    required_levels: int = 0
    signal: str = ""
    private_passed: int = 0
    private_total: int = 0
    claimed_score: int | None = None
    claimed_seed: int | None = None
    mismatch: bool = False
    claim_note: str = ""
    # Self-reported: these come from the candidate's machine and cannot be verified.
    time_used_s: float | None = None
    time_limit_s: float | None = None
    hints_used: int = 0
    reveals: int = 0
    reveals_before_start: int = 0
    reveal_times: list[float] = field(default_factory=list)
    late: bool = False
    num_grades: int | None = None                  # None: the bundle does not say (format 1)
    # per level: budget_min (its minutes and those before it), passed_after_s (from the start),
    # used_s (its own), fast
    level_times: list[dict[str, Any]] | None = None
    fast_levels: list[int] = field(default_factory=list)
    copy_of_reference: bool = False
    reference_similarity: float | None = None
    similarity_not_measured: str = ""  # why; a flag of its own, never "not a copy"
    identical_to: list[str] = field(default_factory=list)
    contained: bool | None = None
    problem: str = ""
    notes: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    num_failures: int = 0
    source: str = ""
    source_lines: int = 0
    source_truncated: bool = False
    followups: list[str] = field(default_factory=list)

    @property
    def flags(self) -> list[str]:
        """What the coach must look at besides the score, by name (terminal, --json, --html)."""
        named = (("MISMATCH", self.mismatch), ("COPY", self.copy_of_reference),
                 ("UNMEASURED", bool(self.similarity_not_measured)), ("FAST", bool(self.fast_levels)),
                 ("SAME", bool(self.identical_to)), ("UNCONTAINED", self.contained is False))
        return [name for name, on in named if on]

    @property
    def needs_attention(self) -> bool:
        return self.status != "graded" or self.score != 100 or bool(self.flags)

    @property
    def overtime(self) -> bool:
        return self.time_used_s is not None and self.time_limit_s is not None \
            and self.time_used_s > self.time_limit_s

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "flags": self.flags,
                "self_reported": ["time_used_s", "hints_used", "reveals", "late", "num_grades", "level_times",
                                  "fast_levels"]}
