"""Shared helpers for hidden suites: tensor strategies, tolerances per dtype, closeness
checks that fail with a readable counterexample, and measurements (operations, FLOPs, host
syncs, new storages, execution time and growth rates) for efficiency tests."""

from __future__ import annotations

import math
import traceback
from typing import Any, Sequence

import torch
from hypothesis import strategies as st

from grader.protocol import PropertyFailure, show

# Explicit tolerances per dtype (atol, rtol), for results compared with a float32/float64
# computation of the same formula.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-9, 1e-7),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


_NOT_CANDIDATE = ("/grader/", "/reference/", "site-packages", "/torch/", "<")


def candidate_lines(exc: BaseException) -> str | None:
    """Where in the candidate's file the exception came from (best effort: the frames
    outside the grader, the reference and installed packages)."""
    lines = [f"line {f.lineno}, in {f.name}: {(f.line or '').strip()}"
             for f in traceback.extract_tb(exc.__traceback__)
             if not any(part in f.filename for part in _NOT_CANDIDATE)]
    return "in your file: " + " / ".join(lines[-2:]) if lines else None


@st.composite
def tensors(draw: Any, shape: Sequence[int], *, low: float = -3.0, high: float = 3.0,
            dtype: torch.dtype = torch.float32, integers: bool = False) -> torch.Tensor:
    """A tensor of `shape` with values in [low, high]; integer-valued when `integers`, which
    keeps shrunk counterexamples short and readable."""
    n = math.prod(shape)
    if integers:
        values = draw(st.lists(st.integers(int(low), int(high)), min_size=n, max_size=n))
    else:
        values = draw(st.lists(st.floats(low, high, allow_nan=False, allow_infinity=False,
                                         width=32), min_size=n, max_size=n))
    return torch.tensor(values, dtype=torch.float64).reshape(tuple(shape)).to(dtype)


@st.composite
def seeded_tensors(draw: Any, shape: Sequence[int], *, dtype: torch.dtype = torch.float32,
                   scale: float = 1.0) -> torch.Tensor:
    """A normal tensor from a drawn seed: fast for larger shapes (shrinks the seed only)."""
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * scale).to(dtype)


def check_close(got: Any, expected: torch.Tensor, prop: str, *, input: Any = None,
                atol: float | None = None, rtol: float | None = None) -> None:
    """Raise PropertyFailure unless `got` is a tensor of expected's shape and dtype whose
    values are within tolerance (per expected's dtype unless given); NaNs must match."""
    if not isinstance(got, torch.Tensor):
        raise PropertyFailure(prop + " (the result must be a torch.Tensor)", input=input,
                              expected=f"Tensor of shape {tuple(expected.shape)}",
                              got=f"{type(got).__name__}: {show(got)}")
    if tuple(got.shape) != tuple(expected.shape):
        raise PropertyFailure(prop + " (wrong shape)", input=input,
                              expected=f"shape {tuple(expected.shape)}", got=f"shape {tuple(got.shape)}")
    if got.dtype != expected.dtype:
        raise PropertyFailure(prop + " (wrong dtype)", input=input,
                              expected=str(expected.dtype), got=str(got.dtype))
    default_atol, default_rtol = tolerance(expected.dtype)
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    a, b = got.detach().double().cpu(), expected.detach().double().cpu()
    ok = torch.isclose(a, b, atol=atol, rtol=rtol, equal_nan=True)
    if bool(ok.all()):
        return
    bad = (~ok).nonzero()[0].tolist()
    diff = (a - b).abs().nan_to_num(nan=float("inf"))
    raise PropertyFailure(
        prop, input=input, expected=expected, got=got,
        note=f"first mismatch at index {tuple(bad)}: expected {b[tuple(bad)].item():.6g}, "
             f"got {a[tuple(bad)].item():.6g}; max abs diff {diff.max().item():.3g} "
             f"(atol={atol:g}, rtol={rtol:g})")


# Measurements (ops, FLOPs, syncs, storages, peak bytes, time, growth rates) live in the torch-free
# grader.suites._measure; re-exported here for the suites that already import torch.
from grader.suites._measure import (best_time_s, count_flops, count_ops, count_syncs,  # noqa: E402,F401 - re-exported, see above
                                    exec_time_s, growth_exponent, median_time_s, new_storages,
                                    peak_bytes)
