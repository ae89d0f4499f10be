"""The worker's side of the bridge: runs the judge's requests on the candidate's objects.

Candidate objects go back to the judge as handles (with what the judge needs to know of
their type: its name, whether it is a class, which attributes are methods); the judge's
callables come in as ``Callback`` stubs. Around every operation that runs candidate code
the worker applies the judge's grad mode and global RNG state, and, when the judge is
measuring, the meters of ``measure`` (so the candidate's share is measured here, with the
transport left out).
"""

from __future__ import annotations

import inspect
import io
import itertools
import operator
import socket
import sys
import threading
import time
import traceback
import types
from itertools import islice
from typing import Any, Callable

from . import codec, measure, modules
from .bridge import Endpoint
from .codec import BridgeError, no_modes
from .modules import unpickle_trusted
from .schema import INTERNAL_OPS, JUDGE_TO_WORKER, OPS, RNG_NOT_SYNCED, Msg, Op, Tag
from .wire import MAX_SPIN_S, FramedSocket, PeerClosed, WireError

MAX_ITEMS = 1_000_000
MAX_OUTPUT_CHARS = 64_000


class Callback:
    """A judge callable, as the candidate's code sees it: something to call, nothing more."""

    __slots__ = ("_kata_endpoint", "_kata_handle")

    def __init__(self, endpoint: "WorkerEndpoint", handle: int) -> None:
        self._kata_endpoint, self._kata_handle = endpoint, handle

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._kata_endpoint.request(Op.CALLBACK, self, args, tuple(kwargs.items()))

    def __repr__(self) -> str:
        return "<function provided by the grader>"


