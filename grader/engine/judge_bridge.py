"""The judge's side of the bridge: handles of the candidate's objects decoded as proxies
(proxy.py), callbacks for the suite's callables, autograd across the boundary, random-state
syncing, and the worker's share of measurements. What the test calls is told to an observer
(transcript.Recorder by default), which keeps the calls a snippet replays.

Nothing here runs candidate code: a proxy's every operation is a request to the worker,
and what comes back is decoded into plain values, tensors, or more proxies.
"""

from __future__ import annotations

import hashlib
import itertools
import socket
import threading
import time
import weakref
from typing import Any, Callable

from grader.engine.measure_check import add_share, decide
from grader.engine.proxy import RemoteMethod, RemoteObject, TypeInfo, type_info
from grader.engine.transcript import Call, Recorder, Transcript
from grader.engine.worker_cpu import CpuSample, WorkerCpu
from grader.worker import codec, modules
from grader.worker.bridge import Endpoint
from grader.worker.codec import BridgeError, no_modes
from grader.worker.schema import RNG_NOT_SYNCED, Op, Tag
from grader.worker.wire import FramedSocket, ReplyTooLarge, WireError


class WorkerCrashed(BaseException):
    """The worker process running the candidate's code died or broke the protocol. A
    BaseException: hypothesis must not shrink against a process that is gone."""


class RandomStateNotSynced(BridgeError, AssertionError):
    """The worker refused a call: it could not start from the judge's random state (the
    call's draws, and the seed its snippet prints, would not be the test's). An error of
    that test, raised where the call was made; an AssertionError so that its card shows this
    message as it is, not as something the candidate's code raised."""

    def __init__(self, worker_message: str) -> None:
        super().__init__(f"the grader could not sync the test's random state into your code's process, "
                         f"so the call was not made ({worker_message}); grade again")


class ReplyRefused(WorkerCrashed):
    """The worker sent a reply the judge would not rebuild (over its decode budget): the
    worker is replaced, as after a crash."""


class HungFunction(BaseException):
    """A call into the candidate's code by the way an earlier test of this grade entered it
    and hung (the same function, method of a class, or instance call): not sent, and the test
    fails at once instead of waiting the hang out again and restarting the worker after it.
    A BaseException, as a timeout is: hypothesis must not shrink against it. args: (the
    HangSite)."""

    @property
    def site(self) -> "HangSite":
        return self.args[0]


