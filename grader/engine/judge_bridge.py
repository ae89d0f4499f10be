"""The judge's side of the bridge: proxies for the candidate's objects, callbacks for the
suite's callables, autograd across the boundary, and the worker's share of measurements.

Nothing here runs candidate code: a proxy's every operation is a request to the worker,
and what comes back is decoded into plain values, tensors, or more proxies.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import pickle
import socket
import sys
import threading
import time
import weakref
from typing import Any, Callable

from grader.engine.measure_check import add_share, decide
from grader.engine.transcript import Call, Transcript, current_example, snapshot
from grader.engine.worker_cpu import CpuSample, WorkerCpu
from grader.worker import codec
from grader.worker.bridge import Endpoint
from grader.worker.codec import BridgeError, no_modes
from grader.worker.modules import apply_module_state, encode_module_state, module_members
from grader.worker.wire import FramedSocket, ReplyTooLarge, WireError


class WorkerCrashed(BaseException):
    """The worker process running the candidate's code died or broke the protocol. A
    BaseException: hypothesis must not shrink against a process that is gone."""


class ReplyRefused(WorkerCrashed):
    """The worker sent a reply the judge would not rebuild (over its decode budget): the
    worker is replaced, as after a crash."""


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
        value = self._kata_bridge.request("getattr", self, name)
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
            self._kata_bridge.request("setattr", self, name, value)

    def __delattr__(self, name: str) -> None:
        if self._kata_cache is not None:
            self._kata_cache.clear()
        self._kata_bridge.request("delattr", self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._kata_bridge.request("call", self, args, tuple(kwargs.items()))

    def __len__(self) -> int:
        return _typed(self._kata_bridge.request("len", self), int, "len()")

    def __iter__(self) -> Any:
        return iter(_typed(self._kata_bridge.request("iter", self), list, "iter()"))

    def __next__(self) -> Any:
        return self._kata_bridge.request("next", self)

    def __getitem__(self, key: Any) -> Any:
        return self._kata_bridge.request("getitem", self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._kata_bridge.request("setitem", self, key, value)

    def __delitem__(self, key: Any) -> None:
        self._kata_bridge.request("delitem", self, key)

    def __contains__(self, key: Any) -> bool:
        return _typed(self._kata_bridge.request("contains", self, key), bool, "in")

    def __bool__(self) -> bool:
        return _typed(self._kata_bridge.request("bool", self), bool, "bool()")

    def __int__(self) -> int:
        return _typed(self._kata_bridge.request("int", self), int, "int()")

    def __float__(self) -> float:
        return _typed(self._kata_bridge.request("float", self), float, "float()")

    def __index__(self) -> int:
        return _typed(self._kata_bridge.request("index", self), int, "index")

    def __instancecheck__(self, obj: Any) -> bool:
        return _typed(self._kata_bridge.request("isinstance", obj, self), bool, "isinstance()")

    def __subclasscheck__(self, cls: Any) -> bool:
        return _typed(self._kata_bridge.request("issubclass", cls, self), bool, "issubclass()")

    def __dir__(self) -> list[str]:
        return _typed(self._kata_bridge.request("dir", self), list, "dir()")

    def __repr__(self) -> str:
        try:
            text = self._kata_bridge.request("repr", self)
        except BaseException:  # noqa: BLE001 - a repr must not fail a report
            text = None
        return text if isinstance(text, str) else f"<{self._kata_type.qualname} object of your code>"

    def __str__(self) -> str:
        try:
            text = self._kata_bridge.request("str", self)
        except BaseException:  # noqa: BLE001
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
        return self._obj._kata_bridge.request("callmethod", self._obj, self._name, args,
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
    calls = [(tuple(args), tuple(dict(kwargs).items())) for args, kwargs in calls]
    if isinstance(fn, RemoteMethod):
        fn = fn._obj._kata_bridge.request("getattr", fn._obj, fn._name)
    if isinstance(fn, RemoteObject):
        bridge = fn._kata_bridge
        rows = _as_rows(calls) if clone_args else None
        if rows is not None:
            got = bridge.request("call_rows", fn, *rows)
        else:
            if clone_args:
                calls = _single_use_tensors_as_copies(calls)
            got = bridge.request("call_many", fn, calls, clone_args)
        if type(got) is not list or len(got) != len(calls):
            raise TypeError("call_many: the worker's answer does not fit the calls")
        return got
    return [fn(*(codec.clone_tensors(args) if clone_args else args), **dict(kwargs)) for args, kwargs in calls]


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
    return bridge.request("harness", source, fn.__name__, args)


def read_all(obj: Any, reads: list[tuple[str, tuple | None]]) -> list[tuple[bool, Any]]:
    """For each (name, args): obj.name(*args), or the attribute obj.name when args is None;
    [(True, value) or (False, exception)] in order. One request when obj is the candidate's."""
    if isinstance(obj, RemoteObject):
        outcomes = obj._kata_bridge.request("read_all", obj, _wire_reads(reads))
        if type(outcomes) is not list or len(outcomes) != len(reads) or not all(map(_outcome_shape, outcomes)):
            raise TypeError("read_all: the worker's answer does not fit the reads")
        return outcomes
    out: list[tuple[bool, Any]] = []
    for name, args in reads:
        try:
            out.append((True, getattr(obj, name) if args is None else getattr(obj, name)(*args)))
        except Exception as exc:  # noqa: BLE001
            out.append((False, exc))
    return out


