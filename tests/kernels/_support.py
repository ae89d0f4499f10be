"""Shared pieces of the kernel tests: hypothesis settings, dtypes per device, tolerances."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, settings

# The interpreter runs every Triton program in numpy: keep draws few and small.
FEW = 6
SOME = 15


def kernel_settings(max_examples: int) -> settings:
    """Derandomized, no example database, no deadline (the first call compiles or warms up)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                               HealthCheck.data_too_large],
    )


def dtypes_for(device: str) -> list[torch.dtype]:
    """fp32 in the interpreter (bf16 tl.dot is not trusted there); all three on a GPU."""
    if device == "cpu":
        return [torch.float32]
    return [torch.float32, torch.float16, torch.bfloat16]


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """atol/rtol against a float64 oracle fed the same (rounded) inputs, for O(1) values."""
    return {
        torch.float32: {"atol": 2e-5, "rtol": 2e-5},
        torch.float16: {"atol": 3e-3, "rtol": 3e-3},
        torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
    }[dtype]


def randn(generator: torch.Generator, *shape: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """Standard normal values drawn on the CPU from a seeded generator, then moved."""
    return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)


def seeded(seed: int) -> torch.Generator:
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator
