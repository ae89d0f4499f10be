"""What the runner tells a judge: one `JudgeConfig`, written as JSON into one environment
variable (``KATA_JUDGE_CONFIG``) and read back once when the judge's plugin starts.

The judge is ``python -m pytest`` (started, or forked from a zygote): its command line is
pytest's, so its configuration travels in its environment. Standard library only: the
zygote renumbers the results pipe in it without importing the grader's plugin.

Variables a user sets on purpose (``KATA_SANDBOX``, ``KATA_CPU_MODE``,
``KATA_JUDGE_MEMORY_BYTES``) are not part of it: they pass the runner's allow-list
(judge_env.py) as they are.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from grader.engine.limits import Limits

ENV_CONFIG = "KATA_JUDGE_CONFIG"


class ConfigError(ValueError):
    """The judge's configuration is missing a field it needs or carries one it does not know:
    the runner and the plugin disagree, a bug in the grader."""


@dataclass(frozen=True)
class JudgeConfig:
    """One judge's run: what to grade, with which limits, and which of the suite's tests.

    Invariants: `keep_tests` and `drop_tests` are never both set (a split grading gives a
    judge either its share or the other judges' shares); `load_error` set means no worker
    is started (the parent's compile check found the file cannot load)."""

    solution: str | None = None  # the candidate's file (absolute); None: collect only, no worker
    module: str = "solution"  # the name it is imported under, and the reference's module
    results_fd: int | None = None  # the pipe only the judge holds; None: events go nowhere
    test_timeout_s: float = 60.0  # a test's limit where `test_limits` names no other
    # {test name: seconds}, from the reference's timings (grader/engine/time_limits.py).
    test_limits: Mapping[str, float] = field(default_factory=dict)
    # {test name: seconds one call into the candidate's code may take}, likewise.
    call_limits: Mapping[str, float] = field(default_factory=dict)
    max_examples: int = 100  # hypothesis's examples per property
    levels: tuple[int, ...] = ()  # run only these levels' tests (empty: every level)
    tests: tuple[str, ...] | None = None  # run only these tests; the others are not reported
    keep_tests: tuple[str, ...] | None = None  # a split grading's share: run only these
    drop_tests: tuple[str, ...] | None = None  # the first judge's: leave these to the others
    support: tuple[str, ...] = ()  # the kata's support files, importable in judge and worker
    load_error: str | None = None  # why the file cannot load: every test fails with it
    limits: Limits = field(default_factory=Limits)  # what the worker may use
    # Stop after the first failing test (`kata check`): the tests after it are not run.
    stop_at_first_failure: bool = False
    # `kata grade --sanitize` of a C++ solution: "address" or "thread" (the worker's crash is
    # read for the sanitizer's report), and the worker's extra environment (the runtime it
    # preloads, the sanitizer's options).
    sanitizer: str | None = None
    worker_env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.keep_tests is not None and self.drop_tests is not None:
            raise ConfigError("a judge either keeps its share of the tests or drops the others', not both")

    # ------------------------------------------------------------------------- the wire

    def to_json(self) -> str:
        raw = {f.name: getattr(self, f.name) for f in fields(self)}
        raw["limits"] = self.limits.to_dict()
        raw["test_limits"], raw["call_limits"] = dict(self.test_limits), dict(self.call_limits)
        raw["worker_env"] = dict(self.worker_env)
        return json.dumps(raw, sort_keys=True)

    def to_env(self) -> dict[str, str]:
        return {ENV_CONFIG: self.to_json()}

    @classmethod
    def from_json(cls, text: str) -> "JudgeConfig":
        """The configuration `to_json` wrote; ConfigError for anything else."""
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict):
                raise ConfigError(f"{ENV_CONFIG} is not a JSON object")
            unknown = set(raw) - {f.name for f in fields(cls)}
            if unknown:
                raise ConfigError(f"{ENV_CONFIG} has fields the judge does not know: {sorted(unknown)}")
            return cls(**{name: _PARSE[name](value) for name, value in raw.items()})
        except ConfigError:
            raise
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise ConfigError(f"{ENV_CONFIG} is malformed: {exc}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "JudgeConfig":
        """The judge's configuration, from its environment (defaults where it has none: a
        judge started by hand collects the suite and reports nothing)."""
        text = (os.environ if environ is None else environ).get(ENV_CONFIG)
        return cls.from_json(text) if text else cls()

    def with_results_fd(self, fd: int) -> "JudgeConfig":
        return replace(self, results_fd=fd)


def _optional(parse: Any) -> Any:
    return lambda value: None if value is None else parse(value)


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"expected a list of names, got {value!r:.100}")
    return tuple(str(v) for v in value)


def _seconds_by_name(value: Any) -> dict[str, float]:
    return {str(k): float(v) for k, v in dict(value).items()}


_PARSE: dict[str, Any] = {
    "solution": _optional(str),
    "module": str,
    "results_fd": _optional(int),
    "test_timeout_s": float,
    "test_limits": _seconds_by_name,
    "call_limits": _seconds_by_name,
    "max_examples": int,
    "levels": lambda value: tuple(int(v) for v in value),
    "tests": _optional(_names),
    "keep_tests": _optional(_names),
    "drop_tests": _optional(_names),
    "support": _names,
    "load_error": _optional(str),
    "limits": lambda value: Limits.from_dict(dict(value)),
    "stop_at_first_failure": bool,
    "sanitizer": _optional(str),
    "worker_env": lambda value: {str(k): str(v) for k, v in dict(value).items()},
}


def rebind_results_fd(env: dict[str, str], fd: int) -> None:
    """In `env`, the judge's configuration with the results pipe at `fd` (its number in a
    judge forked from the zygote)."""
    if ENV_CONFIG in env:
        env[ENV_CONFIG] = JudgeConfig.from_json(env[ENV_CONFIG]).with_results_fd(fd).to_json()
