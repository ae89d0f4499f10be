"""Values across the judge/worker boundary: plain data, tensors and shared objects.

Both sides run this code. What crosses:

* plain values (None, bool, int, float, str, bytes, complex, slice, Ellipsis) as they are;
  tuples (and namedtuples, as tuples), frozensets, bytearrays, numpy arrays by value;
* **shared objects** — list, dict, set, tensor, torch.Generator, and (judge to worker only)
  ``nn.Module`` — with an id, so that identity survives the trip and in-place changes are
  seen on the other side (see ``Registry``);
* everything else the worker holds (the candidate's objects, functions, classes) as a
  **handle**, shown to the judge as a proxy; every judge callable as a **callback** handle
  the worker can call and nothing more.

The judge decodes only tagged plain data (``wire.loads`` guarantees it) into values built
here: no class named by the worker is ever looked up, no code of the worker's runs in the
judge. Tensor metadata is validated before any memory is allocated.
"""

from __future__ import annotations

import math
import operator
import sys
import threading
from typing import Any, Callable

from .schema import BridgeError
from .values import PLAIN_TYPES, TENSOR_DTYPES

PLAIN = PLAIN_TYPES  # what crosses as it is: the value table's plain rows
MAX_DEPTH = 40
MAX_DIMS = 16
MAX_STR_CHARS = 200_000


# The most items a plain tree (see plain_tree) may hold: a frame can repeat one list many
# times by reference, and a check must never walk more than a bounded tree.
MAX_PLAIN_ITEMS = 100_000
_SCALARS = frozenset(PLAIN) - {str, bytes}


def plain_tree(value: Any) -> bool:
    """Whether `value` is plain data that may cross as it is, with no shared object or
    handle in it: None, bool, int, float, bytes, str of at most MAX_STR_CHARS, and tuples,
    lists and dicts of those, nested at most MAX_DEPTH deep, MAX_PLAIN_ITEMS items in all.
    The sender asks before sending a tree "verbatim"; the judge asks again of what a worker
    sends (see Verbatim), so what it gets is what the codec would have built."""
    return _plain(value, 0, [MAX_PLAIN_ITEMS])


def _plain(node: Any, depth: int, budget: list[int]) -> bool:
    t = type(node)
    if t is tuple or t is list:
        items = node
    elif t is dict:
        items = [x for pair in node.items() for x in pair]
    elif t is str:
        return len(node) <= MAX_STR_CHARS
    else:
        return t in _SCALARS or t is bytes
    budget[0] -= len(items) + 1
    if budget[0] < 0 or depth >= MAX_DEPTH:
        return False
    if all(map(_SCALARS.__contains__, map(type, items))):  # (a list of ids: no loop in Python)
        return True
    for item in items:
        if type(item) not in _SCALARS and not _plain(item, depth + 1, budget):
            return False
    return True


class Verbatim:
    """A plain tree (plain_tree is true of it) that crosses as it is ("V"), not item by
    item: lists and dicts in it arrive as copies, never shared objects. For the many small
    reads of a lockstep test's state, where tagging each item cost most of a round trip."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class TensorCopy:
    """A tensor that crosses as a copy of its values, not as a shared object: for the
    thousands of tensors of a call_many that are each used once (a draft per call) or that
    each call returns, which would otherwise all be registered on both sides and checked
    for changes at every later message."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor


def torch_loaded() -> Any:
    return sys.modules.get("torch")


def no_modes() -> Any:
    """A context in which torch-function and dispatch modes are off: the bridge's own tensor
    work must never be counted as the candidate's (or the judge's) operations."""
    torch = torch_loaded()
    if torch is None or not (torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack()):
        return _NULL
    from contextlib import ExitStack

    from torch.utils._python_dispatch import _disable_current_modes

    stack = ExitStack()
    stack.enter_context(torch._C.DisableTorchFunction())
    stack.enter_context(_disable_current_modes())
    return stack


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NULL = _Null()


