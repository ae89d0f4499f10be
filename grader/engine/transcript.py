"""The calls a test made into the candidate's code, as a Python script that replays them.

The judge records every call of the current hypothesis example (a new example starts a new
transcript), with its arguments as they were at the time of the call. When the test fails,
the calls of the example that raised the failure the card describes (example_calls.py) become
a snippet the candidate can paste next to their file (snippet.py): it rebuilds each input
exactly (tensors as ``torch.tensor([...], dtype=...)`` literals), makes the same calls and
prints what their code returns.

The judge's endpoint knows nothing of this: it tells its observer (``Recorder``) of each
request it sends, of the seed it gives the call, and of how the call ended.
"""

from __future__ import annotations

import re
import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from grader.engine.proxy import RemoteObject
from grader.worker.schema import Op
from grader.worker.values import MAX_LITERAL_ELEMENTS, MAX_PACKED_BYTES  # (a snippet's limits)

MAX_CALLS = 400          # per example: a longer transcript is cut at its start
MAX_SNIPPET_CHARS = 40_000


@dataclass
class Call:
    op: str
    target: Any          # the proxy called (or whose attribute is read)
    name: str | None     # method or attribute name
    args: tuple
    kwargs: tuple
    result: Any = None
    raised: str | None = None
    seed: int | None = None  # torch's global generator was seeded with this just before the call
    # The frames of a NotImplementedError the candidate's code raised in this call ([] when
    # none came with it), else None: the card then names the function (failures.py).
    unimplemented: list | None = None
    # The state the test read in the same round trip (call_then_read): ((name, args or None,
    # kwargs), ...), possibly wrapped in codec.Verbatim. Replayed after the example's last
    # call, where a lockstep test's failing comparison looked.
    reads: Any = None
    # A request that made two calls (new_then_call): the method call that took this call's
    # object; both are in the transcript.
    then: "Call | None" = None

    def note_raised(self, exc: BaseException) -> None:
        """The call raised `exc` (in the candidate's code, or on its way back)."""
        self.raised = type(exc).__name__
        if isinstance(exc, NotImplementedError) and getattr(exc, "_kata_remote", False):
            self.unimplemented = list(getattr(exc, "_kata_frames", None) or [])

    def raised_not_implemented(self) -> bool:
        return self.unimplemented is not None or self.raised == "NotImplementedError"


class Made:
    """The object a recorded constructor call of new_then_call makes, until (or unless) its
    reply names it: the snippet calls it by its class's name, as it would the proxy."""

    __slots__ = ("_kata_type",)

    def __init__(self, cls: Any) -> None:
        self._kata_type = getattr(cls, "_kata_type", None)


@dataclass
class Segment:
    """The calls of one example (or of one replay of a suite's own shrinker), as they stood
    when its failure was raised: what that failure's snippet replays."""

    calls: list[Call] = field(default_factory=list)
    dropped: int = 0


@dataclass
class Transcript:
    calls: list[Call] = field(default_factory=list)
    example: Any = None
    dropped: int = 0

    def __post_init__(self) -> None:
        # The judge talks to one worker at a time, and its endpoint makes a new transcript for
        # each test: the newest is the one recording (failures take their calls from it).
        global _active
        _active = weakref.ref(self)

    def start(self, example: Any) -> None:
        if example is not self.example:
            if example is None and threading.current_thread() is not threading.main_thread():
                return  # a call from a thread the test started: hypothesis's context is per thread
            self.new_segment(example)

    def new_segment(self, example: Any) -> None:
        """Forget the calls so far: `example` starts (or a suite's replay starts within it)."""
        self.example = example
        self.calls = []  # (a new list: failures raised earlier keep theirs)
        self.dropped = 0

    def segment(self) -> Segment:
        return Segment(list(self.calls), self.dropped)

    def add(self, call: Call) -> None:
        self.calls.append(call)
        if len(self.calls) > MAX_CALLS:
            del self.calls[0]
            self.dropped += 1


_active: "weakref.ref[Transcript] | None" = None
_context_var: Any = None


def active_transcript() -> Transcript | None:
    """The transcript now recording the test's calls (None where no worker was started)."""
    return _active() if _active is not None else None


def current_example() -> Any:
    """An object standing for the running hypothesis example (None outside one)."""
    global _context_var
    if _context_var is None:
        try:
            from hypothesis.control import _current_build_context

            _context_var = _current_build_context
        except ImportError:  # an API that moved: one transcript per test
            _context_var = False
    if _context_var is False:
        return None
    try:
        return _context_var.value
    except Exception:  # noqa: BLE001 - hypothesis internals: without them, one transcript per test
        return None


_IMMUTABLE = frozenset({type(None), bool, int, float, complex, str, bytes})


def snapshot(value: Any, depth: int = 0) -> Any:
    """The argument as it is now (later in-place changes must not alter the transcript)."""
    t = type(value)
    if t in _IMMUTABLE or (t is tuple and all(map(_IMMUTABLE.__contains__, map(type, value)))):
        return value  # (most arguments: request ids, token counts)
    if depth > 6:
        return value
    if t is list:
        return [snapshot(v, depth + 1) for v in value]
    if t is dict:
        return {k: snapshot(v, depth + 1) for k, v in value.items()}
    if t is tuple:
        return tuple(snapshot(v, depth + 1) for v in value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor) \
            and value.numel() * value.element_size() <= max(MAX_PACKED_BYTES, 8 * MAX_LITERAL_ELEMENTS):
        return value.detach().clone()
    if torch is not None and isinstance(value, torch.nn.Module):
        return ModuleSnap(value)
    return value


# A module's recipe: a dotted constructor call with plain arguments (names, numbers).
_RECIPE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\([\w\s=,.+\-]*\)")


