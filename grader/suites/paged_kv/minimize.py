"""Shrink a failing call sequence of the lockstep run, cheaply.

Hypothesis's own shrinker replays the state machine hundreds of times through its data
layer; for this kata that is seconds per failing test, most of a failing candidate's grading
time. A recorded failure (paired.Paired keeps every call it made) shrinks as well by replaying
the calls themselves: drop calls, lower counts, shrink the pool, and keep each change after
which the candidate still breaks the *same* rule. Any sequence is a legal one: a call the
statement rejects is rejected by both allocators in a replay.
"""

from __future__ import annotations

from typing import Any

from grader.protocol import PropertyFailure, start_replay
from grader.suites.paged_kv.paired import replay

MAX_REPLAYS = 400  # a bound on the work: a failure is shown even if not fully shrunk

Steps = list[tuple[str, tuple[Any, ...]]]


def minimize(solution: Any, reference: Any, failure: PropertyFailure) -> PropertyFailure:
    """The smallest failure of the same rule that the replays find (or `failure` itself)."""
    num_blocks, block_size, steps = failure.replay  # type: ignore[attr-defined]  # set by paired.Pair._fail
    shrinker = _Shrinker(solution, reference, _rule_of(failure.prop), failure)
    changed = True
    while changed and shrinker.budget > 0:
        changed = False
        for i in range(len(steps) - 2, -1, -1):  # the last call is the one that failed
            if i < len(steps) - 1 and shrinker.fails(num_blocks, block_size, steps[:i] + steps[i + 1:]):
                steps, changed = steps[:i] + steps[i + 1:], True
        for i, (method, args) in enumerate(steps):
            if method != "allocate" or args[1] <= 1:
                continue
            for k in (1, args[1] // 2, args[1] - 1):
                trial = steps[:i] + [("allocate", (args[0], k))] + steps[i + 1:]
                if shrinker.fails(num_blocks, block_size, trial):
                    steps, changed = trial, True
                    break
        for smaller in ((num_blocks - 1, block_size), (num_blocks, block_size - 1)):
            if min(smaller) >= 1 and shrinker.fails(*smaller, steps):
                (num_blocks, block_size), changed = smaller, True
    return shrinker.best


class _Shrinker:
    def __init__(self, solution: Any, reference: Any, rule: str, failure: PropertyFailure) -> None:
        self.solution, self.reference, self.rule = solution, reference, rule
        self.best = failure
        self.budget = MAX_REPLAYS

    def fails(self, num_blocks: int, block_size: int, steps: Steps) -> bool:
        """Whether the replay breaks the same rule (then it becomes the best failure)."""
        if self.budget <= 0:
            return False
        self.budget -= 1
        start_replay()  # a failure of this replay shows its calls alone
        try:
            replay(self.solution, self.reference, num_blocks, block_size, steps)
        except PropertyFailure as failure:
            if _rule_of(failure.prop) != self.rule:
                return False
            self.best = failure
            return True
        except Exception:  # noqa: BLE001 - another error (or a rejected call no longer rejected)
            return False
        return False


def _rule_of(prop: str) -> str:
    return prop.split(" — rule: ", 1)[-1]
