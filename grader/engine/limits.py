"""Resource limits for the grading child (used when re-grading someone else's code)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

# Variables a child keeps when the environment is scrubbed: enough to run Python and torch.
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT", "TRITON_INTERPRET",
             "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class ResourceLimits:
    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    max_file_bytes: int | None = None
    scrub_env: bool = False
    home: str | None = None

    def scrubbed_env(self) -> dict[str, str]:
        if not self.scrub_env:
            return dict(os.environ)
        env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
        if self.home:
            env["HOME"] = self.home
        return env


def child_preexec(limits: ResourceLimits) -> Callable[[], None]:
    def apply() -> None:
        import resource

        if limits.cpu_seconds is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        if limits.memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        if limits.max_file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))

    return apply
