"""One table of the values the bridge carries: how each is recognised, crosses, is shown on
a scorecard and is rebuilt in a snippet.

A row (``ValueType``) per kind of value, keyed by its type's name: ``where`` is
``(module, attribute)`` of each type it covers, resolved only once that module is loaded
(hypothesis's ``vendor/pretty.py`` defers its printers the same way), so checking a value's
type never imports torch or numpy. Its users:

* the codec: ``codec.PLAIN`` (what crosses as it is) and ``Endpoint.encode`` / ``decode``
  (``bridge.py``), which take a row's ``encode`` and ``decode`` for a value that crosses by
  value (the shared ones, lists to tensors, are the endpoint's: it keeps their identity);
* ``grader.protocol.show``: a row's ``show``, the scorecard's short text (None: ``repr``);
* ``grader.engine.snippet.literal``: a row's ``literal``, Python source that rebuilds the
  value exactly (``tests/test_value_table.py`` evaluates it for every row).

Renderers take the value and ``sub``, which renders a nested value the same way (a
literal's ``sub`` also carries the snippet's ``imports`` and ``setup``: ``LiteralContext``).
Adding a value type: its tag in ``schema.VALUES``, its row here, its samples in the tests
(README, "Adding a value type").

Standard library only: this module ships to the worker.
"""

from __future__ import annotations

import builtins
import math
import sys
from typing import Any, Callable, NamedTuple, Protocol

from .schema import BridgeError, Tag
from .wire import WireError

# Dtypes a tensor may cross with (names, as torch spells them).
TENSOR_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                 "uint8", "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2",
                 "uint16", "uint32", "uint64")
MAX_LITERAL_ELEMENTS = 4096  # a larger tensor is not written out value by value
MAX_PACKED_BYTES = 24_000  # a larger tensor is rebuilt exactly from base64 up to this size
MAX_SHOWN_ELEMENTS = 64  # a scorecard shows this many items of a sequence or tensor


class LiteralContext(Protocol):
    """What a literal renderer is given to render nested values (snippet.py's names)."""

    imports: set[str]  # modules the rendered source needs besides torch
    setup: list[str]  # lines to run before the line the literal is in

    def __call__(self, value: Any) -> str: ...


class ValueType(NamedTuple):
    name: str
    where: tuple[tuple[str, str], ...]  # (module, attribute) of each type it covers
    tag: str | None  # the schema tag it crosses under; None: as it is (a plain scalar)
    literal: Callable[[Any, Any], str]
    show: Callable[[Any, Callable[[Any], str]], str] | None = None
    # (endpoint, value, depth) -> tree, for a value that crosses by value; None: the
    # endpoint's own (a plain scalar as it is, a shared object with its identity).
    encode: Callable[[Any, Any, int], Any] | None = None
    decode: Callable[[Any, tuple, int], Any] | None = None  # (endpoint, tree, depth) -> value
    plain: bool = False  # crosses as it is (codec.PLAIN)


# ---------------------------------------------------------------------------- renderers


def float_literal(value: float) -> str:
    """A float as Python source (nan and the infinities have no literal of their own)."""
    if math.isnan(value):
        return "float('nan')"
    if math.isinf(value):
        return "float('inf')" if value > 0 else "-float('inf')"
    return repr(value)


def show_float(x: float) -> str:
    """Short, and always reads as a float: 2.0 shows as "2." (never "2"), like numpy."""
    if math.isnan(x) or math.isinf(x):
        return repr(x)
    text = f"{x:.6g}"
    if not any(c in text for c in ".en"):
        text += "."
    return text


def _repr(value: Any, sub: Any) -> str:
    return repr(value)


def _float_literal(value: Any, sub: Any) -> str:
    return float_literal(value)


def _show_float(value: Any, sub: Any) -> str:
    return show_float(value)


def _tuple_literal(value: Any, sub: Any) -> str:
    return "(" + ", ".join(map(sub, value)) + ("," if len(value) == 1 else "") + ")"


def _list_literal(value: Any, sub: Any) -> str:
    return "[" + ", ".join(map(sub, value)) + "]"


def _dict_literal(value: Any, sub: Any) -> str:
    return "{" + ", ".join(f"{sub(k)}: {sub(v)}" for k, v in value.items()) + "}"


def _set_literal(value: Any, sub: Any) -> str:
    return ("{" + ", ".join(map(sub, value)) + "}") if value else "set()"


def _frozenset_literal(value: Any, sub: Any) -> str:
    return f"frozenset({_set_literal(value, sub)})" if value else "frozenset()"


