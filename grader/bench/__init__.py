"""The engine of ``kata bench``: time a kata's fixed workload for every implementation at hand.

For one kata, ``run_bench`` times up to four implementations of the same workload:

    yours          the candidate's file (loaded from its path, registered under the module name)
    reference      ``reference/<module>.py``
    kernel         the Triton (or CUDA C++) kernel in ``reference/kernels``, on a CUDA device only
    torch builtin  the PyTorch built-in where one exists (scaled_dot_product_attention)

Each is warmed up, then timed ``repeats`` times (each timing loops the call enough to last a
few milliseconds, with a device synchronize around it); the row carries the median per call,
a throughput (``tflops``, ``gbps``, ``ops_per_s`` or ``steps_per_s``) and ``ratio_to_reference``
= median / the reference's median (2.0 = twice as slow). Attention rows also carry
``ratio_to_builtin`` (to scaled_dot_product_attention). An implementation that cannot run
(not written yet, raises, reference not importable, kernel without a GPU) gives a row with
``median_ms`` None and a ``note`` saying why; the candidate's code never crashes the bench.
The candidate's code runs in this process: a solution that hangs hangs the bench (Ctrl-C).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from grader.bench.timing import BENCH_SLUGS, BenchError, _add_ratios, _load_impls, _measure

__all__ = ["BENCH_SLUGS", "BenchError", "run_bench"]
from grader.bench.workloads import _CASES


def run_bench(slug: str, solution_path: Path | None, device: str, repeats: int = 5,
              quick: bool = False, cpp_reference: Path | str | None = None) -> list[dict[str, Any]]:
    """Time the kata's fixed workload(s) for yours, the reference, the kernel and the built-in.

    Args:
        slug: one of BENCH_SLUGS.
        solution_path: the candidate's file (a C++ solution: its built module), or None for
            no "yours" row timing.
        cpp_reference: the C++ reference's built module (a "reference c++" row), or why
            there is none.
        device: "cpu" or "cuda".
        repeats: timed repetitions; the median is reported.
        quick: tiny workloads and one call per timing (for tests).

    Returns:
        Rows ``{impl, workload, median_ms, ratio_to_reference, note}`` plus, where meaningful,
        ``tflops`` / ``gbps`` / ``ops_per_s`` / ``steps_per_s``, ``ratio_to_builtin`` and ``variant``.

    Raises:
        BenchError: unknown slug, unknown device, or cuda asked without a GPU.
    """
    if slug not in _CASES:
        raise BenchError(f"no benchmark for kata '{slug}'", hint=f"choose one of: {', '.join(BENCH_SLUGS)}")
    if device not in ("cpu", "cuda"):
        raise BenchError(f"device must be cpu or cuda, not '{device}'")
    if device == "cuda" and not torch.cuda.is_available():
        raise BenchError("device cuda needs a CUDA GPU, and torch sees none", hint="use --device cpu")
    if repeats < 1:
        raise BenchError(f"repeats must be >= 1, got {repeats}")
    module_name = slug.replace("-", "_")
    previous = sys.modules.get(module_name)
    try:
        impls = _load_impls(module_name, solution_path, cpp_reference)
        rows = [_measure(case, device, repeats, quick)
                for make_cases in _CASES[slug] for case in make_cases(impls, device, quick)]
    finally:  # the candidate's module was registered under the kata's name: put back what was there
        if previous is None:
            sys.modules.pop(module_name, None)
        else:
            sys.modules[module_name] = previous
    _add_ratios(rows)
    return rows
