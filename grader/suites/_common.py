"""Shared helpers for hidden suites: tensor strategies, tolerances per dtype, closeness
checks that fail with a readable counterexample, and measurements (operations, FLOPs, host
syncs, new storages, execution time and growth rates) for efficiency tests."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
from hypothesis import strategies as st

from grader.worker.measure import measuring
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


# ---------------------------------------------------------------------------- measurement
# Efficiency tests measure only through these helpers (grader.engine.measure): the
# candidate's code runs in a worker process, and its share is measured there.


def count_ops(fn: Callable[[], Any]) -> int:
    """Number of torch operations `fn()` calls (functions, methods, operators): exact and
    immune to machine noise, so "no Python loop over rows/heads" is checked by comparing
    counts at two sizes. Counted at the torch-function level: a dispatch-level mode would
    import torch._dynamo on first use, about a second of every grading run."""
    with torch.no_grad(), measuring("ops") as m:
        fn()
    return m.ops


def count_flops(fn: Callable[[], Any]) -> int:
    """FLOPs of `fn()` as torch.utils.flop_counter.FlopCounterMode counts them."""
    with measuring("flops") as m:
        fn()
    return m.flops


def count_syncs(fn: Callable[[], Any]) -> int:
    """Device-to-host synchronisations `fn()` makes (item, tolist, cpu, boolean-mask
    indexing, ...; see grader.engine.measure)."""
    with measuring("syncs") as m:
        fn()
    return m.syncs


def new_storages(fn: Callable[[], Any]) -> list[tuple[int, tuple[int, ...], str]]:
    """Every tensor storage `fn()` creates: (numel of the storage, shape, dtype name)."""
    with measuring("storages") as m:
        fn()
    return m.storages


def exec_time_s(fn: Callable[[], Any]) -> float:
    """Seconds `fn()` spends executing: its own code here plus the candidate's calls as the
    worker timed them (the transport between the two does not count)."""
    with measuring("time") as m:
        fn()
    return m.time_s


def median_time_s(fn: Callable[[], Any], *, repeats: int = 5, min_time_s: float = 0.002) -> float:
    """Median execution time of fn(), each sample looping until it lasts at least min_time_s."""
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        loops, elapsed = 0, 0.0
        while elapsed < min_time_s:
            elapsed += exec_time_s(fn)
            loops += 1
        samples.append(elapsed / loops)
    samples.sort()
    return samples[len(samples) // 2]


def best_time_s(fn: Callable[[], Any], *, repeats: int = 5, min_time_s: float = 0.002) -> float:
    """Best (minimum) per-call execution time of fn() over `repeats` samples: the least
    noisy estimate when other work shares the machine."""
    fn()  # warm-up
    best = math.inf
    for _ in range(repeats):
        loops, elapsed = 0, 0.0
        while elapsed < min_time_s:
            elapsed += exec_time_s(fn)
            loops += 1
        best = min(best, elapsed / loops)
    return best


def growth_exponent(run_at: Callable[[int], Callable[[], Any]], sizes: Sequence[int], *,
                    timer: Callable[[Callable[[], Any]], float] = median_time_s) -> float:
    """Slope of log(time) against log(size): about 1 for linear work, 2 for quadratic.
    `run_at(n)` prepares a workload of size n and returns the callable to time."""
    xs, ys = [], []
    for n in sizes:
        xs.append(math.log(n))
        ys.append(math.log(max(timer(run_at(n)), 1e-9)))
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    num = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den