def call_then_read(obj: Any, name: str, args: tuple, reads: list[tuple[str, tuple | None]] = (),
                   result_reads: list[tuple[str, tuple | None]] = ()) -> tuple:
    """obj.name(*args), then `result_reads` on what it returned and `reads` on obj, as
    read_all makes them, whatever the call did: ((True, value) or (False, exception), the
    reads' outcomes, the result reads' outcomes; none of those when the call raised). One
    request when obj is the candidate's: a lockstep step and the state it leaves."""
    if isinstance(obj, RemoteObject):
        answer = obj._kata_bridge.request("call_then_read", obj, name, tuple(args), (),
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


# ------------------------------------------------------------------------ endpoint


class JudgeEndpoint(Endpoint):
    ROLE = "judge"
    DECODE_FACTOR = 4  # what a worker's message may make the judge build (see Endpoint)
    IMPORTS_TORCH_FOR_PEER = False

    def __init__(self, main: FramedSocket, broker: socket.socket,
                 on_output: Callable[[str, int], None] | None = None) -> None:
        super().__init__(main, sign=+1)
        self.broker = broker
        self.broker_lock = threading.Lock()
        self.extra_channels: list[FramedSocket] = []
        self.proxies: "weakref.WeakValueDictionary[int, RemoteObject]" = weakref.WeakValueDictionary()
        self.types: dict[int, TypeInfo] = {}
        self.callbacks: dict[int, Callable] = {}
        self.callback_ids: dict[int, int] = {}
        self.handle_ids = itertools.count(1)
        self.released_handles: list[int] = []
        self.errors_by_token: dict[int, BaseException] = {}
        self.on_output = on_output or (lambda text, dropped: None)
        self.dead_sids: list[int] = []
        self.rng_synced: bytes | None = None
        self.measure_kinds: tuple[str, ...] | None = None
        self.measure_share: dict[str, Any] = {}
        self.measure_waited = 0.0
        # The worker's CPU as the kernel counts it (set by whoever started the worker), and
        # what must hold before it is read: `keep_beside()` puts the worker on the judge's
        # CPU and says whether it did (see grader/engine/worker_cpu.py).
        self.cpu: WorkerCpu | None = None
        self.keep_beside: Callable[[], bool] | None = None
        # The worker's CPU for the transport of a measurement: per message, per byte.
        self.transport_cost: tuple[float, float] | None = None
        self.measure_start: CpuSample | None = None
        self.measure_messages = 0
        self.measure_bytes = 0
        self.transcript = Transcript()
        self.module_proxies: list[RemoteObject] = []
        # When the outermost call now waiting on the worker began (time.monotonic()), or None:
        # the judge's per-call time limit reads it.
        self.call_since: float | None = None
        self.call_stats = CallStats()  # the judge session puts its own here (one figure a test)
        self.recording: Call | None = None  # the transcript's entry for the call being sent
        self.active = 0  # requests under way, on every channel (guarded by the registry's lock)

    # ---------------------------------------------------------------- the transcript

    def request(self, op: str, *args: Any) -> Any:
        if not self.measure_kinds:
            return self._request(op, args)
        # All of it is transport for an efficiency test (grader/worker/measure.py), the
        # transcript's copies of the arguments too: only what each side executes is timed.
        self.measure_messages += 1
        c0, waited0 = time.thread_time(), self.waited_cpu_s
        try:
            return self._request(op, args)
        finally:
            self.waited_cpu_s = waited0 + (time.thread_time() - c0)

    def _request(self, op: str, args: tuple) -> Any:
        call = self._record(op, args) if op in _RECORDED else None
        self.recording = call
        outermost, t0 = self.in_flight is None, time.monotonic()
        if outermost:
            self.call_since = t0
        with self.registry.lock:
            self.active += 1
        try:
            result = super().request(op, *args)
        except BaseException as exc:
            if call is not None:
                call.note_raised(exc)
            raise
        finally:
            with self.registry.lock:
                self.active -= 1
            if outermost:
                took = time.monotonic() - t0
                if self.call_since == t0:  # (another thread's call may have started since)
                    self.call_since = None
                if took > self.call_stats.longest_s:
                    self.call_stats.longest_s = took
        if call is not None and op == "call_then_read" and type(result) is tuple and result:
            ok, value = result[0] if type(result[0]) is tuple and len(result[0]) == 2 else (True, None)
            if not ok:
                call.note_raised(value)
            elif isinstance(value, RemoteObject):
                call.result = value
        elif call is not None and isinstance(result, RemoteObject):
            call.result = result
        return result

    def _record(self, op: str, args: tuple) -> Call | None:
        if self.measure_kinds:
            return None  # an efficiency test's workload is not a reproduction
        self.transcript.start(current_example())
        try:
            if op == "call":
                call = Call(op, args[0], None, snapshot(args[1]), snapshot(args[2]))
            elif op in ("callmethod", "call_then_read"):  # (reads: printed after the last call only)
                call = Call("callmethod", args[0], args[1], snapshot(args[2]), snapshot(args[3]),
                            reads=args[4] if op == "call_then_read" else None)
            else:  # getattr / setattr
                call = Call(op, args[0], args[1], snapshot(args[2:]), ())
        except Exception:  # noqa: BLE001 - a transcript must never fail a test
            return None
        self.transcript.add(call)
        return call

    def broken_error(self) -> BaseException:
        if isinstance(self.broken_by, ReplyTooLarge):
            return ReplyRefused(str(self.broken_by))
        return WorkerCrashed(self.broken or "the worker is gone")

    # ---------------------------------------------------------------- channels

    def new_channel(self) -> FramedSocket:
        ours, theirs = socket.socketpair()
        with self.broker_lock:
            socket.send_fds(self.broker, [b"c"], [theirs.fileno()])
        theirs.close()
        chan = FramedSocket(ours)
        self.extra_channels.append(chan)
        return chan

    def module(self, handle: Any) -> Any:
        with self.registry.lock, no_modes():
            return self.decode(handle)

    # ---------------------------------------------------------------- per call

    def call_context(self) -> Any:
        ctx: dict[str, Any] = {}
        torch = codec.torch_loaded()
        if torch is not None:
            ctx["grad"] = torch.is_grad_enabled()
            state = torch.default_generator.get_state().numpy().tobytes()
            if state != self.rng_synced:
                # The judge's random state moved (a new example, the suite drew numbers): both
                # sides restart from a seed derived from it, so that a snippet can say
                # `torch.manual_seed(seed)` where the candidate's code saw this state.
                seed = int.from_bytes(hashlib.blake2b(state, digest_size=4).digest(), "little")
                # The CPU generator alone: torch.manual_seed also queues a seeding of every
                # lazy accelerator module with a formatted stack (about 3 ms a call, and
                # kept), and the worker gets this state only.
                torch.default_generator.manual_seed(seed)
                state = torch.default_generator.get_state().numpy().tobytes()
                ctx["rng"] = state
                self.rng_synced = state
                if self.recording is not None:
                    self.recording.seed = seed
        if self.measure_kinds:
            ctx["measure"] = self.measure_kinds
        return ctx

    def on_extra(self, extra: Any) -> None:
        if type(extra) is not dict:
            return
        out = extra.get("out")
        if type(out) is str and out or extra.get("dropped"):
            out = out if type(out) is str else ""
            dropped = extra.get("dropped")
            dropped = dropped if type(dropped) is int and 0 <= dropped < 2**62 else 0
            # (the worker keeps at most this much a test; a forged reply may not send more)
            self.on_output(out[:MAX_OUTPUT_CHARS], dropped + max(len(out) - MAX_OUTPUT_CHARS, 0))
        # (The worker's random state after a call, extra["rng"], is not taken: nothing the
        # worker sends changes the judge's own state. The worker's stream goes on from it,
        # as in one process; the judge's next draw reseeds both sides, see call_context.)
        if self.measure_kinds and "measure" in extra:
            add_share(self.measure_share, extra["measure"])

    def collects_garbage(self) -> bool:
        # With several channels, an answer in flight on one may still name what another
        # would release: collect only while this request is the only one under way (checked
        # under the registry's lock, which every request takes before it is sent).
        return self.active <= 1

    def note_dead(self, sids: list[int]) -> None:
        self.dead_sids.extend(sids)

    def collect_releases(self) -> list:
        handles, self.released_handles = self.released_handles, []
        sids, self.dead_sids = self.dead_sids, []
        return [sids, handles]

    # ---------------------------------------------------------------- measurement

    def begin_measure(self, kinds: tuple[str, ...]) -> None:
        exact = self.cpu is not None and self.keep_beside is not None and self.keep_beside()
        if exact and "time" in kinds and self.transport_cost is None:
            self.transport_cost = self._calibrate()
        self.measure_kinds = tuple(kinds)
        self.measure_share = {}
        self.measure_waited = self.waited_cpu_s
        self.measure_messages = 0
        self.measure_bytes = -self._channel_bytes()
        self.measure_start = self.cpu.sample() if exact else None

    def end_measure(self) -> tuple[dict[str, Any], float]:
        """The worker's share as the verdict may use it (grader/engine/measure_check.py),
        and the judge's own CPU seconds spent on the transport."""
        end = self.cpu.sample() if self.measure_start is not None else None
        share, waited = self.measure_share, self.waited_cpu_s - self.measure_waited
        per_message, per_byte = self.transport_cost or (0.0, 0.0)
        transport_s = self.measure_messages * per_message + (self.measure_bytes + self._channel_bytes()) * per_byte
        kinds, start = self.measure_kinds or (), self.measure_start
        self.measure_kinds, self.measure_share, self.measure_start = None, {}, None
        return decide(share, kinds, start, end, transport_s), waited

    def _channel_bytes(self) -> int:
        chan = self.channel()
        return chan.bytes_sent + chan.bytes_received

    def _calibrate(self) -> tuple[float, float]:
        """What the transport of a measurement costs the worker: CPU seconds per message
        (calls that run nothing of the candidate's) and per byte of the frames (the same
        call carrying many small numbers, the dearest data to decode per byte). The lower
        quartile of a few of each, so that an interrupted one does not count."""
        payload = tuple(range(50_000))
        self.measure_kinds = ("time",)
        try:
            empty = sorted(self._transport_sample(()) for _ in range(CALIBRATION_MESSAGES))
            full = sorted(self._transport_sample((payload,)) for _ in range(CALIBRATION_MESSAGES // 4))
        finally:
            self.measure_kinds, self.measure_share = None, {}
        per_message = empty[len(empty) // 4][0]
        cost, size = full[len(full) // 4]
        return per_message, max(cost - per_message, 0.0) / max(size - empty[0][1], 1)

    def _transport_sample(self, args: tuple) -> tuple[float, int]:
        """(the worker's CPU seconds, the frames' bytes) of one measured call of "noop"."""
        assert self.cpu is not None
        before, size = self.cpu.sample(), self._channel_bytes()
        self._request("noop", args)
        after, size = self.cpu.sample(), self._channel_bytes() - size
        if before is None or after is None:
            return 0.0, size
        return max(after.process_s - before.process_s, 0.0), size

    # ---------------------------------------------------------------- reset

    def reset(self) -> None:
        """Between tests: forget every shared object, proxy and callback, on both sides."""
        if not self.broken:
            self.request("reset")
        for chan in self.extra_channels:
            chan.close()
        self.extra_channels.clear()
        self._local.channel = self.main
        self.registry.clear()
        for proxy in self.module_proxies:
            proxy._kata_cache.clear()  # the worker's handles start afresh
        self.callbacks.clear()
        self.callback_ids.clear()
        self.errors_by_token.clear()
        self.released_handles.clear()
        self.dead_sids.clear()
        self.transcript = Transcript()

    # ---------------------------------------------------------------- encode (judge -> worker)

    def encode(self, value: Any, depth: int = 0) -> Any:
        # The two values nearly every request carries, first: the candidate object it is
        # about, and a tuple of plain arguments (which crosses in one piece: the worker
        # takes the judge's verbatim trees as they come).
        t = type(value)
        if t is RemoteObject:
            return ("r", object.__getattribute__(value, "_kata_handle"))
        if t is tuple and all(map(_PLAIN_TYPES.__contains__, map(type, value))):
            return ("V", value)
        return super().encode(value, depth)

    def encode_other(self, value: Any, depth: int) -> Any:
        # (A RemoteObject never gets here: encode takes it first.)
        if isinstance(value, RemoteMethod):
            return ("rm", value._obj._kata_handle, value._name)
        torch = codec.torch_loaded()
        if torch is not None and isinstance(value, torch.nn.Module):
            return self.encode_module(value, depth)
        if callable(value):
            return ("C", self.export_callback(value))
        raise BridgeError(f"the suite passed a {type(value).__name__} to the candidate's code; "
                          "only plain data, tensors, generators, torch.nn modules and callables cross")

    def export_callback(self, fn: Callable) -> int:
        handle = self.callback_ids.get(id(fn))
        if handle is None or self.callbacks.get(handle) is not fn:
            handle = next(self.handle_ids)
            self.callbacks[handle] = fn
            self.callback_ids[id(fn)] = handle
        return handle

    def encode_module(self, module: Any, depth: int) -> Any:
        reg = self.registry
        sid = reg.sid_of(module)
        if sid is not None:
            return self.encode_shared(module, depth=depth)
        sid = reg.new_sid()
        reg.put(sid, module)
        members = []
        for kind, name, tensor in module_members(module):
            tsid = reg.sid_of(tensor)
            if tsid is None:
                tsid = reg.new_sid()
                reg.put(tsid, tensor)
            reg.mark_synced(tsid, tensor)
            members.append((kind, name, tsid))
        pickled = pickle.dumps(module, protocol=5)
        reg.mark_synced(sid, module)
        return ("M", sid, pickled, members)

    def encode_content(self, sid: int, obj: Any, depth: int) -> Any:
        torch = codec.torch_loaded()
        if torch is not None and isinstance(obj, torch.nn.Module):
            return encode_module_state(self, sid, obj, depth)
        return super().encode_content(sid, obj, depth)

    # ---------------------------------------------------------------- decode (worker -> judge)

    def _d_proxy(self, tree: tuple, depth: int) -> Any:
        if len(tree) != 4 or type(tree[1]) is not int or type(tree[2]) is not int:
            raise WireError("malformed handle")
        _, handle, tid, info = tree
        if info is not None:
            self.charge(4096)
            self.types[tid] = _type_info(info)
        if tid not in self.types:
            raise WireError("a handle of an unknown type")
        proxy = self.proxies.get(handle)
        if proxy is None:
            proxy = object.__new__(RemoteObject)
            proxy._kata_bridge = self
            proxy._kata_handle = handle
            proxy._kata_type = self.types[tid]
            proxy._kata_cache = {} if self.types[tid].qualname == "module" else None
            if proxy._kata_cache is not None:
                self.module_proxies.append(proxy)
            self.proxies[handle] = proxy
            weakref.finalize(proxy, self.released_handles.append, handle)
        return proxy

    def _d_callback(self, tree: tuple, depth: int) -> Any:
        fn = self.callbacks.get(tree[1]) if len(tree) == 2 else None
        if fn is None:
            raise WireError("a reference to an unknown callback")
        return fn

    def _d_module_state(self, tree: tuple, depth: int) -> Any:
        return apply_module_state(self, tree, depth)

    def finish_tensor(self, value: Any, requires_grad: bool, is_param: bool, grad: Any, extra: Any) -> Any:
        if type(extra) is int and requires_grad:
            return remote_autograd_output(self, extra, value)
        return super().finish_tensor(value, requires_grad, is_param, grad, None)

    def _d_exception(self, tree: tuple, depth: int) -> Any:
        return self.decode_exception(tree[1]) if len(tree) == 2 else BridgeError("malformed exception")

    DECODERS = {**Endpoint.DECODERS, "R": _d_proxy, "c": _d_callback, "MU": _d_module_state,
                "EX": _d_exception}

    # ---------------------------------------------------------------- callbacks in

    def run_op(self, op: Any, args: Any, ctx: Any) -> Any:
        if op != "callback" or type(args) is not list or len(args) != 3:
            raise BridgeError("the worker may only call callbacks")
        fn, cargs, ckwargs = args
        if not callable(fn) or type(cargs) is not tuple or type(ckwargs) is not tuple:
            raise BridgeError("malformed callback")
        if self.measure_kinds:
            self.measure_messages += 1  # the worker's transport for it is not the candidate's
        return fn(*cargs, **_kwargs(ckwargs))

    def encode_exception(self, exc: BaseException) -> Any:
        # A judge exception (a suite's PropertyFailure in a callback) keeps its identity
        # through the worker: it comes back as itself, not as a copy.
        token = next(self.handle_ids)
        self.errors_by_token[token] = exc
        exc._kata_token = token
        return super().encode_exception(exc)

    def decode_exception(self, body: Any) -> BaseException:
        exc = super().decode_exception(body)
        original = self.errors_by_token.get(getattr(exc, "_kata_token", None))
        return original if original is not None else exc


_RECORDED = frozenset({"call", "callmethod", "call_then_read", "getattr", "setattr"})
CALIBRATION_MESSAGES = 16
MAX_OUTPUT_CHARS = 64_000  # the most printed text one reply may carry (the worker's own cap a test)
MAX_METHODS = 2_000  # the most method names of one of the candidate's classes the judge keeps

class CallStats:
    """The longest outermost call into the worker since its owner last reset it (the judge's
    session: per test, whichever worker served it): the reference's figure sets each test's
    per-call time limit (grader/engine/time_limits.py)."""

    __slots__ = ("longest_s",)

    def __init__(self) -> None:
        self.longest_s = 0.0


def _kwargs(pairs: tuple) -> dict[str, Any]:
    if not all(type(p) is tuple and len(p) == 2 and type(p[0]) is str for p in pairs):
        raise BridgeError("malformed keyword arguments")
    return dict(pairs)


def _type_info(info: Any) -> TypeInfo:
    if type(info) is not tuple or len(info) != 5:
        raise WireError("malformed type information")
    qualname, module, is_class, is_callable, methods = info
    return TypeInfo(codec.ensure_str(qualname, "a type name")[:200], codec.ensure_str(module, "a module")[:200],
                    bool(is_class), bool(is_callable),
                    frozenset(m[:200] for m in methods[:MAX_METHODS] if type(m) is str)
                    if type(methods) is list else frozenset())


# ------------------------------------------------------------------------ autograd


def remote_autograd_output(endpoint: JudgeEndpoint, handle: int, value: Any) -> Any:
    """A judge tensor equal to `value` whose backward pass runs in the worker: gradients
    flow to the judge tensors the candidate received (through autograd) and to the
    candidate's own parameters (in the worker)."""
    import torch

    reg = endpoint.registry
    sids = [sid for sid, obj in reg.objects.items()
            if sid > 0 and isinstance(obj, torch.Tensor) and obj.requires_grad]
    inputs = [reg.objects[sid] for sid in sids]
    anchor = torch.zeros((), requires_grad=True)  # so that the output always requires grad
    with torch.enable_grad():
        out = _remote_backward().apply(value, anchor, (endpoint, handle, sids), *inputs)
    # The worker keeps the graph as long as the judge's graph node lives (not the tensor:
    # `(out * w).sum().backward()` drops `out` before the backward pass reaches it).
    weakref.finalize(out.grad_fn, endpoint.released_handles.append, handle)
    return out


_REMOTE_BACKWARD: Any = None


def _remote_backward() -> Any:
    global _REMOTE_BACKWARD
    if _REMOTE_BACKWARD is None:
        import torch

        class RemoteBackward(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, value: Any, anchor: Any, where: Any, *inputs: Any) -> Any:
                ctx.where = where
                ctx.shapes = [(t.shape, t.dtype) for t in inputs]
                return value.clone()

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                endpoint, handle, sids = ctx.where
                deltas = endpoint.request("backward", handle, grad.detach(), sids)
                if type(deltas) is not list or len(deltas) != len(sids):
                    deltas = [None] * len(sids)
                out = []
                for delta, (shape, dtype) in zip(deltas, ctx.shapes):
                    ok = isinstance(delta, torch.Tensor) and delta.shape == shape
                    out.append(delta.to(dtype) if ok else None)
                return (None, None, None, *out)

        _REMOTE_BACKWARD = RemoteBackward
    return _REMOTE_BACKWARD
