"""The suite protocol: what a hidden suite (or a coach's private suite) imports.

A suite is a pytest module. Each test:

* asks for the fixtures ``solution`` (the candidate's module, loaded from its file and
  registered in ``sys.modules`` under the kata's module name) and/or ``reference`` (the
  reference module ``reference.<module>``);
* carries metadata through ``@kata_test(level=..., category=..., description=...)``;
* fails through ``expect(...)`` / ``PropertyFailure`` so the scorecard can show the property
  in words, the (shrunk) input, what was expected and what the solution returned.

Any other exception raised by the candidate's code is a verdict too: the engine reports its
type, message and the line of the candidate's file it came from.

Example::

    from hypothesis import given, strategies as st
    from grader.protocol import expect, kata_test

    @kata_test(level=1, category="correctness", description="add(a, b) equals a + b")
    @given(a=st.integers(-5, 5), b=st.integers(-5, 5))
    def test_add(solution, a, b):
        got = solution.add(a, b)
        expect(got == a + b, "add returns the sum", input={"a": a, "b": b},
               expected=a + b, got=got)
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest

from grader.engine import example_calls, proxy
from grader.worker import values

# Every failure that leaves a hypothesis example carries that example's calls, for its snippet.
example_calls.watch_examples()

CATEGORIES = ("correctness", "edge cases", "numerics", "api contract", "efficiency")

_MAX_SHOWN_CHARS = 2000


def kata_test(*, level: int, category: str, description: str, weight: float = 1.0) -> Callable:
    """Attach grading metadata to a test: its level, category, weight and a one-line
    description a candidate understands (shown on the scorecard)."""
    if category not in CATEGORIES:
        raise ValueError(f"category {category!r} is not one of {CATEGORIES}")
    if level < 1 or weight <= 0 or not description.strip():
        raise ValueError("kata_test needs level >= 1, weight > 0 and a description")
    return pytest.mark.kata(level=level, category=category, description=description,
                            weight=float(weight))


class PropertyFailure(AssertionError):
    """A property did not hold. Carries the parts the scorecard shows."""

    def __init__(self, prop: str, *, input: Any = None, expected: Any = None,
                 got: Any = None, note: str | None = None) -> None:
        self.prop = prop
        self.input = None if input is None else show(input)
        self.expected = None if expected is None else show(expected)
        self.got = None if got is None else show(got)
        self.note = note
        parts = [prop]
        for label, value in (("input", self.input), ("expected", self.expected),
                             ("got", self.got), ("note", note)):
            if value is not None:
                parts.append(f"{label}: {value}")
        super().__init__("\n".join(parts))
        example_calls.capture(self)  # the calls that led here: its snippet replays them


def start_replay() -> None:
    """A suite that replays calls itself (its own shrinker re-running a failing sequence)
    calls this before each replay: a failure raised in a replay then shows that replay's calls
    alone in its snippet, not every replay before it."""
    example_calls.start_replay()


def expect(condition: Any, prop: str, *, input: Any = None, expected: Any = None,
           got: Any = None, note: str | None = None) -> None:
    """Raise PropertyFailure(prop, ...) unless condition is true."""
    if not condition:
        raise PropertyFailure(prop, input=input, expected=expected, got=got, note=note)


def expect_value_error(fn: Callable[[], Any], call: str) -> None:
    """fn() raises ValueError; anything else fails, showing the call, expected and got."""
    try:
        got = fn()
    except ValueError:
        return
    expect(False, f"{call} raises ValueError", input=call, expected="ValueError",
           got=f"no exception (returned {type(got).__name__})")


def call(fn: Callable, *args: Any, what: str, **kwargs: Any) -> Any:
    """Call candidate code; turn NotImplementedError into a readable failure."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as exc:
        raise PropertyFailure(f"{what} is not implemented yet (NotImplementedError)") from exc


def call_many(fn: Callable, calls: list[tuple[tuple, dict]], *, what: str,
              clone_args: bool = False) -> list:
    """[fn(*args, **kwargs) for args, kwargs in calls], in one round trip to the worker when
    `fn` is the candidate's (a plain loop for the reference). Use it for the thousands of
    small calls a distribution test makes; NotImplementedError reads as in `call`. With
    clone_args, every call gets fresh copies of the tensors among its positional arguments
    (pass the same tensor to every call: it crosses once, and no call sees what an earlier
    one did to it in place; calls that differ only in one tensor per position, of one shape
    and dtype, cross as one stacked tensor). A list a call returns is a copy: later changes
    to it are not seen."""
    try:
        return proxy.call_many(fn, calls, clone_args)
    except NotImplementedError as exc:
        raise PropertyFailure(f"{what} is not implemented yet (NotImplementedError)") from exc


def read_all(obj: Any, reads: list[tuple[str, tuple | None]]) -> list[tuple[bool, Any]]:
    """Many reads of one object: for each (name, args), obj.name(*args), or the attribute
    obj.name when args is None. Returns [(True, value) or (False, the exception raised)] in
    order, in one round trip to the worker when obj is the candidate's (a plain loop for the
    reference). Use it to check a whole state after every step of a lockstep machine."""
    return proxy.read_all(obj, reads)


