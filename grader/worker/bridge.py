"""The protocol both sides of a grading run speak: calls, shared objects and exceptions.

One ``Endpoint`` per side (the judge's in ``grader.engine.judge_bridge``, the worker's in
``grader.worker.serve``). A **channel** is a connected socket used by one thread at a time:

    ("call", id, op, args, ctx, updates, releases)   -> the peer runs `op`
    ("ret",  id, value, updates, extra)              <- its result
    ("err",  id, exception, updates, extra)          <- or the exception it raised

While a side waits for its answer it serves the peer's nested calls on the same channel
(the worker calling a judge callback, the judge's callback calling back into the
candidate). `updates` carries every shared object changed in place since the last message;
`releases` (judge to worker) the ids the judge no longer holds.
"""

from __future__ import annotations

import builtins
import itertools
import sys
import threading
import time
from typing import Any, Callable

from . import codec
from .codec import PLAIN, BridgeError, Registry, TensorCopy, Verbatim, fingerprint, no_modes
from .wire import FramedSocket, PeerClosed, ReplyTooLarge, WireError

MAX_EXC_MESSAGE = 4000
_BUILTIN_EXCEPTIONS = {name: obj for name, obj in vars(builtins).items()
                       if isinstance(obj, type) and issubclass(obj, BaseException)}


class RemoteError(Exception):
    """Base of exception classes made on this side for a peer's own exception classes."""


