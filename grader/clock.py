"""The wall clock of sessions and history, in one place so that a test can move it.

Every time a session, a grade, a hint or a mock reveal is stamped with comes from `now()`.
A test of a 75-minute mock replaces the source (`use(fake)`) instead of sleeping; grading
itself still measures real durations with its own timers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_source: Callable[[], float] = time.time


def now() -> float:
    """Seconds since the epoch, from the current source (time.time unless a test set one)."""
    return _source()


@contextmanager
def use(source: Callable[[], float]) -> Iterator[None]:
    """Read the time from `source` inside the block (a test's fake clock)."""
    global _source
    previous, _source = _source, source
    try:
        yield
    finally:
        _source = previous


class FakeClock:
    """A clock that stands still until moved: `clock.advance(minutes=12)`."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, *, seconds: float = 0.0, minutes: float = 0.0) -> None:
        self.t += seconds + 60.0 * minutes
