"""pytest plugin loaded in the grading child process (``-p grader.engine.plugin``).

It provides the ``solution`` and ``reference`` fixtures, arms a per-test time limit, and
streams one JSON line per event to the results file named by ``KATA_RESULTS``:

    {"event": "collected", "tests": [{nodeid, name, level, category, weight, description}]}
    {"event": "import_start"} / {"event": "import_done", "error": str | null}
    {"event": "start", "nodeid": ...}
    {"event": "result", "nodeid": ..., "passed": bool, "message": str, "details": {...}}

The parent (grader.engine.runner) reads the stream while the child runs, so a hang or a
crash of the child still leaves every finished result behind.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from grader.engine.hypothesis_report import falsifying_example
from grader.engine.loading import import_from_path
from grader.protocol import PropertyFailure

ENV_SOLUTION = "KATA_SOLUTION"
ENV_MODULE = "KATA_MODULE"
ENV_RESULTS = "KATA_RESULTS"
ENV_TEST_TIMEOUT = "KATA_TEST_TIMEOUT"
ENV_MAX_EXAMPLES = "KATA_MAX_EXAMPLES"
ENV_LEVELS = "KATA_LEVELS"  # comma-separated levels to run (default: all)

_MAX_MESSAGE_CHARS = 4000


class KataTimeout(BaseException):
    """Raised by the alarm when a test runs past its limit. A BaseException so that a
    candidate's ``except Exception`` cannot swallow it."""


class CandidateImportError(Exception):
    """The candidate's file could not be imported."""


# ---------------------------------------------------------------------------- stream


class _Stream:
    def __init__(self, path: str | None) -> None:
        self._file = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    def write(self, **event: Any) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(event, default=str) + "\n")
        self._file.flush()


_stream = _Stream(None)
_pending: dict[str, dict[str, Any]] = {}
_solution_state: dict[str, Any] = {}


def _test_timeout_s() -> float:
    return float(os.environ.get(ENV_TEST_TIMEOUT, "60"))


# ---------------------------------------------------------------------------- config


def pytest_configure(config: pytest.Config) -> None:
    global _stream
    config.addinivalue_line("markers", "kata(level, category, description, weight): grading metadata")
    _stream = _Stream(os.environ.get(ENV_RESULTS))
    _register_hypothesis_profile()


