"""The protocol both sides of a grading run speak: calls, shared objects and exceptions.

One ``Endpoint`` per side (the judge's in ``grader.engine.judge_bridge``, the worker's in
``grader.worker.serve``). The messages, value tags and operations are written down in
``schema.py``; this module encodes and decodes them.
"""

from __future__ import annotations

import builtins
import itertools
import threading
import time
from typing import Any, Callable, ClassVar

from . import codec, values
from .codec import PLAIN, BridgeError, Registry, TensorCopy, Verbatim, fingerprint, no_modes
from .schema import CALL, EXCEPTION, GRADIENT, MESSAGES, PAIR, SIZES, VALUES, Msg, ProtocolError, Tag, check
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
    # Per class: tag -> (decoder, the size of its layout), from DECODERS; type -> encoder, as met.
    _decode_table: ClassVar[dict[str, tuple[Callable[..., Any], int]]]
    _encoders: ClassVar[dict[type, Callable[..., Any]]]

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
            msg = (Msg.CALL, req_id, op, payload, self.call_context(), self.collect_updates(),
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
            if kind == Msg.CALL:
                self.serve_one(chan, msg)
                continue
            layout = MESSAGES.get(kind) if type(kind) is str else None  # (a call was served above)
            if layout is None or msg[1:2] != (req_id,):
                raise WireError(f"unexpected message {str(kind)[:20]!r}")
            _, _, body, updates, extra = check(msg, layout, WireError)
            with self.registry.lock, no_modes():
                self._local.budget = self._decode_budget(chan.last_frame_bytes)
                try:
                    self.apply_updates(updates)
                    self.on_extra(extra)
                    if kind == Msg.RET:
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
        _, req_id, op, payload, ctx, updates, releases = check(msg, CALL, WireError)
        try:
            with self.registry.lock, no_modes():
                self.apply_releases(releases)
                self.apply_updates(updates)
                if type(payload) is not list:
                    raise WireError("malformed call")
                args = [self.decode(a) for a in payload]
            value = self.run_op(op, args, ctx)
            kind = Msg.RET
        except BaseException as exc:  # noqa: BLE001 - every failure goes back as a value
            kind, value = Msg.ERR, exc
        with self.registry.lock, no_modes():
            try:
                body = self.encode(value) if kind == Msg.RET else self.encode_exception(value)
            except BaseException as exc:  # noqa: BLE001 - a result that cannot cross
                kind, body = Msg.ERR, self.encode_exception(exc)
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
        encoder = self._encoders.get(t)  # (one lookup: the value table's row, met before)
        if encoder is None:
            encoder = self._encoder_for(t)
        return encoder(self, value, depth + 1)

    @classmethod
    def _encoder_for(cls, t: type) -> Callable[["Endpoint", Any, int], Any]:
        """How a value of type `t` crosses: as a shared object of this side's, by its value
        table row's encoder, or (no row of its own) as encode_subclass says; kept per type."""
        row = values.exact(t)
        encoder = None if row is None else cls.SHARED.get(row.name) or row.encode
        encoder = encoder or Endpoint.encode_subclass
        cls._encoders[t] = encoder
        return encoder

    def encode_subclass(self, value: Any, d: int) -> Any:
        t = type(value)
        if isinstance(value, tuple) and (hasattr(t, "_fields") or t.__module__ == "torch.return_types"):
            return (Tag.TUPLE, [self.encode(v, d) for v in tuple(value)])
        # Subclasses of dict and list (OrderedDict, defaultdict, a state_dict) cross as plain
        # values: what arrives is a plain dict or list, never the subclass's behaviour.
        if isinstance(value, dict):
            return (Tag.DICT_COPY, [(self.encode(k, d), self.encode(v, d)) for k, v in dict.items(value)])
        if isinstance(value, list):
            return (Tag.LIST_COPY, [self.encode(v, d) for v in list.__iter__(value)])
        return self.encode_other(value, d)

    def _e_shared(self, value: Any, d: int) -> Any:
        return self.encode_shared(value, depth=d)

    # Value table rows whose values cross as shared objects (codec.Registry).
    SHARED: dict[str, Callable[["Endpoint", Any, int], Any]] = {
        "list": _e_shared, "dict": _e_shared, "set": _e_shared, "tensor": _e_shared, "generator": _e_shared}

    def encode_other(self, value: Any, depth: int) -> Any:  # pragma: no cover - per side
        raise BridgeError(f"a {type(value).__name__} cannot cross")

    def encode_shared(self, obj: Any, *, force: bool = False, depth: int = 0) -> Any:
        reg = self.registry
        sid = reg.sid_of(obj)
        if sid is not None and not force:
            fp = reg.fingerprints.get(sid)
            if fp is None or codec.same_fingerprint(fp, fingerprint(obj)):
                return (Tag.REF, sid)  # unchanged, or being encoded right now (a cycle)
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
            return (Tag.LIST, sid, [self.encode(v, depth) for v in obj])
        if t is dict:
            return (Tag.DICT, sid, [(self.encode(k, depth), self.encode(v, depth)) for k, v in obj.items()])
        if t is set:
            return (Tag.SET, sid, [self.encode(v, depth) for v in obj])
        torch = codec.torch_loaded()
        if t is torch.Generator:
            state = obj.get_state().numpy().tobytes()
            return (Tag.GENERATOR, sid, obj.device.type, state)
        return self.encode_tensor(sid, obj, depth)

    def encode_tensor(self, sid: int, t: Any, depth: int, *, extra: Any = None) -> Any:
        dtype, shape, stride, data = codec.encode_tensor_data(t)
        grad = None
        if t.is_leaf and t.grad is not None and depth < codec.MAX_DEPTH:
            gd, gs, _, gdata = codec.encode_tensor_data(t.grad)
            grad = (gd, gs, gdata)
        return (Tag.TENSOR, sid, dtype, shape, stride, data, t.device.type, bool(t.requires_grad),
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
        entry = self._decode_table.get(tag) if type(tag) is str else None
        if entry is None:
            raise WireError(f"unknown value tag {str(tag)[:10]!r}")
        handler, size = entry
        if len(tree) != size:  # every layout of schema.VALUES, checked here once
            raise WireError(f"malformed {VALUES[tag].name}")
        return handler(self, tree, depth + 1)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._decode_table = _decode_table(cls.DECODERS)
        cls._encoders = dict(_ENCODERS)

    def decode_items(self, items: Any, depth: int) -> list:
        if type(items) is not list:
            raise WireError("malformed sequence")
        self.charge(8 * len(items) + 64)
        return [self.decode(v, depth) for v in items]

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
        if self.VERIFY_VERBATIM and not codec.plain_tree(tree[1]):
            raise WireError("a verbatim value that is not plain data")
        return tree[1]

    def _d_plain_list(self, tree: tuple, depth: int) -> Any:
        return self.decode_items(tree[1], depth)

    def _d_plain_dict(self, tree: tuple, depth: int) -> Any:
        if type(tree[1]) is not list:
            raise WireError("malformed dict")
        self.charge(32 * len(tree[1]) + 64)
        out = {}
        for pair in tree[1]:
            check(pair, PAIR, WireError)
            out[self.decode(pair[0], depth)] = self.decode(pair[1], depth)
        return out

    def _d_list(self, tree: tuple, depth: int) -> Any:
        obj, _ = self._shared_target(tree[1], list)
        items = self.decode_items(tree[2], depth)
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
            check(pair, PAIR, WireError)
            pairs.append((self.decode(pair[0], depth), self.decode(pair[1], depth)))
        obj.clear()
        obj.update(pairs)
        self.registry.mark_synced(tree[1], obj)
        return obj

    def _d_set(self, tree: tuple, depth: int) -> Any:
        obj, _ = self._shared_target(tree[1], set)
        items = self.decode_items(tree[2], depth)
        if type(obj) is not set:
            raise WireError("shared object changed kind")
        obj.clear()
        obj.update(items)
        self.registry.mark_synced(tree[1], obj)
        return obj

    def _d_tensor(self, tree: tuple, depth: int) -> Any:
        import torch

        _, sid, dtype, shape, stride, data, device, requires_grad, is_param, grad, extra = tree
        self.needs_torch("a tensor")
        self.charge(len(data) + 256 if type(data) is bytes else 256)
        if type(grad) is tuple and len(grad) == GRADIENT.size and type(grad[2]) is bytes:
            self.charge(len(grad[2]))
        value = codec.decode_tensor_data(dtype, shape, stride, data, device)
        grad_value = None
        if grad is not None:
            check(grad, GRADIENT, WireError)
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

    def needs_torch(self, what: str) -> None:
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
        self.needs_torch("a torch.Generator")
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

    # Tag -> handler(endpoint, tree, depth), the tree's layout checked by decode first; a
    # subclass's handlers take that subclass (hence no narrower type than Callable[..., Any]).
    DECODERS: dict[str, Callable[..., Any]] = {
        **{row.tag: row.decode for row in values.TYPES if row.tag and row.decode},  # by value
        Tag.REF: _d_ref, Tag.LIST: _d_list, Tag.DICT: _d_dict, Tag.SET: _d_set,
        Tag.LIST_COPY: _d_plain_list, Tag.DICT_COPY: _d_plain_dict, Tag.VERBATIM: _d_verbatim,
        Tag.TENSOR: _d_tensor, Tag.GENERATOR: _d_generator,
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
        return (Tag.EXCEPTION, cls.__name__[:100], str(getattr(cls, "__module__", ""))[:100], base.__name__,
                args, message[:MAX_EXC_MESSAGE], self.exception_frames(exc),
                getattr(exc, "_kata_token", None))

    def exception_frames(self, exc: BaseException) -> list:
        return list(getattr(exc, "_kata_frames", []) or [])

    def decode_exception(self, body: Any) -> BaseException:
        try:
            _, name, module, base_name, args, message, frames, token = check(body, EXCEPTION)
        except ProtocolError:
            return BridgeError("the other process sent a malformed exception")
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


def _decode_table(decoders: dict[str, Callable]) -> dict[str, tuple[Callable, int]]:
    """Tag -> (handler, the size of its layout): every tag a side decodes is in the schema."""
    unknown = set(decoders) - set(SIZES)
    assert not unknown, f"tags missing from schema.VALUES: {sorted(unknown)}"
    return {tag: (handler, SIZES[tag]) for tag, handler in decoders.items()}


def _e_verbatim(endpoint: Endpoint, value: Verbatim, depth: int) -> Any:
    return (Tag.VERBATIM, value.value)


def _e_tensor_copy(endpoint: Endpoint, value: TensorCopy, depth: int) -> Any:
    return endpoint.encode_tensor(0, value.tensor, depth)


# The bridge's own wrappers; each endpoint class adds the types it meets (_encoder_for).
_ENCODERS: dict[type, Callable[[Endpoint, Any, int], Any]] = {Verbatim: _e_verbatim, TensorCopy: _e_tensor_copy}
Endpoint._decode_table = _decode_table(Endpoint.DECODERS)
Endpoint._encoders = dict(_ENCODERS)

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
    except Exception:  # noqa: BLE001 - a class that cannot be subclassed keeps its own message
        return exc


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)[:200]
    except BaseException:  # noqa: BLE001 - a repr is candidate code: whatever it raises, a name
        return f"<{type(value).__name__}>"
