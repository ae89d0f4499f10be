"""Comparisons with the reference and calls into the candidate, shared by the mha levels.

The candidate's module is a proxy to another process: tensors go by value, so every call
gets clones (an in-place edit by the candidate must not corrupt the expected value;
test_inputs_not_modified checks that separately), and results are compared after they
come back. A result is kept as a copy: the tensor the candidate returned stays shared with
it, so a later call could rewrite an earlier result that a test compares with (a leak test,
an invariance). Expected values are the reference computed in float64, cast to q's dtype.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch

from grader.protocol import PropertyFailure, call, expect
from grader.suites._common import candidate_lines, check_close

# ------------------------------------------------------------------------------ rendering


class _Readable:
    """A tensor rendered with its values, floats with a decimal point ("2.0", not "2")
    (protocol.show elides values below depth 4 and prints 2.0 as 2)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __repr__(self) -> str:
        t = self.tensor.detach().cpu()
        meta = f"shape={tuple(t.shape)}, dtype={str(t.dtype).replace('torch.', '')}"
        if t.numel() > 64:
            return f"tensor(first values {_values(t.flatten()[:8])}, ..., {meta})"
        return f"tensor({_values(t)}, {meta})"


def _values(t: torch.Tensor) -> Any:
    if t.dtype == torch.bool or not t.is_floating_point():
        return t.tolist()
    return t.double().round(decimals=5).tolist()  # python floats: 2.0, -inf


class _Float:
    """A float shown as Python writes it ("0.0", "1e-05"), not rounded to "0"."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


def readable(value: Any) -> Any:
    """`value` with every tensor wrapped so the scorecard shows its values."""
    if isinstance(value, torch.Tensor):
        return _Readable(value)
    if isinstance(value, float):
        return _Float(value)
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(readable(v) for v in value)
    return value


def close(got: Any, expected: torch.Tensor, prop: str, *, input: Any, **tolerance: Any) -> None:
    """_common.check_close, with inputs and results shown with their values."""
    try:
        check_close(got, expected, prop, input=input, **tolerance)
    except PropertyFailure as exc:
        if exc.note is None:  # shape / dtype / type mismatch: the message is already complete
            raise PropertyFailure(exc.prop, input=readable(input), expected=exc.expected,
                                  got=exc.got) from None
        raise PropertyFailure(exc.prop, input=readable(input), expected=readable(expected),
                              got=readable(got), note=exc.note) from None


def guarded(fn: Callable[..., Any], *args: Any, what: str, input: Any, **kwargs: Any) -> Any:
    """call(fn, ...), with an exception from the candidate's code turned into a failure that
    shows the input that made it raise (a bare traceback line does not)."""
    try:
        return call(fn, *args, what=what, **kwargs)
    except PropertyFailure:
        raise
    except Exception as exc:  # any exception of candidate code is the verdict
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise PropertyFailure(f"{what} raised {type(exc).__name__}" + (f": {text}" if text else ""),
                              input=readable(input), note=candidate_lines(exc)) from exc


def shown(case: dict, **kwargs: Any) -> dict:
    """The input of an attention() call as the scorecard shows it (defaults left out)."""
    return {**case, **{k: v for k, v in kwargs.items() if v is not None and v is not False}}


# ------------------------------------------------------------------------------ attention


def exact(reference: Any, case: dict, **kwargs: Any) -> torch.Tensor:
    """The reference computed in float64, cast to the dtype of q."""
    mask = kwargs.pop("attn_mask", None)
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    out = reference.attention(case["q"].double(), case["k"].double(), case["v"].double(),
                              attn_mask=mask, **kwargs)
    return out.to(case["q"].dtype)


def kept(result: Any) -> Any:
    """A tensor result as a copy the candidate's later calls cannot reach."""
    return result.detach().clone() if isinstance(result, torch.Tensor) else result


