"""The judge's plugin in-process, no judge or worker started: its configuration survives the
trip through the environment, every event it writes fits the runner's handler for it (and an
event that does not is an error, not dropped), and the per-test clock keeps an import of the
candidate's file out of the test's time."""

from __future__ import annotations

import json
import os
import time
from dataclasses import fields
from types import SimpleNamespace
from typing import Any

import pytest

from grader.engine.config import ENV_CONFIG, ConfigError, JudgeConfig, rebind_results_fd
from grader.engine.events import EventError, EventStream, encode_event
from grader.engine.limits import Limits
from grader.engine.runner import _RunState
from grader.engine.session import SHRINK_FLOOR_S, JudgeSession, TestClock

FULL = JudgeConfig(solution="/work/paged_kv.py", module="paged_kv", results_fd=7, test_timeout_s=12.5,
                   test_limits={"test_a": 3.0}, call_limits={"test_a": 0.5}, max_examples=40, levels=(1, 3),
                   tests=("test_a", "test_b"), keep_tests=("test_a",), support=("/katas/model.py",),
                   load_error=None, limits=Limits(memory_bytes=2 * 1024**3, max_file_bytes=None, cpu_seconds=20),
                   stop_at_first_failure=True, sanitizer="address",
                   worker_env={"LD_PRELOAD": "/usr/lib/libasan.so", "ASAN_OPTIONS": "detect_leaks=0"})


# ---------------------------------------------------------------------------- the configuration


def test_the_config_survives_the_environment_field_for_field():
    environ = FULL.to_env()
    assert list(environ) == [ENV_CONFIG]  # one variable carries all of it
    assert JudgeConfig.from_env(environ) == FULL
    dropping = JudgeConfig(drop_tests=("test_b",), load_error="line 3: invalid syntax", tests=())
    assert JudgeConfig.from_env(dropping.to_env()) == dropping


def test_every_field_of_the_config_is_set_in_the_full_example():
    """So the round trip above covers each field's parser (a new field needs its entry)."""
    unset = [f.name for f in fields(JudgeConfig) if getattr(FULL, f.name) == getattr(JudgeConfig(), f.name)]
    assert unset == ["drop_tests", "load_error"]  # tested in the second round trip


def test_a_judge_without_a_config_collects_only():
    config = JudgeConfig.from_env({})
    assert config.solution is None and config.results_fd is None and config.limits == Limits()
    assert config.test_timeout_s == 60.0 and config.max_examples == 100 and config.tests is None


@pytest.mark.parametrize("text,says", [
    ("[1, 2]", "not a JSON object"),
    ('{"solutoin": "/x.py"}', "does not know: ['solutoin']"),
    ('{"levels": "one"}', "malformed"),
    ('{"tests": "test_a"}', "a list of names"),
    ('{"limits": {"memory": 1}}', "unknown limits"),
    ('{"keep_tests": ["a"], "drop_tests": ["b"]}', "not both"),
    ("{", "malformed"),
])
def test_a_config_the_judge_cannot_read_is_an_error_naming_why(text, says):
    with pytest.raises(ConfigError, match=None) as raised:
        JudgeConfig.from_env({ENV_CONFIG: text})
    assert says in str(raised.value)


def test_the_zygote_renumbers_the_results_pipe_in_the_config():
    env = {**FULL.to_env(), "PATH": "/bin"}
    rebind_results_fd(env, 3)
    assert JudgeConfig.from_env(env) == JudgeConfig(**{**FULL.__dict__, "results_fd": 3})
    assert env["PATH"] == "/bin"


def test_limits_left_out_keep_their_defaults():
    assert Limits.from_dict({"cpu_seconds": 5}) == Limits(cpu_seconds=5)
    assert Limits.from_dict(Limits(memory_bytes=None).to_dict()).memory_bytes is None


# ---------------------------------------------------------------------------- events