class HangSite:
    """Where a test's call was cut as a hang: the innermost function of the candidate's and
    its line, the test, and the card's text of where the code was."""

    __slots__ = ("function", "line", "test", "where")

    def __init__(self, function: str, line: int, test: str, where: str) -> None:
        self.function, self.line, self.test, self.where = function, line, test, where


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
        # Told of every call into the candidate's code (see transcript.Recorder).
        self.observer: Recorder = Recorder()
        self.module_proxies: list[RemoteObject] = []
        # When the outermost call now waiting on the worker began (time.monotonic()), or None:
        # the judge's per-call time limit reads it.
        self.call_since: float | None = None
        self.call_stats = CallStats()  # the judge session puts its own here (one figure a test)
        self.recording: Call | None = None  # the observer's entry for the call being sent
        # The way into the candidate's code, by name, of a callable fetched by getattr:
        # handle -> "attention" (of the module), "PagedKVCacheAllocator.allocate" (bound).
        self.callable_names: dict[int, str] = {}
        # The entry (see entry_of) of the outermost call under way or cut, and the judge session's
        # entries a test hung in -> where (filled by judge_report): a call by the same entry
        # is refused (HungFunction), the worker untouched.
        self.entered: str | None = None
        self.hung_functions: dict[str, HangSite] = {}
        self.active = 0  # requests under way, on every channel (guarded by the registry's lock)

    @property
    def transcript(self) -> Transcript:
        return self.observer.transcript

    # ---------------------------------------------------------------- requests

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
        entry = self.entry_of(op, args)
        if entry is not None and entry in self.hung_functions:
            raise HungFunction(self.hung_functions[entry])
        if op in (Op.NEW_THEN_CALL, Op.SCRIPT):  # more ways in than its entry: each is checked
            for way in self._ways_in(op, args):
                if way in self.hung_functions:
                    raise HungFunction(self.hung_functions[way])
        # (An efficiency test's workload is not a reproduction: nothing of it is recorded.)
        call = self.observer.started(op, args) if not self.measure_kinds else None
        self.recording = call
        outermost, t0 = self.in_flight is None, time.monotonic()
        if outermost:
            self.call_since, self.entered = t0, entry
        with self.registry.lock:
            self.active += 1
        try:
            result = super().request(op, *args)
        except BaseException as exc:
            if call is not None:
                self.observer.raised(call, exc)
            elif op == Op.SCRIPT and not self.measure_kinds:
                self.observer.cut_script(args, exc)
            if outermost and isinstance(exc, Exception):
                self.entered = None  # it returned (by raising): only a cut call stays entered
            if isinstance(exc, RandomStateNotSynced):
                self.rng_synced = None  # the next call sends the state again
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
        if call is not None:
            self.observer.returned(call, op, result)
        if outermost:
            self.entered = None
        if op == Op.GETATTR and isinstance(result, RemoteObject) and result._kata_type.is_callable \
                and isinstance(args[0], RemoteObject) and isinstance(args[1], str):
            owner = args[0]._kata_type.qualname
            self.callable_names[result._kata_handle] = args[1] if owner == "module" else f"{owner}.{args[1]}"
        return result

    def _ways_in(self, op: str, args: tuple) -> list[str]:
        """Each entry (see entry_of) by which a new_then_call or a script enters the
        candidate's code: its constructors' and its methods', in order."""
        if op == Op.NEW_THEN_CALL:
            calls = [("new", args[1], args[2])] if len(args) > 2 else []
        else:
            calls = []
            for entry in (args[1] if len(args) > 1 and type(args[1]) is tuple else ()):
                if type(entry) is tuple and len(entry) > 1 and entry[0] == "repeat":
                    entry = entry[1]
                if type(entry) is tuple and len(entry) > 2 and entry[0] in ("call", "new"):
                    calls.append((entry[0], entry[1], entry[2]))
        ways = []
        for kind, name, cls in calls:
            if kind == "new":
                way = self.entry_of(Op.CALL, (cls,))
                if way is not None:
                    ways.append(way)
            way = self.entry_of(Op.CALLMETHOD, (args[0], name))
            if way is not None:
                ways.append(way)
        return ways

    def entry_of(self, op: str, args: tuple) -> str | None:
        """How a call request enters the candidate's code, named so that the same way in
        has the same name in every worker of the grade: "PagedKVCacheAllocator.allocate" (a
        method), "attention" or "PagedKVCacheAllocator" (a function or class of the module,
        by the attribute it was fetched as), "MultiHeadAttention.__call__" (an instance
        called). None for a request that calls nothing, or calls what has no such name."""
        target = args[0] if args else None
        if not isinstance(target, RemoteObject):
            return None
        if op in (Op.CALLMETHOD, Op.CALL_THEN_READ, Op.NEW_THEN_CALL):  # (the last: its method)
            return f"{target._kata_type.qualname}.{args[1]}" if isinstance(args[1], str) else None
        if op == Op.SCRIPT:  # its last entry's method (a trace's step)
            ways = [way for way in self._ways_in(op, args) if way.startswith(target._kata_type.qualname + ".")]
            return ways[-1] if ways else None
        if op not in (Op.CALL, Op.CALL_MANY, Op.CALL_ROWS):
            return None
        named = self.callable_names.get(target._kata_handle)
        if named is not None or target._kata_type.is_class:
            return named
        return f"{target._kata_type.qualname}.__call__"

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
                    self.observer.seeded(self.recording, seed)
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
        self.measure_start = self.cpu.sample() if exact and self.cpu is not None else None

    def end_measure(self) -> tuple[dict[str, Any], float]:
        """The worker's share as the verdict may use it (grader/engine/measure_check.py),
        and the judge's own CPU seconds spent on the transport."""
        end = self.cpu.sample() if self.measure_start is not None and self.cpu is not None else None
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
        self._request(Op.NOOP, args)
        after, size = self.cpu.sample(), self._channel_bytes() - size
        if before is None or after is None:
            return 0.0, size
        return max(after.process_s - before.process_s, 0.0), size

    # ---------------------------------------------------------------- reset

    def reset(self) -> None:
        """Between tests: forget every shared object, proxy and callback, on both sides."""
        if not self.broken:
            self.request(Op.RESET)
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
        self.observer.reset()

    # ---------------------------------------------------------------- encode (judge -> worker)

    def encode(self, value: Any, depth: int = 0) -> Any:
        # The two values nearly every request carries, first: the candidate object it is
        # about, and a tuple of plain arguments (which crosses in one piece: the worker
        # takes the judge's verbatim trees as they come).
        t = type(value)
        if t is RemoteObject:
            return (Tag.HANDLE_REF, object.__getattribute__(value, "_kata_handle"))
        if t is tuple and all(map(_PLAIN_TYPES.__contains__, map(type, value))):
            return (Tag.VERBATIM, value)
        return super().encode(value, depth)

    def encode_other(self, value: Any, depth: int) -> Any:
        # (A RemoteObject never gets here: encode takes it first.)
        if isinstance(value, RemoteMethod):
            return (Tag.BOUND_METHOD, value._obj._kata_handle, value._name)
        if modules.is_module(value):
            return modules.encode_module(self, value, depth)
        if callable(value):
            return (Tag.CALLBACK, self.export_callback(value))
        raise BridgeError(f"the suite passed a {type(value).__name__} to the candidate's code; "
                          "only plain data, tensors, generators, torch.nn modules and callables cross")

    def export_callback(self, fn: Callable) -> int:
        handle = self.callback_ids.get(id(fn))
        if handle is None or self.callbacks.get(handle) is not fn:
            handle = next(self.handle_ids)
            self.callbacks[handle] = fn
            self.callback_ids[id(fn)] = handle
        return handle

    def encode_content(self, sid: int, obj: Any, depth: int) -> Any:
        if modules.is_module(obj):
            return modules.encode_module_state(self, sid, obj, depth)
        return super().encode_content(sid, obj, depth)

    # ---------------------------------------------------------------- decode (worker -> judge)

    def _d_proxy(self, tree: tuple, depth: int) -> Any:
        _, handle, tid, info = tree
        if type(handle) is not int or type(tid) is not int:
            raise WireError("malformed handle")
        if info is not None:
            self.charge(4096)
            self.types[tid] = type_info(info)
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
        fn = self.callbacks.get(tree[1])
        if fn is None:
            raise WireError("a reference to an unknown callback")
        return fn

    def finish_tensor(self, value: Any, requires_grad: bool, is_param: bool, grad: Any, extra: Any) -> Any:
        if type(extra) is int and requires_grad:
            return remote_autograd_output(self, extra, value)
        return super().finish_tensor(value, requires_grad, is_param, grad, None)

    def _d_exception(self, tree: tuple, depth: int) -> Any:
        return self.decode_exception(tree[1])

    DECODERS: dict[str, Callable[..., Any]] = {**Endpoint.DECODERS, Tag.HANDLE: _d_proxy, Tag.CALLBACK_REF: _d_callback,
                Tag.EXCEPTION_VALUE: _d_exception, **modules.JUDGE_DECODERS}

    # ---------------------------------------------------------------- callbacks in

    def run_op(self, op: Any, args: Any, ctx: Any) -> Any:
        if op != Op.CALLBACK or type(args) is not list or len(args) != 3:
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
        exc._kata_token = token  # type: ignore[attr-defined]  # read back by decode_exception
        return super().encode_exception(exc)

    def decode_exception(self, body: Any) -> BaseException:
        exc = super().decode_exception(body)
        token = getattr(exc, "_kata_token", None)
        original = self.errors_by_token.get(token) if token is not None else None
        if original is not None:
            return original
        if type(exc).__name__ == RNG_NOT_SYNCED and type(exc).__module__ == "grader.worker.serve":
            return RandomStateNotSynced(str(exc))
        return exc


# Arguments that may cross verbatim (no handle or shared object).
_PLAIN_TYPES = frozenset(codec.PLAIN)
CALIBRATION_MESSAGES = 16
MAX_OUTPUT_CHARS = 64_000  # the most printed text one reply may carry (the worker's own cap a test)

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
                deltas = endpoint.request(Op.BACKWARD, handle, grad.detach(), sids)
                if type(deltas) is not list or len(deltas) != len(sids):
                    deltas = [None] * len(sids)
                out = []
                for delta, (shape, dtype) in zip(deltas, ctx.shapes):
                    ok = isinstance(delta, torch.Tensor) and delta.shape == shape
                    out.append(delta.to(dtype) if ok else None)
                return (None, None, None, *out)

        _REMOTE_BACKWARD = RemoteBackward
    return _REMOTE_BACKWARD
