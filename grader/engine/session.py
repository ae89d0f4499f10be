"""The judge as an object: one `JudgeSession` per judge process, registered with pytest as a
plugin (as pytest-xdist's ``WorkerInteractor`` is), holding what a grading's tests share:
the configuration, the event stream, the worker, the running test's clock, the places
earlier tests hung, the CPU plan and the longest-call figure.

Each test: ``start`` is sent, the worker's output is cleared and its CPUs tuned, the test's
random state is seeded, its alarm armed (see `arm`); its verdict is described when its report
says it failed (see judge_report.py), and ``result`` is sent when it ends.
"""

from __future__ import annotations

import hashlib
import random
import signal
import sys
import time
from typing import Any, Callable

import pytest

from grader.engine import collection, judge_report
from grader.engine.config import JudgeConfig
from grader.engine.cpus import CpuPlan
from grader.engine.events import EventStream
from grader.engine.failures import CallTimeout, CandidateImportError, KataTimeout
from grader.engine.judge_bridge import CallStats
from grader.engine.judge_worker import JudgeWorker
from grader.engine.worker_process import WorkerProcess

PROBE_S = 0.5  # after a hang, a test still running after this long is checked for the same hang
CALL_PROBE_S = 0.5  # how often a test with a per-call limit looks at its running call's age
# Shrinking a failing example: at least this long, at most as long as the test has run when it
# starts (at least the floor), and never so long that the test's own limit would cut it.
# 0.5 s: the suites' small examples are as small as after 1 s (rope's, compared), and a fast
# test that fails no longer costs up to ten times its passing time (rope's failing gradings
# took 2.2x its passing one at 1 s, 1.5x at 0.5 s).
SHRINK_FLOOR_S = 0.5
SHRINK_MARGIN_S = 0.75  # left of the test's limit for the last replay and the report
MAX_OUTPUT_LINES = 40
STOPPED = "stopped at the first failing test"


class TestClock:
    """The running test's time (time.monotonic()): when it started and its deadline, both
    moved on by an import of the candidate's file inside it, which runs on its own clock; and
    the seconds spent importing so far (not the tests' time)."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self) -> None:
        self.started = 0.0
        self.deadline = 0.0
        self.import_s = 0.0

    def start(self, limit_s: float, now: float | None = None) -> None:
        self.started = time.monotonic() if now is None else now
        self.deadline = self.started + limit_s

    def pause(self, took_s: float) -> None:
        """An import took `took_s` seconds inside the test: its time is not the test's."""
        self.deadline += took_s
        self.started += took_s
        self.import_s += took_s

    def shrink_budget_s(self, now: float | None = None) -> float:
        """Seconds hypothesis may shrink for, starting now, in the running test."""
        now = time.monotonic() if now is None else now
        ran = now - self.started
        left = self.deadline - now - SHRINK_MARGIN_S
        return max(0.0, min(max(SHRINK_FLOOR_S, ran), left))