def run(solution: Any, case: dict, **kwargs: Any) -> Any:
    """The candidate's attention on copies of the inputs; the result kept as a copy."""
    copies = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    return kept(guarded(solution.attention, case["q"].clone(), case["k"].clone(), case["v"].clone(),
                        what="attention()", input=shown(case, **kwargs), **copies))


def expect_attention(solution: Any, reference: Any, case: dict, prop: str, **kwargs: Any) -> None:
    """The candidate's attention(case, **kwargs) equals the exact result."""
    close(run(solution, case, **kwargs), exact(reference, case, **kwargs), prop,
          input=shown(case, **kwargs))


def expect_tensor(got: Any, shape: tuple[int, ...], prop: str, *, input: Any) -> None:
    expect(isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(shape), prop,
           input=readable(input), expected=f"a tensor of shape {tuple(shape)}",
           got=f"shape {tuple(got.shape)}" if isinstance(got, torch.Tensor) else type(got).__name__)


def raises_value_error(fn: Callable[[], Any], what: str) -> tuple[bool, str]:
    """(True, ...) when fn() raises ValueError; any other outcome is described."""
    try:
        got = fn()
    except ValueError:
        return True, "ValueError"
    except NotImplementedError as exc:
        raise PropertyFailure(f"{what} is not implemented yet (NotImplementedError)") from exc
    except Exception as exc:  # noqa: BLE001 - any other exception is the wrong answer
        return False, f"{type(exc).__name__}: {exc}"
    return False, f"no exception (returned {type(got).__name__})"


# ------------------------------------------------------------------------------ modules

# fp16/bf16 modules round every projection: compared with float64 with a looser tolerance.
MODULE_TOLERANCE = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (6e-2, 6e-2),
                    torch.float32: (1e-5, 1e-4), torch.float64: (1e-9, 1e-7)}


def check_parameters(cand: Any, ref: Any, what: str) -> None:
    got = {name: tuple(p.shape) for name, p in cand.state_dict().items()}
    expected = {name: tuple(p.shape) for name, p in ref.state_dict().items()}
    expect(got == expected, "parameters are q_proj, k_proj, v_proj, o_proj (nn.Linear) with "
           "the stated shapes", input=what, expected=expected, got=got)


def module_pair(solution: Any, reference: Any, d_model: int, n_heads: int,
                n_kv_heads: int | None, bias: bool, seed: int,
                dtype: torch.dtype = torch.float64) -> tuple[Any, Any]:
    """(candidate, reference) MultiHeadAttention with the reference's random weights copied
    into the candidate, both in `dtype`."""
    torch.manual_seed(seed)
    ref = reference.MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=bias).to(dtype)
    cand = call(solution.MultiHeadAttention, d_model, n_heads, n_kv_heads, bias=bias,
                what="MultiHeadAttention()")
    check_parameters(cand, ref, f"MultiHeadAttention({d_model}, {n_heads}, {n_kv_heads}, bias={bias})")
    cand = cand.to(dtype)
    # Copies: ref.state_dict() shares the reference's parameters, and what crosses to the
    # candidate comes back changed when its load_state_dict edits it in place.
    cand.load_state_dict({name: t.clone() for name, t in ref.state_dict().items()})
    return cand, ref


def forward(module: Any, x: torch.Tensor, what: str = "MultiHeadAttention.forward()", **kwargs: Any) -> Any:
    """The candidate's forward on a copy of x (no grad mode entered: the candidate runs in
    its own process); the result kept as a copy."""
    copies = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    shown_kwargs = {k: v for k, v in kwargs.items() if k != "kv_cache"}
    return kept(guarded(module, x.clone(), what=what, input={"x": x, **shown_kwargs}, **copies))


def reference_forward(ref: Any, x: torch.Tensor, dtype: torch.dtype, **kwargs: Any) -> torch.Tensor:
    """The reference module run in float64 on x (and a float mask) upcast, cast to dtype."""
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.is_floating_point():
        kwargs = {**kwargs, "attn_mask": mask.double()}
    with torch.no_grad():
        return copy.deepcopy(ref).double()(x.double(), **kwargs).to(dtype)