class OutputCapture(io.TextIOBase):
    """sys.stdout / sys.stderr of the worker: keeps the candidate's printed text (up to a
    cap) for the judge to show with the test that printed it."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0
        self.lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: Any) -> int:
        text = str(text)
        with self.lock:
            room = MAX_OUTPUT_CHARS - self.size
            if room > 0:
                self.parts.append(text[:room])
                self.size += min(len(text), room)
            self.dropped += max(len(text) - max(room, 0), 0)
        return len(text)

    def drain(self) -> tuple[str, int]:
        with self.lock:
            text, dropped = "".join(self.parts), self.dropped
            self.parts, self.dropped = [], 0
            return text, dropped

    def new_test(self) -> None:
        with self.lock:
            self.size = 0


class WorkerEndpoint(Endpoint):
    ROLE = "worker"
    VERIFY_VERBATIM = False  # the judge is trusted (and sends plain reads by the thousand)

    def __init__(self, main: FramedSocket, module: Any, candidate_path: str,
                 capture: OutputCapture | None) -> None:
        super().__init__(main, sign=-1)
        self.module = module
        self.candidate_path = candidate_path
        self.capture = capture
        self.handles: dict[int, Any] = {}
        self.handle_by_id: dict[int, int] = {}
        self.handle_ids = itertools.count(1)
        self.types: dict[type, tuple[int, tuple]] = {}
        self.type_ids = itertools.count(1)
        self.stubs: dict[int, Callback] = {}
        self.pending_rng: bytes | None = None
        self.share: dict[str, Any] = {}
        self.module_handle = self.export(module)

    # ---------------------------------------------------------------- handles

    def export(self, obj: Any) -> int:
        handle = self.handle_by_id.get(id(obj))
        if handle is not None and self.handles.get(handle) is obj:
            return handle
        handle = next(self.handle_ids)
        self.handles[handle] = obj
        self.handle_by_id[id(obj)] = handle
        return handle

    def hello(self) -> Any:
        with self.registry.lock, no_modes():
            return self.encode_other(self.module, 0)

    def encode_other(self, value: Any, depth: int) -> Any:
        if self.registry.sid_of(value) is not None:  # a module the judge passed in
            return self.encode_shared(value, depth=depth)
        if isinstance(value, Callback):
            return (Tag.CALLBACK_REF, value._kata_handle)
        if isinstance(value, BaseException):  # an outcome of read_all
            return (Tag.EXCEPTION_VALUE, self.encode_exception(value))
        cls = type(value)
        tid, info = self._type(cls)
        # Declared once per channel: replies on different channels (a test's threads) are
        # decoded in no fixed order, so each channel carries its own declarations.
        sent_here = getattr(self._local, "types_sent", None)
        if sent_here is None:
            sent_here = self._local.types_sent = set()
        sent = tid in sent_here
        sent_here.add(tid)
        return (Tag.HANDLE, self.export(value), tid, None if sent else info)

    def _type(self, cls: type) -> tuple[int, tuple]:
        known = self.types.get(cls)
        if known is None:
            is_class = isinstance(cls, type) and issubclass(cls, type)
            known = (next(self.type_ids), (cls.__qualname__, str(cls.__module__), is_class,
                                          callable(getattr(cls, "__call__", None)) or is_class,  # noqa: B004 - callable instances
                                          sorted(_method_names(cls)) if not is_class else []))
            self.types[cls] = known
        return known

    def encode_tensor(self, sid: int, t: Any, depth: int, *, extra: Any = None) -> Any:
        if t.requires_grad and t.grad_fn is not None:
            extra = self.export(t)  # the judge may run a backward pass through it
        return super().encode_tensor(sid, t, depth, extra=extra)

    def encode_content(self, sid: int, obj: Any, depth: int) -> Any:
        if modules.is_module(obj):
            return modules.encode_module_state(self, sid, obj, depth)
        return super().encode_content(sid, obj, depth)

    def exception_frames(self, exc: BaseException) -> list:
        frames = []
        for frame in traceback.extract_tb(exc.__traceback__):
            if frame.filename == self.candidate_path:
                frames.append((frame.lineno or 0, frame.name[:100], (frame.line or "").strip()[:300]))
        return frames[-5:] or list(getattr(exc, "_kata_frames", []) or [])

    # ---------------------------------------------------------------- decode (judge -> worker)

    def _d_handle(self, tree: tuple, depth: int) -> Any:
        obj = self.handles.get(tree[1])
        if obj is None and tree[1] not in self.handles:
            raise WireError("a reference to an unknown handle")
        return obj

    def _d_bound(self, tree: tuple, depth: int) -> Any:
        return getattr(self.handles[tree[1]], tree[2])

    def _d_callback(self, tree: tuple, depth: int) -> Any:
        stub = self.stubs.get(tree[1])
        if stub is None:
            stub = self.stubs[tree[1]] = Callback(self, tree[1])
        return stub

    DECODERS: dict[str, Callable[..., Any]] = {**Endpoint.DECODERS, Tag.HANDLE_REF: _d_handle, Tag.BOUND_METHOD: _d_bound,
                Tag.CALLBACK: _d_callback, **modules.WORKER_DECODERS}

    # ---------------------------------------------------------------- ops

    def run_op(self, op: Any, args: Any, ctx: Any) -> Any:
        fn = _OPS.get(op) if type(op) is str else None
        if fn is None or type(args) is not list:
            raise BridgeError(f"unknown operation {op!r}")
        if op in INTERNAL_OPS:
            return fn(self, *args)
        ctx = ctx if type(ctx) is dict else {}
        torch = codec.torch_loaded()
        if type(ctx.get("rng")) is bytes:
            self.pending_rng = ctx["rng"]
        if torch is not None and self.pending_rng is not None:
            state, self.pending_rng = self.pending_rng, None
            _set_rng(torch, state)  # (raises: the call must not run from another state)
        kinds = ctx.get("measure")
        grad = torch.set_grad_enabled(bool(ctx.get("grad", True))) if torch is not None else None
        if not kinds:
            if grad is None:
                return fn(self, *args)
            with grad:
                return fn(self, *args)
        meters = measure.local_meters(tuple(kinds))
        measuring, self.measuring = self.measuring, True
        waited0, t0 = self.waited_cpu_s, time.thread_time()
        try:
            if grad is not None:
                grad.__enter__()
            for meter in meters:
                meter.__enter__()
            return fn(self, *args)
        finally:
            # CPU time of the candidate's call, without what nested requests cost this side.
            elapsed = time.thread_time() - t0 - (self.waited_cpu_s - waited0)
            self.measuring = measuring
            for meter in reversed(meters):
                meter.__exit__(None, None, None)
            if grad is not None:
                grad.__exit__(None, None, None)
            share = {"time_s": max(elapsed, 0.0)}
            for meter in meters:
                share.update(meter.totals())
            _merge(self.share, share)

    def reply_extra(self) -> Any:
        extra: dict[str, Any] = {}
        if self.capture is not None:
            out, dropped = self.capture.drain()
            if out or dropped:
                extra["out"], extra["dropped"] = out, dropped
        if self.share:
            extra["measure"], self.share = self.share, {}
        return extra

    def apply_releases(self, releases: Any) -> None:
        if type(releases) is not list or len(releases) != 2:
            return
        sids, handles = releases
        for sid in sids:
            self.registry.drop(sid)
        for handle in handles:
            obj = self.handles.pop(handle, None)
            if obj is not None and self.handle_by_id.get(id(obj)) == handle:
                del self.handle_by_id[id(obj)]

    def reset(self) -> None:
        self.registry.clear()
        self.handles = {self.module_handle: self.module}
        self.handle_by_id = {id(self.module): self.module_handle}
        self.stubs.clear()
        if self.capture is not None:
            self.capture.new_test()

    def set_spin(self, seconds: Any) -> None:
        """How long the main channel polls for the judge's next message (see wire.py)."""
        if type(seconds) is not float or not 0.0 <= seconds <= MAX_SPIN_S:
            raise BridgeError("spin takes seconds in [0, 0.001]")
        self.main.spin_s = seconds

    def backward(self, handle: int, grad: Any, sids: list) -> list:
        import torch

        out = self.handles.get(handle)
        if not isinstance(out, torch.Tensor):
            raise BridgeError("backward through a tensor the worker no longer holds")
        mirrors = [self.registry.objects.get(sid) for sid in sids]
        before = [(m.grad, _version(m.grad), m.grad.clone()) if isinstance(m, torch.Tensor) and m.grad is not None
                  else None for m in mirrors]
        if isinstance(grad, torch.Tensor) and grad.shape == out.shape and grad.dtype == out.dtype:
            # The gradient that reaches `out` is exactly `grad` (times the sum's ones), without
            # torch.autograd.backward's shape check, whose first use imports sympy (0.3 s).
            with torch.enable_grad():  # (the judge's backward pass runs without grad mode)
                total = (out * grad).sum()
            torch.autograd.backward(total, retain_graph=True)
        else:
            torch.autograd.backward(out, grad, retain_graph=True)
        deltas: list[Any] = []  # a tensor, or None: nothing to add to the judge's .grad
        for sid, mirror, old in zip(sids, mirrors, before):
            if not isinstance(mirror, torch.Tensor) or mirror.grad is None:
                deltas.append(None)
                continue
            if old is not None and mirror.grad is old[0] and _version(mirror.grad) == old[1]:
                # Not in this graph: its gradient is untouched, as it would be in one process
                # (a zero delta would still write the judge's .grad, and cross back).
                deltas.append(None)
                continue
            deltas.append(mirror.grad - old[2] if old is not None else mirror.grad.clone())
            mirror.grad = old[2] if old is not None else None  # the judge adds the delta, then tells us
            self.registry.mark_synced(sid, mirror)
        return deltas


