"""What the worker process may use: one `Limits`, from the caller of a grading (a coach's
review sets tighter ones) through the judge's configuration to the sandbox's rlimits."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Limits:
    """What the worker may use. None: no limit of that kind.

    The defaults are a candidate's own grading: generous, the machine is theirs; the limits
    are the sandbox's rlimits (address space, largest file written, CPU seconds, open files)
    and the size of its private /tmp."""

    memory_bytes: int | None = 16 * 1024**3
    max_file_bytes: int | None = 64 * 1024**2
    cpu_seconds: int | None = None
    open_files: int = 512
    tmp_bytes: int = 256 * 1024**2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Limits":
        """The limits `to_dict` wrote (TypeError or ValueError for anything else)."""
        def size(name: str) -> int | None:
            value = raw[name]
            return None if value is None else int(value)

        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        defaults = cls()
        values: dict[str, Any] = {name: size(name) if name in raw else getattr(defaults, name)
                                  for name in cls.__dataclass_fields__}
        return cls(**values)
