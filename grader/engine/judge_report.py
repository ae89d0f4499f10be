"""What the judge says about a failed test: the failure in words (failures.py), where the
candidate's code was when a hang was cut (remembered, so a later test stuck at the same place
is cut early), how a crashed worker ended, and the failing example as a script (snippet.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from grader.engine.collection import metadata
from grader.engine.failures import CallTimeout, KataTimeout, describe_failure
from grader.engine.judge_bridge import HangSite, HungFunction, WorkerCrashed
from grader.engine.judge_worker import JudgeWorker


def describe(worker: JudgeWorker, known_hangs: dict[str, str], item: pytest.Item, exc: BaseException | None,
             limit_s: float) -> tuple[str, dict[str, Any]]:
    """The failed test's message and details (with a snippet where one can be written);
    `limit_s`: the test's time limit."""
    stuck, crash = stuck_or_crash(worker, known_hangs, exc, item)
    calls = failing_calls(worker, exc)
    category = metadata(item)["category"]
    message, details = describe_failure(exc, timeout_s=limit_s, stuck=stuck, crash=crash,
                                        category=category, not_implemented=not_implemented(worker, calls, exc))
    text = snippet(worker, item, message, details, calls, category)
    if text:
        details["snippet"] = text
    return message, details


def same_hang(process: Any, known_hangs: dict[str, str]) -> Any:
    """(earlier test, frames) when the candidate's code is stuck where an earlier test hung:
    the same call into it still running across two stack samples, both in the function of
    that hang."""
    endpoint = process.endpoint if process is not None else None
    if endpoint is None:
        return None
    call_before = endpoint.in_flight
    first = process.candidate_frames(process.stack_dump())
    if not first or first[0][1] not in known_hangs:
        process.dumping = False
        return None
    time.sleep(0.3)
    second = process.candidate_frames(process.stack_dump())
    process.dumping = False
    if call_before is None or endpoint.in_flight != call_before or not second \
            or second[0][1] != first[0][1]:
        return None
    return (known_hangs[first[0][1]], second)


def stuck_or_crash(worker: JudgeWorker, known_hangs: dict[str, str], exc: BaseException | None,
                   item: pytest.Item) -> tuple[str | None, str | None]:
    """On a timeout, where the candidate's code was when it was stopped (remembered, so later
    tests stuck at the same place are cut early, and later calls into the function the stuck
    call entered are not made: HungFunction); on a crash of the worker, how it ended."""
    inner = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and exc.exceptions else exc
    if isinstance(inner, HungFunction):
        return inner.site.where, None  # nothing was sent: the worker is as it was
    process = worker.process
    if process is None:
        return None, None
    if isinstance(inner, WorkerCrashed):
        how = process.exit_text() or None
        if worker.config.sanitizer:  # the report the sanitizer printed as it ended the process
            how = _sanitizer_report(process, worker.config.module) or how
        call = last_call_text(process)
        return (f"the last call into your code: {call}" if call else None), how
    if not isinstance(inner, KataTimeout):
        return None, None
    same = inner.args[0] if inner.args and not isinstance(inner, CallTimeout) else None
    if same:
        _earlier, frames = same
    else:
        frames = process.candidate_frames(process.stack_dump())
    worker.kill()
    if not frames:
        return None, None
    known_hangs.setdefault(frames[0][1], item.name)
    lines = worker.source_lines()
    shown = [f"  line {ln}, in {fn}: {lines[ln - 1].strip() if 0 < ln <= len(lines) else ''}"
             for ln, fn in frames[:3]]
    where = "where your code was when it was stopped (innermost first):\n" + "\n".join(shown)
    # A later call entering the candidate's code the way the stuck call did is answered at
    # once (HungFunction), as `not run`, and costs no worker restart. Not after an efficiency
    # test: its workload is large on purpose, and code too slow for it (cut at its call
    # limit) may still answer every small call of the other tests.
    entered = worker.last_endpoint.entered if worker.last_endpoint is not None else None
    if entered is not None and metadata(item)["category"] != "efficiency":
        (line, function) = frames[0]
        worker.hung_functions.setdefault(entered, HangSite(function, line, item.name, where))
    return where, None


def _sanitizer_report(process: Any, module: str) -> str | None:
    from grader.cpp.sanitizer import report

    deadline = time.monotonic() + 1.0
    while True:  # the process has ended; its last output may still be on its way
        text = process.raw_output()
        if "SUMMARY:" in text or time.monotonic() > deadline:
            return report(text, f"{module}.cpp")
        time.sleep(0.05)


def last_call_text(process: Any) -> str | None:
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
        if op == "new_then_call" and len(args) > 4:  # obj.name(cls(*args, **kwargs))
            cls = getattr(getattr(args[2], "_kata_type", None), "qualname", "?")
            parts = [show(a) for a in args[3]] + [f"{k}={show(v)}" for k, v in args[4]]
            return f"{args[1]}({cls}({', '.join(parts)}))"[:1000]
    except Exception:  # noqa: BLE001 - a description must never fail the report
        return None
    return None


def failing_calls(worker: JudgeWorker, exc: BaseException | None) -> Any:
    """The calls of the example whose failure the card describes (see example_calls.py)."""
    from grader.engine.example_calls import failing_calls as calls_of

    process = worker.process
    endpoint = process.endpoint if process is not None else worker.last_endpoint
    try:
        return calls_of(exc, endpoint.transcript if endpoint is not None else None)
    except Exception:  # noqa: BLE001 - a snippet must never fail a report
        return None


def not_implemented(worker: JudgeWorker, calls: Any, exc: BaseException | None) -> tuple[str, list] | None:
    """The function of the candidate's that raised NotImplementedError in the failing
    example, which the card then names (see example_calls.not_implemented)."""
    from grader.engine.example_calls import not_implemented as named

    try:
        return named(calls, exc, worker.proxy_seen)
    except Exception:  # noqa: BLE001 - nor may naming the function
        return None


def snippet(worker: JudgeWorker, item: pytest.Item, message: str, details: dict[str, Any], calls: Any,
            category: str) -> str | None:
    """The failing example's calls as a script the candidate can run (see snippet.py)."""
    if calls is None or category == "efficiency":
        return None
    from grader.engine.snippet import render

    try:
        seed = item.config.getoption("hypothesis_seed", None)
    except ValueError:
        seed = None
    try:
        return render(calls, module=worker.config.module, module_proxy=worker.proxy_seen,
                      test=item.name, seed=seed, message=message, details=details)
    except Exception:  # noqa: BLE001 - a snippet must never fail a report
        return None


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)