def _version(t: Any) -> int:
    try:
        return t._version
    except RuntimeError:  # an inference tensor keeps no version counter
        return -1


class RandomStateNotSynced(BridgeError):
    """The judge's random state could not be set here: the call does not run (its draws,
    and the seed a snippet prints, would not be the judge's)."""


assert RandomStateNotSynced.__name__ == RNG_NOT_SYNCED


def _set_rng(torch: Any, state: bytes) -> None:
    try:
        torch.default_generator.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8).clone())
    except (RuntimeError, ValueError) as exc:
        raise RandomStateNotSynced(
            f"the worker could not take the judge's random state ({type(exc).__name__}: {exc}); "
            "the test's draws would not be reproducible, so the call did not run") from None


def _merge(total: dict[str, Any], share: dict[str, Any]) -> None:
    for key, value in share.items():
        if key == "storages":
            total.setdefault("storages", []).extend([list(s) for s in value])
        else:
            total[key] = total.get(key, 0) + value


def _method_names(cls: type) -> set[str]:
    names = set()
    for name in dir(cls):
        if name.startswith("__") and name.endswith("__"):
            continue
        try:
            attr = inspect.getattr_static(cls, name)
        except AttributeError:
            continue
        if isinstance(attr, (staticmethod, classmethod, types.FunctionType, types.BuiltinFunctionType,
                             types.MethodDescriptorType, types.WrapperDescriptorType)):
            names.add(name)
    return names