def _register_hypothesis_profile() -> None:
    from hypothesis import HealthCheck, Phase, settings

    max_examples = int(os.environ.get(ENV_MAX_EXAMPLES, "100"))
    settings.register_profile(
        "kata",
        database=None,  # reproducible: the seed alone decides what runs
        deadline=None,  # per-test wall-clock limits are the engine's job
        max_examples=max_examples,
        print_blob=False,
        # No "explain" phase: its notes point at grader lines, not at the candidate's.
        phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    settings.load_profile("kata")


def _metadata(item: pytest.Item) -> dict[str, Any]:
    marker = item.get_closest_marker("kata")
    meta = dict(marker.kwargs) if marker else {}
    name = item.name
    return {
        "nodeid": item.nodeid,
        "name": name,
        "level": int(meta.get("level", 1)),
        "category": meta.get("category", "correctness"),
        "weight": float(meta.get("weight", 1.0)),
        "description": meta.get("description", name.replace("_", " ")),
    }


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    wanted = os.environ.get(ENV_LEVELS)
    if wanted:
        levels = {int(x) for x in wanted.split(",") if x.strip()}
        kept = [item for item in items if _metadata(item)["level"] in levels]
        dropped = [item for item in items if _metadata(item)["level"] not in levels]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    _stream.write(event="collected", tests=[_metadata(item) for item in items])


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def solution() -> Any:
    """The candidate's module, loaded once per run from KATA_SOLUTION."""
    if "module" not in _solution_state:
        _solution_state.update(_load_solution())
    if _solution_state.get("error"):
        raise CandidateImportError(_solution_state["error"])
    return _solution_state["module"]


@pytest.fixture(scope="session")
def reference() -> Any:
    """The reference implementation, ``reference.<module>``."""
    return importlib.import_module(f"reference.{os.environ[ENV_MODULE]}")


def _load_solution() -> dict[str, Any]:
    path = os.environ.get(ENV_SOLUTION)
    module_name = os.environ.get(ENV_MODULE, "solution")
    _stream.write(event="import_start")
    error = None
    module = None
    try:
        module = import_from_path(path, module_name)
    except SyntaxError as exc:
        error = f"your file has a syntax error at line {exc.lineno}: {exc.msg}"
        if exc.text:
            error += f"\n    {exc.text.rstrip()}"
    except KataTimeout:
        error = "importing your file did not finish in time (a loop at module level?)"
    except BaseException as exc:  # noqa: BLE001 - any failure of candidate code is a verdict
        error = f"importing your file raised {type(exc).__name__}: {exc}"
        where = _candidate_frames(exc)
        if where:
            error += "\n" + where
    _stream.write(event="import_done", error=error)
    return {"module": module, "error": error}


# ---------------------------------------------------------------------------- per test


def _on_alarm(signum: int, frame: Any) -> None:
    raise KataTimeout()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _stream.write(event="start", nodeid=item.nodeid, t=time.time())
    _pending[item.nodeid] = {"passed": True, "message": "", "details": {},
                             "stdout_bytes": 0, "t0": time.perf_counter()}
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    # Fires at the limit and then every 0.5 s, so a swallowed timeout comes back.
    signal.setitimer(signal.ITIMER_REAL, _test_timeout_s(), 0.5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
        outcome = _pending.pop(item.nodeid)
        duration = time.perf_counter() - outcome.pop("t0")
        _stream.write(event="result", nodeid=item.nodeid, duration_s=round(duration, 4), **outcome)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report_outcome = yield
    report = report_outcome.get_result()
    state = _pending.get(item.nodeid)
    if state is None:
        return
    state["stdout_bytes"] += len(report.capstdout) + len(report.capstderr)
    if report.skipped and call.when in ("setup", "call"):
        state.update(passed=False, message="skipped: " + _skip_reason(report))
    elif report.failed and state["passed"]:
        message, details = describe_failure(call.excinfo.value if call.excinfo else None,
                                            _timeout=_test_timeout_s())
        state.update(passed=False, message=message, details=details)


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


# ---------------------------------------------------------------------------- messages


def describe_failure(exc: BaseException | None, _timeout: float = 0.0) -> tuple[str, dict]:
    """Turn a failure into (message, details) for the scorecard: the property in words, the
    shrunk input, expected and got. Never the test source."""
    if exc is None:
        return "failed", {}
    steps = falsifying_example(exc)
    group_note = None
    inner = exc
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        inner = exc.exceptions[0]
        if type(exc).__name__ == "FlakyFailure":
            group_note = "failed inconsistently when the same input was run again"
        else:
            group_note = f"{len(exc.exceptions)} different failures were found; this is the first"
    details: dict[str, Any] = {}
    if isinstance(inner, PropertyFailure):
        message = inner.prop
        details = {k: v for k, v in (("input", inner.input), ("expected", inner.expected),
                                     ("got", inner.got), ("note", inner.note)) if v is not None}
    elif isinstance(inner, KataTimeout):
        message = (f"timed out after {_timeout:g} s: an infinite loop, or code far slower "
                   "than the reference")
    elif isinstance(inner, CandidateImportError):
        message = str(inner)
    elif isinstance(inner, NotImplementedError):
        message = "not implemented yet (your code raised NotImplementedError)"
        where = _candidate_frames(inner)
        if where:
            details["where"] = where
    elif _missing_name(inner):
        message = (f"your file does not define `{_missing_name(inner)}` "
                   "(the stub lists every name the kata needs)")
    else:
        text = str(inner).strip().splitlines()[0] if str(inner).strip() else ""
        message = f"your code raised {type(inner).__name__}" + (f": {text}" if text else "")
        where = _candidate_frames(inner)
        if where:
            details["where"] = where
        elif isinstance(inner, AssertionError) and str(inner):
            message = str(inner)
    if steps:
        details["example"] = steps
    if group_note:
        details["note"] = (details["note"] + "; " + group_note) if details.get("note") else group_note
    return message[:_MAX_MESSAGE_CHARS], details


def _missing_name(exc: BaseException) -> str | None:
    """The name in "module 'M' has no attribute 'x'" when M is the candidate's module."""
    if not isinstance(exc, AttributeError):
        return None
    module = os.environ.get(ENV_MODULE, "")
    match = re.fullmatch(rf"module '{re.escape(module)}' has no attribute '(\w+)'", str(exc))
    return match.group(1) if match else None


def _candidate_frames(exc: BaseException) -> str | None:
    """The frames of the traceback that are in the candidate's own file."""
    path = os.environ.get(ENV_SOLUTION)
    if not path:
        return None
    target = str(Path(path).resolve())
    shown = []
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            same = str(Path(frame.filename).resolve()) == target
        except OSError:
            same = False
        if same:
            shown.append(f"  line {frame.lineno}, in {frame.name}: {(frame.line or '').strip()}")
    return ("in your file:\n" + "\n".join(shown[-3:])) if shown else None
