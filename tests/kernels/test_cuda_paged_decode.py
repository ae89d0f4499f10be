"""The CUDA C++ paged decode kernel (reference/kernels/cuda/paged_decode.cu) equals the oracle.

Needs no Triton: a GPU, a CUDA build of torch and a toolkit (nvcc); skipped otherwise, with the reason.
"""

from __future__ import annotations

import pytest
import torch

from tests.kernels._paged import gpu_case, make_paged_inputs, paged_oracle
from tests.kernels._support import tolerance


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_cpp_kernel_matches(dtype):
    """The CUDA C++ version (reference/kernels/cuda/paged_decode.cu) agrees with the oracle."""
    from reference.kernels.cuda import cuda_skip_reason, paged_decode_attention_cuda

    if (reason := cuda_skip_reason()) is not None:
        pytest.skip(f"CUDA C++ kernel: {reason}")
    inputs = gpu_case(dtype)
    torch.testing.assert_close(paged_decode_attention_cuda(*inputs).double(), paged_oracle(*inputs), **tolerance(dtype))


def test_cuda_cpp_kernel_edge_cases():
    """Empty sequence, head_dim not a multiple of 32, block size 3, GQA 3:1, shuffled blocks."""
    from reference.kernels.cuda import cuda_skip_reason, paged_decode_attention_cuda

    if (reason := cuda_skip_reason()) is not None:
        pytest.skip(f"CUDA C++ kernel: {reason}")
    case = {"batch": 3, "block_size": 3, "max_blocks": 4, "seq_lens": [0, 7, 12], "num_spare_blocks": 2,
            "num_kv_heads": 2, "groups": 3, "head_dim": 40, "seed": 3}
    inputs = make_paged_inputs(case, torch.float32, "cuda")
    got = paged_decode_attention_cuda(*inputs)
    assert torch.equal(got[0], torch.zeros_like(got[0]))
    torch.testing.assert_close(got.double(), paged_oracle(*inputs), **tolerance(torch.float32))
