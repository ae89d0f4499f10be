"""The judge → runner event stream: JSON lines on a pipe only the judge holds.

Each line is one object, ``{"event": NAME, **payload}``. The judge writes them with
`EventStream.send(NAME, **payload)`; the runner reads them with an `EventHandler`, whose
method ``on_<NAME>(**payload)`` is called for each (as pytest-xdist's ``dsession.loop_once``
calls ``worker_<name>(**kw)``): the handler's signature is the event's schema, so an event
the runner does not know, or a payload that does not fit its handler, is an `EventError`,
never an event quietly dropped. What the judge sends, in order (see grader/engine/runner.py,
``_RunState.on_*``, for each field):

    ============  =======================================================  ======================
    event         payload                                                  when
    ============  =======================================================  ======================
    import_done   error: str (the parent's compile check: cannot load)     configure, no worker
    worker        contained: bool, notes: [str]                            configure, 1st worker
    collected     tests: [metadata], every: [metadata] (a split grading)   after collection
    import_start  (none)                                                   before the 1st test,
                                                                           and at each restart
    import_done   error: str | None                                        that import ended
    start         nodeid: str                                              each test
    result        nodeid: str, passed: bool, message: str, details: dict,  each test
                  duration_s: float, longest_call_s: float,
                  stdout_bytes: int
    stopped       reason: str (the tests not run yet never will be)         after a failing test,
                                                                           kata check's only
    done          (none): the worker is gone, nothing more will come       unconfigure
    ============  =======================================================  ======================

A test's metadata: {nodeid, name, level, category, weight, description, detail, settled_by}.
A file that cannot load sends one ``result`` per test right after ``import_done``.
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

from grader.errors import GradingError

MAX_LINE_BYTES = 256_000  # one event as the judge writes it (a failure's details are cut first)


class EventError(GradingError):
    """An event the runner cannot take: the judge and the runner disagree on the stream."""


class EventStream:
    """The judge's end: writes each event as one JSON line (nowhere without a pipe)."""

    def __init__(self, fd: int | None) -> None:
        self._file = os.fdopen(fd, "w", encoding="utf-8") if fd is not None else None

    def send(self, name: str, **payload: Any) -> None:
        if self._file is None:
            return
        self._file.write(encode_event(name, payload) + "\n")
        self._file.flush()


def encode_event(name: str, payload: dict[str, Any]) -> str:
    """One event's line: a failure's details too long to show are replaced by a note."""
    event = {"event": name, **payload}
    line = json.dumps(event, default=str)
    if len(line) > MAX_LINE_BYTES and "details" in event:
        event["details"] = {"note": "details too long to show"}
        line = json.dumps(event, default=str)[:MAX_LINE_BYTES]
    return line


class EventHandler:
    """The runner's end: `dispatch` calls ``self.on_<event>(**payload)``."""

    def dispatch(self, event: dict[str, Any]) -> None:
        payload = dict(event)
        name = payload.pop("event", None)
        handler = getattr(self, f"on_{name}", None) if isinstance(name, str) and name.isidentifier() else None
        if handler is None:
            raise EventError(f"the judge sent an event the runner does not know: {name!r:.100}")
        try:
            inspect.signature(handler).bind(**payload)
        except TypeError as exc:
            raise EventError(f"the judge's {name!r} event does not fit its handler: {exc} "
                             f"(got {sorted(payload)})") from None
        handler(**payload)