def _iter(ep: WorkerEndpoint, obj: Any) -> list:
    items = list(islice(iter(obj), MAX_ITEMS + 1))
    if len(items) > MAX_ITEMS:
        raise BridgeError(f"iterating an object of your code gave more than {MAX_ITEMS:,} items")
    return items


def _read_all(ep: WorkerEndpoint, obj: Any, reads: list) -> list | codec.Verbatim:
    """[(True, value) or (False, exception)] for each (name, args or None, kwargs): a method
    call, or an attribute read when args is None; one request for many reads of one object."""
    out = []
    for name, args, kwargs in reads:
        try:
            value = getattr(obj, name) if args is None else getattr(obj, name)(*args, **dict(kwargs))
            out.append((True, value))
        except Exception as exc:  # noqa: BLE001 - each read's outcome, error or not
            out.append((False, exc))
    # Reads are values of the moment: plain ones (lists of block ids, counts) cross as they
    # are, in one piece, and arrive as copies.
    return codec.Verbatim(out) if codec.plain_tree(out) else out


def _call_then_read(ep: WorkerEndpoint, obj: Any, name: Any, args: Any, kwargs: Any, reads: Any,
                    result_reads: Any) -> tuple:
    """(outcome of obj.name(*args, **kwargs), read_all's outcomes on obj, and on the call's
    value: none if it raised): a step and the state it leaves, in one request."""
    try:
        first = (True, getattr(obj, name)(*args, **dict(kwargs)))
    except Exception as exc:  # noqa: BLE001 - the call's outcome, error or not
        first = (False, exc)
    of_result = _read_all(ep, first[1], result_reads) if first[0] else []
    return first, _read_all(ep, obj, reads), of_result


def _new_then_call(ep: WorkerEndpoint, obj: Any, name: Any, cls: Any, args: Any, kwargs: Any,
                   reads: Any) -> tuple:
    """(outcome of made = cls(*args, **kwargs); when it was made, the outcome of
    obj.name(made) and read_all's outcomes on obj, else None and []): a request whose
    argument is built with the candidate's class, in one request instead of two."""
    try:
        made: tuple = (True, cls(*args, **dict(kwargs)))
    except Exception as exc:  # noqa: BLE001 - the constructor's outcome, error or not
        return (False, exc), None, []
    try:
        outcome: tuple = (True, getattr(obj, name)(made[1]))
    except Exception as exc:  # noqa: BLE001 - the call's outcome, error or not
        outcome = (False, exc)
    return made, outcome, _read_all(ep, obj, reads)


MAX_SCRIPT_RECORDS = 100_000  # what one script may run (a repeat's limit included)


def _script(ep: WorkerEndpoint, obj: Any, entries: Any) -> list:
    """The entries' records, in order, until the first record with an exception the entry
    does not allow (its main call's, of a name in its last field; any read's); see
    grader/engine/proxy.py's run_script for the entries and their records."""
    if type(entries) is not tuple:
        raise BridgeError("malformed script")
    records = _Copied()  # (crosses as a copy, not as a shared list)
    for entry in entries:
        if type(entry) is not tuple or not entry or entry[0] not in _SCRIPT_ENTRIES:
            raise BridgeError("malformed script entry")
        kind = entry[0]
        if kind == "repeat":
            _, inner, limit, cond = entry
            if type(inner) is not tuple or not inner or inner[0] != "call" or type(limit) is not int:
                raise BridgeError("malformed script repeat")
            outcome = _plain_list(_read_all(ep, obj, [cond]))[0]
            records.append(("read", outcome))
            while outcome[0] and outcome[1] is True and limit > 0 and len(records) < MAX_SCRIPT_RECORDS:
                limit -= 1
                record = _script_call(ep, obj, inner)
                records.append(record)
                if not _script_ok(record, inner[-1]):
                    return records
                reads = _plain_list(record[2])
                outcome = reads[0] if reads else (True, False)
            if not outcome[0] or type(outcome[1]) is not bool or len(records) >= MAX_SCRIPT_RECORDS:
                return records  # (a read that is not a bool: the test reads it itself)
            continue
        record = _script_call(ep, obj, entry)
        records.append(record)
        if not _script_ok(record, entry[-1]) or len(records) >= MAX_SCRIPT_RECORDS:
            return records
    return records


