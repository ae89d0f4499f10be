"""Run one suite against one solution file and collect the results.

The parent (this module) starts the **judge**, ``python -m pytest <suite> -p
grader.engine.plugin``, which runs the suite and the reference and starts its own **worker**
for the candidate's code (see plugin.py). The judge's configuration is one `JudgeConfig`
(config.py) in its environment; it streams events on a pipe only it holds, each taken here by
the handler `_RunState.on_<event>` (events.py). The parent watches that stream as a last line of defence: a test that runs far past
its limit gets the judge killed and restarted on the tests not yet run; a judge that dies is
handled the same way. Nothing the candidate's code does can make the parent crash or hang.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Collection

from grader.catalog import checkout_root
from grader.engine import warm, zygote
from grader.engine.config import JudgeConfig
from grader.engine.events import EventError, EventHandler
from grader.engine.judge_env import judge_environment
from grader.engine.limits import Limits
from grader.errors import GradingError


# Extra seconds the parent waits past a test's own limit before it kills the child: the
# in-child alarm should fire first and keep the process alive.
_KILL_GRACE_S = 5.0
_POLL_S = 0.02
_MAX_OUTPUT_KEPT = 16_000
_MAX_EVENT_BYTES = 1_000_000       # one line of the results stream
_MAX_STREAM_BYTES = 64_000_000     # the whole stream of one run


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class, whatever its name
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
    longest_call_s: float = 0.0  # the longest single call into the solution's code
    detail: bool = False  # a detail of its level: failing it lowers the score, not the level
    settled_by: list[str] = field(default_factory=list)  # clarification ids settling its rules

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
    contained: bool | None = None


@dataclass(eq=False)  # by identity: a split grading keeps its live judges in a set
class _Child:
    proc: "subprocess.Popen | zygote.ZygoteChild"
    output: "_OutputSink"
    events: "_EventReader"
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
            chunk = self.stream.read1(65536)  # (what there is: the counts stay current)
            if not chunk:
                return
            self.total += len(chunk)
            if len(self.head) < _MAX_OUTPUT_KEPT:
                self.head.extend(chunk[: _MAX_OUTPUT_KEPT - len(self.head)])


def run_suite(suite: Path, solution: Path, module: str, seed: int, *,
              test_timeout_s: float = 30.0, total_timeout_s: float = 600.0,
              max_examples: int | None = None, limits: Limits | None = None,
              on_event: Callable[[str, dict[str, Any]], None] | None = None,
              workdir: Path | None = None, levels: set[int] | None = None,
              test_limits: dict[str, float] | None = None,
              call_limits: dict[str, float] | None = None,
              support: tuple[Path, ...] = (),
              shards: list[list[str]] | None = None,
              tests: Collection[str] | None = None,
              load_error: str | None = None, stop_at_first_failure: bool = False,
              sanitizer: str | None = None, worker_env: dict[str, str] | None = None) -> RunOutcome:
    """Run `suite` against `solution` (registered as `module`) and return every result.

    on_event(kind, data) is called, as the judge reports them, with "collected" (data:
    {"tests": [...]}), "start" (data: the TestResult dict of the test now running, not yet
    decided) and "result" (data: a TestResult dict), for a progress display.

    With `shards` (test names, a list per judge), that many judges run at once, each its
    share on CPUs of its own, and their results are merged in the suite's order; a test no
    share names runs in the first. The events of all of them reach on_event (one
    "collected", with every test). With `tests` (names), only those tests run (within
    `levels`); the others are not reported. With `load_error` (the parent's compile check
    found the file cannot load), the judge starts no worker and fails every test with it.
    With `stop_at_first_failure` (one judge), the tests after the first failing one are not
    run and not reported; a note says how many.
    """
    t0 = time.monotonic()
    config = JudgeConfig(
        solution=str(solution.resolve()), module=module, test_timeout_s=test_timeout_s,
        test_limits=dict(test_limits or {}), call_limits=dict(call_limits or {}),
        max_examples=100 if max_examples is None else max_examples,
        levels=tuple(sorted(levels or ())), tests=tuple(sorted(tests)) if tests is not None else None,
        support=tuple(str(p.resolve()) for p in support), load_error=load_error,
        limits=limits or Limits(), stop_at_first_failure=stop_at_first_failure,
        sanitizer=sanitizer, worker_env=dict(worker_env or {}))
    if load_error is not None or stop_at_first_failure:
        shards = None  # nothing to share: no test runs, or the order of all of them matters
    with tempfile.TemporaryDirectory(prefix="kata-run-") as tmp:
        env = _judge_env()
        run = functools.partial(_run_judge, suite, seed, test_timeout_s=test_timeout_s,
                                deadline=t0 + total_timeout_s, total_timeout_s=total_timeout_s)
        if not shards or len(shards) < 2:
            cwd = workdir or Path(tmp) / "cwd"
            cwd.mkdir(exist_ok=True)
            state = _RunState(on_event, test_limits or {})
            run(env, config, cwd, state)
            states = [state]
        else:
            states = _run_shards(run, env, config, shards, workdir, Path(tmp), on_event, test_limits or {})
        return _outcome(states, time.monotonic() - t0)


def _run_judge(suite: Path, seed: int, env: dict[str, str], config: JudgeConfig, cwd: Path,
               state: "_RunState", *,
               test_timeout_s: float, deadline: float, total_timeout_s: float,
               cpus: set[int] | None = None, stop: "_Stop | None" = None) -> None:
    """One judge on the suite until every test it has is decided: restarted past a test
    that hung or crashed it."""
    max_restarts = 1000
    while max_restarts > 0 and not (stop is not None and stop.is_set()):
        max_restarts -= 1
        cmd = _pytest_command(suite, seed, state.done_or_dead())
        child = _spawn(cmd, env, config, cwd, cpus)
        if stop is not None:
            stop.children.add(child)
        verdict, waited = "interrupted", True
        try:
            verdict = _watch(child, state, test_timeout_s, deadline=deadline)
        finally:  # (an interrupt too: the judge runs in a session of its own)
            # A judge that said all it had to (verdict "finished") is killed and left to its
            # zygote to reap: its end, torch's memory unmapped, took 10-20 ms of each warm check.
            waited = not (verdict == "finished" and isinstance(child.proc, zygote.ZygoteChild))
            _kill(child, wait=waited)
            if stop is not None:
                stop.children.discard(child)
        state.absorb_output(child.output, wait=waited)
        if stop is not None and state.import_error is not None and stop.unloadable is None:
            # The other judges' workers import the same file: their verdict is this one.
            stop.unloadable = state
            stop.stop_all()
        if verdict == "finished" or not state.remaining() or (stop is not None and stop.is_set()):
            break
        if verdict == "total_timeout":
            state.fail_remaining(f"not run: the whole run passed its {total_timeout_s:g} s limit")
            break
        if state.tests is None:
            raise GradingError(
                f"the suite {suite.name} could not be collected "
                f"({_exit_text(child.proc.returncode)})",
                hint="this is a bug in the grader, not in your code; run with --debug "
                     "and report it\n" + bytes(child.output.head).decode(errors="replace")[-2000:])


def _run_shards(run: Callable[..., None], env: dict[str, str], config: JudgeConfig,
                shards: list[list[str]], workdir: Path | None, tmp: Path, on_event: Callable[[str, dict[str, Any]], None] | None,
                test_limits: dict[str, float]) -> list["_RunState"]:
    """Each share in a judge of its own, on its own thread here; every judge's state."""
    lock = threading.Lock()
    collected = [False]

    def events(kind: str, data: dict[str, Any]) -> None:
        with lock:
            if kind == "collected":
                if collected[0]:
                    return
                collected[0] = True
            if on_event is not None:
                on_event(kind, data)

    cpus = _cpu_shares(len(shards))
    stop = _Stop()
    named = [name for share in shards[1:] for name in share]
    states, errors, threads = [], [], []
    for i, share in enumerate(shards):
        ours = replace(config, drop_tests=tuple(named)) if i == 0 else replace(config, keep_tests=tuple(share))
        cwd = workdir or tmp / f"cwd{i}"
        cwd.mkdir(exist_ok=True)
        state = _RunState(events, test_limits)
        states.append(state)

        # Each judge and its worker take turns on CPUs of their own (a lone judge's plan,
        # grader/engine/cpus.py, then works within them).
        def work(state: _RunState = state, config: JudgeConfig = ours,
                 cwd: Path = cwd, cpus: set[int] | None = cpus[i] if cpus else None) -> None:
            try:
                run(env, config, cwd, state, cpus=cpus, stop=stop)
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                errors.append(exc)

        threads.append(threading.Thread(target=work, daemon=True, name=f"kata-judge-{i}"))
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except BaseException:  # Ctrl-C: no judge outlives the grading
        stop.stop_all()
        raise
    if errors:
        raise errors[0]
    if stop.unloadable is not None:
        _fail_unloaded(states, stop.unloadable)
    return states