class Recorded:
    """A stream that keeps the events, as the runner would read them off the pipe."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def send(self, name: str, **payload: Any) -> None:
        self.events.append(json.loads(encode_event(name, payload)))


def _item(name: str, seed: int = 7) -> Any:
    options = {"hypothesis_seed": seed}
    return SimpleNamespace(nodeid=f"suite.py::{name}", name=name,
                           config=SimpleNamespace(getoption=lambda key, default=None: options.get(key, default)))


def _meta(name: str) -> dict[str, Any]:
    return {"nodeid": f"suite.py::{name}", "name": name, "level": 1, "category": "correctness",
            "weight": 1.0, "description": name, "detail": False, "settled_by": []}


def _session(**config: Any) -> tuple[JudgeSession, Recorded]:
    stream = Recorded()
    return JudgeSession(JudgeConfig(**config), stream), stream  # type: ignore[arg-type]


def test_what_a_test_sends_is_what_the_runner_takes():
    session, stream = _session(test_limits={"test_a": 2.0})
    seen: list[tuple[str, dict]] = []
    state = _RunState(lambda kind, data: seen.append((kind, data)), {})
    state.dispatch({"event": "collected", "tests": [_meta("test_a")]})
    item = _item("test_a")
    session.begin_test(item)
    session.call_stats.longest_s = 0.25  # as the endpoint records a call
    session.pending[item.nodeid].update(passed=False, message="expected 3, got 4")
    session.end_test(item)
    for event in stream.events:
        state.dispatch(event)
    assert [e["event"] for e in stream.events] == ["start", "result"]
    (result,) = state.ordered()
    assert (result.passed, result.message, result.longest_call_s) == (False, "expected 3, got 4", 0.25)
    assert [kind for kind, _ in seen] == ["collected", "start", "result"]


def test_a_file_that_cannot_load_fails_every_test_through_the_events():
    session, stream = _session(load_error="line 2: invalid syntax")
    deselected: list = []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    items = [_item("test_a"), _item("test_b")]
    session.start()
    session.fail_all_if_unloadable(config, items)  # type: ignore[arg-type]
    assert items == [] and len(deselected) == 2
    state = _RunState(None, {})
    state.dispatch({"event": "collected", "tests": [_meta("test_a"), _meta("test_b")]})
    for event in stream.events:
        state.dispatch(event)
    assert state.import_error == "line 2: invalid syntax" and not state.remaining()
    assert all(t.message == "line 2: invalid syntax" and not t.passed for t in state.ordered())


@pytest.mark.parametrize("event,says", [
    ({"event": "finished"}, "does not know: 'finished'"),
    ({"nodeid": "x"}, "does not know: None"),
    ({"event": "start"}, "missing a required argument: 'nodeid'"),
    ({"event": "start", "nodeid": "x", "t": 1.0}, "unexpected keyword argument 't'"),
    ({"event": "__init__"}, "does not know"),
])
def test_an_event_that_does_not_fit_a_handler_is_an_error(event, says):
    with pytest.raises(EventError) as raised:
        _RunState(None, {}).dispatch(event)
    assert says in str(raised.value)


def test_the_stream_writes_one_line_per_event_and_cuts_details_first():
    read_fd, write_fd = os.pipe()
    stream = EventStream(write_fd)
    stream.send("import_done", error=None)
    stream.send("result", nodeid="n", passed=False, message="m", details={"big": "x" * 300_000},
                duration_s=0.0, longest_call_s=0.0, stdout_bytes=0)
    stream._file.close()  # type: ignore[union-attr]
    with os.fdopen(read_fd) as pipe:
        lines = [json.loads(line) for line in pipe]
    assert lines[0] == {"event": "import_done", "error": None}
    assert lines[1]["details"] == {"note": "details too long to show"}


# ---------------------------------------------------------------------------- the clock


def test_the_shrink_budget_grows_with_the_test_and_stops_short_of_its_limit():
    clock = TestClock()
    clock.start(10.0, now=100.0)
    assert clock.shrink_budget_s(now=100.2) == SHRINK_FLOOR_S
    assert clock.shrink_budget_s(now=104.0) == 4.0
    assert clock.shrink_budget_s(now=109.9) == 0.0


def test_an_import_inside_a_test_is_on_its_own_clock():
    session, stream = _session(test_timeout_s=5.0, test_limits={"test_a": 1.0})
    item = _item("test_a")
    session.begin_test(item)
    session.clock.start(session.limit_for(item))
    deadline = session.clock.deadline
    assert session.on_own_clock(lambda: time.sleep(0.2) or "imported") == "imported"
    assert session.clock.deadline - deadline >= 0.2 and session.clock.import_s >= 0.2
    session.end_test(item)
    (result,) = [e for e in stream.events if e["event"] == "result"]
    assert result["duration_s"] < 0.15  # the import's 0.2 s are not the test's


def test_a_call_limit_applies_only_below_the_tests_own():
    session, _ = _session(test_timeout_s=30.0, test_limits={"test_a": 2.0},
                          call_limits={"test_a": 0.5, "test_b": 40.0})
    assert session.limit_for(_item("test_a")) == 2.0 and session.call_limit_for(_item("test_a")) == 0.5
    assert session.limit_for(_item("test_b")) == 30.0 and session.call_limit_for(_item("test_b")) is None
    assert session.call_limit_for(_item("test_c")) is None


def test_each_test_starts_with_no_longest_call_and_the_worker_is_spawned_from_the_config():
    started: list = []

    class FakeProcess:
        contained, command, endpoint = True, SimpleNamespace(notes=["sandboxed"]), None

        def __init__(self, solution, module, limits, on_output, support=()):
            started.append((str(solution), module, limits, support))

        def start(self) -> None:
            pass

        def kill(self, *, wait: bool = True) -> None:
            pass

    stream = Recorded()
    limits = Limits(cpu_seconds=3)
    session = JudgeSession(JudgeConfig(solution="/w/toy.py", module="toy", limits=limits, support=("/k/m.py",)),
                           stream, start_process=FakeProcess)  # type: ignore[arg-type]
    session.start()
    assert started == [("/w/toy.py", "toy", limits, (__import__("pathlib").Path("/k/m.py"),))]
    assert stream.events == [{"event": "worker", "contained": True, "notes": ["sandboxed"]}]
    session.call_stats.longest_s = 9.0
    session.begin_test(_item("test_a"))
    assert session.call_stats.longest_s == 0.0


def test_every_event_the_judge_sends_has_a_handler_that_takes_its_fields():
    """Read off the judge's source: each ``stream.send("name", field=...)`` names a handler
    ``_RunState.on_name`` and binds to its signature (a field added on one side only fails here,
    before any grading would)."""
    import ast
    import inspect
    from pathlib import Path

    import grader.engine as engine

    sends = []
    for module in ("session.py", "judge_worker.py", "plugin.py", "collection.py"):
        tree = ast.parse((Path(engine.__file__).parent / module).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "send" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                sends.append((module, node.args[0].value, [k.arg for k in node.keywords if k.arg], 
                              any(k.arg is None for k in node.keywords)))
    assert {name for _, name, _, _ in sends} == {"worker", "import_start", "import_done", "collected", "start",
                                                 "result", "stopped", "done"}
    for module, name, keywords, spread in sends:
        handler = getattr(_RunState, f"on_{name}")
        parameters = inspect.signature(handler).parameters
        assert set(keywords) <= set(parameters), (module, name, keywords)
        if not spread:  # (a ** payload is checked by the round trips above)
            required = {p for p, v in parameters.items() if p != "self" and v.default is inspect.Parameter.empty}
            assert required <= set(keywords), (module, name, keywords)
