"""pytest plugin of the **judge** process (``-p grader.engine.plugin``).

The judge runs the suite, hypothesis and the reference; it never imports the candidate's
code. The candidate's module lives in a worker process (sandboxed where the OS allows,
see ``sandbox.py``), reached through the ``solution`` fixture, a proxy. A worker that
crashes or hangs is killed and a fresh one serves the next test.

Results go to the parent as JSON lines on an inherited pipe (``KATA_RESULTS_FD``) that
only the judge holds:

    {"event": "collected", "tests": [{nodeid, name, level, category, weight, description, detail}]}
    {"event": "worker", "contained": bool, "notes": [...]}
    {"event": "import_start"} / {"event": "import_done", "error": str | null}
    {"event": "start", "nodeid": ...}
    {"event": "result", "nodeid": ..., "passed": bool, "message": str, "details": {...}}
    {"event": "done"}: the worker is gone and nothing more will come
"""

from __future__ import annotations

import functools
import gc
import hashlib
import importlib
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grader.engine import import_watch, sandbox
from grader.engine.cpus import CpuPlan
from grader.engine.failures import (CallTimeout, CandidateImportError, KataTimeout, describe_failure,
                                    import_error_text)
from grader.engine.judge_bridge import CALL_STATS, WorkerCrashed
from grader.engine.judge_env import limit_judge_memory
from grader.engine.suite_listing import detail_tests, rules_file, settling_ids
from grader.engine.worker_process import WorkerProcess
from grader.worker import measure

ENV_SOLUTION = "KATA_SOLUTION"
ENV_MODULE = "KATA_MODULE"
ENV_RESULTS_FD = "KATA_RESULTS_FD"
ENV_TEST_TIMEOUT = "KATA_TEST_TIMEOUT"
ENV_TEST_LIMITS = "KATA_TEST_LIMITS"  # JSON {test name: seconds}, from the reference's times
ENV_CALL_LIMITS = "KATA_CALL_LIMITS"  # JSON {test name: seconds one call may take}, likewise
PROBE_S = 0.5  # after a hang, a test still running after this long is checked for the same hang
CALL_PROBE_S = 0.5  # how often a test with a per-call limit looks at its running call's age
ENV_MAX_EXAMPLES = "KATA_MAX_EXAMPLES"
ENV_LEVELS = "KATA_LEVELS"  # comma-separated levels to run (default: all)
ENV_SUPPORT = "KATA_SUPPORT"  # the kata's support files (os.pathsep-separated paths)
# One judge's share of a split grading: JSON {"keep": [test names]} or {"drop": [names]}.
ENV_SHARD = "KATA_SHARD"
ENV_TESTS = "KATA_TESTS"  # a JSON list of test names: run only those
ENV_LOAD_ERROR = "KATA_LOAD_ERROR"  # why the file cannot load (the parent's compile check): fail all
ENV_MEMORY = "KATA_WORKER_MEMORY_BYTES"
ENV_CPU = "KATA_WORKER_CPU_SECONDS"
ENV_FILE = "KATA_WORKER_FILE_BYTES"

_MAX_LINE_BYTES = 256_000
_MAX_OUTPUT_LINES = 40


# ---------------------------------------------------------------------------- stream


class _Stream:
    def __init__(self, fd: str | None) -> None:
        self._file = os.fdopen(int(fd), "w", encoding="utf-8") if fd else None

    def write(self, **event: Any) -> None:
        if self._file is None:
            return
        line = json.dumps(event, default=str)
        if len(line) > _MAX_LINE_BYTES and "details" in event:
            event["details"] = {"note": "details too long to show"}
            line = json.dumps(event, default=str)[:_MAX_LINE_BYTES]
        self._file.write(line + "\n")
        self._file.flush()


_stream = _Stream(None)


def _test_timeout_s() -> float:
    return float(os.environ.get(ENV_TEST_TIMEOUT, "60"))