class ModuleSnap:
    """A module the test built and passed in (LoRALinear's base layer), as it was then."""

    __slots__ = ("original_id", "module", "source")

    def __init__(self, module: Any) -> None:
        import copy

        self.original_id = id(module)
        # A suite may say how to rebuild a module it made (a kata's model from its seed):
        # `module._kata_rebuild = "pkg.Class(args)"`, valid while the module is unchanged.
        source = getattr(module, "_kata_rebuild", None)
        self.source = source if isinstance(source, str) and _RECIPE.fullmatch(source) else None
        try:
            small = sum(p.numel() for p in module.state_dict().values()) <= MAX_LITERAL_ELEMENTS
            self.module = copy.deepcopy(module) if small else None
        except Exception:  # noqa: BLE001 - a transcript must never fail a test
            self.module = None


# The requests a snippet replays: calls into the candidate's code, and attribute reads and
# writes. (call_then_read replays as its call, its reads printed after the last call.)
# (new_then_call replays as two calls: the constructor's, then the method's.)
RECORDED_OPS = frozenset({Op.CALL, Op.CALLMETHOD, Op.CALL_THEN_READ, Op.NEW_THEN_CALL, Op.GETATTR, Op.SETATTR})


class Recorder:
    """The judge endpoint's observer: keeps the calls of the running example in a
    transcript. A transcript must never fail a test: a call it cannot copy is not recorded.

    Invariant: `transcript` is the newest Transcript (active_transcript() returns it)."""

    def __init__(self) -> None:
        self.transcript = Transcript()

    def reset(self) -> None:
        """A new test: a new transcript."""
        self.transcript = Transcript()

    def started(self, op: str, args: tuple) -> Call | None:
        """A request is about to be sent: its entry, or None when it is not replayed."""
        if op not in RECORDED_OPS:
            return None
        self.transcript.start(current_example())
        try:
            if op == Op.CALL:
                call = Call(op, args[0], None, snapshot(args[1]), snapshot(args[2]))
            elif op in (Op.CALLMETHOD, Op.CALL_THEN_READ):  # (reads: printed after the last call only)
                call = Call(Op.CALLMETHOD, args[0], args[1], snapshot(args[2]), snapshot(args[3]),
                            reads=args[4] if op == Op.CALL_THEN_READ else None)
            elif op == Op.NEW_THEN_CALL:  # (obj, name, cls, args, kwargs, reads)
                made = Made(args[2])
                call = Call(Op.CALL, args[2], None, snapshot(args[3]), snapshot(args[4]), result=made)
                call.then = Call(Op.CALLMETHOD, args[0], args[1], (made,), (), reads=args[5])
            else:  # getattr / setattr
                call = Call(op, args[0], args[1], snapshot(args[2:]), ())
        except Exception:  # noqa: BLE001 - a transcript must never fail a test
            return None
        self.transcript.add(call)
        if call.then is not None:
            self.transcript.add(call.then)
        return call

    def seeded(self, call: Call, seed: int) -> None:
        """Both sides' global generator was seeded with `seed` just before the call."""
        call.seed = seed

    def raised(self, call: Call, exc: BaseException) -> None:
        (call.then or call).note_raised(exc)  # (the request's last call: where it was cut)

    def returned(self, call: Call, op: str, result: Any) -> None:
        if op == Op.NEW_THEN_CALL and call.then is not None and type(result) is tuple and len(result) == 3:
            self._made(call, call.then, result[0], result[1])
        elif op == Op.CALL_THEN_READ and type(result) is tuple and result:
            outcome: tuple[bool, Any] = result[0] if type(result[0]) is tuple and len(result[0]) == 2 else (True, None)
            ok, value = outcome
            if not ok:
                call.note_raised(value)
            elif isinstance(value, RemoteObject):
                call.result = value
        elif isinstance(result, RemoteObject):
            call.result = result

    def cut_script(self, args: tuple, exc: BaseException) -> None:
        """A script whose request failed (cut as a hang, or the worker died): none of its
        records came back, so its calls are recorded each once (a repeat: its read and one
        call), the last taking the error. A snippet then makes them as the test did, up to
        where the code was stopped (a hang at a repeat's later call aside)."""
        try:
            obj, entries = args
            last = None
            for entry in entries[:MAX_CALLS]:
                if entry[0] == "repeat":
                    cond = entry[3]
                    last = self.started(Op.CALLMETHOD, (obj, cond[0], tuple(cond[1] or ()), ()))
                    entry = entry[1]
                if entry[0] == "call":
                    last = self.started(Op.CALL_THEN_READ, (obj, *entry[1:6]))
                elif entry[0] == "new":
                    last = self.started(Op.NEW_THEN_CALL, (obj, *entry[1:6]))
            if last is not None:
                self.raised(last, exc)
        except Exception:  # noqa: BLE001 - a transcript must never fail a test
            return

    def _made(self, call: Call, then: Call, made: Any, outcome: Any) -> None:
        """new_then_call's reply: the constructor raised (the method was never called: its
        entry leaves the transcript), or its object is the method's argument."""
        if type(made) is not tuple or len(made) != 2:
            return
        if not made[0]:
            call.note_raised(made[1])
            calls = self.transcript.calls
            for i in range(len(calls) - 1, -1, -1):
                if calls[i] is then:
                    del calls[i]
                    break
            call.then = None
            return
        if isinstance(made[1], RemoteObject):
            call.result = made[1]
            then.args = (made[1],)
        if type(outcome) is tuple and len(outcome) == 2:
            if not outcome[0]:
                then.note_raised(outcome[1])
            elif isinstance(outcome[1], RemoteObject):
                then.result = outcome[1]
