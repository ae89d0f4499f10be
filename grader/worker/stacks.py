"""The worker's stack dumps, which the judge asks for with SIGUSR1: while the worker imports
the candidate's file (is their module-level code looping? grader/engine/import_watch.py)
and when a call hangs (where is it stuck?).

faulthandler's dump, a C signal handler that walks every thread's frames wherever the
interrupted code is, crashed the worker now and then: about one dump in 15,000 taken while
torch imports ends in SIGSEGV (scripts/bench_stack_dumps.py), and a correct file's grade read
"your code crashed". This dump is a Python signal handler: it runs between two bytecodes of
the main thread, where every frame is whole. Its text is faulthandler's, framed by BEGIN and
END, so the judge can tell it from the candidate's output however late it comes: the main
thread inside one long C call (loading torch's library) runs it when the call returns.

For a call stuck inside C code, which never returns to a bytecode, faulthandler's dump stays
on SIGUSR2 once the import is done (arm_c_fallback); the judge sends it only when this one
does not come.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from types import FrameType

BEGIN = b"\x1f<kata-stacks>\n"
END = b"\x1f</kata-stacks>\n"
MAX_FRAMES = 100   # per thread, as faulthandler
MAX_THREADS = 100


def format_stacks(current: FrameType | None, current_ident: int, frames: dict[int, FrameType]) -> str:
    """faulthandler's text for these threads: the current thread's block last."""
    blocks = []
    for ident, top in frames.items():
        if ident != current_ident:
            blocks.append(_block(f"Thread 0x{ident:016x}", top))
        if len(blocks) >= MAX_THREADS - 1:
            break
    blocks.append(_block(f"Current thread 0x{current_ident:016x}", current))
    return "\n".join(blocks)


def _block(title: str, frame: FrameType | None) -> str:
    lines = [f"{title} (most recent call first):"]
    depth = 0
    while frame is not None:
        if depth == MAX_FRAMES:
            lines.append("  ...")
            break
        code = frame.f_code
        lines.append(f'  File "{code.co_filename}", line {frame.f_lineno or 0} in {code.co_name}')
        frame, depth = frame.f_back, depth + 1
    return "\n".join(lines) + "\n"


def arm(fd: int) -> None:
    """Dump every thread's stack to `fd` on SIGUSR1, framed by BEGIN and END. Blocking
    calls the signal interrupts are resumed (PEP 475), as after any Python handler."""
    current_frames, get_ident, write = sys._current_frames, threading.get_ident, os.write

    def dump(_signum: int, frame: FrameType | None) -> None:
        try:
            text = format_stacks(frame, get_ident(), current_frames())
            data = BEGIN + text.encode("utf-8", "replace") + END
            while data:
                data = data[write(fd, data):]
        except Exception:  # noqa: BLE001 - a dump that cannot be made must not break the candidate's code
            pass

    signal.signal(signal.SIGUSR1, dump)


def arm_c_fallback(fd: int) -> None:
    """faulthandler's dump to `fd` on SIGUSR2: for a call stuck in C code, after the import."""
    faulthandler.register(signal.SIGUSR2, file=fd, all_threads=True)
