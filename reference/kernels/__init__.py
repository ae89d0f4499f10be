"""GPU kernels for the hot paths of the compute katas, in Triton (and one in CUDA C++).

Each module holds one kernel and a Python wrapper with a plain signature:

- ``flash_attention``  attention forward with online softmax (FlashAttention-2 tiling), for ``mha``
- ``paged_decode``     one decode token per sequence reading K/V through a block table, for
                       ``mha`` and ``paged-kv`` together
- ``rope``             fused rotary embedding (rotate-half and interleaved, partial rotary), for ``rope``
- ``bgmv``             LoRA shrink / expand over many adapters in one batch (Punica BGMV), for ``lora``
- ``cuda/``            paged decode attention again, in CUDA C++, loaded with
                       ``torch.utils.cpp_extension`` when a toolkit and a GPU are present

Triton is optional (``pip install -e .[kernels]``). ``import reference.kernels`` always works;
``HAS_TRITON`` says whether the kernels can run, and calling one without Triton raises
``KernelUnavailable`` with the reason. On a CPU-only machine the kernels run through the Triton
interpreter: set ``TRITON_INTERPRET=1`` before Triton is imported and pass CPU tensors.
"""

from __future__ import annotations

from reference.kernels._triton import (
    HAS_TRITON,
    TRITON_IMPORT_ERROR,
    KernelUnavailable,
    interpreter_enabled,
    kernel_skip_reason,
)
from reference.kernels.bgmv import bgmv_expand, bgmv_shrink, multi_lora_delta
from reference.kernels.flash_attention import flash_attention
from reference.kernels.paged_decode import paged_decode_attention
from reference.kernels.rope import rope

__all__ = [
    "HAS_TRITON",
    "TRITON_IMPORT_ERROR",
    "KernelUnavailable",
    "bgmv_expand",
    "bgmv_shrink",
    "flash_attention",
    "interpreter_enabled",
    "kernel_skip_reason",
    "multi_lora_delta",
    "paged_decode_attention",
    "rope",
]
