"""Tolerances, comparisons with the reference and calls into the candidate, shared by the
rope levels.

Tolerances (statement): a float32 angle p * w carries an error of about p * 1e-7, so every
comparison allows an absolute error of max(1, max|x|) * (1e-5 + 4e-7 * p_max); a solution
that rounds the frequencies differently but correctly (float64 then cast, complex
multiplication) passes. Half-precision results are compared with the float32 computation
of the same input, within max(1, max|x|) * (2e-2 + 4e-7 * p_max).

The candidate's module is a proxy to another process: tensors go by value, so every call
gets clones of x and positions (test_input_not_modified checks in-place edits separately).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch

from grader.protocol import PropertyFailure, call, expect
from grader.suites._common import candidate_lines, check_close

ANGLE_ERR_PER_POSITION = 1e-7  # float32 angle error per unit of position
HALF_ATOL = 2e-2  # bf16/fp16 results vs float32, relative to max(1, max |x|) (statement)
HALVES = (torch.float16, torch.bfloat16)


def position_atol(x: torch.Tensor, positions: torch.Tensor, base_atol: float = 1e-5) -> float:
    """Absolute tolerance for a rotated x: float32 rounding plus the angle error, which
    grows with the largest position (and the factor 4 leaves room for both roundings)."""
    p_max = int(positions.max()) if positions.numel() else 0
    scale = max(1.0, float(x.detach().double().abs().max())) if x.numel() else 1.0
    return scale * (base_atol + 4 * ANGLE_ERR_PER_POSITION * p_max)


# ---------------------------------------------------------------------------- rendering


class _Readable:
    """A tensor rendered with its values, floats with a decimal point ("2.0", not "2")."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __repr__(self) -> str:
        t = self.tensor.detach().cpu()
        meta = f"shape={tuple(t.shape)}, dtype={str(t.dtype).replace('torch.', '')}"
        flat = t.flatten()[:8] if t.numel() > 64 else t
        values = flat.double().round(decimals=5).tolist() if t.is_floating_point() else flat.tolist()
        return f"tensor({'first values ' if t.numel() > 64 else ''}{values}{', ...' if t.numel() > 64 else ''}, {meta})"


class _Float:
    """A float shown as Python writes it ("0.0", "1e-05"), not rounded to "0"."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


def readable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return _Readable(value)
    if isinstance(value, float):
        return _Float(value)
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(readable(v) for v in value)
    return value


def guarded(fn: Callable[..., Any], *args: Any, what: str, input: Any, **kwargs: Any) -> Any:
    """call(fn, ...), with an exception from the candidate's code turned into a failure that
    shows the input that made it raise (a bare traceback line does not)."""
    try:
        return call(fn, *args, what=what, **kwargs)
    except PropertyFailure:
        raise
    except Exception as exc:  # any exception of candidate code is the verdict
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise PropertyFailure(f"{what} raised {type(exc).__name__}" + (f": {text}" if text else ""),
                              input=readable(input), note=candidate_lines(exc)) from exc


def shown(x: torch.Tensor, positions: torch.Tensor, **kwargs: Any) -> dict:
    return {"x": x, "positions": positions, **kwargs}


def close(got: Any, expected: torch.Tensor, prop: str, *, input: Any, **tolerance: Any) -> None:
    """_common.check_close, with inputs and results shown with their values."""
    try:
        check_close(got, expected, prop, input=input, **tolerance)
    except PropertyFailure as exc:
        if exc.note is None:
            raise PropertyFailure(exc.prop, input=readable(input), expected=exc.expected,
                                  got=exc.got) from None
        raise PropertyFailure(exc.prop, input=readable(input), expected=readable(expected),
                              got=readable(got), note=exc.note) from None


# ---------------------------------------------------------------------------- calls


# The helpers below hand the candidate copies of a scaling dict, so that a candidate that
# changes the dict fails only test_scaling_configs_reused_and_alternated, which passes the
# same dict again on purpose. They keep a copy of the tensor returned: the candidate's own
# stays shared with it, and a later call could rewrite an earlier result a test compares with.


def kept(result: Any) -> Any:
    return result.detach().clone() if isinstance(result, torch.Tensor) else result


def rope(solution: Any, x: torch.Tensor, positions: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    return kept(guarded(solution.apply_rope, x.clone(), positions.clone(), *args, what="apply_rope",
                        input=shown(x, positions, **({"base": args[0]} if args else {}), **kwargs),
                        **copy.deepcopy(kwargs)))


def inv_freq(solution: Any, dim: int, *args: Any, **kwargs: Any) -> Any:
    shown_args = dict(zip(("base", "scaling"), args), **kwargs)
    return kept(guarded(solution.rope_inv_freq, dim, *copy.deepcopy(args), what="rope_inv_freq",
                        input={"dim": dim, **shown_args}, **copy.deepcopy(kwargs)))


def make_embedding(solution: Any, dim: int, base: float = 10000.0, scaling: dict | None = None) -> Any:
    return guarded(solution.RotaryEmbedding, dim, base, copy.deepcopy(scaling), what="RotaryEmbedding",
                   input={"dim": dim, "base": base, "scaling": scaling})


def embed(embedding: Any, x: torch.Tensor, positions: torch.Tensor, **shown_too: Any) -> Any:
    return kept(guarded(embedding, x.clone(), positions.clone(), what="RotaryEmbedding.__call__",
                        input=shown(x, positions, **shown_too)))


def cached_positions(embedding: Any) -> Any:
    return call(lambda: embedding.cached_positions, what="RotaryEmbedding.cached_positions")


def expect_rotated(got: Any, reference: Any, x: torch.Tensor, positions: torch.Tensor, prop: str,
                   *, shown_input: dict | None = None, **kwargs: Any) -> None:
    """`got` is reference.apply_rope(x, positions, **kwargs) within the statement's
    tolerance: float32/float64 against the same dtype, fp16/bf16 against the float32
    computation of the same input (and the dtype checked first)."""
    shown_input = shown_input if shown_input is not None else shown(x, positions, **kwargs)
    if x.dtype in HALVES:
        expect(isinstance(got, torch.Tensor) and got.dtype == x.dtype and got.shape == x.shape,
               prop + " (the output has x's shape and dtype)", input=readable(shown_input),
               expected=f"shape {tuple(x.shape)}, {x.dtype}",
               got=f"shape {tuple(got.shape)}, {got.dtype}" if isinstance(got, torch.Tensor) else type(got).__name__)
        close(got.float(), reference.apply_rope(x.float(), positions, **kwargs), prop,
              input=shown_input, atol=position_atol(x, positions, base_atol=HALF_ATOL), rtol=0.0)
        return
    close(got, reference.apply_rope(x, positions, **kwargs), prop, input=shown_input,
          atol=position_atol(x, positions), rtol=0.0)


def expect_matches_reference(solution: Any, reference: Any, x: torch.Tensor, positions: torch.Tensor,
                             prop: str, **kwargs: Any) -> None:
    for_reference = copy.deepcopy(kwargs)  # a scaling dict the candidate changes stays intact here
    expect_rotated(rope(solution, x, positions, **kwargs), reference, x, positions, prop, **for_reference)


def expect_value_error(fn: Callable[[], Any], what: str, input: Any) -> None:
    """fn() must raise ValueError; any other exception propagates as the verdict."""
    try:
        got = fn()
    except ValueError:
        return
    raise PropertyFailure(f"{what} must raise ValueError", input=readable(input),
                          expected="ValueError", got=f"returned {type(got).__name__}")
