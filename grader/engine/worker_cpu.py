"""The worker's CPU time as the kernel counts it, read by the judge from outside.

An efficiency verdict must not rest on a figure the candidate's process reports: code in
the worker can run its work on a helper thread (the worker's meters time the calling
thread only) or rewrite the worker's report. The kernel's own accounts cannot be
rewritten from inside the worker:

* the **process clock** (``clock_gettime`` on ``MAKE_PROCESS_CPUCLOCK(pid)``): CPU time of
  every thread of the worker, threads that have ended included, in nanoseconds;
* the **main thread's** run time (``/proc/<pid>/task/<pid>/schedstat``, its first field):
  the thread that serves the judge's main channel, where every measured call runs.

Both are exact only for threads that are not running at the moment they are read (the
kernel brings a running thread's account up to date at its next tick or switch). While
the judge measures, it therefore keeps the worker and all its threads on the judge's own
CPU (grader/engine/cpus.py, "share"), and the worker may not move itself (the seccomp
filter refuses ``sched_setaffinity``): when the judge reads, no thread of the worker runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

_CPUCLOCK_SCHED = 2  # the clock that counts scheduled run time (CPUCLOCK_SCHED)


@dataclass(frozen=True)
class CpuSample:
    process_s: float  # every thread of the worker, ended ones included
    main_s: float     # the worker's main thread alone


class WorkerCpu:
    """Reads one worker process's CPU accounts (Linux; `available` is False elsewhere)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._clock = ((~pid) << 3) | _CPUCLOCK_SCHED  # MAKE_PROCESS_CPUCLOCK(pid, SCHED)
        self._schedstat = Path(f"/proc/{pid}/task/{pid}/schedstat")
        self.available = self.sample() is not None

    def sample(self) -> CpuSample | None:
        """Both accounts now, or None when they cannot be read (the worker is gone, or
        this system does not offer them)."""
        try:
            process_s = time.clock_gettime(self._clock)
            main_s = int(self._schedstat.read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError, OverflowError):
            return None
        return CpuSample(process_s, main_s)
