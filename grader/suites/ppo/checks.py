"""Checks shared by the ppo suite's levels: scalars and stats, gradients, errors (looked at
forward: the next call after a rejected one), unchanged inputs, low-precision results."""

from __future__ import annotations

from typing import Any, Callable

import torch

from grader.protocol import PropertyFailure, expect
from grader.suites._common import check_close, tolerance


def scalar_of(value: Any, what: str, input: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.detach().reshape(())
    raise PropertyFailure(f"{what} must be a scalar tensor", input=input,
                          expected="0-d tensor", got=value)


def check_stats(got: Any, expected: dict[str, torch.Tensor], prop: str, input: Any) -> None:
    expect(isinstance(got, dict), f"{prop}: the stats must be a dict", input=input,
           expected=f"dict with keys {sorted(expected)}", got=type(got).__name__)
    for key, want in expected.items():
        expect(key in got, f"{prop}: stats['{key}'] is missing", input=input,
               expected=sorted(expected), got=sorted(got))
        value = scalar_of(got[key], f"stats['{key}']", input)
        atol, rtol = tolerance(want.dtype)
        check_close(value.double(), want.detach().double(), f"{prop}: stats['{key}']",
                    input=input, atol=atol, rtol=rtol)


def check_grad(got: torch.Tensor | None, expected: torch.Tensor, prop: str, input: Any) -> None:
    got = torch.zeros_like(expected) if got is None else got
    check_close(got, expected, prop, input=input)


def check_low_precision(got: Any, exact: torch.Tensor, dtype: torch.dtype, prop: str, input: Any) -> None:
    """`got` has `dtype` and is close to `exact` (the same formula in float64 on the same
    inputs) within a few units of `dtype`'s precision: computing in `dtype` or in a wider
    type and rounding at the end are both accepted."""
    expect(isinstance(got, torch.Tensor) and got.dtype == dtype, f"{prop}: the result has the "
           "input's dtype", input=input, expected=str(dtype),
           got=str(got.dtype) if isinstance(got, torch.Tensor) else type(got).__name__)
    atol, rtol = tolerance(dtype)
    check_close(got.detach().double(), exact.detach().double(), prop, input=input,
                atol=4 * atol, rtol=4 * rtol)


def expect_value_error(fn: Callable[[], Any], prop: str, input: Any) -> None:
    try:
        fn()
    except ValueError:
        return
    except (NotImplementedError, PropertyFailure):
        raise
    except Exception as exc:  # the wrong exception is the verdict
        raise PropertyFailure(prop, input=input, expected="ValueError",
                              got=f"{type(exc).__name__}: {exc}") from exc
    raise PropertyFailure(prop, input=input, expected="ValueError", got="no exception")


def shapes_of(inp: dict[str, Any]) -> dict[str, Any]:
    return {k: (f"shape {tuple(v.shape)}" if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}


def kept(value: Any) -> Any:
    """A result (tensors, tuples, lists, dicts of them) as copies the candidate's later calls
    cannot reach: what it returned stays shared with it, and a test compares a first result
    with a later one. A tensor keeps requires_grad (clone, not detach), which tests check."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [kept(v) for v in value]
    if isinstance(value, tuple):
        return tuple(kept(v) for v in value)
    if isinstance(value, dict):
        return {k: kept(v) for k, v in value.items()}
    return value


def copies(*tensors: Any) -> list[Any]:
    """Inputs for the candidate: copies of the tensors (the suite later reads its own, for
    the expected value or the reference's call), anything else as it is."""
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in tensors]


def snapshot(inp: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in inp.items() if isinstance(v, torch.Tensor)}


def expect_unchanged(before: dict[str, torch.Tensor], after: dict[str, Any], what: str) -> None:
    for name, old in before.items():
        new = after[name].detach()
        same = old.dtype == new.dtype and old.shape == new.shape and torch.equal(
            torch.nan_to_num(old.double(), nan=1234.5), torch.nan_to_num(new.double(), nan=1234.5))
        expect(same, f"{what} must not modify its input '{name}'", expected=old, got=new)


def same_result(a: Any, b: Any) -> bool:
    """Whether two results (tensors, tuples, dicts of tensors) are identical, NaN included."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
            torch.nan_to_num(a.detach().double(), nan=1234.5), torch.nan_to_num(b.detach().double(), nan=1234.5))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_result(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_result(a[k], b[k]) for k in a)
    return a == b