@functools.cache
def _limits_from_env(variable: str) -> dict[str, float]:
    """{test name: seconds} from a JSON environment variable set by the runner ({} if unset
    or malformed)."""
    try:
        raw = json.loads(os.environ.get(variable) or "{}")
        return {str(k): float(v) for k, v in raw.items()}
    except (ValueError, TypeError, AttributeError):
        return {}


def _limit_for(item: pytest.Item) -> float:
    return _limits_from_env(ENV_TEST_LIMITS).get(item.name, _test_timeout_s())


def _call_limit_for(item: pytest.Item) -> float | None:
    """The longest one call into the candidate's code may run in this test, or None (no
    reference timings: only the test's own limit applies)."""
    limit = _limits_from_env(ENV_CALL_LIMITS).get(item.name)
    return limit if limit is not None and limit < _limit_for(item) else None


# Where earlier tests hung: the function of the candidate's innermost frame -> test name.
_known_hangs: dict[str, str] = {}


# ---------------------------------------------------------------------------- the worker


class _Worker:
    """The current worker, restarted when the previous one died, hung or broke."""

    def __init__(self) -> None:
        self.process: WorkerProcess | None = None
        self.proxy: Any = None
        self.import_error: str | None = None
        self.output: list[str] = []
        self.output_chars = 0
        self.announced = False
        self.last_endpoint: Any = None  # kept after a kill, for the failing test's snippet
        self.proxy_seen: Any = None

    def on_output(self, text: str, dropped: int) -> None:
        self.output.append(text)
        self.output_chars += len(text) + dropped

    def spawn(self) -> None:
        if self.process is None and self.import_error is None:
            limits = sandbox.Limits(
                memory_bytes=int(os.environ.get(ENV_MEMORY, 16 * 1024**3)) or None,
                cpu_seconds=int(os.environ.get(ENV_CPU, 0)) or None,
                file_bytes=int(os.environ.get(ENV_FILE, 64 * 1024**2)) or None)
            self.process = WorkerProcess(Path(os.environ[ENV_SOLUTION]), os.environ.get(ENV_MODULE, "solution"),
                                         limits, self.on_output, support=_support_files())
            self.process.start()
            if not self.announced:
                self.announced = True
                _stream.write(event="worker", contained=self.process.contained,
                              notes=self.process.command.notes if self.process.command else [])

    def module(self) -> Any:
        if self.import_error is not None:
            raise CandidateImportError(self.import_error)
        if self.proxy is not None:
            return self.proxy
        self.spawn()
        assert self.process is not None
        _stream.write(event="import_start")
        process = self.process
        try:
            ok, value, _ = _on_own_clock(lambda: import_watch.wait_for_hello(process))
        except import_watch.ImportStuck as stuck:
            raise self.import_failed(import_watch.stuck_text(stuck.frames, stuck.seconds, _source_lines()))
        except KataTimeout:
            frames = import_watch.frames_now(process)
            where = "\n" + import_watch.where_text(frames, _source_lines()) if frames else ""
            raise self.import_failed("importing your file did not finish in time (a loop at module level?)"
                                     + where) from None
        if not ok:
            if value.get("kind") == "crashed":
                value = {**value, "msg": process.exit_text() or value.get("msg", "")}
            raise self.import_failed(import_error_text(value))
        _stream.write(event="import_done", error=None)
        self.proxy = self.proxy_seen = value
        _cpus.worker_changed()
        self.tune_cpus()
        measure.set_remote(self.process.endpoint)  # efficiency tests measure the worker's share
        self.process.endpoint.keep_beside = self.keep_beside
        return value

    def import_failed(self, text: str) -> CandidateImportError:
        """The worker could not import the candidate's file: every later test fails with `text`."""
        self.import_error = text
        self.kill()
        _stream.write(event="import_done", error=text)
        return CandidateImportError(text)

    def endpoint(self) -> Any:
        return self.process.endpoint if self.process is not None else None

    def tune_cpus(self) -> None:
        """Side by side or on one CPU, as the machine's load now calls for (see cpus.py)."""
        endpoint = self.endpoint()
        if endpoint is None or endpoint.broken is not None or not self.process.alive():
            return
        try:
            _cpus.update(self.process.python_pid(), lambda s: endpoint.request("spin", s),
                         lambda s: setattr(endpoint.main, "spin_s", s))
        except Exception:  # noqa: BLE001 - a worker that cannot be tuned is still graded
            pass

    def keep_beside(self) -> bool:
        """The worker on the judge's CPU while a test measures it (see worker_cpu.py)."""
        endpoint = self.endpoint()
        if endpoint is None or endpoint.broken is not None or not self.process.alive():
            return False
        try:
            return _cpus.beside(self.process.python_pid(), lambda s: endpoint.request("spin", s),
                                lambda s: setattr(endpoint.main, "spin_s", s))
        except Exception:  # noqa: BLE001 - then the worker's own figures stand
            return False

    def after_test(self) -> None:
        """Reset the worker for the next test, or discard it when it is broken."""
        endpoint = self.endpoint()
        if endpoint is None:
            return
        if endpoint.broken is None and self.process.alive():
            try:
                endpoint.reset()
                return
            except BaseException:  # noqa: BLE001 - a worker that cannot reset is replaced
                pass
        self.kill()

    def kill(self) -> None:
        if self.process is not None:
            self.last_endpoint = self.process.endpoint
            self.process.kill()
        self.process, self.proxy = None, None
        measure.set_remote(None)

    def take_output(self) -> tuple[str, int]:
        text, total = "".join(self.output), self.output_chars
        self.output, self.output_chars = [], 0
        return text, total


