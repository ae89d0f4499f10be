"""The judge's wait for the worker's hello, which tells a loop at module level from a slow
import.

While the worker imports the candidate's file, the judge samples the worker's stack every
PROBE_S (the worker's dump on SIGUSR1, grader/worker/stacks.py, as for a hung test). The import is judged stuck
when every sample over a stretch shows the candidate's own code running — a frame of their
file innermost, no import of a library under it — for STUCK_CPU_S of the worker's CPU time
(a busy loop, whatever the machine's load) or STUCK_WALL_S of wall time (a loop that sleeps
or waits). An `import torch` that takes seconds on a loaded machine is never stuck: its
innermost frames are torch's and importlib's. Then the verdict names the line instead of
waiting out the flat limit (30 s), which stays the backstop.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROBE_S = 0.3
# No kata's module-level code needs seconds of CPU (a table of a million entries takes a
# fraction of one); a loop must be cut well within 5 s of the grade, on a loaded machine too.
STUCK_CPU_S = 1.5
STUCK_WALL_S = 3.0
_SIGUSR1_BIT = 1 << 9  # signal 10's bit in /proc/<pid>/status's SigCgt mask
_FRAME = re.compile(r'^\s*File "(.*)", line (\d+) in (\S+)', re.M)
_IMPORTING = ("<frozen importlib._bootstrap", "importlib/__init__.py")


class ImportStuck(Exception):
    """The candidate's code at module level ran without end. args: (frames, seconds)
    where frames are (line, function) in their file, innermost first."""

    @property
    def frames(self) -> list[tuple[int, str]]:
        return self.args[0]

    @property
    def seconds(self) -> float:
        return self.args[1]


@dataclass
class _Stretch:
    """Since when the samples have shown the candidate's own code running."""

    wall_s: float
    cpu_s: float | None


def wait_for_hello(process: Any, probe_s: float = PROBE_S, stuck_cpu_s: float = STUCK_CPU_S,
                   stuck_wall_s: float = STUCK_WALL_S) -> tuple[bool, Any, Any]:
    """process.hello() once it can be read; ImportStuck when the candidate's module-level
    code is judged to loop first."""
    stretch: _Stretch | None = None
    while not process.hello_ready(probe_s):
        frames = own_code_running(process)
        if not frames:
            stretch = None
            continue
        now, cpu = time.monotonic(), cpu_seconds(process.python_pid())
        if stretch is None:
            stretch = _Stretch(now, cpu)
            continue
        cpu_used = cpu - stretch.cpu_s if cpu is not None and stretch.cpu_s is not None else None
        if (cpu_used is not None and cpu_used >= stuck_cpu_s) or now - stretch.wall_s >= stuck_wall_s:
            raise ImportStuck(frames, now - stretch.wall_s)
    return process.hello()


def own_code_running(process: Any) -> list[tuple[int, str]]:
    """(line, function) of the candidate's frames, innermost first, of a thread whose
    innermost frames are the candidate's own code (not an import it started); [] when no
    thread is there, or the worker cannot be sampled yet."""
    pid = process.python_pid()
    if pid is None or not _dumps_on_sigusr1(pid):
        return []  # still starting: SIGUSR1 would kill it
    try:
        dump = process.stack_dump()
    finally:
        process.dumping = False
    return own_frames(dump, process.candidate_path)


def own_frames(dump: str, candidate_path: str) -> list[tuple[int, str]]:
    """See own_code_running: from a dump of every thread (faulthandler's text)."""
    for block in re.split(r"\n\s*\n", dump):
        frames = [(m.group(1), int(m.group(2)), m.group(3)) for m in _FRAME.finditer(block)]
        ours = [i for i, (path, _, _) in enumerate(frames) if path == candidate_path]
        if not ours:
            continue
        inner = frames[: ours[0]]  # what the candidate's innermost frame is calling
        if any(path.startswith(_IMPORTING) or path.endswith(_IMPORTING) for path, _, _ in inner):
            continue
        return [(line, func) for path, line, func in frames if path == candidate_path]
    return []


def _dumps_on_sigusr1(pid: int) -> bool:
    """Whether the process has a handler for SIGUSR1 (the worker arms its stack dump on it
    before it imports the candidate's file; before that, the signal would end it)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & _SIGUSR1_BIT)
    except (OSError, ValueError, IndexError):
        return False
    return False


def cpu_seconds(pid: int | None) -> float | None:
    """The process's CPU time (every thread, user and system) as the kernel counts it."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def stuck_text(frames: list[tuple[int, str]], seconds: float, source_lines: list[str]) -> str:
    """The verdict of a stuck import: what, where (the lines), and what next."""
    return (f"importing your file did not finish: your code at module level ran for at least "
            f"{seconds:.1f} s without finishing (an infinite loop?), so it was stopped\n"
            + where_text(frames, source_lines)
            + "\nnext: fix the loop, or move slow work at module level into a function")


def where_text(frames: list[tuple[int, str]], source_lines: list[str]) -> str:
    """The frames as a hung test shows them (judge_report.stuck_or_crash)."""
    shown = [f"  line {ln}, in {fn}: {source_lines[ln - 1].strip() if 0 < ln <= len(source_lines) else ''}"
             for ln, fn in frames[:3]]
    return "where your code was when it was stopped (innermost first):\n" + "\n".join(shown)


def frames_now(process: Any) -> list[tuple[int, str]]:
    """The candidate's frames in the worker's stack now, wherever they are ([] if none)."""
    pid = process.python_pid()
    if pid is None or not _dumps_on_sigusr1(pid):
        return []
    try:
        return process.candidate_frames(process.stack_dump())
    finally:
        process.dumping = False