def _script_call(ep: WorkerEndpoint, obj: Any, entry: tuple) -> tuple:
    if entry[0] == "call":  # ("call", name, args, kwargs, reads, result_reads, may_raise)
        _, name, args, kwargs, reads, result_reads, _ = entry
        return ("call", *_call_then_read(ep, obj, name, args, kwargs, reads, result_reads))
    _, name, cls, args, kwargs, reads, _ = entry  # ("new", ...)
    return ("new", *_new_then_call(ep, obj, name, cls, args, kwargs, reads))


def _script_ok(record: tuple, may_raise: Any) -> bool:
    """No exception in the record but the main call's, of a name in `may_raise`."""
    if record[0] == "new":
        _, made, main, reads = record
        if not made[0]:
            return False
        outcomes = _plain_list(reads)
    else:
        _, main, reads, result_reads = record
        outcomes = _plain_list(reads) + _plain_list(result_reads)
    if not main[0] and not (type(may_raise) is tuple and type(main[1]).__name__ in may_raise):
        return False
    return all(ok for ok, _ in outcomes)


def _plain_list(outcomes: Any) -> list:
    return list(outcomes.value if isinstance(outcomes, codec.Verbatim) else outcomes)


_SCRIPT_ENTRIES = frozenset({"call", "new", "repeat"})


class _Copied(list):
    """A list that crosses as a plain copy ("L0"), not as a shared object."""


def _call_many(ep: WorkerEndpoint, fn: Any, calls: list, clone_args: Any = False) -> list:
    """Like [fn(*a, **dict(kw)) for a, kw in calls], in one request; with clone_args, each
    call gets its own copy of every tensor among its positional arguments. The results, and
    the lists among them, cross as copies: thousands of them would otherwise each be a
    shared object, checked for changes at every later message."""
    out = _Copied()
    torch = codec.torch_loaded()
    tensor = torch.Tensor if torch is not None else None
    for args, kwargs in calls:
        if clone_args is True:
            args = codec.clone_tensors(args)
        value = fn(*args, **dict(kwargs))
        kind = type(value)
        out.append(_Copied(value) if kind is list else codec.TensorCopy(value) if kind is tensor else value)
    return out


def _call_rows(ep: WorkerEndpoint, fn: Any, args: Any, kwargs: Any, columns: Any, n: Any) -> list:
    """call_many for calls that differ only in one tensor per argument position: call i gets
    `args` with row i of each column's tensor at its position (and, as with clone_args, its
    own copy of every tensor among them)."""
    torch = codec.torch_loaded()
    if (torch is None or type(args) is not tuple or type(kwargs) is not tuple or type(n) is not int
            or type(columns) is not tuple or not columns):
        raise BridgeError("malformed call_rows request")
    rows = []
    for item in columns:
        if (type(item) is not tuple or len(item) != 2 or type(item[0]) is not int
                or not 0 <= item[0] < len(args) or not isinstance(item[1], torch.Tensor)
                or item[1].dim() == 0 or item[1].shape[0] != n):
            raise BridgeError("malformed call_rows column")
        rows.append((item[0], item[1].unbind(0)))

    def calls() -> Any:
        template = list(args)
        for i in range(n):
            for j, column in rows:
                template[j] = column[i]
            yield tuple(template), kwargs

    return _call_many(ep, fn, calls(), True)


_HARNESSES: dict[str, Any] = {}  # source -> its compiled code (a test runs its harness often)


def _harness(ep: WorkerEndpoint, source: Any, name: Any, args: Any) -> Any:
    """`name(*args)` of a module of the judge's, given as its source (the judge is trusted,
    as with the modules it pickles), run here next to the candidate's code: for a test of
    how that code behaves under real threads of one process, which calls from the judge's
    threads, one message at a time, would not interleave as finely. A plain result crosses
    as it is."""
    if type(source) is not str or type(name) is not str or type(args) is not tuple:
        raise BridgeError("malformed harness request")
    code = _HARNESSES.get(source)
    if code is None:
        code = _HARNESSES[source] = compile(source, "<the grader's harness>", "exec")
    namespace: dict[str, Any] = {"__name__": "kata_harness"}
    exec(code, namespace)  # the judge's own code, never the candidate's
    result = namespace[name](*args)
    return codec.Verbatim(result) if codec.plain_tree(result) else result