def _shallow_same(a: list, b: list) -> bool:
    """Same length and the same elements: identical objects, or equal plain values."""
    if len(a) != len(b):
        return False
    if all(map(operator.is_, a, b)):  # the common case, at C speed
        return True
    for x, y in zip(a, b):
        if x is y:
            continue
        tx = type(x)
        if tx is not type(y) or tx not in PLAIN or x != y:
            return False
    return True


# ------------------------------------------------------------------------ registry


class Registry:
    """Shared objects by id. Ids are positive for objects the judge made, negative for the
    worker's. Each entry keeps the object and a fingerprint of it as last synchronised; a
    changed fingerprint means the object was modified in place and the other side must hear
    of it."""

    def __init__(self, sign: int) -> None:
        self.sign = sign
        self.objects: dict[int, Any] = {}
        self.fingerprints: dict[int, Any] = {}
        self.sid_by_id: dict[int, int] = {}
        self.next_sid = 1
        self.lock = threading.RLock()

    def sid_of(self, obj: Any) -> int | None:
        sid = self.sid_by_id.get(id(obj))
        if sid is not None and self.objects.get(sid) is obj:
            return sid
        return None

    def new_sid(self) -> int:
        sid = self.sign * self.next_sid
        self.next_sid += 1
        return sid

    def put(self, sid: int, obj: Any) -> None:
        old = self.objects.get(sid)
        if old is not None and old is not obj:
            self.sid_by_id.pop(id(old), None)
        self.objects[sid] = obj
        self.sid_by_id[id(obj)] = sid

    def drop(self, sid: int) -> None:
        obj = self.objects.pop(sid, None)
        self.fingerprints.pop(sid, None)
        if obj is not None and self.sid_by_id.get(id(obj)) == sid:
            del self.sid_by_id[id(obj)]

    def clear(self) -> None:
        self.objects.clear()
        self.fingerprints.clear()
        self.sid_by_id.clear()

    def mark_synced(self, sid: int, obj: Any) -> None:
        self.fingerprints[sid] = fingerprint(obj)

    def scan(self, collect_garbage: bool) -> tuple[list[int], list[int]]:
        """(ids of entries changed since they were last synchronised, ids dropped because
        nothing but the registry held them). Garbage is collected only where asked (the
        judge's side: the worker keeps what the judge may still send back)."""
        changed, dead = [], []
        objects, fingerprints = self.objects, self.fingerprints
        for sid in list(objects):
            obj = objects[sid]
            # Changed in place: the other side hears of it even when nothing here holds the
            # object any more (`layer.weight.copy_(w)` drops its temporary at once); the
            # release follows at the next scan, once the change has crossed.
            if not same_fingerprint(fingerprints.get(sid), fingerprint(obj)):
                changed.append(sid)
            # References when unused elsewhere: the dict, `obj`, getrefcount's argument.
            elif collect_garbage and sys.getrefcount(obj) <= 3:
                dead.append(sid)
            del obj
        freed = dead
        while freed:
            for sid in freed:
                self.drop(sid)
            # What a dropped object held may now be held by the registry alone: a tensor the
            # candidate's result was computed from, kept by that result's gradient node
            # (which every later result would otherwise take as an input again).
            freed = []
            for sid in list(objects):
                obj = objects[sid]
                if sys.getrefcount(obj) <= 3 and sid not in changed:
                    freed.append(sid)
                del obj
            dead.extend(freed)
        return changed, dead


def fingerprint(obj: Any) -> Any:
    t = type(obj)
    if t is list:
        return ("list", list(obj))
    if t is dict:
        return ("dict", list(obj), list(obj.values()))
    if t is set:
        return ("set", set(obj))
    torch = torch_loaded()
    if torch is not None:
        if isinstance(obj, torch.Tensor):
            return ("tensor",) + tensor_fingerprint(obj)
        if isinstance(obj, torch.Generator):
            return ("gen", bytes(obj.get_state().numpy().tobytes()))
        if isinstance(obj, torch.nn.Module):
            return ("module", tuple(m.training for m in obj.modules()),
                    tuple((n, id(p)) for n, p in obj.named_parameters(remove_duplicate=False)),
                    tuple((n, id(b)) for n, b in obj.named_buffers(remove_duplicate=False)))
    return ("other", id(obj))


