"""new_then_call: a request whose argument is built with the candidate's own class
(a lockstep `add_request(Request(...))`) is one round trip, and is recorded, replayed and
refused after a hang as the two calls it stands for.

The worker's side (one request, real objects) is tests/engine_fixtures/shared_suite.py's
test_new_then_call_builds_the_argument_in_the_same_request (run by tests/test_engine.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from grader.engine.judge_bridge import HangSite, HungFunction, JudgeEndpoint
from grader.engine.proxy import RemoteObject, TypeInfo
from grader.engine.snippet import render
from grader.engine.transcript import Made, Recorder
from grader.protocol import new_then_call
from grader.worker.schema import Op


class Entry:
    def __init__(self, name: str, size: int = 1) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.name, self.size = name, size


class Ledger:
    def __init__(self) -> None:
        self.names: list[str] = []

    def add_entry(self, entry: Entry) -> int:
        if entry.name in self.names:
            raise KeyError(entry.name)
        self.names.append(entry.name)
        return len(self.names)


def test_in_place_for_the_reference_constructor_then_call_then_reads():
    ledger = Ledger()
    made, outcome, reads = new_then_call(ledger, "add_entry", Entry, ("a",), {"size": 2}, [("names", None)])
    assert made[0] and isinstance(made[1], Entry) and made[1].size == 2
    assert outcome == (True, 1) and reads == [(True, ["a"])]
    made, outcome, reads = new_then_call(ledger, "add_entry", Entry, ("b", -1), reads=[("names", None)])
    assert not made[0] and isinstance(made[1], ValueError) and outcome is None and reads == []
    assert ledger.names == ["a"]  # the method was not called
    made, outcome, reads = new_then_call(ledger, "add_entry", Entry, ("a",), reads=[("names", None)])
    assert made[0] and not outcome[0] and isinstance(outcome[1], KeyError) and reads == [(True, ["a"])]


def _remote(qualname: str, is_class: bool = False, methods: frozenset[str] = frozenset()) -> Any:
    obj = object.__new__(RemoteObject)
    object.__setattr__(obj, "_kata_type", TypeInfo(qualname, "scheduler", is_class, True, methods))
    object.__setattr__(obj, "_kata_handle", id(obj))
    object.__setattr__(obj, "_kata_cache", None)
    return obj


def _request(recorder: Recorder, module: Any) -> tuple[Any, Any, Any]:
    cls, sched = _remote("Request", is_class=True), _remote("Scheduler", methods=frozenset({"add_request"}))
    sched_cls = _remote("Scheduler", is_class=True)
    module._kata_cache = {"Request": cls, "Scheduler": sched_cls}  # the snippet names classes by it
    recorder.started(Op.CALL, (sched_cls, (), ()))  # scheduler = scheduler.Scheduler()
    recorder.transcript.calls[-1].result = sched
    call = recorder.started(Op.NEW_THEN_CALL, (sched, "add_request", cls, ("a", 3), (("priority", 1),),
                                               (("has_unfinished", (), ()),)))
    assert call is not None
    return call, cls, sched


def _snippet(recorder: Recorder, module: Any) -> str:
    return render(recorder.transcript, module="scheduler", module_proxy=module, test="t", seed=1,
                  message="boom") or ""


class _Module:
    """The module proxy as the snippet reads it: the functions and classes fetched, by name."""

    def __init__(self) -> None:
        self._kata_cache: dict[str, Any] = {}


def test_recorded_as_the_constructor_call_then_the_method_call_with_its_object():
    recorder, module = Recorder(), _Module()
    call, cls, sched = _request(recorder, module)
    made = _remote("Request")
    recorder.returned(call, Op.NEW_THEN_CALL, ((True, made), (True, None), [(True, True)]))
    calls = recorder.transcript.calls[1:]
    assert [(c.op, c.target, c.name) for c in calls] == [("call", cls, None), ("callmethod", sched, "add_request")]
    assert calls[0].args == ("a", 3) and calls[0].kwargs == (("priority", 1),) and calls[0].result is made
    assert calls[1].args == (made,) and calls[1].reads is not None
    text = _snippet(recorder, module)
    assert "request = scheduler.Request('a', 3, priority=1)" in text
    assert "scheduler_2.add_request(request)" in text and "has_unfinished()" in text


def test_a_constructor_that_raised_leaves_only_its_own_call():
    recorder, module = Recorder(), _Module()
    call, cls, _ = _request(recorder, module)
    recorder.returned(call, Op.NEW_THEN_CALL, ((False, ValueError("size")), None, []))
    calls = recorder.transcript.calls[1:]
    assert len(calls) == 1 and calls[0] is call and calls[0].raised == "ValueError"
    text = _snippet(recorder, module)
    assert "scheduler.Request('a', 3, priority=1)  # raises ValueError" in text and "add_request" not in text


def test_a_method_that_raised_is_marked_on_the_method_call():
    recorder, module = Recorder(), _Module()
    call, _, _ = _request(recorder, module)
    recorder.returned(call, Op.NEW_THEN_CALL, ((True, _remote("Request")), (False, KeyError("a")), [(True, True)]))
    _, first, then = recorder.transcript.calls
    assert first.raised is None and then.raised == "KeyError"


def test_a_cut_request_still_replays_both_calls():
    """No reply (a hang, a crash): the method call takes the request's error, and the snippet
    names the object the constructor would have made."""
    recorder, module = Recorder(), _Module()
    call, cls, _ = _request(recorder, module)
    recorder.raised(call, TimeoutError("cut"))
    _, first, then = recorder.transcript.calls
    assert isinstance(first.result, Made) and then.args == (first.result,) and then.raised == "TimeoutError"
    text = _snippet(recorder, module)
    compile(text, "snippet", "exec")
    assert "request = scheduler.Request('a', 3, priority=1)" in text
    assert "scheduler_2.add_request(request)  # raises TimeoutError" in text


@pytest.mark.parametrize("hung", ["Scheduler.add_request", "Request"])
def test_refused_at_once_when_either_call_hung_earlier(hung):
    endpoint = object.__new__(JudgeEndpoint)
    cls, sched = _remote("Request", is_class=True), _remote("Scheduler", methods=frozenset({"add_request"}))
    endpoint.callable_names = {cls._kata_handle: "Request"}
    site = HangSite("f", 3, "test_x", "line 3")
    endpoint.hung_functions = {hung: site}
    with pytest.raises(HungFunction) as raised:
        endpoint._request(Op.NEW_THEN_CALL, (sched, "add_request", cls, ("a", 3), (), ()))
    assert raised.value.site is site


@pytest.mark.parametrize("hung", ["Scheduler.add_request", "Request", "Scheduler.step"])
def test_a_script_is_refused_at_once_when_any_of_its_calls_hung_earlier(hung):
    """A script enters by each of its calls: any of them hung earlier, none is made; its own
    entry (where a hang of it is filed) is its last call's."""
    endpoint = object.__new__(JudgeEndpoint)
    cls, sched = _remote("Request", is_class=True), _remote("Scheduler", methods=frozenset({"add_request", "step"}))
    endpoint.callable_names = {cls._kata_handle: "Request"}
    entries = (("new", "add_request", cls, ("a", 3), (), (), ()),
               ("repeat", ("call", "step", (), (), (), (), ()), 5, ("has_unfinished", (), ())))
    assert endpoint.entry_of(Op.SCRIPT, (sched, entries)) == "Scheduler.step"
    site = HangSite("f", 3, "test_x", "line 3")
    endpoint.hung_functions = {hung: site}
    with pytest.raises(HungFunction) as raised:
        endpoint._request(Op.SCRIPT, (sched, entries))
    assert raised.value.site is site


