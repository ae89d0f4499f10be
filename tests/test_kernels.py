"""reference.kernels without a GPU and without Triton: importable, honest about why it cannot run.

The kernels themselves are tested in tests/kernels/ (interpreter on CPU, compiled on a GPU).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_import_works_without_triton():
    """With triton unimportable, the package imports, HAS_TRITON is False and a call says what to install."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["triton"] = None  # makes `import triton` raise ImportError
        import torch
        import reference.kernels as kernels
        assert kernels.HAS_TRITON is False
        assert "pip install -e .[kernels]" in kernels.kernel_skip_reason("cpu")
        q = torch.randn(1, 1, 2, 4)
        try:
            kernels.flash_attention(q, q, q)
        except kernels.KernelUnavailable as exc:
            assert "Triton is not installed" in str(exc), exc
        else:
            raise AssertionError("expected KernelUnavailable")
        from reference.kernels.cuda import cuda_skip_reason
        print("ok", cuda_skip_reason() is not None or torch.cuda.is_available())
        """
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok True")


def test_skip_reasons_name_the_missing_piece():
    from reference.kernels import kernel_skip_reason
    from reference.kernels.cuda import cuda_skip_reason

    if not torch.cuda.is_available():
        assert "CUDA" in kernel_skip_reason("cuda") or "Triton" in kernel_skip_reason("cuda")
        assert cuda_skip_reason() is not None
    assert kernel_skip_reason("mps") is not None


def test_shape_errors_come_before_any_launch():
    """Bad shapes are a ValueError naming the argument, whether or not Triton can run here."""
    import pytest

    from reference.kernels import bgmv_shrink, flash_attention, paged_decode_attention, rope

    q = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="4-D"):
        flash_attention(q[0], q, q)
    with pytest.raises(ValueError, match="H_kv"):
        flash_attention(q, torch.randn(1, 3, 3, 8), torch.randn(1, 3, 3, 8))
    with pytest.raises(ValueError, match="block_tables"):
        paged_decode_attention(torch.randn(2, 2, 8), torch.randn(4, 2, 1, 8), torch.randn(4, 2, 1, 8),
                               torch.zeros(2, 2, dtype=torch.int64), torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="rotary_dim"):
        rope(q, torch.arange(3), rotary_dim=3)
    with pytest.raises(ValueError, match="lora_a"):
        bgmv_shrink(torch.randn(2, 8), torch.randn(2, 4, 7), torch.zeros(2, dtype=torch.int64))
