"""The kernel tests really run somewhere: on a machine without a GPU the interpreter must be on.

Without this, importing reference.kernels before tests/kernels/conftest.py set TRITON_INTERPRET
would turn every CPU kernel test into a skip, and CI would pass without testing anything.
"""

from __future__ import annotations

import pytest
import torch


def test_kernels_run_on_this_machine():
    pytest.importorskip("triton", reason="Triton is not installed: `pip install -e .[kernels]`")
    from reference.kernels import interpreter_enabled, kernel_skip_reason

    if torch.cuda.is_available():
        assert kernel_skip_reason("cuda") is None or interpreter_enabled()
    else:
        assert interpreter_enabled(), (
            "reference.kernels was imported before TRITON_INTERPRET=1 was set; "
            "the CPU kernel tests would all skip. Run `TRITON_INTERPRET=1 pytest tests/kernels`."
        )
        assert kernel_skip_reason("cpu") is None