class _Stop(threading.Event):
    """Set when a split grading is abandoned: its judges are not restarted, and the live
    ones (`children`) are killed. `unloadable`: the judge whose worker could not import the
    candidate's file, when that is why."""

    def __init__(self) -> None:
        super().__init__()
        self.children: set[_Child] = set()
        self.unloadable: _RunState | None = None

    def stop_all(self) -> None:
        self.set()
        for child in list(self.children):
            _kill(child)


def _fail_unloaded(states: list["_RunState"], failed: "_RunState") -> None:
    """Every test of a split grading failed with the import error one judge reported: the
    tests of the judges stopped for it, collected or not (`failed` knows every test)."""
    message = str(failed.import_error)
    for state in states:
        state.import_error = state.import_error or message
        state.fail_remaining(message)
    known = {nodeid for state in states for nodeid in (state.tests or {})}
    for meta in failed.every:
        if meta["nodeid"] not in known and failed.tests is not None:
            failed.tests[meta["nodeid"]] = TestResult(**meta)
            failed.finish(meta["nodeid"], passed=False, message=message)


def _cpu_shares(n: int) -> list[set[int]] | None:
    """The CPUs this process may use, dealt out to `n` judges (None when there are fewer
    CPUs than judges: the kernel places them)."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if len(allowed) < n:
        return None
    return [set(allowed[i::n]) for i in range(n)]


def _outcome(states: list["_RunState"], duration_s: float) -> RunOutcome:
    """One outcome from every judge's state: the tests in the suite's order."""
    if len(states) == 1:
        state = states[0]
        return RunOutcome(tests=state.ordered(), duration_s=duration_s,
                          import_error=state.import_error, notes=state.notes,
                          output_head=state.output_head, output_bytes=state.output_bytes,
                          contained=state.contained)
    by_id: dict[str, TestResult] = {}
    for state in states:
        by_id.update(state.tests or {})
    order = next((s.order for s in states if s.order), [])
    tests = [by_id.pop(n) for n in order if n in by_id] + list(by_id.values())
    notes: list[str] = []
    for state in states:
        notes += [n for n in state.notes if n not in notes]
    contained = [s.contained for s in states if s.contained is not None]
    return RunOutcome(tests=tests, duration_s=duration_s,
                      import_error=next((s.import_error for s in states if s.import_error), None),
                      notes=notes, output_head="".join(s.output_head for s in states)[:_MAX_OUTPUT_KEPT],
                      output_bytes=sum(s.output_bytes for s in states),
                      contained=all(contained) if contained else None)


class _RunState(EventHandler):
    def __init__(self, on_event: Callable[[str, dict[str, Any]], None] | None,
                 test_limits: dict[str, float]) -> None:
        self.on_event = on_event or (lambda kind, data: None)
        self.test_limits = test_limits
        self.tests: dict[str, TestResult] | None = None
        self.order: list[str] = []  # every test of the suite (a split grading's judge runs some)
        self.every: list[dict[str, Any]] = []  # and their metadata, as collected
        self.done: set[str] = set()
        self.current: str | None = None
        self.current_started = 0.0
        self.import_error: str | None = None
        self.importing = False
        self.import_started = 0.0
        self.import_crashed = False
        self.notes: list[str] = []
        self.output_head = ""
        self.output_bytes = 0
        self.contained: bool | None = None
        self.judge_done = False  # the judge said it has nothing more to send

    # ---------------------------------------------------------------- the judge's events
    # Each handler's signature is its event's schema (see grader/engine/events.py).

    def on_collected(self, tests: list[dict[str, Any]], every: list[dict[str, Any]] | None = None) -> None:
        """The tests this judge runs (`every`: all the suite's, when it runs a share)."""
        if self.tests is not None:
            return  # a restarted judge collects again: the first list stands
        self.tests = {t["nodeid"]: TestResult(**t) for t in tests}
        every = every if isinstance(every, list) else tests
        self.order = [str(t.get("nodeid")) for t in every if isinstance(t, dict)]
        self.every = [t for t in every if isinstance(t, dict)]
        self.on_event("collected", {"tests": every})

    def on_worker(self, contained: bool, notes: list[str]) -> None:
        """The judge's first worker started, sandboxed or not."""
        self.contained = bool(contained)
        self.notes.extend(str(n)[:500] for n in notes[:5])

    def on_import_start(self) -> None:
        """The worker imports the candidate's file, on the flat limit's clock."""
        self.importing, self.import_started = True, time.monotonic()

    def on_import_done(self, error: str | None) -> None:
        """The import ended: `error` says why the file cannot load, or None."""
        self.importing = False
        # The import ran on its own clock (the flat limit): the test's starts now.
        self.current_started = time.monotonic()
        self.import_error = error

    def on_start(self, nodeid: str) -> None:
        """A test starts: the parent's watch times it from now."""
        self.current, self.current_started = nodeid, time.monotonic()
        test = (self.tests or {}).get(str(self.current))
        if test is not None and self.current not in self.done:
            self.on_event("start", test.to_dict())

    def on_result(self, nodeid: str, passed: bool, message: str, details: dict[str, Any],
                  duration_s: float, longest_call_s: float, stdout_bytes: int) -> None:
        """A test's verdict, with the figures the scorecard and the reference's timings use."""
        self.finish(str(nodeid), passed=passed is True, message=str(message)[:4000],
                    details=details if isinstance(details, dict) else {},
                    duration_s=float(duration_s), longest_call_s=float(longest_call_s),
                    stdout_bytes=int(stdout_bytes))

    def on_stopped(self, reason: str) -> None:
        """The judge stopped after a failing test (JudgeConfig.stop_at_first_failure): the
        tests it did not reach are not run, and not reported; a note counts them."""
        if self.tests is None:
            return
        left = [n for n in self.tests if n not in self.done]
        for nodeid in left:
            del self.tests[nodeid]
        if left:
            self.notes.append(f"{str(reason)[:200]}: {len(left)} more not run")

    def on_done(self) -> None:
        """The judge has nothing more to send (it is shutting down)."""
        self.judge_done = True

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

    def current_limit(self, default: float) -> float:
        test = (self.tests or {}).get(self.current or "")
        return self.test_limits.get(test.name, default) if test is not None else default

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

    def absorb_output(self, sink: _OutputSink, *, wait: bool = True) -> None:
        """Count the judge's output; with `wait`, up to its end (a judge not waited for has
        written all it writes but its last lines, which count if they are in by now)."""
        sink.join(timeout=2 if wait else 0)
        self.output_bytes += sink.total
        if len(self.output_head) < _MAX_OUTPUT_KEPT:
            self.output_head += bytes(sink.head).decode(errors="replace")

    def ordered(self) -> list[TestResult]:
        return list((self.tests or {}).values())


def _watch(child: _Child, state: _RunState, test_timeout_s: float, deadline: float) -> str:
    """Follow the results stream until the judge exits, hangs, or the run's time is up."""
    while True:
        _read_events(child, state)
        if state.judge_done and state.tests is not None and not state.remaining():
            return "finished"  # the caller kills the judge, still shutting down
        code = child.proc.poll()
        if code is not None:
            child.events.join(timeout=2)
            _read_events(child, state)
            if code in (0, 1) and not state.remaining():
                return "finished"
            if state.current is not None:
                state.finish(state.current, passed=False,
                             message=f"the grader's test process stopped ({_exit_text(code)})")
            return "crashed" if code not in (0, 1) else "finished"
        now = time.monotonic()
        if now > deadline:
            _kill(child)
            _read_events(child, state)
            return "total_timeout"
        # The judge waits for the worker's import before the first test (on its own clock,
        # the flat limit): a judge stuck there is killed like a hung test.
        if state.importing and state.current is None and now - state.import_started > test_timeout_s + _KILL_GRACE_S:
            _kill(child)
            _read_events(child, state)
            if state.importing:
                state.fail_remaining(f"importing your file did not finish in {test_timeout_s:g} s and the "
                                     "grader's test process had to be killed (a loop at module level?)")
            return "hung"
        # While the worker imports the candidate's file, the flat limit applies.
        limit = test_timeout_s if state.importing else state.current_limit(test_timeout_s)
        if state.current is not None and now - state.current_started > limit + _KILL_GRACE_S:
            _kill(child)
            _read_events(child, state)
            if state.current is not None:
                state.finish(state.current, passed=False,
                             message=f"timed out after {limit:g} s and had to be killed "
                                     "(an infinite loop, or code far slower than the reference)")
            return "hung"
        # Wait for the next event, not a fixed nap: a result (and "done", the end of the
        # grading) is handled as it arrives, not up to _POLL_S later.
        _read_events(child, state, wait_s=_POLL_S)


def _read_events(child: _Child, state: _RunState, wait_s: float = 0.0) -> None:
    """Dispatch the events the judge sent so far; with `wait_s`, wait up to that long for
    the first of them."""
    while True:
        try:
            line = child.events.lines.get(timeout=wait_s) if wait_s > 0 else child.events.lines.get_nowait()
        except queue.Empty:
            return
        wait_s = 0.0
        try:
            event = json.loads(line)
        except ValueError:
            continue  # (the judge writes whole lines: only a cut one could fail here)
        if not isinstance(event, dict):
            raise EventError(f"the judge sent something that is not an event: {line[:100]!r}")
        state.dispatch(event)


class _EventReader(threading.Thread):
    """Reads the judge's results pipe line by line, with a bound on each line and the total."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.stream = os.fdopen(fd, "rb")
        self.lines: "queue.Queue[bytes]" = queue.Queue()
        self.total = 0

    def run(self) -> None:
        with self.stream:
            while self.total < _MAX_STREAM_BYTES:
                line = self.stream.readline(_MAX_EVENT_BYTES)
                if not line:
                    return
                self.total += len(line)
                if line.endswith(b"\n"):
                    self.lines.put(line)


def _pytest_command(suite: Path, seed: int, deselect: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", str(suite), "-p", "grader.engine.plugin",
           # The one plugin of another package a grading needs (--hypothesis-seed): the
           # judge's environment turns off every installed plugin's autoload (see _judge_env).
           "-p", "_hypothesis_pytestplugin",
           "-q", "--tb=no", "--no-header", "-p", "no:cacheprovider",
           # Suites fail through expect(); skipping assertion rewriting and plugins a grading
           # run never uses saves about 1.5 s of CPU per run.
           "--assert=plain", "-p", "no:unraisableexception", "-p", "no:benchmark", "-p", "no:xdist",
           "--noconftest",  # a suite under tests/ must not pick up the project's own conftest
           "-c", os.devnull, "--rootdir", str(suite.parent),
           f"--hypothesis-seed={seed}", "-W", "ignore"]
    for nodeid in deselect:
        cmd += ["--deselect", nodeid]
    return cmd


def _judge_env() -> dict[str, str]:
    """The judge's environment, but for its configuration (added at each start: see _spawn)."""
    env = judge_environment(os.environ)  # an allow-list: no reviewer's secret reaches a grading
    env.update({
        "PYTHONPATH": _child_pythonpath(os.environ.get("PYTHONPATH")),
        # `python -m` would put the child's working directory first on sys.path, where the
        # candidate's code can write files: a module written there must never be imported.
        "PYTHONSAFEPATH": "1",
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
        # No pytest plugin the user happens to have installed (anyio's, pytest-cov, ...)
        # loads into a judge: they cannot change a verdict, and finding and importing them
        # cost about 45 ms a judge.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    })
    # One intra-op thread in the judge and the worker (which keeps these two): a suite's
    # tensors are small, so more threads only wait for each other (twice the CPU time on a
    # loaded machine), and a CPU-time measurement then sees all the work.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    if not env["PYTHONPATH"]:
        del env["PYTHONPATH"]
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


def judges_forked() -> bool:
    """Whether this process's next grading forks its judges from a process that imported
    torch already (the warm grader, or a review's zygote) rather than starting them."""
    return zygote.wanted() or warm.forks_judges(_judge_env())


def _spawn(cmd: list[str], env: dict[str, str], config: JudgeConfig, cwd: Path,
           cpus: set[int] | None = None) -> _Child:
    read_fd, write_fd = os.pipe()
    env = {**env, **config.with_results_fd(write_fd).to_env()}
    try:
        # Forked from a zygote where this process asked for one (see zygote.py), else started.
        forked = warm.spawn_judge(cmd, env, str(cwd), write_fd, cpus) or \
            zygote.spawn_judge(cmd, env, str(cwd), write_fd, cpus)
        proc = forked or subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          start_new_session=True, pass_fds=(write_fd,))
    finally:
        os.close(write_fd)
    if cpus and forked is None:
        # As soon as it runs, before the judge starts its worker, which inherits its CPUs
        # (and so does every thread either makes later).
        try:
            os.sched_setaffinity(proc.pid, cpus)
        except OSError:
            pass  # it only costs speed
    sink = _OutputSink(proc.stdout)
    sink.start()
    events = _EventReader(read_fd)
    events.start()
    return _Child(proc=proc, output=sink, events=events, started_at=time.monotonic())


def _kill(child: _Child, *, wait: bool = True) -> None:
    try:
        os.killpg(child.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        if wait:
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
