"""A seccomp filter that stops the worker from creating processes (or moving itself to
other CPUs).

The candidate's code needs threads (torch uses them, the scheduler kata tests them) but
never a process: with no fork, no daemon can outlive the review, no second process can add
to the memory limit, and no child can escape the session. The filter allows ``clone`` only
with ``CLONE_THREAD``, answers ``clone3`` with ENOSYS (glibc then falls back to ``clone``)
and ``fork``/``vfork`` with EPERM.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
_CLONE_THREAD = 0x00010000

# (audit arch, clone, clone3, fork, vfork, sched_setaffinity); fork/vfork do not exist on
# aarch64.
_ARCHES = {
    "x86_64": (0xC000003E, 56, 435, 57, 58, 203),
    "aarch64": (0xC00000B7, 220, 435, None, None, 122),
}


def supported() -> bool:
    return platform.machine() in _ARCHES


def no_fork_program() -> bytes:
    """The filter as a compiled classic-BPF program (what bwrap --seccomp reads)."""
    arch, clone, clone3, fork, vfork, setaffinity = _ARCHES[platform.machine()]
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    code: list[tuple[int, Any, Any, int]] = [
        (_LD_W_ABS, 0, 0, 4),                 # arch
        (_JEQ_K, 0, "kill", arch),
        (_LD_W_ABS, 0, 0, 0),                 # syscall number
    ]
    if platform.machine() == "x86_64":
        code.append((_JGE_K, "kill", 0, 0x40000000))  # the x32 ABI
    # sched_setaffinity too: while the judge measures, it keeps the worker on its own CPU
    # so that its reading of the worker's CPU time is exact (grader/engine/worker_cpu.py).
    for nr in (fork, vfork, setaffinity):
        if nr is not None:
            code.append((_JEQ_K, "eperm", 0, nr))
    code += [
        (_JEQ_K, "enosys", 0, clone3),
        (_JEQ_K, "clone", 0, clone),
        (_RET_K, 0, 0, _ALLOW),
    ]
    labels = {"clone": len(code)}
    code += [(_LD_W_ABS, 0, 0, 16),           # clone's flags (args[0], low word)
             (_JSET_K, "allow", "eperm", _CLONE_THREAD)]
    labels["allow"] = len(code)
    code.append((_RET_K, 0, 0, _ALLOW))
    labels["eperm"] = len(code)
    code.append((_RET_K, 0, 0, eperm))
    labels["enosys"] = len(code)
    code.append((_RET_K, 0, 0, enosys))
    labels["kill"] = len(code)
    code.append((_RET_K, 0, 0, _KILL_PROCESS))
    out = bytearray()
    for i, (op, jt, jf, k) in enumerate(code):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        out += struct.pack("<HBBI", op, jt, jf, k)
    return bytes(out)


def install_in_this_process() -> None:
    """Load the filter into the calling process (the no-sandbox fallback, from preexec_fn).
    The installer is the worker's own (grader/worker/zygote.py: a forked warm worker loads
    the same program itself, with the standard library only)."""
    from grader.worker.zygote import install_seccomp

    install_seccomp(no_fork_program())


from typing import Any  # noqa: E402 - used in annotations only
