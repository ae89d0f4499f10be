"""Proxies: how the candidate's objects look in the judge, and the batched calls a suite
makes through them (grader/protocol.py's call_many, read_all, call_then_read,
new_then_call, Script).

Nothing here runs candidate code: a proxy's every operation is a request to the endpoint
that made it (``_kata_bridge``, a ``grader.engine.judge_bridge.JudgeEndpoint``), and what
comes back is decoded into plain values, tensors, or more proxies.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable, Sequence

from grader.worker import codec
from grader.worker.schema import TYPE_INFO, Op, check
from grader.worker.wire import WireError

MAX_METHODS = 2_000  # the most method names of one of the candidate's classes the judge keeps


class TypeInfo:
    __slots__ = ("qualname", "module", "is_class", "is_callable", "methods")

    def __init__(self, qualname: str, module: str, is_class: bool, is_callable: bool,
                 methods: frozenset[str]) -> None:
        self.qualname, self.module = qualname, module
        self.is_class, self.is_callable, self.methods = is_class, is_callable, methods


_ALLOWED_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__dict__",
                              "__wrapped__", "__annotations__"})
# Attributes that libraries probe on any object they are handed (hypothesis looks for an
# executor on a test's first argument): answered here, without asking the worker.
_PROBES = frozenset({"execute_example", "setup_example", "teardown_example",
                     "hypothesis_internal_is_this_a_mock_check", "_pytestfixturefunction"})


class RemoteObject:
    """Stands in the judge for an object that lives in the worker (a candidate's instance,
    function, class or module). Equality and hashing are by identity: a verdict never asks
    the candidate's code whether two things are equal."""

    __slots__ = ("_kata_bridge", "_kata_handle", "_kata_type", "_kata_cache", "__weakref__")

    def __getattr__(self, name: str) -> Any:
        if (name.startswith("__") and name.endswith("__") and name not in _ALLOWED_DUNDERS) \
                or name in _PROBES or name.startswith("_repr_"):
            raise AttributeError(name)
        info = self._kata_type
        if not info.is_class and name in info.methods:
            return RemoteMethod(self, name)
        cache = self._kata_cache
        if cache is not None and name in cache:
            return cache[name]
        value = self._kata_bridge.request(Op.GETATTR, self, name)
        if cache is not None and isinstance(value, RemoteObject) and value._kata_type.is_callable:
            # The module's functions and classes: `solution.f(x)` is then one request, not
            # two. The judge's own setattr clears it; candidate code rebinding a function of
            # its module while being graded is not supported.
            cache[name] = value
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_kata_"):
            object.__setattr__(self, name, value)
        else:
            if self._kata_cache is not None:
                self._kata_cache.clear()
            self._kata_bridge.request(Op.SETATTR, self, name, value)

    def __delattr__(self, name: str) -> None:
        if self._kata_cache is not None:
            self._kata_cache.clear()
        self._kata_bridge.request(Op.DELATTR, self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._kata_bridge.request(Op.CALL, self, args, tuple(kwargs.items()))

    def __len__(self) -> int:
        return _typed(self._kata_bridge.request(Op.LEN, self), int, "len()")

    def __iter__(self) -> Any:
        return iter(_typed(self._kata_bridge.request(Op.ITER, self), list, "iter()"))

    def __next__(self) -> Any:
        return self._kata_bridge.request(Op.NEXT, self)

    def __getitem__(self, key: Any) -> Any:
        return self._kata_bridge.request(Op.GETITEM, self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._kata_bridge.request(Op.SETITEM, self, key, value)

    def __delitem__(self, key: Any) -> None:
        self._kata_bridge.request(Op.DELITEM, self, key)

    def __contains__(self, key: Any) -> bool:
        return _typed(self._kata_bridge.request(Op.CONTAINS, self, key), bool, "in")

    def __bool__(self) -> bool:
        return _typed(self._kata_bridge.request(Op.BOOL, self), bool, "bool()")

    def __int__(self) -> int:
        return _typed(self._kata_bridge.request(Op.INT, self), int, "int()")

    def __float__(self) -> float:
        return _typed(self._kata_bridge.request(Op.FLOAT, self), float, "float()")

    def __index__(self) -> int:
        return _typed(self._kata_bridge.request(Op.INDEX, self), int, "index")

    def __instancecheck__(self, obj: Any) -> bool:
        return _typed(self._kata_bridge.request(Op.ISINSTANCE, obj, self), bool, "isinstance()")

    def __subclasscheck__(self, cls: Any) -> bool:
        return _typed(self._kata_bridge.request(Op.ISSUBCLASS, cls, self), bool, "issubclass()")

    def __dir__(self) -> list[str]:
        return _typed(self._kata_bridge.request(Op.DIR, self), list, "dir()")

    def __repr__(self) -> str:
        try:
            text = self._kata_bridge.request(Op.REPR, self)
        except BaseException:  # noqa: BLE001 - a repr must not fail a report
            text = None
        return text if isinstance(text, str) else f"<{self._kata_type.qualname} object of your code>"

    def __str__(self) -> str:
        try:
            text = self._kata_bridge.request(Op.STR, self)
        except BaseException:  # noqa: BLE001 - a str must not fail a report
            text = None
        return text if isinstance(text, str) else repr(self)

    def __hash__(self) -> int:
        return object.__hash__(self)

    def __reduce__(self) -> Any:
        raise TypeError("an object of the candidate's code cannot be pickled in the judge")


class RemoteMethod:
    """A method of a candidate object, bound on the judge's side: calling it is one request."""

    __slots__ = ("_obj", "_name")

    def __init__(self, obj: RemoteObject, name: str) -> None:
        self._obj, self._name = obj, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._obj._kata_bridge.request(Op.CALLMETHOD, self._obj, self._name, args,
                                              tuple(kwargs.items()))

    def __repr__(self) -> str:
        return f"<method {self._name} of {self._obj._kata_type.qualname} (your code)>"


def call_many(fn: Any, calls: list[tuple[tuple, dict]], clone_args: bool = False) -> list:
    """[fn(*args, **kwargs) for args, kwargs in calls]: when `fn` is the candidate's, the
    worker runs the loop and the whole batch is one request (thousands of small calls, as a
    distribution test makes, would otherwise cost a round trip each). With clone_args, each
    call gets its own copy of every tensor among its positional arguments, made where the
    call runs: a tensor passed to every call crosses once. Results are values: a list the
    candidate returns arrives as a copy, not as a shared object."""
    pairs = [(tuple(args), tuple(dict(kwargs).items())) for args, kwargs in calls]  # kwargs as items
    if isinstance(fn, RemoteMethod):
        fn = fn._obj._kata_bridge.request(Op.GETATTR, fn._obj, fn._name)
    if isinstance(fn, RemoteObject):
        bridge = fn._kata_bridge
        rows = _as_rows(pairs) if clone_args else None
        if rows is not None:
            got = bridge.request(Op.CALL_ROWS, fn, *rows)
        else:
            if clone_args:
                pairs = _single_use_tensors_as_copies(pairs)
            got = bridge.request(Op.CALL_MANY, fn, pairs, clone_args)
        if type(got) is not list or len(got) != len(pairs):
            raise TypeError("call_many: the worker's answer does not fit the calls")
        return got
    return [fn(*(codec.clone_tensors(args) if clone_args else args), **dict(kwargs)) for args, kwargs in pairs]


def _as_rows(calls: list) -> tuple | None:
    """(args, kwargs, columns, number of calls) when, with clone_args, the calls differ only
    in one plain tensor per argument position, of one shape and dtype (a draft per call):
    those tensors cross stacked, one tensor per position, and call i gets row i (a copy
    of it, as clone_args gives). The arguments every call shares cross once, as a template.
    None when the calls are not of that form (they cross as call_many's list)."""
    torch = codec.torch_loaded()
    if torch is None or len(calls) < 2:
        return None
    args0, kwargs0 = calls[0]
    width = len(args0)
    varies = [False] * width
    for args, kwargs in calls:
        if len(args) != width or len(kwargs) != len(kwargs0):
            return None
        for (key, value), (key0, value0) in zip(kwargs, kwargs0):
            if value is not value0 or key != key0:
                return None
        for j in range(width):
            if args[j] is not args0[j]:
                varies[j] = True
    columns = []
    for j in range(width):
        if not varies[j]:
            continue
        column = [args[j] for args, _ in calls]
        if not all(_stackable(t, column[0], torch) for t in column):
            return None
        columns.append((j, codec.TensorCopy(torch.stack(column))))
    if not columns:
        return None
    template = tuple(None if varies[j] else a for j, a in enumerate(args0))
    return template, kwargs0, tuple(columns), len(calls)


def _stackable(t: Any, first: Any, torch: Any) -> bool:
    """Whether `t` can cross as a row of a stack and arrive as it would alone: a plain
    strided tensor, with no autograd, in the layout a copy of it crosses in."""
    return (type(t) is torch.Tensor and t.layout is torch.strided and not t.requires_grad
            and t.shape == first.shape and t.dtype == first.dtype and t.device == first.device
            and (t.dim() <= 1 or t.is_contiguous()) and not t.is_conj() and not t.is_neg())


def _single_use_tensors_as_copies(calls: list) -> list:
    """With clone_args each call works on its own copies of its positional tensors, so no
    identity is kept: a tensor that only one call gets crosses as a plain copy, not as a
    shared object (a tensor every call gets still crosses once, and is referred to)."""
    torch = codec.torch_loaded()
    if torch is None:
        return calls
    uses: dict[int, int] = {}
    for args, _ in calls:
        for a in args:
            if type(a) is torch.Tensor:
                uses[id(a)] = uses.get(id(a), 0) + 1
    if not uses or all(n > 1 for n in uses.values()):
        return calls
    return [(tuple(codec.TensorCopy(a) if type(a) is torch.Tensor and uses[id(a)] == 1 else a for a in args), kwargs)
            for args, kwargs in calls]


def run_in_one_process(fn: Callable, *args: Any) -> Any:
    """fn(*args) where the candidate's code runs: in the worker when an argument is the
    candidate's (a proxy), else here. `fn`'s module is sent as source and run in the
    worker: it may use the standard library and torch, nothing of the grader's."""
    bridge = next((a._kata_bridge for a in args if isinstance(a, RemoteObject)), None)
    if bridge is None:
        return fn(*args)
    source = inspect.getsource(sys.modules[fn.__module__])
    return bridge.request(Op.HARNESS, source, fn.__name__, args)


def read_all(obj: Any, reads: list[tuple[str, tuple | None]]) -> list[tuple[bool, Any]]:
    """For each (name, args): obj.name(*args), or the attribute obj.name when args is None;
    [(True, value) or (False, exception)] in order. One request when obj is the candidate's."""
    if isinstance(obj, RemoteObject):
        outcomes = obj._kata_bridge.request(Op.READ_ALL, obj, _wire_reads(reads))
        if type(outcomes) is not list or len(outcomes) != len(reads) or not all(map(_outcome_shape, outcomes)):
            raise TypeError("read_all: the worker's answer does not fit the reads")
        return outcomes
    out: list[tuple[bool, Any]] = []
    for name, args in reads:
        try:
            out.append((True, getattr(obj, name) if args is None else getattr(obj, name)(*args)))
        except Exception as exc:  # noqa: BLE001 - each read's outcome, error or not
            out.append((False, exc))
    return out


def call_then_read(obj: Any, name: str, args: tuple, reads: Sequence[tuple[str, tuple | None]] = (),
                   result_reads: Sequence[tuple[str, tuple | None]] = ()) -> tuple:
    """obj.name(*args), then `result_reads` on what it returned and `reads` on obj, as
    read_all makes them, whatever the call did: ((True, value) or (False, exception), the
    reads' outcomes, the result reads' outcomes; none of those when the call raised). One
    request when obj is the candidate's: a lockstep step and the state it leaves."""
    if isinstance(obj, RemoteObject):
        answer = obj._kata_bridge.request(Op.CALL_THEN_READ, obj, name, tuple(args), (),
                                          _wire_reads(reads), _wire_reads(result_reads))
        if not (type(answer) is tuple and len(answer) == 3 and _outcome_shape(answer[0])
                and all(type(part) is list and all(_outcome_shape(o) for o in part) for part in answer[1:])
                and len(answer[1]) == len(reads)
                and len(answer[2]) == (len(result_reads) if answer[0][0] else 0)):
            raise TypeError("call_then_read: the worker's answer does not fit the call and reads")
        return answer
    try:
        first: tuple[bool, Any] = (True, getattr(obj, name)(*args))
    except Exception as exc:  # noqa: BLE001 - the call's outcome, error or not
        first = (False, exc)
    of_result = read_all(first[1], list(result_reads)) if first[0] else []
    return first, read_all(obj, list(reads)), of_result


def new_then_call(obj: Any, name: str, cls: Any, args: tuple, kwargs: dict | None = None,
                  reads: Sequence[tuple[str, tuple | None]] = ()) -> tuple:
    """made = cls(*args, **kwargs), then obj.name(made), then `reads` on obj as read_all
    makes them: ((True, made) or (False, exception), the call's outcome and the reads'
    outcomes; None and [] when the constructor raised). One request when obj is the
    candidate's: add_request(Request(...)) of a lockstep test."""
    kwargs = kwargs or {}
    if isinstance(obj, RemoteObject):
        answer = obj._kata_bridge.request(Op.NEW_THEN_CALL, obj, name, cls, tuple(args),
                                          tuple(kwargs.items()), _wire_reads(reads))
        if not (type(answer) is tuple and len(answer) == 3 and _outcome_shape(answer[0])
                and type(answer[2]) is list and all(map(_outcome_shape, answer[2]))
                and ((answer[0][0] and _outcome_shape(answer[1]) and len(answer[2]) == len(reads))
                     or (not answer[0][0] and answer[1] is None and not answer[2]))):
            raise TypeError("new_then_call: the worker's answer does not fit the call and reads")
        return answer
    try:
        made: tuple[bool, Any] = (True, cls(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the constructor's outcome, error or not
        return (False, exc), None, []
    try:
        outcome: tuple[bool, Any] = (True, getattr(obj, name)(made[1]))
    except Exception as exc:  # noqa: BLE001 - the call's outcome, error or not
        outcome = (False, exc)
    return made, outcome, read_all(obj, list(reads))


def run_script(obj: Any, entries: Sequence[tuple]) -> list:
    """Calls on obj fixed in advance, in one request when obj is the candidate's (for any
    other object: [], and the test makes its calls itself). Entries:

    * ("call", name, args, reads, result_reads, may_raise): obj.name(*args), as
      call_then_read makes it; record ("call", outcome, reads' outcomes, result reads');
    * ("new", name, cls, args, kwargs, reads, may_raise): obj.name(cls(*args, **kwargs)), as
      new_then_call makes it; record ("new", made, outcome, reads' outcomes);
    * ("repeat", a "call" entry, limit, (name, args)): the read first, record ("read",
      outcome); then, while it gave True and at most `limit` times, the call, whose first
      read gives the next (each call's record as above).

    The records, in order, end after the first that holds an exception other than its main
    call's of a class named in `may_raise` (a tuple of names), or a read of a repeat that did
    not give a bool: what follows is for the test to call itself. Nothing is recorded in the
    transcript here: a record is, as the test takes it (record_script_call). No entries:
    no request."""
    if not isinstance(obj, RemoteObject) or not entries:
        return []
    wire = tuple(_wire_entry(entry) for entry in entries)
    records = obj._kata_bridge.request(Op.SCRIPT, obj, wire)
    if type(records) is not list or len(records) > 100_000 or not all(map(_record_shape, records)):
        raise TypeError("run_script: the worker's answer does not fit a script's records")
    return records


def _wire_entry(entry: tuple) -> tuple:
    kind = entry[0]
    if kind == "call":
        _, name, args, reads, result_reads, may_raise = entry
        return ("call", name, tuple(args), (), _wire_reads(reads), _wire_reads(result_reads), tuple(may_raise))
    if kind == "new":
        _, name, cls, args, kwargs, reads, may_raise = entry
        return ("new", name, cls, tuple(args), tuple(kwargs.items()), _wire_reads(reads), tuple(may_raise))
    if kind == "repeat":
        _, inner, limit, (name, args) = entry
        if inner[0] != "call":
            raise ValueError("a script repeats a call entry")
        return ("repeat", _wire_entry(inner), int(limit), (name, None if args is None else tuple(args), ()))
    raise ValueError(f"unknown script entry {kind!r}")


def _record_shape(record: Any) -> bool:
    if type(record) is not tuple or not record:
        return False
    if record[0] == "read":
        return len(record) == 2 and _outcome_shape(record[1])
    if record[0] not in ("call", "new") or len(record) != 4 or not _outcome_shape(record[1]):
        return False
    rest = record[2:] if record[0] == "call" else record[3:]
    if record[0] == "new" and record[2] is not None and not _outcome_shape(record[2]):
        return False
    return all(type(part) is list and all(map(_outcome_shape, part)) for part in rest)


def record_script_call(obj: Any, entry: tuple, record: tuple) -> None:
    """The transcript takes the calls of a script's record, as if made now (the snippet
    then replays what the test had looked at when it failed, not the whole script)."""
    bridge = obj._kata_bridge
    if bridge.measure_kinds:
        return
    observer = bridge.observer
    kind = record[0]
    if kind == "read":
        name, args = entry[3]
        call = observer.started(Op.CALLMETHOD, (obj, name, tuple(args or ()), ()))
        if call is not None:
            if record[1][0]:
                observer.returned(call, Op.CALLMETHOD, record[1][1])
            else:
                observer.raised(call, record[1][1])
        return
    if kind == "call":
        _, name, args, reads, result_reads, _ = entry
        call = observer.started(Op.CALL_THEN_READ, (obj, name, tuple(args), (), _wire_reads(reads),
                                                    _wire_reads(result_reads)))
        if call is not None:
            observer.returned(call, Op.CALL_THEN_READ, record[1:])
        return
    _, name, cls, args, kwargs, reads, _ = entry
    call = observer.started(Op.NEW_THEN_CALL, (obj, name, cls, tuple(args), tuple(kwargs.items()),
                                               _wire_reads(reads)))
    if call is not None:
        observer.returned(call, Op.NEW_THEN_CALL, record[1:])


def _wire_reads(reads: Any) -> Any:
    """(name, args or None, kwargs) for each read: a tuple, since a list would cross as a
    shared object, kept for the test; in one piece when it is plain data (it usually is)."""
    wire = tuple((name, None if args is None else tuple(args), ()) for name, args in reads)
    if all(type(name) is str and (args is None or all(map(_PLAIN_TYPES.__contains__, map(type, args))))
           for name, args, _ in wire):
        return codec.Verbatim(wire)
    return wire


# Arguments that may cross verbatim, a read's or a request's (no handle or shared object).
_PLAIN_TYPES = frozenset(codec.PLAIN)


def _outcome_shape(outcome: Any) -> bool:
    return type(outcome) is tuple and len(outcome) == 2 and type(outcome[0]) is bool


def _typed(value: Any, kind: type, what: str) -> Any:
    if type(value) is not kind:
        raise TypeError(f"{what} of an object of your code returned {type(value).__name__}, not {kind.__name__}")
    return value



def type_info(info: Any) -> TypeInfo:
    """A TYPE_INFO record from the worker, bounded."""
    qualname, module, is_class, is_callable, methods = check(info, TYPE_INFO, WireError)
    return TypeInfo(codec.ensure_str(qualname, "a type name")[:200], codec.ensure_str(module, "a module")[:200],
                    bool(is_class), bool(is_callable),
                    frozenset(m[:200] for m in methods[:MAX_METHODS] if type(m) is str)
                    if type(methods) is list else frozenset())
