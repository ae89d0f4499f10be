"""What the judge process starts with: an environment from an allow-list, and a memory
limit of its own.

The judge never runs the candidate's code, but it decodes what the worker sends and runs
the suite on it; a review runs it on strangers' bundles. So it gets nothing of the caller's
environment it does not need (a reviewer's tokens and keys stay out of every process a
grading starts), and it stops at a memory limit rather than take the reviewer's machine
with it (grader/worker/bridge.py also bounds what one message may make it build).
"""

from __future__ import annotations

import os
from typing import Mapping

ENV_JUDGE_MEMORY = "KATA_JUDGE_MEMORY_BYTES"  # the judge's limit (0: none), as the user sets it
DEFAULT_JUDGE_MEMORY_BYTES = 8 * 1024**3

# What Python, torch, Triton and CUDA need to run, and the engine's own switches (the runner
# adds PYTHONPATH's absolute entries itself; PYTHONOPTIMIZE, which would drop a suite's
# asserts, is not passed).
_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "LD_LIBRARY_PATH", "VIRTUAL_ENV", "SYSTEMROOT",
    "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONUTF8", "PYTHONIOENCODING",
    "PYTHONFAULTHANDLER", "PYTHONMALLOC", "PYTHONWARNINGS", "PYTHONHOME", "PYTHONNOUSERSITE",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "KATA_SANDBOX", "KATA_CPU_MODE", ENV_JUDGE_MEMORY,
})
_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TRITON_", "TORCH_", "COVERAGE_")


def judge_environment(caller: Mapping[str, str]) -> dict[str, str]:
    """The part of the caller's environment the judge may see."""
    return {k: v for k, v in caller.items() if k in _NAMES or k.startswith(_PREFIXES)}


def limit_judge_memory() -> int | None:
    """In the judge: cap the memory it may take (RLIMIT_DATA: heap and private writable
    mappings, the memory a decoded reply or a tensor takes; not the address space, which
    a CUDA build of torch reserves by the tens of GB without using it). The limit in
    bytes, or None where none was set."""
    try:
        limit = int(os.environ.get(ENV_JUDGE_MEMORY, DEFAULT_JUDGE_MEMORY_BYTES))
    except ValueError:
        limit = DEFAULT_JUDGE_MEMORY_BYTES
    if limit <= 0:
        return None
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if soft == resource.RLIM_INFINITY or soft > limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ImportError, AttributeError, ValueError, OSError):
        return None  # not on this system: the per-message bound still holds
    return limit
