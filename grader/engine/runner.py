"""Run one suite against one solution file in a child process and collect the results.

The child is ``python -m pytest <suite> -p grader.engine.plugin``; it streams JSON lines
(see plugin.py). The parent watches that stream: a test that runs past its limit and cannot be
interrupted inside the child (a hang in C code, a swallowed alarm) gets the child killed, is
marked as timed out, and the child is restarted on the tests not yet run. A child that dies
(segfault, ``os._exit``) is handled the same way. Nothing the candidate's code does can make
the parent crash or hang.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from grader.catalog import checkout_root
from grader.engine import plugin
from grader.engine.limits import ResourceLimits, child_preexec
from grader.errors import GradingError

# Extra seconds the parent waits past a test's own limit before it kills the child: the
# in-child alarm should fire first and keep the process alive.
_KILL_GRACE_S = 5.0
_POLL_S = 0.02
_MAX_OUTPUT_KEPT = 16_000


@dataclass
class TestResult:
    nodeid: str
    name: str
    level: int
    category: str
    weight: float
    description: str
    passed: bool = False
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    stdout_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunOutcome:
    """What one run of a suite produced: every collected test with its result."""

    tests: list[TestResult]
    duration_s: float
    import_error: str | None = None
    notes: list[str] = field(default_factory=list)
    output_head: str = ""
    output_bytes: int = 0


@dataclass
class _Child:
    proc: subprocess.Popen
    output: "_OutputSink"
    started_at: float


class _OutputSink(threading.Thread):
    """Drains the child's stdout+stderr, keeping the head and counting the rest, so that a
    solution printing without end neither fills memory nor blocks on a full pipe."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.head = bytearray()
        self.total = 0

    def run(self) -> None:
        while True:
            chunk = self.stream.read(65536)
            if not chunk:
                return
            self.total += len(chunk)
            if len(self.head) < _MAX_OUTPUT_KEPT:
                self.head.extend(chunk[: _MAX_OUTPUT_KEPT - len(self.head)])


def run_suite(suite: Path, solution: Path, module: str, seed: int, *,
              test_timeout_s: float = 30.0, total_timeout_s: float = 600.0,
              max_examples: int | None = None, limits: ResourceLimits | None = None,
              on_event: Callable[[str, dict[str, Any]], None] | None = None,
              workdir: Path | None = None, levels: set[int] | None = None) -> RunOutcome:
    """Run `suite` against `solution` (registered as `module`) and return every result.

    on_event(kind, data) is called with "collected" (data: {"tests": [...]}) and "result"
    (data: a TestResult dict), for a progress bar.
    """
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kata-run-") as tmp:
        results_path = Path(tmp) / "results.jsonl"
        cwd = workdir or Path(tmp) / "cwd"
        cwd.mkdir(exist_ok=True)
        env = _child_env(solution, module, results_path, test_timeout_s, max_examples, limits)
        if levels:
            env[plugin.ENV_LEVELS] = ",".join(str(lv) for lv in sorted(levels))
        state = _RunState(on_event)
        offset = 0
        max_restarts = 1000
        while max_restarts > 0:
            max_restarts -= 1
            cmd = _pytest_command(suite, seed, state.done_or_dead())
            child = _spawn(cmd, env, cwd, limits)
            offset, verdict = _watch(child, results_path, offset, state, test_timeout_s,
                                     deadline=t0 + total_timeout_s)
            _kill(child)  # whatever the candidate's code forked into the group goes too
            state.absorb_output(child.output)
            if verdict == "finished" or not state.remaining():
                break
            if verdict == "total_timeout":
                state.fail_remaining(f"not run: the whole run passed its {total_timeout_s:g} s limit")
                break
            if state.import_crashed:
                state.fail_remaining("importing your file crashed the test process "
                                     f"({_exit_text(child.proc.returncode)})")
                break
            if state.tests is None:
                raise GradingError(
                    f"the suite {suite.name} could not be collected "
                    f"({_exit_text(child.proc.returncode)})",
                    hint="this is a bug in the grader, not in your code; run with --debug "
                         "and report it\n" + bytes(child.output.head).decode(errors="replace")[-2000:])
        return RunOutcome(tests=state.ordered(), duration_s=time.monotonic() - t0,
                          import_error=state.import_error, notes=state.notes,
                          output_head=state.output_head, output_bytes=state.output_bytes)


class _RunState:
    def __init__(self, on_event: Callable[[str, dict[str, Any]], None] | None) -> None:
        self.on_event = on_event or (lambda kind, data: None)
        self.tests: dict[str, TestResult] | None = None
        self.done: set[str] = set()
        self.current: str | None = None
        self.current_started = 0.0
        self.import_error: str | None = None
        self.importing = False
        self.import_crashed = False
        self.notes: list[str] = []
        self.output_head = ""
        self.output_bytes = 0

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "collected" and self.tests is None:
            self.tests = {t["nodeid"]: TestResult(**t) for t in event["tests"]}
            self.on_event("collected", {"tests": event["tests"]})
        elif kind == "import_start":
            self.importing = True
        elif kind == "import_done":
            self.importing = False
            self.import_error = event.get("error")
        elif kind == "start":
            self.current, self.current_started = event["nodeid"], time.monotonic()
        elif kind == "result":
            self.finish(event["nodeid"], passed=event["passed"], message=event["message"],
                        details=event.get("details", {}), duration_s=event.get("duration_s", 0.0),
                        stdout_bytes=event.get("stdout_bytes", 0))

    def finish(self, nodeid: str, **fields: Any) -> None:
        if self.tests is None or nodeid not in self.tests or nodeid in self.done:
            return
        result = self.tests[nodeid]
        for key, value in fields.items():
            setattr(result, key, value)
        self.done.add(nodeid)
        if self.current == nodeid:
            self.current = None
        self.on_event("result", result.to_dict())

    def remaining(self) -> list[str]:
        if self.tests is None:
            return ["?"]
        return [n for n in self.tests if n not in self.done]

    def done_or_dead(self) -> list[str]:
        return sorted(self.done)

    def fail_remaining(self, message: str) -> None:
        for nodeid in self.remaining():
            if nodeid != "?":
                self.finish(nodeid, passed=False, message=message)

    def absorb_output(self, sink: _OutputSink) -> None:
        sink.join(timeout=2)
        self.output_bytes += sink.total
        if len(self.output_head) < _MAX_OUTPUT_KEPT:
            self.output_head += bytes(sink.head).decode(errors="replace")

    def ordered(self) -> list[TestResult]:
        return list((self.tests or {}).values())