def _complex_literal(value: complex, sub: Any) -> str:
    return f"complex({float_literal(value.real)}, {float_literal(value.imag)})"


def _slice_literal(value: slice, sub: Any) -> str:
    return f"slice({sub(value.start)}, {sub(value.stop)}, {sub(value.step)})"


def _show_sequence(value: Any, sub: Callable[[Any], str]) -> str:
    items = [sub(v) for v in value[:MAX_SHOWN_ELEMENTS]]
    if len(value) > MAX_SHOWN_ELEMENTS:
        items.append(f"... {len(value) - MAX_SHOWN_ELEMENTS} more")
    if isinstance(value, tuple):
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return "[" + ", ".join(items) + "]"


def _show_dict(value: Any, sub: Callable[[Any], str]) -> str:
    return "{" + ", ".join(f"{k!r}: {sub(v)}" for k, v in value.items()) + "}"


def _nested(values: Any) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_nested(v) for v in values) + "]"
    if isinstance(values, float):
        return float_literal(values)
    return repr(values)


def _packed(raw: bytes, sub: Any) -> str:
    """`raw` as source: base64 (the snippet then imports it)."""
    import base64

    sub.imports.add("base64")
    return f"bytearray(base64.b64decode({base64.b64encode(raw).decode()!r}))"


def tensor_literal(t: Any, sub: Any = None) -> str:
    """A tensor as the source that rebuilds it: its values, or (too many to print) its bytes
    in base64, or (too many for that) zeros of its shape, said so in the setup."""
    dtype = str(t.dtype)
    grad = ", requires_grad=True" if t.requires_grad and t.is_leaf else ""
    if t.numel() > MAX_LITERAL_ELEMENTS:
        nbytes = t.numel() * t.element_size()
        if nbytes <= MAX_PACKED_BYTES and t.device.type == "cpu" and sub is not None:
            import torch

            raw = t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
            rebuilt = f"torch.frombuffer({_packed(raw, sub)}, dtype={dtype}).reshape({tuple(t.shape)})"
            return rebuilt + (".requires_grad_()" if grad else "")
        if sub is not None:
            sub.setup.append(f"# (a {tuple(t.shape)} tensor below is shown as zeros: its "
                             f"{t.numel()} values are too many to print)")
        return f"torch.zeros({tuple(t.shape)}, dtype={dtype}{grad})"
    values = t.detach().cpu()
    if str(values.dtype) in ("torch.bfloat16", "torch.float16"):
        values = values.float()
    body = _nested(values.tolist())
    if t.numel() == 0:
        return f"torch.empty({tuple(t.shape)}, dtype={dtype}{grad})"
    return f"torch.tensor({body}, dtype={dtype}{grad})"


def show_tensor(t: Any, sub: Any = None) -> str:
    """A small tensor as the Python that rebuilds it: torch.tensor([[2., nan]],
    dtype=torch.float64); a large one by its shape, dtype and first values."""
    dtype = str(t.dtype).replace("torch.", "")
    if t.numel() > MAX_SHOWN_ELEMENTS:
        flat = t.detach().flatten()[:8].cpu().tolist()
        head = ", ".join(_show_scalar(v) for v in flat)
        return f"<tensor of shape {tuple(t.shape)}, {dtype}, first values [{head}, ...]>"
    if t.numel() == 0:
        return f"torch.empty({tuple(t.shape)}, dtype=torch.{dtype})"
    text = _show_nested(t.detach().cpu().tolist())
    default = {"float32", "int64", "bool"}  # what torch.tensor infers from such values
    suffix = "" if dtype in default else f", dtype=torch.{dtype}"
    return f"torch.tensor({text}{suffix})"


def _show_nested(values: Any) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_show_nested(v) for v in values) + "]"
    return _show_scalar(values)


def _show_scalar(v: Any) -> str:
    return show_float(v) if isinstance(v, float) else repr(v)


def _generator_literal(gen: Any, sub: Any) -> str:
    """From its seed: a test's generator is passed as the suite seeded it (a transcript keeps
    the generator, not its state at the call, so a state read later would be the wrong one)."""
    return f"torch.Generator().manual_seed({gen.initial_seed()})"


def _ndarray_literal(arr: Any, sub: Any) -> str:
    sub.imports.add("numpy")
    if arr.dtype.kind not in "biufc":
        return f"<a numpy array of {arr.dtype}>"
    return f"numpy.frombuffer({_packed(arr.tobytes(), sub)}, dtype={arr.dtype.str!r}).reshape({tuple(arr.shape)})"