class JudgeSession:
    """One judge's grading (see the module docstring).

    Invariants: `pending` holds the running test's outcome so far, and nothing between tests;
    `known_hangs` only grows (the function of the candidate's innermost frame where a test
    hung -> that test's name); `call_stats` is reset as each test starts and read as it ends.
    """

    def __init__(self, config: JudgeConfig, stream: EventStream, *, cpus: CpuPlan | None = None,
                 start_process: Callable[..., Any] = WorkerProcess) -> None:
        self.config = config
        self.stream = stream
        self.cpus = cpus if cpus is not None else CpuPlan()
        self.call_stats = CallStats()
        self.clock = TestClock()
        self.known_hangs: dict[str, str] = {}
        self.pending: dict[str, dict[str, Any]] = {}
        self.worker = JudgeWorker(config, stream, self.cpus, self.call_stats, self.on_own_clock,
                                  start_process=start_process)

    # ---------------------------------------------------------------- limits

    def limit_for(self, item: pytest.Item) -> float:
        return self.config.test_limits.get(item.name, self.config.test_timeout_s)

    def call_limit_for(self, item: pytest.Item) -> float | None:
        """The longest one call into the candidate's code may run in this test, or None (no
        reference timings: only the test's own limit applies)."""
        limit = self.config.call_limits.get(item.name)
        return limit if limit is not None and limit < self.limit_for(item) else None

    # ---------------------------------------------------------------- the clock

    def on_own_clock(self, start: Callable[[], Any]) -> Any:
        """Import the candidate's file with its own limit (the flat per-test limit), the
        running test's alarm paused: after a hang the worker is restarted inside the next test,
        and an import slowed by a loaded machine must not read as "a loop at module level"
        against a limit made for that test's calls. The test's remaining time resumes after."""
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        handler = signal.getsignal(signal.SIGALRM)
        t0 = time.monotonic()
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.config.test_timeout_s, 0)
        try:
            result = start()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, handler)
        self.clock.pause(time.monotonic() - t0)  # the probes' deadline moves by the import's time
        if remaining > 0:
            signal.setitimer(signal.ITIMER_REAL, remaining, 0)
        return result

    def arm(self, item: pytest.Item) -> None:
        """The test's alarm: at its limit; with a per-call limit, also every CALL_PROBE_S
        seconds to look at the running call's age; after an earlier hang, also every PROBE_S
        seconds to check whether this test is stuck at the same place (then it is cut at once)."""
        limit = self.limit_for(item)
        call_limit = self.call_limit_for(item)
        self.clock.start(limit)
        signal.signal(signal.SIGALRM, _on_alarm)
        intervals = [s for s, wanted in ((PROBE_S, bool(self.known_hangs)), (CALL_PROBE_S, call_limit is not None))
                     if wanted]
        if not intervals or limit <= min(intervals) + 0.5:
            signal.setitimer(signal.ITIMER_REAL, limit, 0)
            return
        every = min(intervals)

        def probe(signum: int, frame: Any) -> None:
            if call_limit is not None:
                since = getattr(self.worker.endpoint(), "call_since", None)
                if since is not None and time.monotonic() - since > call_limit:
                    raise CallTimeout(call_limit)
            if self.known_hangs:
                same = judge_report.same_hang(self.worker.process, self.known_hangs)
                if same is not None:
                    raise KataTimeout(same)
            left = self.clock.deadline - time.monotonic()
            if left <= 0:
                raise KataTimeout()
            signal.signal(signal.SIGALRM, probe if left > every + 0.5 else _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, min(every, left) if left > every + 0.5 else left, 0)

        signal.signal(signal.SIGALRM, probe)
        signal.setitimer(signal.ITIMER_REAL, every, 0)

    # ---------------------------------------------------------------- pytest's hooks

    def start(self) -> None:
        """At pytest's configure: the worker starts while the suite is collected."""
        if self.config.load_error:  # the parent's compile check: the file cannot load, no worker
            self.worker.import_error = self.config.load_error
            self.stream.send("import_done", error=self.config.load_error)
        elif self.config.solution:
            self.worker.spawn()

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        self.stream.send("collected", **collection.select(self.config, config, items))
        self.fail_all_if_unloadable(config, items)

    def fail_all_if_unloadable(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Wait for the worker's import before the first test; when the file cannot load, every
        test fails at once with why, and none runs (each would only say it again)."""
        if not items or not (self.config.solution or self.worker.import_error):
            return
        try:
            self.worker.module()
            return
        except CandidateImportError as exc:
            message = str(exc)
        printed, num_chars = self.worker.take_output()  # what the code printed before it failed
        for i, item in enumerate(items):
            details = {"output": "\n".join(printed.splitlines()[:MAX_OUTPUT_LINES])[:8000]} if printed and i == 0 else {}
            self.stream.send("result", nodeid=item.nodeid, passed=False, message=message, details=details,
                             duration_s=0.0, longest_call_s=0.0, stdout_bytes=num_chars if i == 0 else 0)
        collection.keep_only(config, items, lambda item: False)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        self.begin_test(item)
        previous = signal.getsignal(signal.SIGALRM)
        self.arm(item)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, previous)
            self.end_test(item)

    def begin_test(self, item: pytest.Item) -> None:
        self.stream.send("start", nodeid=item.nodeid)
        self.worker.take_output()
        self.worker.last_endpoint = None
        self.worker.tune_cpus()
        self.pending[item.nodeid] = {"passed": True, "message": "", "details": {}, "t0": time.perf_counter(),
                                     "import_s": self.clock.import_s}
        self.call_stats.longest_s = 0.0
        seed_test(item)

    def end_test(self, item: pytest.Item) -> None:
        outcome = self.pending.pop(item.nodeid)
        self.worker.after_test()
        text, total = self.worker.take_output()
        outcome["stdout_bytes"] = total
        if text and not outcome["passed"]:
            lines = text.splitlines()
            shown = "\n".join(lines[:MAX_OUTPUT_LINES])[:8000]
            more = len(lines) - MAX_OUTPUT_LINES
            outcome["details"]["output"] = shown + (f"\n... {more} more lines" if more > 0 else "")
        # The test's own time: an import of the candidate's file inside it is on its own clock.
        duration = time.perf_counter() - outcome.pop("t0") - (self.clock.import_s - outcome.pop("import_s"))
        self.stream.send("result", nodeid=item.nodeid, duration_s=round(max(duration, 0.0), 4),
                         longest_call_s=round(self.call_stats.longest_s, 4), **outcome)
        if self.config.stop_at_first_failure and not outcome["passed"]:
            item.session.shouldstop = STOPPED  # pytest runs no further test
            self.stream.send("stopped", reason=STOPPED)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        if call.excinfo is not None:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)  # the verdict is in; describing it is not timed
        report_outcome = yield
        report = report_outcome.get_result()
        state = self.pending.get(item.nodeid)
        if state is None:
            return
        if report.skipped and call.when in ("setup", "call"):
            state.update(passed=False, message="skipped: " + judge_report.skip_reason(report))
        elif report.failed and state["passed"]:
            exc = call.excinfo.value if call.excinfo else None
            message, details = judge_report.describe(self.worker, self.known_hangs, item, exc, self.limit_for(item))
            state.update(passed=False, message=message, details=details)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.worker.kill(wait=False)
        # Every result is out and the worker is killed: the parent need not wait for this
        # interpreter's shutdown (a few tenths of a second with torch loaded), nor this
        # judge for the worker's end (about 10 ms with torch loaded).
        self.stream.send("done")


def _on_alarm(signum: int, frame: Any) -> None:
    raise KataTimeout()


def seed_test(item: pytest.Item) -> None:
    """Every test starts from its own random state, derived from the grading's seed and the
    test's id: what it draws (and what the candidate's code draws through the bridge) does
    not depend on which tests ran before it in this judge (a level filter, a split grading)."""
    seed = item.config.getoption("hypothesis_seed", None)
    digest = hashlib.blake2b(f"{seed}:{item.nodeid}".encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little") >> 1
    random.seed(value)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.default_generator.manual_seed(value)  # (not torch.manual_seed: see judge_bridge)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(value % 2**32)