def test_a_script_on_an_object_of_the_judges_makes_nothing():
    """The reference's scheduler: no records, the test makes each call itself."""
    from grader.protocol import Script

    ledger = Ledger()
    script = Script(ledger, [("call", "add_entry", (Entry("a"),), [], [], ())])
    assert script.records == [] and script.take() is None and ledger.names == []


def test_a_cut_script_records_each_of_its_calls_once_the_last_taking_the_error():
    """A script cut as a hang sends nothing back: the snippet still makes its calls, in
    order, and its last call shows the error (the code hangs there, or earlier)."""
    recorder, module = Recorder(), _Module()
    _, cls, sched = _request(recorder, module)
    before = len(recorder.transcript.calls)
    entries = (("new", "add_request", cls, ("b", 1), (), (), ()),
               ("call", "abort", ("b",), (), (), (), ("KeyError",)),
               ("repeat", ("call", "step", (), (), (("has_unfinished", (), ()),), (), ()), 9,
                ("has_unfinished", (), ())))
    recorder.cut_script((sched, entries), TimeoutError("cut"))
    calls = [(c.op, c.name, c.raised) for c in recorder.transcript.calls[before:]]
    assert calls == [("call", None, None), ("callmethod", "add_request", None), ("callmethod", "abort", None),
                     ("callmethod", "has_unfinished", None), ("callmethod", "step", "TimeoutError")]
    text = _snippet(recorder, module)
    compile(text, "snippet", "exec")
    assert "scheduler_2.abort('b')" in text and "scheduler_2.step()" in text


def test_a_scripts_records_must_follow_its_entries(monkeypatch):
    """The records come from the candidate's process: one of another kind than its entry (a
    "read" in the middle of a repeat would restart its limit), or past the last entry, is
    refused, not read as the test expects."""
    from grader import protocol

    entries = [("call", "abort", ("b",), (), (), ()),
               ("repeat", ("call", "step", (), (("has_unfinished", (), ()),), (), ()), 2, ("has_unfinished", (), ()))]
    read, step = ("read", (True, True), ), ("call", (True, None), [(True, True)], [])
    last = ("call", (True, None), [(True, False)], [])
    monkeypatch.setattr(protocol.proxy, "record_script_call", lambda *a: None)

    def script(records):
        monkeypatch.setattr(protocol.proxy, "run_script", lambda obj, e: list(records))
        return protocol.Script(object(), entries)

    good = script([("call", (True, None), [], []), read, step, last])
    assert [good.take()[0] for _ in range(4)] == ["call", "read", "call", "call"] and good.take() is None
    for forged, at in (([read], 0),                                            # a read for a call
                       ([("call", (True, None), [], []), step], 1),            # a call for the read
                       ([("call", (True, None), [], []), read, step, read], 3),  # a read again
                       ([("call", (True, None), [], []), read, last, last], 3)):  # past the entries
        s = script(forged)
        for _ in range(at):
            s.take()
        with pytest.raises(TypeError, match="the worker's record"):
            s.take()