def call_then_read(obj: Any, name: str, args: tuple, reads: Sequence[tuple[str, tuple | None]] = (),
                   result_reads: Sequence[tuple[str, tuple | None]] = ()) -> tuple:
    """obj.name(*args), then `result_reads` on the value it returned and `reads` on obj (each
    as read_all makes them), whatever the call did. Returns ((True, value) or (False, the
    exception raised), the reads' outcomes, the result reads' outcomes: none of those when
    the call raised), in one round trip when obj is the candidate's: a lockstep step and
    the state it leaves."""
    return proxy.call_then_read(obj, name, args, reads, result_reads)


def new_then_call(obj: Any, name: str, cls: Any, args: tuple, kwargs: dict | None = None,
                  reads: Sequence[tuple[str, tuple | None]] = ()) -> tuple:
    """made = cls(*args, **kwargs), then obj.name(made), then `reads` on obj (as read_all
    makes them). Returns ((True, made) or (False, the exception the constructor raised), the
    call's outcome and the reads' outcomes: None and [] when the constructor raised), in
    one round trip when obj is the candidate's: a lockstep add_request(Request(...)) where
    the request is built with the candidate's own class. The snippet shows the two calls."""
    return proxy.new_then_call(obj, name, cls, args, kwargs, reads)


class Script:
    """Calls on one of the candidate's objects fixed in advance (a trace test's adds, aborts
    and steps), made in one round trip; the test then takes their records in order with
    `take`, each entering the example's transcript as it is taken, so a snippet replays what
    the test had looked at when it failed. When obj is not the candidate's (the reference),
    or the script ended early (an exception, see below), `take` gives None and the test
    makes the call itself, as it would without a script.

    Entries (reads as read_all takes them; may_raise: exception class names after which the
    script goes on):

    * ("call", name, args, reads, result_reads, may_raise): obj.name(*args) as call_then_read
      makes it; record ("call", outcome, reads' outcomes, result reads' outcomes);
    * ("new", name, cls, args, kwargs, reads, may_raise): obj.name(cls(*args, **kwargs)) as
      new_then_call makes it; record ("new", made, outcome, reads' outcomes);
    * ("repeat", a "call" entry, limit, (name, args)): the read first, record ("read",
      outcome); then, while it gives True (a bool) and at most `limit` times, the call, whose
      first read gives the next.

    The script stops after the first record holding any other exception: the test fails
    there (what comes after is never looked at). Its candidate code may run a little further
    than a test making the calls one by one would have: a later call of the script that
    hangs is then the test's verdict."""

    def __init__(self, obj: Any, entries: Sequence[tuple]) -> None:
        self.obj = obj
        self.entries = list(entries)
        self.records = proxy.run_script(obj, self.entries)
        self._at = 0  # the next record
        self._entry = 0  # the entry it belongs to
        self._left_in_repeat: int | None = None

    def take(self) -> tuple | None:
        """The next record (in the transcript from now on), or None: make the call yourself."""
        if self._at >= len(self.records):
            return None
        record = self.records[self._at]
        entry = self.entries[self._entry] if self._entry < len(self.entries) else ("none",)
        expected = ("read" if self._left_in_repeat is None else "call") if entry[0] == "repeat" else entry[0]
        if record[0] != expected:  # the worker is the candidate's process: its answer is checked
            raise TypeError(f"Script: the worker's record {self._at} is a {record[0]!r} where the script "
                            f"has {'no entry' if expected == 'none' else repr(expected)}")
        if entry[0] == "repeat":
            self._left_in_repeat = entry[2] if record[0] == "read" else (self._left_in_repeat or 1) - 1
            proxy.record_script_call(self.obj, entry if record[0] == "read" else entry[1], record)
            if record[0] == "read":
                goes_on = record[1][0] and record[1][1] is True
            else:
                reads = record[2]
                goes_on = bool(reads) and reads[0][0] and reads[0][1] is True
            if not goes_on or self._left_in_repeat == 0:
                self._entry, self._left_in_repeat = self._entry + 1, None
        else:
            proxy.record_script_call(self.obj, entry, record)
            self._entry += 1
        self._at += 1
        return record


def run_in_one_process(fn: Callable, *args: Any) -> Any:
    """fn(*args) in the process where the candidate's code runs, when an argument is the
    candidate's (the reference: here), and its result back as plain data. For tests of how
    the code behaves under real threads of one process: the harness `fn` starts the
    threads there and reports what happened; the verdict is the test's, here. `fn`'s module
    travels as source: the standard library and torch only."""
    return proxy.run_in_one_process(fn, *args)


def show(value: Any) -> str:
    """A short, readable rendering of a value for a scorecard: tensors with shape and dtype,
    floats rounded, long things cut."""
    text = _show(value, depth=0)
    if len(text) > _MAX_SHOWN_CHARS:
        text = text[:_MAX_SHOWN_CHARS] + f"... ({len(text)} chars)"
    return text


def _show(value: Any, depth: int) -> str:
    """By the value's row in the value table (grader/worker/values.py): its `show`, else repr.
    (The table checks a type without importing torch: a value can only be a tensor if torch
    is already loaded, and importing it just to check would add about 2 s to a grading.)"""
    if depth > 4:
        return "..."
    row = values.nearest(type(value))
    if row is None or row.show is None:
        return repr(value)
    return row.show(value, lambda item: _show(item, depth + 1))
