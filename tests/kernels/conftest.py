"""Kernel tests: the Triton interpreter on CPU, the compiled kernels on a GPU.

Triton decides between interpreter and compiler when a kernel is decorated, that is when
``reference.kernels`` is imported, so the mode is fixed here, before any test module of this
folder imports Triton: ``TRITON_INTERPRET=1`` unless a GPU is present (then the kernels are
compiled, the CUDA tests run and the CPU ones skip). On a GPU machine run both:

    TRITON_INTERPRET=1 pytest tests/kernels     # interpreter, CPU tensors, fp32
    TRITON_INTERPRET=0 pytest tests/kernels     # compiled, CUDA tensors, fp32/fp16/bf16
"""

from __future__ import annotations

import os

import pytest
import torch

if "TRITON_INTERPRET" not in os.environ:
    os.environ["TRITON_INTERPRET"] = "0" if torch.cuda.is_available() else "1"


@pytest.fixture(params=["cpu", "cuda"])
def device(request) -> str:
    """The device a kernel test runs on; skipped, with the reason, where the kernels cannot run."""
    pytest.importorskip("triton", reason="Triton is not installed: `pip install -e .[kernels]`")
    from reference.kernels import kernel_skip_reason

    reason = kernel_skip_reason(request.param)
    if reason is not None:
        pytest.skip(f"{request.param}: {reason}")
    return request.param
