"""Strategies, builders and comparisons shared by the tensor-lib levels.

Shapes have 0-4 dims of size 0-4 and values are multiples of 0.25 in [-3, 3]: counterexamples
stay readable, and sums, products and matmuls of them are exact in float64, so a result is
compared with torch's within 1e-12 (exp, log and division round once more). The same tensor
is built on both sides: in torch float64 (the oracle) and in the candidate's library, from
nested lists, or through reshape where a 0-size dim cannot be written as nested lists.
A layout makes an input non-contiguous in the same way on both sides: "transposed" stores
the last two dims swapped and transposes them back, "strided" takes every other element of
a last dim twice as long.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
from hypothesis import strategies as st

from grader.protocol import PropertyFailure, expect, read_all

RTOL = ATOL = 1e-12
LAYOUTS = ("contiguous", "transposed", "strided")

values_strategy = st.integers(-12, 12).map(lambda k: k / 4)


def shapes(min_dims: int = 0, max_dims: int = 4, min_size: int = 0, max_size: int = 4) -> Any:
    return st.lists(st.integers(min_size, max_size), min_size=min_dims, max_size=max_dims).map(tuple)


@dataclass(frozen=True)
class Case:
    """One input tensor: its logical shape, values (row-major) and the layout it is stored in."""

    shape: tuple[int, ...]
    values: tuple[float, ...]
    layout: str = "contiguous"

    def torch(self) -> torch.Tensor:
        return torch.tensor(self.values, dtype=torch.float64).reshape(self.shape)

    def shown(self) -> Any:
        text = f"{self.torch().tolist()} (shape {self.shape})"
        return text if self.layout == "contiguous" else f"{text}, stored {self.layout}"


@st.composite
def cases(draw: Any, shape: Any = None, layouts: tuple[str, ...] = LAYOUTS) -> Case:
    shape = draw(shapes()) if shape is None else shape
    if not isinstance(shape, tuple):
        shape = draw(shape)
    values = tuple(draw(st.lists(values_strategy, min_size=math.prod(shape), max_size=math.prod(shape))))
    usable = [layout for layout in layouts if layout == "contiguous"
              or (layout == "transposed" and len(shape) >= 2) or (layout == "strided" and len(shape) >= 1)]
    return Case(shape, values, draw(st.sampled_from(usable)) if usable else "contiguous")


def new_tensor(lib: Any, shape: tuple[int, ...], values: list[float], requires_grad: bool = False) -> Any:
    """A contiguous leaf in `lib` (the candidate's module, or None for torch)."""
    if lib is None:
        return torch.tensor(values, dtype=torch.float64).reshape(shape).requires_grad_(requires_grad)
    if 0 in shape:
        t = lib.Tensor([]).reshape(shape)
        if requires_grad:
            t.requires_grad = True
        return t
    data = torch.tensor(values, dtype=torch.float64).reshape(shape).tolist()
    return lib.Tensor(data, requires_grad=requires_grad)


def build(lib: Any, case: Case, requires_grad: bool = False) -> tuple[Any, Any]:
    """(leaf, the tensor of the case): in torch when lib is None, else in the candidate's library."""
    logical = case.torch()
    if case.layout == "transposed":
        stored = logical.transpose(-1, -2).contiguous()
        leaf = new_tensor(lib, tuple(stored.shape), stored.flatten().tolist(), requires_grad)
        return leaf, leaf.transpose(-1, -2)
    if case.layout == "strided":
        stored = torch.stack([logical, torch.full_like(logical, 7.0)], dim=-1).flatten(-2)
        leaf = new_tensor(lib, tuple(stored.shape), stored.flatten().tolist(), requires_grad)
        return leaf, leaf[(slice(None),) * (len(case.shape) - 1) + (slice(None, None, 2),)]
    leaf = new_tensor(lib, case.shape, list(case.values), requires_grad)
    return leaf, leaf


def read(t: Any, what: str) -> tuple[Any, Any]:
    """(shape, tolist()) of the candidate's tensor, in one request."""
    if t is None:
        raise PropertyFailure(f"{what} is a Tensor", expected="a Tensor", got="None")
    (ok_shape, shape), (ok_list, data) = read_all(t, [("shape", None), ("tolist", ())])
    for ok, value in ((ok_shape, shape), (ok_list, data)):
        if not ok:
            raise value
    return shape, data


def _close(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and \
            all(_close(g, e, rtol, atol) for g, e in zip(got, expected))
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    if math.isnan(expected) or math.isinf(expected):
        return math.isnan(got) if math.isnan(expected) else got == expected
    return abs(got - expected) <= atol + rtol * abs(expected)


def expect_tensor(got: Any, expected: torch.Tensor, prop: str, *, input: Any,
                  rtol: float = RTOL, atol: float = ATOL, what: str = "the result") -> None:
    """got (the candidate's Tensor) has expected's shape and values."""
    shape, data = read(got, what)
    want = expected.detach().tolist()
    expect(isinstance(shape, tuple) and shape == tuple(expected.shape), f"{prop}: the shape of {what}",
           input=input, expected=tuple(expected.shape), got=shape)
    expect(_close(data, want, rtol, atol), f"{prop}: the values of {what}", input=input,
           expected=want, got=data)


def expect_layout(got: Any, expected: torch.Tensor, prop: str, *, input: Any, what: str = "the result") -> None:
    """got has expected's shape, strides and values (exactly)."""
    (ok_s, strides), = read_all(got, [("strides", None)])
    if not ok_s:
        raise strides
    expect_tensor(got, expected, prop, input=input, rtol=0.0, atol=0.0, what=what)
    expect(strides == expected.stride(), f"{prop}: the strides of {what} (in elements)", input=input,
           expected=expected.stride(), got=strides)


def expect_error(fn: Callable[[], Any], kind: type[Exception], call: str) -> None:
    """fn() raises `kind` (a subclass counts); anything else fails, showing the call."""
    try:
        got = fn()
    except kind:
        return
    except Exception as exc:  # noqa: BLE001 - the wrong exception is the verdict
        expect(False, f"{call} raises {kind.__name__}", input=call, expected=kind.__name__,
               got=f"{type(exc).__name__}: {exc}")
    expect(False, f"{call} raises {kind.__name__}", input=call, expected=kind.__name__,
           got=f"no exception (returned {type(got).__name__})")


def to_candidate(lib: Any, t: torch.Tensor) -> Any:
    """The candidate's contiguous tensor with t's values (a gradient to pass to backward)."""
    return new_tensor(lib, tuple(t.shape), t.flatten().tolist())


def broadcast_pair(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast: each a suffix of one shape, some dims set to 1."""
    out = draw(shapes())
    pair = []
    for _ in range(2):
        cut = draw(st.integers(0, len(out)))
        pair.append(tuple(1 if draw(st.booleans()) and draw(st.booleans()) else s for s in out[cut:]))
    return pair[0], pair[1]


@st.composite
def broadcast_cases(draw: Any, layouts: tuple[str, ...] = LAYOUTS) -> tuple[Case, Case]:
    sa, sb = broadcast_pair(draw)
    return draw(cases(sa, layouts)), draw(cases(sb, layouts))


@st.composite
def matmul_cases(draw: Any) -> tuple[Case, Case]:
    """Operands matmul accepts: 1-D or batched, batch dims that broadcast, sizes 0-3."""
    k = draw(st.integers(0, 3))
    a_1d, b_1d = draw(st.booleans()) and draw(st.booleans()), draw(st.booleans()) and draw(st.booleans())
    batch = draw(shapes(0, 2, 0, 3))
    a_batch = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else s for s in batch)
    b_batch = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else s for s in batch)[draw(st.integers(0, len(batch))):]
    sa = (k,) if a_1d else a_batch + (draw(st.integers(0, 3)), k)
    sb = (k,) if b_1d else b_batch + (k, draw(st.integers(0, 3)))
    return draw(cases(sa)), draw(cases(sb))