_worker = _Worker()
_cpus = CpuPlan()  # made at import, so the first look at the load covers the judge's start


# ---------------------------------------------------------------------------- config


def _support_files() -> tuple[Path, ...]:
    return tuple(Path(p) for p in os.environ.get(ENV_SUPPORT, "").split(os.pathsep) if p)


def _import_support() -> None:
    """The kata's support files, importable in the judge under their own names (as they are
    in the worker), so a suite can build e.g. the model it passes to the candidate."""
    from grader.engine.loading import import_from_path

    for path in _support_files():
        if path.stem not in sys.modules:
            import_from_path(path, path.stem)


def pytest_configure(config: pytest.Config) -> None:
    global _stream
    config.addinivalue_line("markers", "kata(level, category, description, weight): grading metadata")
    _stream = _Stream(os.environ.get(ENV_RESULTS_FD))
    limit_judge_memory()
    _import_support()
    _register_hypothesis_profile()
    load_error = os.environ.get(ENV_LOAD_ERROR)
    if load_error:  # the parent's compile check: the file cannot load, no worker to start
        _worker.import_error = load_error
        _stream.write(event="import_done", error=load_error)
    elif os.environ.get(ENV_SOLUTION):
        _worker.spawn()  # starts while the suite is collected
    # Importing the suite (torch, the reference) makes few cycles but many objects, which
    # every full collection would walk again: no collection until the suite is in, then
    # what is there is frozen out of later collections (see pytest_collection_finish).
    gc.disable()


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()
    gc.enable()


def pytest_unconfigure(config: pytest.Config) -> None:
    _worker.kill()
    # Every result is out and the worker is gone: the parent need not wait for this
    # interpreter's shutdown (a few tenths of a second with torch loaded).
    _stream.write(event="done")


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
    _bound_shrinking()
    _no_local_constants()


