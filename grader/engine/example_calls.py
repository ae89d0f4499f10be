"""Which calls a failure's snippet replays: those of the example that raised it.

The transcript (transcript.py) starts afresh with each hypothesis example, but the example a
card shows is not always the last one that ran. Hypothesis runs every explicit ``@example``
and reports the simplest that failed; a suite's own shrinker (paged-kv's minimize.py) replays
a failure many times inside one test and reports the smallest. So each failure carries the
calls of its own example, taken when it is raised:

* a PropertyFailure takes them when it is made (grader/protocol.py), so a failure raised in a
  replay carries that replay's calls, and one raised before a teardown does not carry the
  teardown's;
* any other exception leaving a hypothesis example (the candidate's error, a timeout, a
  suite's own assert) takes them as it passes the end of the example: hypothesis's
  ``BuildContext.__exit__``, wrapped by watch_examples();
* a suite that replays calls itself marks where each replay starts (``protocol.start_replay``).

The report takes the calls attached to the very exception the card describes
(failing_calls), and only falls back to the transcript's latest calls where none are attached.
Nothing here may fail a test: at worst a card has no snippet.
"""

from __future__ import annotations

import threading
from typing import Any

from grader.engine.snippet import callee
from grader.engine.transcript import Segment, Transcript, active_transcript, current_example

_ATTRIBUTE = "_kata_example_calls"


def capture(exc: BaseException) -> None:
    """Attach to `exc` the calls of the example running now (unless it has some already)."""
    transcript = active_transcript()
    if transcript is None or getattr(exc, _ATTRIBUTE, None) is not None:
        return
    example = current_example()
    ours = example is transcript.example or (
        example is None and threading.current_thread() is not threading.main_thread())
    _attach(exc, transcript.segment() if ours else Segment())  # (none yet in this example)


def start_replay() -> None:
    """A suite's own replay starts: the failures it raises show its calls alone."""
    transcript = active_transcript()
    if transcript is not None:
        transcript.new_segment(current_example())


def failing_calls(exc: BaseException | None, fallback: Transcript | None) -> Segment | Transcript | None:
    """The calls behind the failure describe_failure describes (the first member of a group),
    else those the group carries, else the transcript's latest (`fallback`)."""
    if exc is not None:
        described = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and exc.exceptions else exc
        for candidate in (described, exc):
            calls = getattr(candidate, _ATTRIBUTE, None)
            if isinstance(calls, Segment):
                return calls
    return fallback


def not_implemented(calls: Segment | Transcript | None, exc: BaseException | None,
                    module_proxy: Any) -> tuple[str, list] | None:
    """(name, frames) of the first function of the candidate's that raised
    NotImplementedError among `calls` (or in the chain of exceptions behind `exc`: a check
    that failed while handling it), else None."""
    for call in (calls.calls if calls is not None else []):
        if call.raised_not_implemented():
            return callee(call, module_proxy), call.unimplemented or _frames_in_chain(exc)
    frames = _frames_in_chain(exc)
    if frames:
        return frames[0][1], frames
    return None


def _frames_in_chain(exc: BaseException | None) -> list:
    """The frames of a NotImplementedError of the candidate's that `exc` was raised while
    handling (its context or cause, however deep), or []."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, NotImplementedError) and getattr(exc, "_kata_remote", False):
            return list(getattr(exc, "_kata_frames", None) or [])
        exc = exc.__cause__ or exc.__context__
    return []


def watch_examples() -> None:
    """Make every exception that leaves a hypothesis example carry that example's calls.
    Wraps ``hypothesis.control.BuildContext.__exit__``, which every release in the bounds has
    with this signature; where it moved, failures other than PropertyFailure fall back to the
    transcript's latest calls."""
    try:
        from hypothesis.control import BuildContext
    except ImportError:  # pragma: no cover - hypothesis moved its build context
        return
    original = getattr(BuildContext, "__exit__", None)
    if original is None or getattr(original, "_kata_captures", False):
        return

    def __exit__(self: Any, exc_type: Any, exc_value: Any, tb: Any) -> Any:
        if exc_value is not None:
            try:
                _capture_at_exit(self, exc_value)
            except Exception:  # noqa: BLE001 - a snippet must never change a verdict
                pass
        return original(self, exc_type, exc_value, tb)

    __exit__._kata_captures = True  # type: ignore[attr-defined]
    BuildContext.__exit__ = __exit__  # type: ignore[method-assign]


def _capture_at_exit(context: Any, exc: BaseException) -> None:
    transcript = active_transcript()
    if transcript is None or getattr(exc, _ATTRIBUTE, None) is not None:
        return
    _attach(exc, transcript.segment() if transcript.example is context else Segment())


def _attach(exc: BaseException, calls: Segment) -> None:
    try:
        setattr(exc, _ATTRIBUTE, calls)
    except (AttributeError, TypeError):  # an exception type without a __dict__
        pass
