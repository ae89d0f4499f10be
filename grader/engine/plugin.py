"""pytest plugin of the **judge** process (``-p grader.engine.plugin``).

The judge runs the suite, hypothesis and the reference; it never imports the candidate's
code. The candidate's module lives in a worker process (sandboxed where the OS allows,
see ``sandbox.py``), reached through the ``solution`` fixture, a proxy. A worker that
crashes or hangs is killed and a fresh one serves the next test.

At pytest's configure this module reads the judge's configuration (config.py, one variable
the runner writes), prepares the process (its memory limit, the kata's support files,
hypothesis's profile) and registers a `JudgeSession` (session.py) with pytest: the session
holds the judge's state and implements the hooks of collection and of each test. Results go
to the parent as JSON lines on an inherited pipe that only the judge holds; the events and
their fields are listed in events.py.
"""

from __future__ import annotations

import gc
import importlib
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from grader.engine.config import JudgeConfig
from grader.engine.cpus import CpuPlan
from grader.engine.events import EventStream
from grader.engine.judge_env import limit_judge_memory
from grader.engine.session import SHRINK_FLOOR_S, SHRINK_MARGIN_S, JudgeSession  # noqa: F401 - tests read them here

SESSION_NAME = "kata_judge"  # the session's name among pytest's plugins
# Made at import, so that the CPU plan's first look at the machine's load covers the judge's
# start (what the session starts with, see cpus.py).
_CPUS_AT_IMPORT = CpuPlan()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kata(level, category, description, weight): grading metadata")
    judge = JudgeConfig.from_env()
    stream = EventStream(judge.results_fd)
    session = JudgeSession(judge, stream, cpus=_CPUS_AT_IMPORT)
    limit_judge_memory()
    # The worker first: it imports torch (and the kata's support files) while this judge
    # imports them too, on the other CPU (train-memory's support file imports
    # torch._dynamo, about 1.2 s a side).
    session.start()
    _import_support(judge.support)
    _register_hypothesis_profile(judge.max_examples, session.clock.shrink_budget_s)
    config.pluginmanager.register(session, SESSION_NAME)
    # Importing the suite (torch, the reference) makes few cycles but many objects, which
    # every full collection would walk again: no collection until the suite is in, then
    # what is there is frozen out of later collections (see pytest_collection_finish).
    gc.disable()


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()
    gc.enable()


def judge_session(config: pytest.Config) -> JudgeSession:
    session = config.pluginmanager.get_plugin(SESSION_NAME)
    assert isinstance(session, JudgeSession), "the judge's plugin was not configured"
    return session


def _import_support(paths: tuple[str, ...]) -> None:
    """The kata's support files, importable in the judge under their own names (as they are
    in the worker), so a suite can build e.g. the model it passes to the candidate."""
    from grader.worker.loading import import_from_path

    for path in map(Path, paths):
        if path.stem not in sys.modules:
            import_from_path(path, path.stem)


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def solution(request: pytest.FixtureRequest) -> Any:
    """The candidate's module: a proxy to it in the worker process."""
    return judge_session(request.config).worker.module()


@pytest.fixture(scope="session")
def reference(request: pytest.FixtureRequest) -> Any:
    """The reference implementation, ``reference.<module>`` (in the judge)."""
    return importlib.import_module(f"reference.{judge_session(request.config).config.module}")


# ---------------------------------------------------------------------------- hypothesis


def _register_hypothesis_profile(max_examples: int, shrink_budget_s: Callable[[], float]) -> None:
    from hypothesis import HealthCheck, Phase, settings

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
    _bound_shrinking(shrink_budget_s)
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


def _bound_shrinking(budget_s: Callable[[], float]) -> None:
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
    if runner is None or shrink is None \
            or not isinstance(getattr(engine, "MAX_SHRINKING_SECONDS", None), (int, float)):
        return
    if getattr(shrink, "_kata_bounded", False):
        shrink._kata_budget_s = budget_s  # bounded already (another session in this process): its clock now
        return

    def shrink_within_the_tests_time(self: Any) -> None:
        engine.MAX_SHRINKING_SECONDS = shrink_within_the_tests_time._kata_budget_s()  # type: ignore[attr-defined]
        return shrink(self)

    shrink_within_the_tests_time._kata_bounded = True  # type: ignore[attr-defined]
    shrink_within_the_tests_time._kata_budget_s = budget_s  # type: ignore[attr-defined]
    runner.shrink_interesting_test_cases = shrink_within_the_tests_time
