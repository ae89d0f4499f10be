"""Timing for ``kata bench``: load the implementations, warm up, time, take medians."""

from __future__ import annotations

import importlib
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

import torch

from grader.worker.loading import import_from_path
from grader.errors import KataError

BENCH_SLUGS = ("mha", "flash-attn", "rope", "lora", "paged-kv", "scheduler", "sampling", "ppo", "quant", "train-memory")
NEEDS_CUDA = "needs cuda (the Triton interpreter on CPU checks correctness, it does not measure speed)"
_MIN_TIMING_S = {False: 0.02, True: 0.0}  # quick: one call per timing


class BenchError(KataError):
    """The bench cannot run as asked (unknown kata, missing device)."""


@dataclass
class Case:
    """One implementation of one workload. ``fn`` None means it is not run (``note`` says why).

    ``work`` maps the throughput key to the amount of work per call (FLOPs, bytes, operations);
    None there means ``fn`` returns the amount itself (a trace that counts its own steps).
    """

    workload: str
    impl: str
    fn: Callable[[], Any] | None
    work: Mapping[str, float | None] = field(default_factory=dict)
    note: str = ""
    variant: str | None = None


# ----------------------------------------------------------------------------- loading


def _load_impls(module_name: str, solution_path: Path | None,
                cpp_reference: Path | str | None = None) -> dict[str, ModuleType | str]:
    """{"yours": module or why not, "reference": module or why not}, and "reference c++"
    (the C++ reference's built module, or why not) when `cpp_reference` is given."""
    impls: dict[str, ModuleType | str] = {}
    if solution_path is None:
        impls["yours"] = "no solution file given"
    else:
        try:
            impls["yours"] = import_from_path(Path(solution_path), module_name)
        except BaseException as exc:  # noqa: BLE001 - a broken solution is a row, not a crash
            impls["yours"] = f"importing {solution_path} failed: {_short(exc)}"
    if isinstance(cpp_reference, str):
        impls["reference c++"] = cpp_reference
    elif cpp_reference is not None:
        try:
            impls["reference c++"] = import_from_path(cpp_reference, f"{module_name}_cpp_reference")
        except BaseException as exc:  # noqa: BLE001 - a row, not a crash
            impls["reference c++"] = f"the C++ reference did not load: {_short(exc)}"
    try:
        impls["reference"] = importlib.import_module(f"reference.{module_name}")
    except Exception as exc:  # noqa: BLE001 - a reference being written is a note
        impls["reference"] = f"reference/{module_name}.py is not importable yet: {_short(exc)}"
    return impls


def _short(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        return "not implemented yet (NotImplementedError)"
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return text if len(text) <= 160 else text[:157] + "..."


# ----------------------------------------------------------------------------- timing


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _median_seconds(fn: Callable[[], Any], device: str, repeats: int, quick: bool) -> tuple[float, Any]:
    """Warm up, size an inner loop to last a few ms, return (median seconds per call, last result)."""
    result = fn()  # warm-up: first-call compilation, allocator growth, caches
    _sync(device)
    start = time.perf_counter()
    result = fn()
    _sync(device)
    once = max(time.perf_counter() - start, 1e-7)
    inner = max(1, min(1000, int(_MIN_TIMING_S[quick] / once)))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            result = fn()
        _sync(device)
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples), result


def _measure(case: Case, device: str, repeats: int, quick: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"impl": case.impl, "workload": case.workload, "median_ms": None,
                           "ratio_to_reference": None, "note": case.note}
    if case.variant:
        row["variant"] = case.variant
    if case.fn is None:
        return row
    try:
        with torch.no_grad():
            seconds, result = _median_seconds(case.fn, device, repeats, quick)
    except BaseException as exc:  # candidate code failing is a row
        if isinstance(exc, KeyboardInterrupt):
            raise
        row["note"] = f"raised {_short(exc)}"
        return row
    row["median_ms"] = seconds * 1e3
    for key, amount in case.work.items():
        amount = float(result) if amount is None else amount
        scale = 1e12 if key == "tflops" else 1e9 if key == "gbps" else 1.0
        row[key] = amount / seconds / scale
    return row


def _add_ratios(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        for impl, key in (("reference", "ratio_to_reference"), ("torch builtin", "ratio_to_builtin")):
            base = next((r["median_ms"] for r in rows if r["impl"] == impl and r["workload"] == row["workload"]
                         and r["median_ms"]), None)
            if base and row["median_ms"]:
                row[key] = row["median_ms"] / base


# ----------------------------------------------------------------------------- case helpers


def _impl_cases(workload: str, impls: dict[str, ModuleType | str], make_fn: Callable[[ModuleType], Callable[[], Any]],
                work: Mapping[str, float | None]) -> list[Case]:
    """A yours and a reference case, each ``make_fn(module)``; a failure to set up becomes a note."""
    cases = []
    for impl in [i for i in ("yours", "reference", "reference c++") if i in impls]:
        module = impls[impl]
        if isinstance(module, str):
            cases.append(Case(workload, impl, None, work, note=module))
            continue
        try:
            cases.append(Case(workload, impl, make_fn(module), work))
        except BaseException as exc:  # noqa: BLE001 - candidate set-up code may fail
            cases.append(Case(workload, impl, None, work, note=f"set-up raised {_short(exc)}"))
    return cases


def _kernel_case(workload: str, device: str, make_fn: Callable[[], Callable[[], Any]],
                 work: Mapping[str, float | None], variant: str = "triton") -> Case:
    if device != "cuda":
        return Case(workload, "kernel", None, work, note=NEEDS_CUDA, variant=variant)
    if variant == "cuda c++":
        from reference.kernels.cuda import cuda_skip_reason as skip_reason
    else:
        from reference.kernels import kernel_skip_reason

        def skip_reason() -> str | None:
            return kernel_skip_reason("cuda")
    reason = skip_reason()
    if reason is not None:
        return Case(workload, "kernel", None, work, note=reason, variant=variant)
    return Case(workload, "kernel", make_fn(), work, variant=variant)