def _watch(child: _Child, results_path: Path, offset: int, state: _RunState,
           test_timeout_s: float, deadline: float) -> tuple[int, str]:
    """Follow the results stream until the child exits, hangs, or the run's time is up."""
    while True:
        offset = _read_events(results_path, offset, state)
        code = child.proc.poll()
        if code is not None:
            offset = _read_events(results_path, offset, state)
            if code in (0, 1) and not state.remaining():
                return offset, "finished"
            if state.importing:
                state.import_crashed = True
            elif state.current is not None:
                state.finish(state.current, passed=False,
                             message=f"your code crashed the test process ({_exit_text(code)})")
            return offset, "crashed" if code not in (0, 1) else "finished"
        now = time.monotonic()
        if now > deadline:
            _kill(child)
            return _read_events(results_path, offset, state), "total_timeout"
        if state.current is not None and now - state.current_started > test_timeout_s + _KILL_GRACE_S:
            _kill(child)
            offset = _read_events(results_path, offset, state)
            if state.current is not None:
                state.finish(state.current, passed=False,
                             message=f"timed out after {test_timeout_s:g} s and had to be killed "
                                     "(an infinite loop, or code far slower than the reference)")
            return offset, "hung"
        if state.importing and now - child.started_at > test_timeout_s + _KILL_GRACE_S:
            _kill(child)
            state.import_error = "importing your file did not finish in time (a loop at module level?)"
            state.fail_remaining(state.import_error)
            return offset, "finished"
        time.sleep(_POLL_S)


def _read_events(path: Path, offset: int, state: _RunState) -> int:
    if not path.exists():
        return offset
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    # Only whole lines: the child may be mid-write.
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        try:
            state.handle(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue
    return offset + end


def _pytest_command(suite: Path, seed: int, deselect: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", str(suite), "-p", "grader.engine.plugin",
           "-q", "--tb=no", "--no-header", "-p", "no:cacheprovider",
           # Suites fail through expect(); skipping assertion rewriting and plugins a grading
           # run never uses saves about 1.5 s of CPU per run.
           "--assert=plain", "-p", "no:unraisableexception", "-p", "no:benchmark", "-p", "no:xdist",
           "-c", os.devnull, "--rootdir", str(suite.parent),
           f"--hypothesis-seed={seed}", "-W", "ignore"]
    for nodeid in deselect:
        cmd += ["--deselect", nodeid]
    return cmd


def _child_env(solution: Path, module: str, results: Path, test_timeout_s: float,
               max_examples: int | None, limits: ResourceLimits | None) -> dict[str, str]:
    base = limits.scrubbed_env() if limits is not None else dict(os.environ)
    env = dict(base)
    env.update({
        plugin.ENV_SOLUTION: str(solution.resolve()),
        plugin.ENV_MODULE: module,
        plugin.ENV_RESULTS: str(results),
        plugin.ENV_TEST_TIMEOUT: str(test_timeout_s),
        "PYTHONPATH": _child_pythonpath(env.get("PYTHONPATH")),
        # `python -m` would put the child's working directory first on sys.path, where the
        # candidate's code can write files: a module written there must never be imported.
        "PYTHONSAFEPATH": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
    })
    if not env["PYTHONPATH"]:
        del env["PYTHONPATH"]
    if max_examples is not None:
        env[plugin.ENV_MAX_EXAMPLES] = str(max_examples)
    return env


def _child_pythonpath(inherited: str | None) -> str:
    """The checkout's packages first when kata runs from one (a wheel's are on sys.path
    already, and site-packages must not move ahead of the standard library), then the
    absolute entries of the caller's PYTHONPATH: an empty or relative entry would name the
    child's working directory, never what the caller meant."""
    root = checkout_root()
    entries = [str(root)] if root else []
    entries += [p for p in (inherited or "").split(os.pathsep) if p and os.path.isabs(p)]
    return os.pathsep.join(entries)


def _spawn(cmd: list[str], env: dict[str, str], cwd: Path, limits: ResourceLimits | None) -> _Child:
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True,
                            preexec_fn=child_preexec(limits) if limits else None)
    sink = _OutputSink(proc.stdout)
    sink.start()
    return _Child(proc=proc, output=sink, started_at=time.monotonic())


def _kill(child: _Child) -> None:
    try:
        os.killpg(child.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        child.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not time out
        pass


def _exit_text(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