def _no_local_constants() -> None:
    """Hypothesis mixes into its draws constants it parses out of every local module it
    finds loaded: here the grader's engine, the reference and the strategies (never the
    candidate's code, which runs in the worker). Parsing them cost about 0.25 s a grading
    (paged-kv), and the inputs a seed draws would change whenever the grader's own source
    does. The suites' strategies draw the edge values on purpose. Where hypothesis's
    internals moved, nothing is changed."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - hypothesis moved its providers
        return
    empty = getattr(providers, "_local_constants", None)
    if empty is None or not callable(getattr(providers, "_get_local_constants", None)) or len(empty):
        return
    providers._get_local_constants = lambda: empty


# Shrinking a failing example: at least this long, at most as long as the test has run when it
# starts (at least the floor), and never so long that the test's own limit would cut it.
# 0.5 s: the suites' small examples are as small as after 1 s (rope's, compared), and a fast
# test that fails no longer costs up to ten times its passing time (rope's failing gradings
# took 2.2x its passing one at 1 s, 1.5x at 0.5 s).
SHRINK_FLOOR_S = 0.5
SHRINK_MARGIN_S = 0.75  # left of the test's limit for the last replay and the report


def _bound_shrinking() -> None:
    """Hypothesis shrinks a failing example for up to five minutes. Here that time is
    bounded by the test's (see SHRINK_FLOOR_S): past its limit, the alarm would stop
    hypothesis mid-shrink, and the scorecard would show a timeout or "inconsistent data
    generation" in place of the failure it had found; and a failing solution would take
    many times a passing one's time. Shrinking stops early with the smallest failing example
    found so far: the verdict is the same, only that example may be less small on a slow
    machine. Where hypothesis has no such bound to set (its internals moved), the alarm is
    still the backstop."""
    try:
        from hypothesis.internal.conjecture import engine
    except ImportError:  # pragma: no cover - hypothesis moved its engine
        return
    runner = getattr(engine, "ConjectureRunner", None)
    shrink = getattr(runner, "shrink_interesting_test_cases", None)
    if shrink is None or not isinstance(getattr(engine, "MAX_SHRINKING_SECONDS", None), (int, float)) \
            or getattr(shrink, "_kata_bounded", False):
        return

    def shrink_within_the_tests_time(self: Any) -> None:
        engine.MAX_SHRINKING_SECONDS = shrink_budget_s()
        return shrink(self)

    shrink_within_the_tests_time._kata_bounded = True  # type: ignore[attr-defined]
    runner.shrink_interesting_test_cases = shrink_within_the_tests_time


def shrink_budget_s(now: float | None = None) -> float:
    """Seconds hypothesis may shrink for, starting now, in the running test."""
    now = time.monotonic() if now is None else now
    ran = now - _started[0]
    left = _deadline[0] - now - SHRINK_MARGIN_S
    return max(0.0, min(max(SHRINK_FLOOR_S, ran), left))


def _metadata(item: pytest.Item) -> dict[str, Any]:
    marker = item.get_closest_marker("kata")
    meta = dict(marker.kwargs) if marker else {}
    name = item.name
    level = int(meta.get("level", 1))
    return {
        "nodeid": item.nodeid,
        "name": name,
        "level": level,
        "category": meta.get("category", "correctness"),
        "weight": float(meta.get("weight", 1.0)),
        "description": meta.get("description", name.replace("_", " ")),
        "detail": _is_detail(item, level),
        "settled_by": list(_maps_of(item, level)[1].get(getattr(item, "originalname", name), ())),
    }


def _is_detail(item: pytest.Item, level: int) -> bool:
    """Whether the RULES map of the test's level names it under DETAILS only (a level's map is
    a global of its test_level<N>.py, which collection has imported)."""
    return getattr(item, "originalname", item.name) in _maps_of(item, level)[0]


def _maps_of(item: pytest.Item, level: int) -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """The detail tests of the test's level, and the clarifications settling each test."""
    file = getattr(getattr(item, "module", None), "__file__", None)
    return _maps_at(str(rules_file(Path(file), level))) if file is not None else (frozenset(), {})