# ---------------------------------------------------------------------------- by value


def _e_tuple(endpoint: Any, value: Any, depth: int) -> Any:
    return (Tag.TUPLE, [endpoint.encode(v, depth) for v in value])


def _d_tuple(endpoint: Any, tree: tuple, depth: int) -> Any:
    return tuple(endpoint.decode_items(tree[1], depth))


def _e_frozenset(endpoint: Any, value: Any, depth: int) -> Any:
    return (Tag.FROZENSET, [endpoint.encode(v, depth) for v in value])


def _d_frozenset(endpoint: Any, tree: tuple, depth: int) -> Any:
    return frozenset(endpoint.decode_items(tree[1], depth))


def _e_complex(endpoint: Any, value: Any, depth: int) -> Any:
    return (Tag.COMPLEX, value.real, value.imag)


def _d_complex(endpoint: Any, tree: tuple, depth: int) -> Any:
    return complex(float(tree[1]), float(tree[2]))


def _e_slice(endpoint: Any, value: Any, depth: int) -> Any:
    return (Tag.SLICE, endpoint.encode(value.start, depth), endpoint.encode(value.stop, depth),
            endpoint.encode(value.step, depth))


def _d_slice(endpoint: Any, tree: tuple, depth: int) -> Any:
    return slice(endpoint.decode(tree[1], depth), endpoint.decode(tree[2], depth), endpoint.decode(tree[3], depth))


def _e_ellipsis(endpoint: Any, value: Any, depth: int) -> Any:
    return (Tag.ELLIPSIS,)


def _d_ellipsis(endpoint: Any, tree: tuple, depth: int) -> Any:
    return Ellipsis


def _e_bytearray(endpoint: Any, value: Any, depth: int) -> Any:
    return (Tag.BYTEARRAY, bytes(value))


def _d_bytearray(endpoint: Any, tree: tuple, depth: int) -> Any:
    endpoint.charge(len(tree[1]) if type(tree[1]) is bytes else 0)
    return bytearray(tree[1]) if type(tree[1]) is bytes else bytearray()


def _e_dtype(endpoint: Any, value: Any, depth: int) -> Any:
    return (Tag.DTYPE, str(value).replace("torch.", ""))


def dtype_by_name(name: Any) -> Any:
    import torch

    if name not in TENSOR_DTYPES:
        raise BridgeError(f"unknown dtype {name!r}")
    return getattr(torch, name)


def _d_dtype(endpoint: Any, tree: tuple, depth: int) -> Any:
    endpoint.needs_torch("a torch dtype")
    return dtype_by_name(tree[1])


def _e_device(endpoint: Any, value: Any, depth: int) -> Any:
    return (Tag.DEVICE, str(value))


def _d_device(endpoint: Any, tree: tuple, depth: int) -> Any:
    endpoint.needs_torch("a torch device")
    import torch

    if type(tree[1]) is not str:
        raise BridgeError("a device must be a string")
    return torch.device(tree[1][:20])


def _e_size(endpoint: Any, value: Any, depth: int) -> Any:
    return (Tag.SIZE, [int(v) for v in value])


def _d_size(endpoint: Any, tree: tuple, depth: int) -> Any:
    endpoint.needs_torch("a torch Size")
    import torch

    dims = tree[1]
    if type(dims) is not list or not all(type(d) is int for d in dims):
        raise WireError("malformed size")
    return torch.Size(dims)


def _e_ndarray(endpoint: Any, value: Any, depth: int) -> Any:
    if value.dtype.kind not in "biufc":
        return endpoint.encode_other(value, depth)
    import numpy as np

    arr = np.ascontiguousarray(value)
    # (value's shape: ascontiguousarray makes a 0-d array 1-d)
    return (Tag.NDARRAY, arr.dtype.str, list(value.shape), arr.tobytes())


def _d_ndarray(endpoint: Any, tree: tuple, depth: int) -> Any:
    import numpy as np

    _, dtype, shape, data = tree
    if type(dtype) is not str:
        raise BridgeError("a dtype must be a string")
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise WireError(f"bad numpy dtype: {exc}") from None
    if dt.kind not in "biufc" or type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
        raise WireError("malformed numpy array")
    if type(data) is not bytes or len(data) != math.prod(shape) * dt.itemsize:
        raise WireError("numpy data does not fit its shape")
    endpoint.charge(len(data))
    return np.frombuffer(bytearray(data), dtype=dt).reshape(shape)


