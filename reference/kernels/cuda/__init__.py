"""CUDA C++ kernels, compiled on first use with ``torch.utils.cpp_extension.load``.

``paged_decode.cu`` is the paged decode attention of ``reference/kernels/paged_decode.py``
written in CUDA C++ (warp-per-token online softmax, shuffles for the dot product), so the
same algorithm can be read in both languages. Building needs a GPU, a CUDA build of torch and
a CUDA toolkit (nvcc) whose major version matches torch's; ``cuda_skip_reason()`` says which
is missing. The first build takes a minute or two and is cached under
``~/.cache/torch_extensions`` (``TORCH_EXTENSIONS_DIR`` overrides).
"""

from __future__ import annotations

import functools
import math
import os
import shutil
from pathlib import Path
from types import ModuleType

import torch

from reference.kernels._triton import KernelUnavailable

SOURCE_DIR = Path(__file__).resolve().parent
PAGED_DECODE_SOURCE = SOURCE_DIR / "paged_decode.cu"


def _cuda_home() -> str | None:
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME:
        return CUDA_HOME
    nvcc = shutil.which("nvcc")
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else None


def cuda_skip_reason() -> str | None:
    """Why the CUDA C++ kernels cannot be built and run here, or None when they can."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is not a CUDA build"
    if not torch.cuda.is_available():
        return "no CUDA device is available (torch.cuda.is_available() is False)"
    cuda_home = _cuda_home()
    if cuda_home is None or not os.path.exists(os.path.join(cuda_home, "bin", "nvcc")):
        return "no CUDA toolkit found: install one (nvcc) or set CUDA_HOME"
    return None


@functools.lru_cache(maxsize=None)
def load_paged_decode_extension(verbose: bool = False) -> ModuleType:
    """Compile (first call) and import the paged decode extension.

    Raises:
        KernelUnavailable: no GPU, no CUDA build of torch, or no toolkit (the message says which).
        RuntimeError: the toolkit is there but the build failed (compiler output in the message).
    """
    reason = cuda_skip_reason()
    if reason is not None:
        raise KernelUnavailable(reason)
    from torch.utils.cpp_extension import load

    if "CUDA_HOME" not in os.environ and "CUDA_PATH" not in os.environ:
        os.environ["CUDA_HOME"] = _cuda_home() or ""
    return load(
        name="kata_paged_decode_cuda",
        sources=[str(PAGED_DECODE_SOURCE)],
        extra_cflags=["-O3"],
        extra_cuda_cflags=["-O3"],
        verbose=verbose,
    )


def paged_decode_attention_cuda(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    """Same contract as ``reference.kernels.paged_decode_attention`` (D <= 256, CUDA tensors).

    q (B, H, D); k_cache, v_cache (NB, BS, H_kv, D); block_tables (B, max_blocks) int32;
    seq_lens (B,) int32 -> (B, H, D) in q's dtype.
    """
    extension = load_paged_decode_extension()
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return extension.paged_decode_attention(
        q,
        k_cache,
        v_cache,
        block_tables.to(torch.int32).contiguous(),
        seq_lens.to(torch.int32).contiguous(),
        float(scale),
    )


__all__ = [
    "PAGED_DECODE_SOURCE",
    "cuda_skip_reason",
    "load_paged_decode_extension",
    "paged_decode_attention_cuda",
]