class Endpoint:
    """What both sides share: the registry of shared objects, the codec, the call loop."""

    ROLE = "?"
    # Whether a verbatim tree from the peer is checked to be plain data (the judge checks
    # what a worker sends; a worker takes the judge's as it comes).
    VERIFY_VERBATIM = True
    # What one message from the peer may make this side build, in bytes: at least
    # DECODE_FLOOR, at most DECODE_FACTOR times the message's size on the wire, and never
    # more than DECODE_CAP (None: no bound; the judge bounds what a worker sends). A frame
    # can name one object many times (pickle's memo), and each naming would be rebuilt.
    DECODE_FACTOR: int | None = None
    # Whether a tensor from the peer may make this side import torch (the worker: the
    # judge's tensors are its arguments; the judge: only where its suite imported torch).
    IMPORTS_TORCH_FOR_PEER = True
    DECODE_FLOOR = 64 * 1024**2
    DECODE_CAP = 1024**3

    def __init__(self, main: FramedSocket, sign: int) -> None:
        self.registry = Registry(sign)
        self.main = main
        self._local = threading.local()
        self._local.channel = main
        self._ids = itertools.count(1)
        self.broken: str | None = None
        self.broken_by: BaseException | None = None  # what broke the connection
        self.last_call: tuple[str, tuple] | None = None
        self.in_flight: int | None = None  # the id of the request this side waits on
        self.interrupted_by: BaseException | None = None
        # This side's own CPU time inside its requests (the transport), counted while an
        # operation it runs is being measured (the worker's side of an efficiency test).
        self.waited_cpu_s = 0.0
        self.measuring = False

    # ---------------------------------------------------------------- calls out

    def channel(self) -> FramedSocket:
        chan = getattr(self._local, "channel", None)
        if chan is None:
            chan = self.new_channel()
            self._local.channel = chan
        return chan

    def new_channel(self) -> FramedSocket:  # pragma: no cover - overridden where threads may call
        raise BridgeError("this side opens no extra channels")

    def request(self, op: str, *args: Any) -> Any:
        if self.broken:
            self._fail()
        self.last_call = (op, args)
        if not self.measuring:
            return self._send_and_await(op, args)
        # The whole request is transport, encoding included: an efficiency test counts only
        # the time each side spends executing.
        c0 = time.thread_time()
        try:
            return self._send_and_await(op, args)
        finally:
            self.waited_cpu_s += time.thread_time() - c0

    def _send_and_await(self, op: str, args: tuple) -> Any:
        chan = self.channel()
        req_id = next(self._ids)
        with self.registry.lock, no_modes():  # nothing is sent if this fails
            payload = [self.encode(a) for a in args]
            msg = ("call", req_id, op, payload, self.call_context(), self.collect_updates(),
                   self.collect_releases())
        outer, self.in_flight = self.in_flight, req_id
        try:
            chan.send(msg)
            ok, value = self._await(chan, req_id)
        except (PeerClosed, WireError, OSError) as exc:
            self.broken = f"{type(exc).__name__}: {exc}"
            self.broken_by = exc
            self._fail()
        except BaseException as exc:
            # Interrupted mid-call (a timeout): the answer may still come, so the channel
            # can no longer be trusted to pair answers with calls.
            self.broken = self.broken or "interrupted while waiting for the other process"
            self.interrupted_by = self.interrupted_by or exc
            raise
        finally:
            self.in_flight = outer
        if ok:
            return value
        raise value

    def _fail(self) -> None:
        if self.interrupted_by is not None:  # later calls report the interruption itself
            raise self.interrupted_by
        raise self.broken_error() from None

    def _await(self, chan: FramedSocket, req_id: int) -> tuple[bool, Any]:
        while True:
            msg = chan.recv()
            if type(msg) is not tuple or not msg:
                raise WireError("a message must be a tuple")
            kind = msg[0]
            if kind == "call":
                self.serve_one(chan, msg)
                continue
            if kind not in ("ret", "err") or len(msg) != 5 or msg[1] != req_id:
                raise WireError(f"unexpected message {str(kind)[:20]!r}")
            _, _, body, updates, extra = msg
            with self.registry.lock, no_modes():
                self._local.budget = self._decode_budget(chan.last_frame_bytes)
                try:
                    self.apply_updates(updates)
                    self.on_extra(extra)
                    if kind == "ret":
                        return True, self.decode(body)
                    return False, self.decode_exception(body)
                except (WireError, BridgeError):
                    raise
                except Exception as exc:  # noqa: BLE001 - a value that does not decode
                    raise WireError(f"a value that cannot be rebuilt: {type(exc).__name__}: {exc}") from None
                finally:
                    self._local.budget = None

    def _decode_budget(self, frame_bytes: int) -> list | None:
        """[bytes this message may still make this side build, the message's size]."""
        if self.DECODE_FACTOR is None:
            return None
        allowed = min(max(self.DECODE_FLOOR, self.DECODE_FACTOR * frame_bytes), self.DECODE_CAP)
        return [allowed, frame_bytes, allowed]

    def charge(self, num_bytes: int) -> None:
        """Count what decoding is about to build against the message's budget."""
        budget = getattr(self._local, "budget", None)
        if budget is None:
            return
        budget[0] -= num_bytes
        if budget[0] < 0:
            raise ReplyTooLarge(
                f"a message of {budget[1] / 1e6:,.1f} MB would take more than "
                f"{budget[2] / 1e6:,.0f} MB to rebuild (at most {self.DECODE_FACTOR}x its size on "
                f"the wire, {self.DECODE_CAP / 2**30:g} GiB at most): refused")

    # ---------------------------------------------------------------- calls in

    def serve_one(self, chan: FramedSocket, msg: tuple) -> None:
        if len(msg) != 7:
            raise WireError("malformed call")
        _, req_id, op, payload, ctx, updates, releases = msg
        try:
            with self.registry.lock, no_modes():
                self.apply_releases(releases)
                self.apply_updates(updates)
                if type(payload) is not list:
                    raise WireError("malformed call")
                args = [self.decode(a) for a in payload]
            value = self.run_op(op, args, ctx)
            kind = "ret"
        except BaseException as exc:  # noqa: BLE001 - every failure goes back as a value
            kind, value = "err", exc
        with self.registry.lock, no_modes():
            try:
                body = self.encode(value) if kind == "ret" else self.encode_exception(value)
            except BaseException as exc:  # noqa: BLE001 - a result that cannot cross
                kind, body = "err", self.encode_exception(exc)
            reply = (kind, req_id, body, self.collect_updates(), self.reply_extra())
        chan.send(reply)

    def run_op(self, op: Any, args: Any, ctx: Any) -> Any:  # pragma: no cover - per side
        raise BridgeError(f"unknown operation {op!r}")

    def call_context(self) -> Any:
        return None

    def on_extra(self, extra: Any) -> None:
        return None

    def reply_extra(self) -> Any:
        return None

    def collect_releases(self) -> list:
        return []

    def apply_releases(self, releases: Any) -> None:
        return None

    def broken_error(self) -> BaseException:
        return BridgeError(f"the connection is broken ({self.broken})")

    # ---------------------------------------------------------------- shared objects

    def collect_updates(self) -> list:
        """Every registered object changed in place since it last crossed, re-encoded."""
        changed, dead = self.registry.scan(collect_garbage=self.collects_garbage())
        self.note_dead(dead)
        return [self.encode_shared(self.registry.objects[sid], force=True) for sid in changed]

    def collects_garbage(self) -> bool:
        return False

    def note_dead(self, sids: list[int]) -> None:
        return None

    def apply_updates(self, updates: Any) -> None:
        if type(updates) is not list:
            raise WireError("updates must be a list")
        for item in updates:
            self.decode(item)

    # ---------------------------------------------------------------- encode

    def encode(self, value: Any, depth: int = 0) -> Any:
        t = type(value)
        if t in PLAIN:
            return value
        if depth > codec.MAX_DEPTH:
            raise BridgeError("a value nested too deeply to cross")
        d = depth + 1
        if t is tuple:
            return ("T", [self.encode(v, d) for v in value])
        if t is Verbatim:
            return ("V", value.value)
        if t is TensorCopy:
            return self.encode_tensor(0, value.tensor, d)
        if t is list or t is dict or t is set:
            return self.encode_shared(value, depth=d)
        if t is frozenset:
            return ("F", [self.encode(v, d) for v in value])
        if t is complex:
            return ("J", value.real, value.imag)
        if t is slice:
            return ("SL", self.encode(value.start, d), self.encode(value.stop, d), self.encode(value.step, d))
        if value is Ellipsis:
            return ("EL",)
        if t is bytearray:
            return ("BA", bytes(value))
        torch = codec.torch_loaded()
        if torch is not None:
            if t is torch.Tensor or t is torch.nn.Parameter:
                return self.encode_shared(value, depth=d)
            if t is torch.dtype:
                return ("DT", str(value).replace("torch.", ""))
            if t is torch.device:
                return ("DV", str(value))
            if t is torch.Size:
                return ("SZ", [int(v) for v in value])
            if t is torch.Generator:
                return self.encode_shared(value, depth=d)
        if isinstance(value, tuple) and (hasattr(t, "_fields") or t.__module__ == "torch.return_types"):
            return ("T", [self.encode(v, d) for v in tuple(value)])
        # Subclasses of dict and list (OrderedDict, defaultdict, a state_dict) cross as plain
        # values: what arrives is a plain dict or list, never the subclass's behaviour.
        if isinstance(value, dict):
            return ("D0", [(self.encode(k, d), self.encode(v, d)) for k, v in dict.items(value)])
        if isinstance(value, list):
            return ("L0", [self.encode(v, d) for v in list.__iter__(value)])
        np = sys.modules.get("numpy")
        if np is not None and t is np.ndarray and value.dtype.kind in "biufc":
            arr = np.ascontiguousarray(value)
            return ("NP", arr.dtype.str, list(arr.shape), arr.tobytes())
        return self.encode_other(value, d)

    def encode_other(self, value: Any, depth: int) -> Any:  # pragma: no cover - per side
        raise BridgeError(f"a {type(value).__name__} cannot cross")

    def encode_shared(self, obj: Any, *, force: bool = False, depth: int = 0) -> Any:
        reg = self.registry
        sid = reg.sid_of(obj)
        if sid is not None and not force:
            fp = reg.fingerprints.get(sid)
            if fp is None or codec.same_fingerprint(fp, fingerprint(obj)):
                return ("=", sid)  # unchanged, or being encoded right now (a cycle)
        if sid is None:
            sid = reg.new_sid()
            reg.put(sid, obj)
        reg.fingerprints[sid] = None  # a reference back to it while encoding is a cycle
        try:
            tree = self.encode_content(sid, obj, depth)
        finally:
            reg.mark_synced(sid, obj)
        return tree

    def encode_content(self, sid: int, obj: Any, depth: int) -> Any:
        t = type(obj)
        if t is list:
            return ("L", sid, [self.encode(v, depth) for v in obj])
        if t is dict:
            return ("D", sid, [(self.encode(k, depth), self.encode(v, depth)) for k, v in obj.items()])
        if t is set:
            return ("S", sid, [self.encode(v, depth) for v in obj])
        torch = codec.torch_loaded()
        if t is torch.Generator:
            state = obj.get_state().numpy().tobytes()
            return ("G", sid, obj.device.type, state)
        return self.encode_tensor(sid, obj, depth)

    def encode_tensor(self, sid: int, t: Any, depth: int, *, extra: Any = None) -> Any:
        dtype, shape, stride, data = codec.encode_tensor_data(t)
        grad = None
        if t.is_leaf and t.grad is not None and depth < codec.MAX_DEPTH:
            gd, gs, _, gdata = codec.encode_tensor_data(t.grad)
            grad = (gd, gs, gdata)
        return ("X", sid, dtype, shape, stride, data, t.device.type, bool(t.requires_grad),
                type(t) is not codec.torch_loaded().Tensor, grad, extra)

    # ---------------------------------------------------------------- decode

    def decode(self, tree: Any, depth: int = 0) -> Any:
        t = type(tree)
        if t in PLAIN:
            if t is str and len(tree) > codec.MAX_STR_CHARS:
                return tree[:codec.MAX_STR_CHARS]
            return tree
        if t is not tuple or not tree or depth > codec.MAX_DEPTH + 2:
            raise WireError("malformed value")
        tag = tree[0]
        handler = self.DECODERS.get(tag) if type(tag) is str else None
        if handler is None:
            raise WireError(f"unknown value tag {str(tag)[:10]!r}")
        return handler(self, tree, depth + 1)

    def _decode_items(self, items: Any, depth: int) -> list:
        if type(items) is not list:
            raise WireError("malformed sequence")
        self.charge(8 * len(items) + 64)
        return [self.decode(v, depth) for v in items]

    def _d_tuple(self, tree: tuple, depth: int) -> Any:
        return tuple(self._decode_items(tree[1], depth))

    def _d_frozenset(self, tree: tuple, depth: int) -> Any:
        return frozenset(self._decode_items(tree[1], depth))

    def _d_ref(self, tree: tuple, depth: int) -> Any:
        sid = tree[1]
        if type(sid) is not int or sid not in self.registry.objects:
            raise WireError("a reference to an unknown shared object")
        return self.registry.objects[sid]

    def _shared_target(self, sid: Any, make: Callable[[], Any]) -> tuple[Any, bool]:
        """The registered object for `sid`, or a new one registered under it."""
        if type(sid) is not int or sid == 0:
            raise WireError("malformed shared object id")
        obj = self.registry.objects.get(sid)
        if obj is not None:
            return obj, False
        obj = make()
        self.registry.put(sid, obj)
        return obj, True

    def _d_verbatim(self, tree: tuple, depth: int) -> Any:
        if len(tree) != 2 or (self.VERIFY_VERBATIM and not codec.plain_tree(tree[1])):
            raise WireError("a verbatim value that is not plain data")
        return tree[1]

    def _d_plain_list(self, tree: tuple, depth: int) -> Any:
        return self._decode_items(tree[1], depth)

    def _d_plain_dict(self, tree: tuple, depth: int) -> Any:
        if type(tree[1]) is not list:
            raise WireError("malformed dict")
        self.charge(32 * len(tree[1]) + 64)
        out = {}
        for pair in tree[1]:
            if type(pair) is not tuple or len(pair) != 2:
                raise WireError("malformed dict item")
            out[self.decode(pair[0], depth)] = self.decode(pair[1], depth)
        return out

    def _d_list(self, tree: tuple, depth: int) -> Any:
        obj, _ = self._shared_target(tree[1], list)
        items = self._decode_items(tree[2], depth)
        if type(obj) is not list:
            raise WireError("shared object changed kind")
        if not codec._shallow_same(obj, items):
            obj[:] = items
        self.registry.mark_synced(tree[1], obj)
        return obj

    def _d_dict(self, tree: tuple, depth: int) -> Any:
        obj, _ = self._shared_target(tree[1], dict)
        if type(obj) is not dict or type(tree[2]) is not list:
            raise WireError("malformed dict")
        self.charge(32 * len(tree[2]) + 64)
        pairs = []
        for pair in tree[2]:
            if type(pair) is not tuple or len(pair) != 2:
                raise WireError("malformed dict item")
            pairs.append((self.decode(pair[0], depth), self.decode(pair[1], depth)))
        obj.clear()
        obj.update(pairs)
        self.registry.mark_synced(tree[1], obj)
        return obj

    def _d_set(self, tree: tuple, depth: int) -> Any:
        obj, _ = self._shared_target(tree[1], set)
        items = self._decode_items(tree[2], depth)
        if type(obj) is not set:
            raise WireError("shared object changed kind")
        obj.clear()
        obj.update(items)
        self.registry.mark_synced(tree[1], obj)
        return obj

    def _d_tensor(self, tree: tuple, depth: int) -> Any:
        import torch

        if len(tree) != 11:
            raise WireError("malformed tensor")
        _, sid, dtype, shape, stride, data, device, requires_grad, is_param, grad, extra = tree
        self._needs_torch("a tensor")
        self.charge(len(data) + 256 if type(data) is bytes else 256)
        if type(grad) is tuple and len(grad) == 3 and type(grad[2]) is bytes:
            self.charge(len(grad[2]))
        value = codec.decode_tensor_data(dtype, shape, stride, data, device)
        grad_value = None
        if grad is not None:
            if type(grad) is not tuple or len(grad) != 3:
                raise WireError("malformed gradient")
            grad_value = codec.decode_tensor_data(grad[0], grad[1], None, grad[2], device)
        wants_grad = bool(requires_grad) and (value.is_floating_point() or value.is_complex())
        if sid == 0:
            return self.finish_tensor(value, wants_grad, bool(is_param), grad_value, extra)
        existing = self.registry.objects.get(sid)
        if existing is not None:
            if not isinstance(existing, torch.Tensor):
                raise WireError("shared object changed kind")
            codec.refresh_tensor(existing, value)
            if existing.is_leaf:
                if existing.requires_grad != wants_grad:
                    existing.requires_grad_(wants_grad)
                if grad_value is None or grad_value.shape == existing.shape:
                    existing.grad = grad_value
            self.registry.mark_synced(sid, existing)
            return existing
        tensor = self.finish_tensor(value, wants_grad, bool(is_param), grad_value, extra)
        self.registry.put(sid, tensor)
        self.registry.mark_synced(sid, tensor)
        return tensor

    def _needs_torch(self, what: str) -> None:
        """A side that has not imported torch takes no tensor: the judge of a kata without
        tensors (paged-kv) would otherwise import torch inside a call's time limit, and a
        limit that cut that import short would leave torch half-imported for every later
        test."""
        if not self.IMPORTS_TORCH_FOR_PEER and codec.torch_loaded() is None:
            raise BridgeError(f"your code returned {what}, and this kata has no tensors")

    def finish_tensor(self, value: Any, requires_grad: bool, is_param: bool, grad: Any, extra: Any) -> Any:
        import torch

        tensor = torch.nn.Parameter(value, requires_grad=requires_grad) if is_param \
            else value.requires_grad_(requires_grad)
        if grad is not None and grad.shape == tensor.shape and tensor.is_leaf:
            tensor.grad = grad
        return tensor

    def _d_generator(self, tree: tuple, depth: int) -> Any:
        import torch

        _, sid, device, state = tree
        if type(state) is not bytes or device not in ("cpu", "cuda"):
            raise WireError("malformed generator")
        self._needs_torch("a torch.Generator")
        self.charge(len(state) + 256)
        if device == "cuda" and not torch.cuda.is_available():
            device = "cpu"
        gen, _ = self._shared_target(sid, lambda: torch.Generator(device=device))
        if not isinstance(gen, torch.Generator):
            raise WireError("shared object changed kind")
        try:
            gen.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8).clone())
        except (RuntimeError, ValueError) as exc:
            raise BridgeError(f"a generator state that does not fit: {exc}") from None
        self.registry.mark_synced(sid, gen)
        return gen

    def _d_small(self, tree: tuple, depth: int) -> Any:
        tag = tree[0]
        if tag == "J":
            return complex(float(tree[1]), float(tree[2]))
        if tag == "SL":
            return slice(self.decode(tree[1], depth), self.decode(tree[2], depth), self.decode(tree[3], depth))
        if tag == "EL":
            return Ellipsis
        if tag == "BA":
            self.charge(len(tree[1]) if type(tree[1]) is bytes else 0)
            return bytearray(tree[1]) if type(tree[1]) is bytes else bytearray()
        if tag in ("DT", "DV", "SZ"):
            self._needs_torch("a torch " + {"DT": "dtype", "DV": "device", "SZ": "Size"}[tag])
        if tag == "DT":
            return codec.dtype_by_name(tree[1])
        if tag == "DV":
            import torch

            return torch.device(codec.ensure_str(tree[1], "a device")[:20])
        if tag == "SZ":
            import torch

            dims = tree[1]
            if type(dims) is not list or not all(type(d) is int for d in dims):
                raise WireError("malformed size")
            return torch.Size(dims)
        if tag == "NP":
            return self._d_numpy(tree)
        raise WireError("malformed value")  # pragma: no cover

    def _d_numpy(self, tree: tuple) -> Any:
        import numpy as np

        _, dtype, shape, data = tree
        try:
            dt = np.dtype(codec.ensure_str(dtype, "a dtype"))
        except TypeError as exc:
            raise WireError(f"bad numpy dtype: {exc}") from None
        if dt.kind not in "biufc" or type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
            raise WireError("malformed numpy array")
        import math

        if type(data) is not bytes or len(data) != math.prod(shape) * dt.itemsize:
            raise WireError("numpy data does not fit its shape")
        self.charge(len(data))
        return np.frombuffer(bytearray(data), dtype=dt).reshape(shape)

    DECODERS: dict[str, Callable[["Endpoint", tuple, int], Any]] = {
        "T": _d_tuple, "F": _d_frozenset, "=": _d_ref, "L": _d_list, "D": _d_dict, "S": _d_set,
        "L0": _d_plain_list, "D0": _d_plain_dict, "V": _d_verbatim,
        "X": _d_tensor, "G": _d_generator, "J": _d_small, "SL": _d_small, "EL": _d_small,
        "BA": _d_small, "DT": _d_small, "DV": _d_small, "SZ": _d_small, "NP": _d_small,
    }

    # ---------------------------------------------------------------- exceptions

    def encode_exception(self, exc: BaseException) -> Any:
        cls = type(exc)
        base = next((c for c in cls.__mro__ if _BUILTIN_EXCEPTIONS.get(c.__name__) is c), Exception)
        try:
            message = str(exc)
        except BaseException:  # noqa: BLE001 - a broken __str__ is still an exception
            message = f"<{cls.__name__} whose message could not be read>"
        args = [a if type(a) in PLAIN else _safe_repr(a) for a in getattr(exc, "args", ())][:8]
        return ("E", cls.__name__[:100], str(getattr(cls, "__module__", ""))[:100], base.__name__,
                args, message[:MAX_EXC_MESSAGE], self.exception_frames(exc),
                getattr(exc, "_kata_token", None))

    def exception_frames(self, exc: BaseException) -> list:
        return list(getattr(exc, "_kata_frames", []) or [])

    def decode_exception(self, body: Any) -> BaseException:
        if type(body) is not tuple or len(body) != 8 or body[0] != "E":
            return BridgeError("the other process sent a malformed exception")
        _, name, module, base_name, args, message, frames, token = body
        name, module = codec.ensure_str(name, "a name")[:100], codec.ensure_str(module, "a module")[:100]
        message = codec.ensure_str(message, "a message")[:MAX_EXC_MESSAGE]
        cls = exception_class(name, module, base_name)
        clean_args = [a if type(a) in PLAIN else "?" for a in args][:8] if type(args) is list else []
        try:
            exc = cls(*clean_args)
        except Exception:  # noqa: BLE001 - a class whose __init__ wants other arguments
            exc = cls(message)
        if str(exc) != message and cls is not KeyError:
            exc = _with_message(exc, message)
        exc._kata_frames = [tuple(f) for f in frames if type(f) is tuple and len(f) == 3][:20] \
            if type(frames) is list else []
        exc._kata_remote = True
        if token is not None:
            exc._kata_token = token
        return exc


