"""Where the judge and its worker run: side by side, or taking turns on one CPU.

Judge and worker take turns: each waits while the other works, and a grading sends them
thousands of messages. Waking a process that sleeps on another CPU costs tens of
microseconds on a virtual machine (an idle CPU has to be woken first); a switch on the same
CPU costs a few. So there are two good ways to run, and which one wins depends on the load:

* **side by side** (``spin``): each on a CPU of its own, polling briefly for the other's
  answer before it sleeps. Fastest on a machine with a free CPU for each of them (a
  candidate's ``kata grade``); ruinous when other work needs those CPUs, since the polling
  process holds a CPU the others wait for.
* **taking turns** (``share``): both pinned to the CPU the kernel chose for the judge,
  sleeping while they wait. Gradings run at once (a review's ``--jobs``, a test suite) then
  spread over the CPUs as the kernel spread their judges.

The judge decides at test boundaries from what the machine did since it last looked: the
CPU time every process on the allowed CPUs used (``/proc/stat``) less the judge's and the
worker's own. Linux only; elsewhere nothing changes (the worker sleeps while it waits).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

SPIN_S = 0.001  # how long a side polls before it sleeps, in the "spin" mode
MIN_INTERVAL_S = 0.2  # the shortest window the load is measured over (jiffies are 10 ms)
SPIN_IF_FREE_CPUS = 1.5  # side by side only while this many CPUs are left by other work
ENV_MODE = "KATA_CPU_MODE"  # auto (default) | spin | share: to measure one mode alone
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class CpuPlan:
    """The judge's choice of mode, re-examined with `update` before each test."""

    def __init__(self) -> None:
        try:
            self.allowed = frozenset(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self.allowed = frozenset()
        forced = os.environ.get(ENV_MODE, "auto").strip().lower()
        self.forced = forced if forced in ("spin", "share") else None
        self.usable = len(self.allowed) > 1 and Path("/proc/stat").is_file()
        self.mode: str | None = None
        self.cpu: int | None = None  # the judge's one CPU while sharing
        self._last = self._sample(None) if self.usable else None
        self._placed: int | None = None  # the worker put on this judge's one CPU

    def update(self, worker_pid: int | None, set_worker_spin: Callable[[float], None],
               set_judge_spin: Callable[[float], None], force: str | None = None) -> str | None:
        """Choose the mode for what runs next (`force`: this one) and apply it when it changed."""
        if worker_pid is not None and len(self.allowed) == 1 and self._placed != worker_pid:
            # A judge with one CPU (its share of a split grading): its worker runs there too. A
            # worker the judge started inherits it; one forked by the warm grader's zygote
            # comes with the zygote's CPUs, and may wake on the other judge's CPU, its cache
            # cold, and compete with that judge's own worker.
            self._placed = worker_pid
            try:
                _set_process_affinity(worker_pid, self.allowed)
            except OSError:
                pass  # the worker is gone: it only costs speed
        if not self.usable or worker_pid is None:
            return self.mode
        wanted = force or self.forced or self._measured(worker_pid) or self.mode or _guess(len(self.allowed))
        if wanted == self.mode:
            return self.mode
        try:
            if wanted == "spin":
                os.sched_setaffinity(0, self.allowed)
                _set_process_affinity(worker_pid, self.allowed)
                spin = SPIN_S
            else:
                self.cpu = current_cpu() if self.cpu is None or self.mode == "spin" else self.cpu
                if self.cpu is None or self.cpu not in self.allowed:
                    return self.mode
                os.sched_setaffinity(0, {self.cpu})
                _set_process_affinity(worker_pid, {self.cpu})
                spin = 0.0
            set_worker_spin(spin)
            set_judge_spin(spin)
        except OSError:
            return self.mode  # the worker is gone, or the OS said no: it only costs speed
        self.mode = wanted
        return self.mode

    def beside(self, worker_pid: int | None, set_worker_spin: Callable[[float], None],
               set_judge_spin: Callable[[float], None]) -> bool:
        """Put the worker (every thread of it) on the judge's one CPU, as a measurement
        needs (grader/engine/worker_cpu.py): whether they now share one CPU."""
        if len(self.allowed) == 1:
            return True
        if not self.usable or worker_pid is None:
            return False
        return self.update(worker_pid, set_worker_spin, set_judge_spin, force="share") == "share"

    def worker_changed(self) -> None:
        """A new worker: it starts unpinned and sleeping, so the mode is applied again, and
        the load is measured from now on (its start, in the sandbox's processes too, is
        not the machine's other work)."""
        self.mode = None
        if self.usable:
            self._last = self._sample(None)

    def _measured(self, worker_pid: int) -> str | None:
        last = self._last
        if last is None or time.monotonic() - last[0] < MIN_INTERVAL_S:
            return None
        now = self._sample(worker_pid)
        if now is None:
            return None
        wall = now[0] - last[0]
        self._last = now
        worker_before = last[3] if last[2] == worker_pid else 0
        ours = (now[1] - last[1]) + (now[3] - worker_before)  # in ticks
        others = max((now[4] - last[4]) - ours, 0) / (_TICKS * wall)  # CPUs busy with other work
        return "spin" if len(self.allowed) - others >= SPIN_IF_FREE_CPUS else "share"

    def _sample(self, worker_pid: int | None) -> tuple[float, int, int | None, int, int] | None:
        """(time, the judge's ticks, the worker's pid, its ticks, busy ticks of the allowed CPUs)."""
        try:
            t = os.times()
            judge = round((t.user + t.system) * _TICKS)
            worker = _process_ticks(worker_pid) if worker_pid is not None else 0
            return time.monotonic(), judge, worker_pid, worker, _busy_ticks(self.allowed)
        except (OSError, ValueError, IndexError):
            return None


def _guess(num_cpus: int) -> str:
    """Before any measurement: the processes running right now (/proc/loadavg's fourth
    field), less this one and its worker (which may still be on its way to sleep), against
    the CPUs."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return "share"
    return "spin" if num_cpus - max(running - 2, 0) >= 2 else "share"


def current_cpu() -> int | None:
    """The CPU this thread runs on now (field 39 of /proc/thread-self/stat)."""
    try:
        stat = Path("/proc/thread-self/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _process_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def _busy_ticks(cpus: frozenset[int]) -> int:
    busy = 0
    for line in Path("/proc/stat").read_text().splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *values = line.split()
        if int(name[3:]) in cpus:
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in values[:8])
            busy += user + nice + system + irq + softirq + steal
    return busy


def _set_process_affinity(pid: int, cpus: frozenset[int] | set[int]) -> None:
    """Every thread of `pid` (a thread made later inherits its creator's CPUs)."""
    tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")] if os.path.isdir(f"/proc/{pid}/task") else [pid]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:  # a thread that has just ended
            continue