def tensor_fingerprint(t: Any) -> tuple:
    try:
        version = t._version
    except RuntimeError:  # inference tensors keep no version counter
        version = -1
    g = t.grad if t.is_leaf else None
    grad = (id(g), g._version) if g is not None else None
    return (version, t.data_ptr(), tuple(t.shape), t.dtype, t.requires_grad, grad,
            content_digest(t))


CONTENT_DIGEST_MAX_BYTES = 1 << 20


def content_digest(t: Any) -> int | None:
    """A digest of a parameter's bytes. A write through `.data` (`w.data += d`, as PEFT's
    merge does) moves no version counter the other side could see, so a parameter's content
    itself is compared. Only parameters (where `.data` is the idiom), and only up to 1 MiB,
    are digested: every shared object is fingerprinted at every round trip."""
    try:
        if type(t) is not _torch().nn.Parameter or t.layout is not _torch().strided or t.device.type == "meta" or t.is_quantized:
            return None
        if t.numel() * t.element_size() > CONTENT_DIGEST_MAX_BYTES:
            return None
        data = t.detach()
        if data.device.type != "cpu":
            data = data.cpu()
        if data.dim() == 0:
            data = data.reshape(1)
        return hash(data.contiguous().view(_torch().uint8).numpy().tobytes())
    except Exception:  # noqa: BLE001 - an exotic tensor: the version counter is all there is
        return None


def _torch() -> Any:
    return sys.modules["torch"]


def same_fingerprint(a: Any, b: Any) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return False
    kind = a[0]
    if kind == "list":
        return _shallow_same(a[1], b[1])
    if kind == "dict":
        return _shallow_same(a[1], b[1]) and _shallow_same(a[2], b[2])
    return a == b


# ------------------------------------------------------------------------ tensors


# Dtypes whose bytes numpy can give directly (the others go through a uint8 view).
_NUMPY_DTYPES = frozenset({"float64", "float32", "float16", "int64", "int32", "int16", "int8",
                           "uint8", "bool", "complex64", "complex128"})
_DTYPE_NAMES: dict[Any, str] = {}  # torch.dtype -> its name (filled as they are met)
_ITEM_SIZES: dict[str, int] = {}


def _dtype_name(dtype: Any) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def encode_tensor_data(t: Any) -> tuple:
    """(dtype name, shape, stride, bytes) of a strided tensor, copied to the CPU."""
    torch = torch_loaded()
    data = t.detach()
    if data.is_cpu and data.is_contiguous() and not data.is_conj() and not data.is_neg():
        # The common case, in a fraction of the general path's time: thousands of small
        # tensors cross in a distribution test.
        dtype = _dtype_name(data.dtype)
        if dtype in _NUMPY_DTYPES:
            return dtype, tuple(data.shape), None, data.numpy().tobytes()
    if data.device.type != "cpu":
        data = data.cpu()
    if data.is_conj():
        data = data.resolve_conj()
    if data.is_neg():
        data = data.resolve_neg()
    dtype = _dtype_name(data.dtype)
    if dtype not in TENSOR_DTYPES:
        raise BridgeError(f"a tensor of dtype {dtype} cannot cross")
    shape = tuple(data.shape)
    stride = tuple(data.stride()) if not data.is_contiguous() and _dense_non_overlapping(data) else None
    # Bytes in memory order when the layout is dense but not row-major (keeps e.g. a
    # transposed result's strides); otherwise in row-major order.
    if stride is not None:
        order = sorted(range(len(shape)), key=lambda d: -stride[d])
        raw = data.permute(order).contiguous()
    else:
        raw = data.contiguous()
    flat = raw.reshape(-1)
    if flat.numel() and flat.stride(0) != 1:  # size-1 dims may carry any stride
        flat = torch.empty(flat.shape, dtype=flat.dtype).copy_(flat)
    payload = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return dtype, shape, stride, payload


