"""Comparisons with the reference and calls into the candidate, shared by the quant levels.

Codes (int8 q, int4 q and zero points) are integers: they are compared exactly, except where
the reference's ratio (w / scale, or min / scale) lies within TIE_SLACK of a rounding tie,
where dividing in another order (w * (1 / scale)) may land one step away. Scales are floats
computed in float32: relative 1e-6. Dequantized values and matmul results use the tolerance
of their dtype.

The candidate's module is a proxy to another process: every call gets clones of its tensor
arguments (the not-modified tests pass their own tensors on purpose) and results are kept as
copies, so a later call cannot rewrite an earlier result.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from grader.protocol import PropertyFailure, call, expect
from grader.suites._common import candidate_lines, check_close

TIE_SLACK = 1e-4
SCALE_RTOL = 1e-6
# Result tolerances by dtype (rtol; atol relative to the largest magnitude of the expected).
RESULT_RTOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


class _Readable:
    """A tensor shown with its values and dtype ("2.5", not "2")."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __repr__(self) -> str:
        t = self.tensor.detach().cpu()
        meta = f"shape={tuple(t.shape)}, dtype={str(t.dtype).replace('torch.', '')}"
        big = t.numel() > 64
        flat = t.flatten()[:8] if big else t
        if t.is_floating_point():
            values = flat.double().tolist()
        else:
            values = flat.tolist()
        return f"tensor({'first values ' if big else ''}{values}{', ...' if big else ''}, {meta})"


def readable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return _Readable(value)
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(readable(v) for v in value)
    return value


def kept(result: Any) -> Any:
    if isinstance(result, torch.Tensor):
        return result.detach().clone()
    if isinstance(result, tuple):
        return tuple(kept(r) for r in result)
    return result


def guarded(fn: Callable[..., Any], *args: Any, what: str, input: Any, **kwargs: Any) -> Any:
    """fn(*clones of args, **kwargs), a kept copy of its result; an exception from the
    candidate's code becomes a failure that shows the input."""
    args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
    kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    try:
        return kept(call(fn, *args, what=what, **kwargs))
    except PropertyFailure:
        raise
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise PropertyFailure(f"{what} raised {type(exc).__name__}" + (f": {text}" if text else ""),
                              input=readable(input), note=candidate_lines(exc)) from exc


def expect_tensor(got: Any, shape: tuple[int, ...], dtype: torch.dtype, prop: str, *, input: Any) -> None:
    ok = isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(shape) and got.dtype == dtype
    expect(ok, prop + f" (a tensor of shape {tuple(shape)}, {str(dtype)[6:]})", input=readable(input),
           expected=f"shape {tuple(shape)}, {dtype}",
           got=f"shape {tuple(got.shape)}, {got.dtype}" if isinstance(got, torch.Tensor) else type(got).__name__)


def expect_tuple(got: Any, length: int, what: str, *, input: Any) -> None:
    expect(isinstance(got, (tuple, list)) and len(got) == length, f"{what} returns a tuple of {length}",
           input=readable(input), got=type(got).__name__ if not isinstance(got, (tuple, list)) else f"{len(got)} items")


def unpack_codes(packed: torch.Tensor) -> torch.Tensor:
    """(out, in // 2) uint8 -> (out, in) codes, column 2j from the low nibble: the statement's
    layout, read here rather than by the reference's helper."""
    low, high = packed & 0x0F, packed >> 4
    return torch.stack((low, high), dim=-1).reshape(packed.shape[0], 2 * packed.shape[1])


def near_tie(ratio: torch.Tensor) -> torch.Tensor:
    """Where ratio's fractional part is within TIE_SLACK of one half."""
    frac = ratio.double() - ratio.double().floor()
    return (frac - 0.5).abs() < TIE_SLACK


def expect_codes(got: torch.Tensor, expected: torch.Tensor, ratio: torch.Tensor, prop: str, *,
                 input: Any) -> None:
    """got equals expected, except one step where `ratio` (the value rounded) is on a tie."""
    diff = (got.long() - expected.long()).abs()
    bad = (diff > 1) | ((diff == 1) & ~near_tie(ratio))
    if not bool(bad.any()):
        return
    where = tuple(bad.nonzero()[0].tolist())
    raise PropertyFailure(prop, input=readable(input), expected=readable(expected), got=readable(got),
                          note=f"first mismatch at index {where}: expected {int(expected[where])}, "
                               f"got {int(got[where])} (the value rounded there: {float(ratio[where]):.6g})")


def expect_scales(got: torch.Tensor, expected: torch.Tensor, prop: str, *, input: Any) -> None:
    close(got, expected, prop, input=input, atol=0.0, rtol=SCALE_RTOL)


def close(got: Any, expected: torch.Tensor, prop: str, *, input: Any, **tolerance: Any) -> None:
    """_common.check_close with inputs and results shown with their values."""
    try:
        check_close(got, expected, prop, input=input, **tolerance)
    except PropertyFailure as exc:
        raise PropertyFailure(exc.prop, input=readable(input), expected=readable(expected),
                              got=readable(got) if isinstance(got, torch.Tensor) else exc.got,
                              note=exc.note) from None


def result_tolerance(expected: torch.Tensor) -> dict:
    """rtol of the dtype, and an atol of rtol * max|expected| (sums of cancelling terms)."""
    rtol = RESULT_RTOL.get(expected.dtype, 1e-5)
    scale = float(expected.detach().double().abs().max()) if expected.numel() else 0.0
    return {"rtol": rtol, "atol": rtol * max(scale, 1e-6)}


def expect_value_error(fn: Callable[[], Any], what: str, input: Any) -> None:
    """fn() must raise ValueError; any other exception propagates as the verdict."""
    try:
        got = fn()
    except ValueError:
        return
    raise PropertyFailure(f"{what} must raise ValueError", input=readable(input),
                          expected="ValueError", got=f"returned {type(got).__name__}")