_CLASSES: dict[tuple[str, str, str], type] = {}
_MAX_CLASSES = 256


class CandidateExit(RemoteError):
    """Stands for SystemExit, KeyboardInterrupt and GeneratorExit raised by the candidate:
    reported like any exception, never able to stop the process that receives it."""


def exception_class(name: str, module: str, base_name: Any) -> type:
    base = _BUILTIN_EXCEPTIONS.get(base_name) if type(base_name) is str else None
    if base is None or not issubclass(base, BaseException):
        base = Exception
    if not issubclass(base, Exception):  # SystemExit, KeyboardInterrupt, GeneratorExit, ...
        base = CandidateExit
    elif module == "builtins" and name == base.__name__:
        return base
    key = (module, name, base.__name__)
    cls = _CLASSES.get(key)
    if cls is None:
        if len(_CLASSES) >= _MAX_CLASSES:
            _CLASSES.clear()
        cls = type(name if name.isidentifier() else "CandidateError", (base,), {"__module__": module or "solution"})
        _CLASSES[key] = cls
    return cls


def _with_message(exc: BaseException, message: str) -> BaseException:
    """`exc` whose str() is `message` (a candidate class with its own __str__)."""
    cls = type(exc)
    try:
        sub = type(cls.__name__, (cls,), {"__str__": lambda self: self._kata_message,
                                          "__module__": cls.__module__})
        new = sub(*exc.args)
        new._kata_message = message
        return new
    except Exception:  # noqa: BLE001
        return exc


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)[:200]
    except BaseException:  # noqa: BLE001
        return f"<{type(value).__name__}>"