@functools.lru_cache(maxsize=None)
def _maps_at(path: str) -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    module = next((m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == path), None)
    rules = getattr(module, "RULES", None)
    return (detail_tests(rules, getattr(module, "DETAILS", None)),
            settling_ids(rules, getattr(module, "SETTLED_BY", None)))


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    wanted = os.environ.get(ENV_LEVELS)
    if wanted:
        levels = {int(x) for x in wanted.split(",") if x.strip()}
        _keep_only(config, items, lambda item: _metadata(item)["level"] in levels)
    only = os.environ.get(ENV_TESTS)
    if only:
        names = frozenset(str(n) for n in json.loads(only))
        _keep_only(config, items, lambda item: item.name in names)
    shard = _shard()
    if shard is None:
        _stream.write(event="collected", tests=[_metadata(item) for item in items])
    else:
        every = [_metadata(item) for item in items]
        keep, names = shard
        _keep_only(config, items, lambda item: (item.name in names) == keep)
        # The parent merges the judges' results in the suite's order, and shows every test.
        ours = {item.nodeid for item in items}
        _stream.write(event="collected", tests=[m for m in every if m["nodeid"] in ours], all=every)
    _fail_all_if_unloadable(config, items)


def _fail_all_if_unloadable(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Wait for the worker's import before the first test; when the file cannot load, every
    test fails at once with why, and none runs (each would only say it again)."""
    if not items or not (os.environ.get(ENV_SOLUTION) or _worker.import_error):
        return
    try:
        _worker.module()
        return
    except CandidateImportError as exc:
        message = str(exc)
    printed, num_chars = _worker.take_output()  # what the code printed before it failed
    for i, item in enumerate(items):
        details = {"output": "\n".join(printed.splitlines()[:_MAX_OUTPUT_LINES])[:8000]} if printed and i == 0 else {}
        _stream.write(event="result", nodeid=item.nodeid, passed=False, message=message, details=details,
                      duration_s=0.0, longest_call_s=0.0, stdout_bytes=num_chars if i == 0 else 0)
    _keep_only(config, items, lambda item: False)


def _keep_only(config: pytest.Config, items: list[pytest.Item], wanted: Any) -> None:
    """Deselect, in place, the items for which wanted(item) is false."""
    dropped = [item for item in items if not wanted(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if wanted(item)]


def _shard() -> tuple[bool, frozenset[str]] | None:
    """(True, names to run) or (False, names to leave to the other judges), when this judge
    runs a share of a split grading."""
    raw = os.environ.get(ENV_SHARD)
    if not raw:
        return None
    spec = json.loads(raw)
    keep = "keep" in spec
    return keep, frozenset(str(n) for n in spec["keep" if keep else "drop"])


def _seed_test(item: pytest.Item) -> None:
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


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def solution() -> Any:
    """The candidate's module: a proxy to it in the worker process."""
    return _worker.module()


@pytest.fixture(scope="session")
def reference() -> Any:
    """The reference implementation, ``reference.<module>`` (in the judge)."""
    return importlib.import_module(f"reference.{os.environ[ENV_MODULE]}")


# ---------------------------------------------------------------------------- per test


_pending: dict[str, dict[str, Any]] = {}
_deadline = [0.0]  # the running test's deadline (time.monotonic()), moved on by an import
_started = [0.0]  # when the running test started (time.monotonic()), moved on likewise
_import_s = [0.0]  # seconds spent importing the candidate's file so far (not the tests' time)


def _on_alarm(signum: int, frame: Any) -> None:
    raise KataTimeout()


def _on_own_clock(start: Any) -> Any:
    """Import the candidate's file with its own limit (the flat per-test limit), the running
    test's alarm paused: after a hang the worker is restarted inside the next test, and an
    import slowed by a loaded machine must not read as "a loop at module level" against a
    limit made for that test's calls. The test's remaining time resumes after the import."""
    remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    handler = signal.getsignal(signal.SIGALRM)
    t0 = time.monotonic()
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, _test_timeout_s(), 0)
    try:
        result = start()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, handler)
    took = time.monotonic() - t0
    _deadline[0] += took  # the probes' deadline moves by the import's time
    _started[0] += took
    _import_s[0] += took
    if remaining > 0:
        signal.setitimer(signal.ITIMER_REAL, remaining, 0)
    return result