# ---------------------------------------------------------------------------- the table


def _builtin(name: str) -> tuple[tuple[str, str], ...]:
    return (("builtins", name),)


TYPES: tuple[ValueType, ...] = (
    ValueType("none", _builtin("NoneType"), None, _repr, plain=True),
    ValueType("bool", _builtin("bool"), None, _repr, plain=True),
    ValueType("int", _builtin("int"), None, _repr, plain=True),
    ValueType("float", _builtin("float"), None, _float_literal, _show_float, plain=True),
    ValueType("str", _builtin("str"), None, _repr, plain=True),
    ValueType("bytes", _builtin("bytes"), None, _repr, plain=True),
    ValueType("tuple", _builtin("tuple"), Tag.TUPLE, _tuple_literal, _show_sequence, _e_tuple, _d_tuple),
    ValueType("list", _builtin("list"), Tag.LIST, _list_literal, _show_sequence),
    ValueType("dict", _builtin("dict"), Tag.DICT, _dict_literal, _show_dict),
    ValueType("set", _builtin("set"), Tag.SET, _set_literal),
    ValueType("frozenset", _builtin("frozenset"), Tag.FROZENSET, _frozenset_literal, None, _e_frozenset,
              _d_frozenset),
    ValueType("complex", _builtin("complex"), Tag.COMPLEX, _complex_literal, None, _e_complex, _d_complex),
    ValueType("slice", _builtin("slice"), Tag.SLICE, _slice_literal, None, _e_slice, _d_slice),
    ValueType("ellipsis", _builtin("ellipsis"), Tag.ELLIPSIS, lambda value, sub: "...", None, _e_ellipsis,
              _d_ellipsis),
    ValueType("bytearray", _builtin("bytearray"), Tag.BYTEARRAY, _repr, None, _e_bytearray, _d_bytearray),
    # Deferred: resolved once their module is loaded.
    ValueType("tensor", (("torch", "Tensor"), ("torch.nn", "Parameter")), Tag.TENSOR, tensor_literal, show_tensor),
    ValueType("generator", (("torch", "Generator"),), Tag.GENERATOR, _generator_literal),
    ValueType("dtype", (("torch", "dtype"),), Tag.DTYPE, lambda value, sub: str(value), None, _e_dtype, _d_dtype),
    ValueType("device", (("torch", "device"),), Tag.DEVICE, lambda value, sub: f"torch.device({str(value)!r})",
              None, _e_device, _d_device),
    ValueType("size", (("torch", "Size"),), Tag.SIZE, lambda value, sub: f"torch.Size({list(value)!r})",
              _show_sequence, _e_size, _d_size),
    ValueType("ndarray", (("numpy", "ndarray"),), Tag.NDARRAY, _ndarray_literal, None, _e_ndarray, _d_ndarray),
)
BY_NAME = {row.name: row for row in TYPES}

_EXACT: dict[type, ValueType | None] = {}  # a type -> its row (None: no row), as met
_NEAREST: dict[type, ValueType | None] = {}  # a type -> the row of it or of its nearest base
_DEFERRED: list[tuple[tuple[str, str], ValueType]] = []  # rows of types not imported here
_BUILTINS = {**vars(builtins), "NoneType": type(None), "ellipsis": type(Ellipsis)}
for _row in TYPES:
    for _module, _attr in _row.where:
        if _module == "builtins":
            _EXACT[_BUILTINS[_attr]] = _row
        else:
            _DEFERRED.append(((_module, _attr), _row))

PLAIN_TYPES = tuple(t for t, row in _EXACT.items() if row is not None and row.plain)


def exact(t: type) -> ValueType | None:
    """The row of type `t` itself (a subclass has none), without importing anything."""
    try:
        return _EXACT[t]
    except KeyError:
        pass
    row = None
    for (module, attr), candidate in _DEFERRED:
        loaded = sys.modules.get(module)
        if loaded is not None and getattr(loaded, attr, None) is t:
            row = candidate
            break
    _EXACT[t] = row
    return row


def nearest(t: type) -> ValueType | None:
    """The row of `t` or of its nearest base with one (a namedtuple's is tuple's): what a
    value is shown and rebuilt as."""
    try:
        return _NEAREST[t]
    except KeyError:
        pass
    row = None
    for base in getattr(t, "__mro__", (t,)):
        row = exact(base)
        if row is not None:
            break
    _NEAREST[t] = row
    return row