def _dense_non_overlapping(t: Any) -> bool:
    """Whether the tensor's elements fill its storage span exactly, in some order of its
    dimensions (a transposed or permuted tensor): then its bytes cross in memory order with
    its strides. (torch keeps this test internal: Tensor has no method for it.)"""
    if t.numel() == 0:
        return False
    span = 1
    for stride, size in sorted((st, sz) for st, sz in zip(t.stride(), t.shape) if sz != 1):
        if stride != span:
            return False
        span *= size
    return True


def decode_tensor_data(dtype_name: Any, shape: Any, stride: Any, payload: Any, device: Any) -> Any:
    """A new tensor from validated metadata; BridgeError for anything inconsistent."""
    import torch

    if dtype_name not in TENSOR_DTYPES:
        raise BridgeError(f"unknown tensor dtype {dtype_name!r}")
    dtype = getattr(torch, dtype_name)
    if (type(shape) is not tuple or len(shape) > MAX_DIMS
            or not all(type(d) is int and 0 <= d < 2**40 for d in shape)):
        raise BridgeError(f"bad tensor shape {shape!r}")
    numel = math.prod(shape)
    itemsize = _ITEM_SIZES.get(dtype_name)
    if itemsize is None:
        itemsize = _ITEM_SIZES[dtype_name] = torch.empty((), dtype=dtype).element_size()
    if type(payload) is not bytes or len(payload) != numel * itemsize:
        raise BridgeError(f"tensor data of {len(payload) if isinstance(payload, bytes) else '?'} "
                          f"bytes does not fit shape {shape} of {dtype_name}")
    if numel == 0:
        out = torch.empty(shape, dtype=dtype)
    else:
        out = torch.frombuffer(bytearray(payload), dtype=dtype) if dtype_name in _NUMPY_DTYPES \
            else torch.frombuffer(bytearray(payload), dtype=torch.uint8).view(dtype)
        if stride is not None:
            if (type(stride) is not tuple or len(stride) != len(shape)
                    or not all(type(s) is int and s >= 0 for s in stride)
                    or 1 + sum((d - 1) * s for d, s in zip(shape, stride)) != numel):
                raise BridgeError(f"bad tensor strides {stride!r} for shape {shape}")
            order = sorted(range(len(shape)), key=lambda d: -stride[d])
            permuted = out.reshape(tuple(shape[d] for d in order))
            inverse = sorted(range(len(order)), key=lambda i: order[i])
            out = permuted.permute(inverse)
        else:
            out = out.reshape(shape)
    if device == "cuda" and torch.cuda.is_available():
        out = out.to("cuda")
    return out


def clone_tensors(args: Any) -> tuple:
    """`args` with each tensor among them replaced by a clone (other values as they are)."""
    torch = torch_loaded()
    if torch is None:
        return tuple(args)
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def refresh_tensor(dst: Any, src: Any) -> None:
    """Make `dst` hold `src`'s values (and shape/dtype if they changed), in place."""
    import torch

    with torch.no_grad():
        if dst.shape == src.shape and dst.dtype == src.dtype:
            try:
                dst.copy_(src)
                return
            except RuntimeError:
                # `dst` overlaps itself (an expanded view: stride 0), which the other side
                # received as a plain tensor and changed in place: it gets the new values
                # as its own storage (the change is seen; its base is left as it was).
                pass
        dst.data = src.to(dst.device)


def ensure_str(value: Any, what: str) -> str:
    if type(value) is not str:
        raise BridgeError(f"{what} must be a string")
    return value[:MAX_STR_CHARS]


def callable_name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__
