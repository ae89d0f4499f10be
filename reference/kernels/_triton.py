"""Guarded Triton import shared by the kernel modules.

Without Triton, ``triton`` and ``tl`` are placeholders that let the ``@triton.jit`` kernels be
*defined* (so ``import reference.kernels`` works everywhere) but never launched: every wrapper
calls ``require_device(tensor)`` first, which raises ``KernelUnavailable`` with the reason.

Triton decides at decoration time whether a kernel is compiled or interpreted, so the
interpreter flag is read here, once, before the kernel modules are imported.
"""

from __future__ import annotations

import os
from typing import Any

import torch


class KernelUnavailable(RuntimeError):
    """A kernel cannot run here; the message says why and what to do."""


class _Missing:
    """Stands in for ``triton`` / ``tl`` when Triton is absent: any attribute, any call."""

    def __getattr__(self, name: str) -> Any:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __getitem__(self, item: Any) -> Any:
        return self


try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
    TRITON_IMPORT_ERROR: str | None = None
except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install that fails while importing
    triton = _Missing()
    tl = _Missing()
    HAS_TRITON = False
    TRITON_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"


def _interpret_flag() -> bool:
    if not HAS_TRITON:
        return False
    try:
        from triton import knobs

        return bool(knobs.runtime.interpret)
    except Exception:  # noqa: BLE001 - an older Triton without knobs, or one that moved them
        return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


# Read once: the kernels below are decorated (compiled or interpreted) at import time.
_INTERPRET = _interpret_flag()


def interpreter_enabled() -> bool:
    """True when the kernels were built for the Triton interpreter (CPU tensors)."""
    return _INTERPRET


def kernel_skip_reason(device: str | torch.device = "cuda") -> str | None:
    """Why the Triton kernels cannot run on ``device`` here, or None when they can."""
    if not HAS_TRITON:
        return (
            f"Triton is not installed ({TRITON_IMPORT_ERROR}); "
            "install the extra with `pip install -e .[kernels]`"
        )
    kind = torch.device(device).type
    if kind == "cpu" and not _INTERPRET:
        return (
            "CPU tensors need the Triton interpreter: set TRITON_INTERPRET=1 "
            "before triton and reference.kernels are imported"
        )
    if kind == "cuda" and not torch.cuda.is_available():
        return "no CUDA device is available (torch.cuda.is_available() is False)"
    if kind == "cuda" and _INTERPRET:
        return "the kernels were built for the interpreter (TRITON_INTERPRET=1); set TRITON_INTERPRET=0 for the GPU"
    if kind not in ("cpu", "cuda"):
        return f"device {kind!r} is not supported by these kernels (cuda, or cpu with the interpreter)"
    return None


def require_device(tensor: torch.Tensor) -> None:
    """Raise KernelUnavailable when the kernels cannot run on ``tensor``'s device."""
    reason = kernel_skip_reason(tensor.device)
    if reason is not None:
        raise KernelUnavailable(reason)


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (Triton block shapes must be powers of two)."""
    return 1 << max(0, int(n) - 1).bit_length()