def _arm(item: pytest.Item) -> None:
    """The test's alarm: at its limit; with a per-call limit, also every CALL_PROBE_S seconds
    to look at the running call's age; after an earlier hang, also every PROBE_S seconds to
    check whether this test is stuck at the same place (then it is cut at once)."""
    limit = _limit_for(item)
    call_limit = _call_limit_for(item)
    _started[0] = time.monotonic()
    _deadline[0] = _started[0] + limit
    signal.signal(signal.SIGALRM, _on_alarm)
    intervals = [s for s, wanted in ((PROBE_S, bool(_known_hangs)), (CALL_PROBE_S, call_limit is not None))
                 if wanted]
    if not intervals or limit <= min(intervals) + 0.5:
        signal.setitimer(signal.ITIMER_REAL, limit, 0)
        return
    every = min(intervals)

    def probe(signum: int, frame: Any) -> None:
        if call_limit is not None:
            endpoint = _worker.endpoint()
            since = getattr(endpoint, "call_since", None)
            if since is not None and time.monotonic() - since > call_limit:
                raise CallTimeout(call_limit)
        if _known_hangs:
            same = _same_hang()
            if same is not None:
                raise KataTimeout(same)
        left = _deadline[0] - time.monotonic()
        if left <= 0:
            raise KataTimeout()
        signal.signal(signal.SIGALRM, probe if left > every + 0.5 else _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, min(every, left) if left > every + 0.5 else left, 0)

    signal.signal(signal.SIGALRM, probe)
    signal.setitimer(signal.ITIMER_REAL, every, 0)


def _same_hang() -> Any:
    """(earlier test, frames) when the candidate's code is stuck where an earlier test hung:
    the same call into it still running across two stack samples, both in the function of
    that hang."""
    process = _worker.process
    endpoint = process.endpoint if process is not None else None
    if endpoint is None:
        return None
    call_before = endpoint.in_flight
    first = process.candidate_frames(process.stack_dump())
    if not first or first[0][1] not in _known_hangs:
        process.dumping = False
        return None
    time.sleep(0.3)
    second = process.candidate_frames(process.stack_dump())
    process.dumping = False
    if call_before is None or endpoint.in_flight != call_before or not second \
            or second[0][1] != first[0][1]:
        return None
    return (_known_hangs[first[0][1]], second)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _stream.write(event="start", nodeid=item.nodeid, t=time.time())
    _worker.take_output()
    _worker.last_endpoint = None
    _worker.tune_cpus()
    _pending[item.nodeid] = {"passed": True, "message": "", "details": {}, "t0": time.perf_counter(),
                             "import_s": _import_s[0]}
    CALL_STATS["longest_s"] = 0.0
    _seed_test(item)
    previous = signal.getsignal(signal.SIGALRM)
    _arm(item)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
        outcome = _pending.pop(item.nodeid)
        _worker.after_test()
        text, total = _worker.take_output()
        outcome["stdout_bytes"] = total
        if text and not outcome["passed"]:
            lines = text.splitlines()
            shown = "\n".join(lines[:_MAX_OUTPUT_LINES])[:8000]
            more = len(lines) - _MAX_OUTPUT_LINES
            outcome["details"]["output"] = shown + (f"\n... {more} more lines" if more > 0 else "")
        # The test's own time: an import of the candidate's file inside it is on its own clock.
        duration = time.perf_counter() - outcome.pop("t0") - (_import_s[0] - outcome.pop("import_s"))
        _stream.write(event="result", nodeid=item.nodeid, duration_s=round(max(duration, 0.0), 4),
                      longest_call_s=round(CALL_STATS["longest_s"], 4), **outcome)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    if call.excinfo is not None:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)  # the verdict is in; describing it is not timed
    report_outcome = yield
    report = report_outcome.get_result()
    state = _pending.get(item.nodeid)
    if state is None:
        return
    if report.skipped and call.when in ("setup", "call"):
        state.update(passed=False, message="skipped: " + _skip_reason(report))
    elif report.failed and state["passed"]:
        exc = call.excinfo.value if call.excinfo else None
        stuck, crash = _stuck_or_crash(exc, item)
        calls = _failing_calls(exc)
        message, details = describe_failure(exc, timeout_s=_limit_for(item), stuck=stuck,
                                            crash=crash, category=_metadata(item)["category"],
                                            not_implemented=_not_implemented(calls, exc))
        snippet = _snippet(item, message, details, calls)
        if snippet:
            details["snippet"] = snippet
        state.update(passed=False, message=message, details=details)


