"""The CPU time one copy comparison may spend on a file (normalise.py, reach.py,
similarity.py): a hostile file costs a bounded amount, then the review says "similarity not
measured" rather than wait."""

from __future__ import annotations

import time


class OverBudget(Exception):
    """The comparison ran out of the CPU time it may spend on one file."""


class Budget:
    """CPU seconds of this thread (a loaded machine does not make an honest file run out)."""

    def __init__(self, cpu_seconds: float) -> None:
        self.cpu_seconds = cpu_seconds
        self._until = time.thread_time() + cpu_seconds
        self._ticks = 0

    def tick(self) -> None:
        self._ticks += 1
        if self._ticks % 512 == 0 and time.thread_time() > self._until:
            raise OverBudget