_OPS: dict[str, Callable[..., Any]] = {
    Op.HARNESS: _harness,
    Op.CALL_MANY: _call_many,
    Op.CALL_ROWS: _call_rows,
    Op.READ_ALL: _read_all,
    Op.CALL_THEN_READ: _call_then_read,
    Op.NEW_THEN_CALL: _new_then_call,
    Op.SCRIPT: _script,
    Op.GETATTR: lambda ep, obj, name: getattr(obj, name),
    Op.SETATTR: lambda ep, obj, name, value: setattr(obj, name, value),
    Op.DELATTR: lambda ep, obj, name: delattr(obj, name),
    Op.CALL: lambda ep, obj, args, kwargs: obj(*args, **dict(kwargs)),
    Op.CALLMETHOD: lambda ep, obj, name, args, kwargs: getattr(obj, name)(*args, **dict(kwargs)),
    Op.LEN: lambda ep, obj: len(obj),
    Op.ITER: _iter,
    Op.NEXT: lambda ep, obj: next(obj),
    Op.GETITEM: lambda ep, obj, key: obj[key],
    Op.SETITEM: lambda ep, obj, key, value: operator.setitem(obj, key, value),
    Op.DELITEM: lambda ep, obj, key: operator.delitem(obj, key),
    Op.CONTAINS: lambda ep, obj, key: key in obj,
    Op.BOOL: lambda ep, obj: bool(obj),
    Op.INT: lambda ep, obj: int(obj),
    Op.FLOAT: lambda ep, obj: float(obj),
    Op.INDEX: lambda ep, obj: operator.index(obj),
    Op.ISINSTANCE: lambda ep, obj, cls: isinstance(obj, cls),
    Op.ISSUBCLASS: lambda ep, obj, cls: issubclass(obj, cls),
    Op.DIR: lambda ep, obj: [str(n) for n in dir(obj)][:10_000],
    Op.REPR: lambda ep, obj: repr(obj)[:2000],
    Op.STR: lambda ep, obj: str(obj)[:2000],
    Op.BACKWARD: lambda ep, handle, grad, sids: ep.backward(handle, grad, sids),
    Op.RESET: lambda ep: ep.reset(),
    Op.PING: lambda ep: "pong",
    Op.NOOP: lambda ep, *payload: None,
    Op.SPIN: lambda ep, seconds: ep.set_spin(seconds),
    Op.STATS: lambda ep: {"shared": len(ep.registry.objects), "handles": len(ep.handles),
                        "sids": sorted(ep.registry.objects)[:50]},
}
assert set(_OPS) == {name for name, row in OPS.items() if row.direction == JUDGE_TO_WORKER}, \
    "every operation the worker runs is in schema.OPS"


# ------------------------------------------------------------------------ serving


def serve(endpoint: WorkerEndpoint, broker: socket.socket | None) -> None:
    """Answer the judge until it hangs up; extra channels (judge threads) each get a thread."""
    if broker is not None:
        threading.Thread(target=_accept_channels, args=(endpoint, broker), daemon=True).start()
    _serve_channel(endpoint, endpoint.main)


def _accept_channels(endpoint: WorkerEndpoint, broker: socket.socket) -> None:
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(broker, 16, 4)
        except OSError:
            return
        if not fds:
            return
        for fd in fds:
            chan = FramedSocket(socket.socket(fileno=fd))
            threading.Thread(target=_serve_channel, args=(endpoint, chan), daemon=True).start()


def _serve_channel(endpoint: WorkerEndpoint, chan: FramedSocket) -> None:
    endpoint._local.channel = chan
    while True:
        try:
            msg = chan.recv()
        except (PeerClosed, WireError, OSError):
            return
        if type(msg) is not tuple or not msg or msg[0] != Msg.CALL:
            return
        endpoint.serve_one(chan, msg)


__all__ = ["Callback", "OutputCapture", "WorkerEndpoint", "serve", "unpickle_trusted", "sys"]
