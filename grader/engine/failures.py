"""A failed test in words a candidate can act on: the property, the shrunk input, expected
and got, the line of their file, what their code printed, and never the test's source."""

from __future__ import annotations

import re
from typing import Any

from grader.engine.hypothesis_report import falsifying_example
from grader.engine.judge_bridge import HungFunction, ReplyRefused, WorkerCrashed
from grader.protocol import PropertyFailure
from grader.worker.bridge import CandidateExit

MAX_MESSAGE_CHARS = 4000
MAX_DETAIL_CHARS = 4000
SANITIZERS = ("AddressSanitizer", "UndefinedBehaviorSanitizer", "ThreadSanitizer", "LeakSanitizer")


class KataTimeout(BaseException):
    """Raised by the alarm when a test runs past its limit. A BaseException so that no
    ``except Exception`` in a suite's helpers can swallow it."""


class CallTimeout(KataTimeout):
    """One call into the candidate's code ran past its own limit (a multiple of the
    reference's longest call in that test): an infinite loop is cut in seconds even in a
    test whose whole limit is long. args: (the limit in seconds,)."""


class CandidateImportError(Exception):
    """The candidate's file could not be imported (the message says why)."""


def import_error_text(info: dict[str, Any]) -> str:
    """The worker's account of a failed import, as the scorecard says it."""
    kind = info.get("kind")
    if kind == "syntax":
        text = f"your file has a syntax error at line {info.get('lineno')}: {info.get('msg')}"
        if info.get("text"):
            text += f"\n    {info['text']}"
        return text
    if kind == "raised":
        text = f"importing your file raised {info.get('type')}: {info.get('msg')}"
        frames = info.get("frames") or []
        if frames:
            text += "\n" + _frames_text(frames)
        return text
    return f"importing your file crashed the test process ({info.get('msg') or 'no reason given'})"


def describe_failure(exc: BaseException | None, *, timeout_s: float = 0.0, stuck: str | None = None,
                     crash: str | None = None, category: str = "",
                     not_implemented: tuple[str, list] | None = None) -> tuple[str, dict]:
    """(message, details) for the scorecard. `not_implemented`: (name, frames) of a function
    of the candidate's that raised NotImplementedError in the failing example (see
    example_calls.not_implemented): the card names it, whatever failed after it."""
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
    elif isinstance(inner, HungFunction):
        site = inner.site
        message = (f"not run: {site.function} hangs at line {site.line} (stuck there in {site.test}; "
                   "not waited out again)")
        details["where"] = site.where
    elif isinstance(inner, KataTimeout):
        same = inner.args[0] if inner.args else None
        if isinstance(inner, CallTimeout):
            message = (f"one call into your code ran past its {_seconds(inner.args[0])} limit "
                       "(the reference's calls in this test are far shorter): an infinite loop, "
                       "or code far slower than the reference")
        elif same:
            message = (f"stuck where {same[0]} was stuck (an infinite loop?): stopped early "
                       f"instead of waiting out its {timeout_s:g} s limit")
        else:
            message = (f"timed out after {timeout_s:g} s: an infinite loop, or code far slower "
                       "than the reference")
        if stuck:
            details["where"] = stuck
    elif isinstance(inner, ReplyRefused):
        message = f"your code's process sent a reply the grader refuses to rebuild ({inner})"
    elif isinstance(inner, WorkerCrashed):
        if crash and crash.startswith(SANITIZERS):  # --sanitize: the report is the message
            message = crash
        else:
            message = f"your code crashed the process it runs in ({crash or inner})"
        if stuck:
            details["where"] = stuck
    elif isinstance(inner, CandidateImportError):
        message = str(inner)
    elif isinstance(inner, NotImplementedError):
        message, details = _not_implemented(not_implemented or _own_name(inner), inner)
    elif _missing_name(inner):
        message = (f"your file does not define `{_missing_name(inner)}` "
                   "(the stub lists every name the kata needs)")
    else:
        name = inner.__class__.__name__
        text = str(inner).strip().splitlines()[0] if str(inner).strip() else ""
        remote = getattr(inner, "_kata_remote", False)
        if remote or isinstance(inner, CandidateExit):
            message = f"your code raised {name}" + (f": {text}" if text else "")
            _add_where(details, inner)
        elif isinstance(inner, AssertionError) and str(inner):
            message = str(inner)
        else:
            message = f"the test could not use what your code returned ({name}" + (f": {text})" if text else ")")
    if not_implemented is not None and "NotImplementedError" not in message \
            and not isinstance(inner, (KataTimeout, HungFunction, WorkerCrashed, CandidateImportError)):
        # A check after the call that raised failed because nothing was done (paged-kv's
        # teardown compared the pools): the card says what to write, not what differed then.
        shown_input = details.get("input")
        message, details = _not_implemented(not_implemented, inner, consequence=True)
        if shown_input is not None:
            details = {"input": shown_input, **details}
    if steps:
        details["example"] = steps
    if group_note:
        details["note"] = (details["note"] + "; " + group_note) if details.get("note") else group_note
    if category == "efficiency":
        where = ("measured around your code's calls: counts on the calling thread, time as the "
                 "kernel counts your process's CPU")
        details["note"] = (details["note"] + "; " + where) if details.get("note") else where
    return message[:MAX_MESSAGE_CHARS], {k: (v[:MAX_DETAIL_CHARS] if isinstance(v, str) else v)
                                         for k, v in details.items()}


def _not_implemented(which: tuple[str, list] | None, exc: BaseException,
                     consequence: bool = False) -> tuple[str, dict[str, Any]]:
    """The card of a test that failed because a function is not written yet."""
    name, frames = which or (None, [])
    message = (f"{name} is not implemented yet" if name else "not implemented yet") \
        + " (your code raised NotImplementedError)"
    details: dict[str, Any] = {}
    if frames:
        details["where"] = _frames_text(frames)
    else:
        _add_where(details, exc)
    if consequence:
        details["note"] = ("the test's later checks failed because of it: what they compared "
                           "follows from the missing function, so write it first")
    return message, details


def _own_name(exc: BaseException) -> tuple[str, list] | None:
    """(the function that raised, frames) from the frames the worker sent with `exc`: the
    outermost frame of the candidate's file is the function the suite called."""
    frames = list(getattr(exc, "_kata_frames", None) or [])
    return (frames[0][1], frames) if frames else None


def _add_where(details: dict[str, Any], exc: BaseException) -> None:
    frames = getattr(exc, "_kata_frames", None)
    if frames:
        details["where"] = _frames_text(frames)


def _frames_text(frames: list) -> str:
    shown = [f"  line {ln}, in {fn}: {code}" for ln, fn, code in frames[-3:]]
    return "in your file:\n" + "\n".join(shown)


def _missing_name(exc: BaseException) -> str | None:
    """The name in "module 'M' has no attribute 'x'" raised for the candidate's module."""
    if not isinstance(exc, AttributeError) or not getattr(exc, "_kata_remote", False):
        return None
    match = re.fullmatch(r"module '\w+' has no attribute '(\w+)'", str(exc))
    return match.group(1) if match else None


def _seconds(value: Any) -> str:
    try:
        return f"{float(value):g} s"
    except (TypeError, ValueError):
        return "time"
