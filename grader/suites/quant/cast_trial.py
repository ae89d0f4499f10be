"""A harness run in the candidate's process (grader.protocol.run_in_one_process): the
candidate's FP8Scaler quantizes under a float8 conversion that does not saturate.

torch 2.13 on the CPU saturates when it casts to float8_e4m3fn (500 becomes 448); earlier
versions and other backends turn values past 448 into NaN. The statement asks for a clamp
before the cast, so that the result does not depend on the conversion. Here every conversion
to float8_e4m3fn (aten._to_copy, aten.copy_ into a float8 tensor) first turns the values
beyond +-448 into NaN, as a non-saturating conversion would: code that clamps first sees no
difference, code that relies on the cast gets NaN.

The mode is entered in this process only, around the candidate's quantize calls of this
trial (no measurement runs here). This module's source runs in the candidate's process: the
standard library and torch only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

E4M3_MAX = 448.0


def _unsaturated(src: Any) -> Any:
    if not isinstance(src, torch.Tensor) or not src.is_floating_point() or src.dtype == torch.float8_e4m3fn:
        return src
    return torch.where(src.abs() > E4M3_MAX, torch.full_like(src, float("nan")), src)


class _NonSaturatingCast(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default and kwargs.get("dtype") == torch.float8_e4m3fn:
            return func(_unsaturated(args[0]), *args[1:], **kwargs)
        if func is torch.ops.aten.copy_.default and args[0].dtype == torch.float8_e4m3fn:
            return func(args[0], _unsaturated(args[1]), *args[2:], **kwargs)
        return func(*args, **kwargs)


def quantize_without_saturating_cast(mod: Any, history_len: int, margin: int, xs: list) -> list:
    """FP8Scaler(history_len, margin).quantize(x) for each x of xs under the non-saturating
    conversion. Returns, per call, ("ok", values as floats, scale as a float) or
    ("error", the exception's type and message)."""
    scaler = mod.FP8Scaler(history_len, margin)
    results: list = []
    for x in xs:
        try:
            with _NonSaturatingCast():
                x_fp8, scale = scaler.quantize(x.clone())
            results.append(("ok", x_fp8.float().flatten().tolist(), float(scale)))
        except Exception as exc:  # noqa: BLE001 - reported to the judge
            results.append(("error", f"{type(exc).__name__}: {exc}"[:300]))
    return results