def _failing_calls(exc: BaseException | None) -> Any:
    """The calls of the example whose failure the card describes (see example_calls.py)."""
    from grader.engine.example_calls import failing_calls

    process = _worker.process
    endpoint = process.endpoint if process is not None else _worker.last_endpoint
    try:
        return failing_calls(exc, endpoint.transcript if endpoint is not None else None)
    except Exception:  # noqa: BLE001 - a snippet must never fail a report
        return None


def _not_implemented(calls: Any, exc: BaseException | None) -> tuple[str, list] | None:
    """The function of the candidate's that raised NotImplementedError in the failing
    example, which the card then names (see example_calls.not_implemented)."""
    from grader.engine.example_calls import not_implemented

    try:
        return not_implemented(calls, exc, _worker.proxy_seen)
    except Exception:  # noqa: BLE001 - nor may naming the function
        return None


def _snippet(item: pytest.Item, message: str, details: dict[str, Any], calls: Any) -> str | None:
    """The failing example's calls as a script the candidate can run (see snippet.py)."""
    if calls is None or _metadata(item)["category"] == "efficiency":
        return None
    from grader.engine.snippet import render

    try:
        seed = item.config.getoption("hypothesis_seed", None)
    except ValueError:
        seed = None
    try:
        return render(calls, module=os.environ.get(ENV_MODULE, "solution"),
                      module_proxy=_worker.proxy_seen, test=item.name, seed=seed, message=message,
                      details=details)
    except Exception:  # noqa: BLE001 - a snippet must never fail a report
        return None


def _stuck_or_crash(exc: BaseException | None, item: pytest.Item) -> tuple[str | None, str | None]:
    """On a timeout, where the candidate's code was when it was stopped (remembered, so later
    tests stuck at the same place are cut early); on a crash of the worker, how it ended."""
    inner = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and exc.exceptions else exc
    process = _worker.process
    if process is None:
        return None, None
    if isinstance(inner, WorkerCrashed):
        how = process.exit_text() or None
        call = _last_call_text(process)
        return (f"the last call into your code: {call}" if call else None), how
    if not isinstance(inner, KataTimeout):
        return None, None
    same = inner.args[0] if inner.args and not isinstance(inner, CallTimeout) else None
    if same:
        earlier, frames = same
    else:
        earlier, frames = None, process.candidate_frames(process.stack_dump())
    _worker.kill()
    if not frames:
        return None, None
    _known_hangs.setdefault(frames[0][1], item.name)
    lines = _source_lines()
    shown = [f"  line {ln}, in {fn}: {lines[ln - 1].strip() if 0 < ln <= len(lines) else ''}"
             for ln, fn in frames[:3]]
    return "where your code was when it was stopped (innermost first):\n" + "\n".join(shown), None


def _last_call_text(process: WorkerProcess) -> str | None:
    endpoint = process.endpoint
    if endpoint is None or endpoint.last_call is None:
        return None
    from grader.protocol import show

    op, args = endpoint.last_call
    try:
        if op in ("call", "callmethod") and args:
            target = args[0]
            name = args[1] if op == "callmethod" else getattr(getattr(target, "_kata_type", None), "qualname", "?")
            call_args, call_kwargs = args[-2], args[-1]
            parts = [show(a) for a in call_args] + [f"{k}={show(v)}" for k, v in call_kwargs]
            return f"{name}({', '.join(parts)})"[:1000]
    except Exception:  # noqa: BLE001 - a description must never fail the report
        return None
    return None


def _source_lines() -> list[str]:
    try:
        return Path(os.environ[ENV_SOLUTION]).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)
