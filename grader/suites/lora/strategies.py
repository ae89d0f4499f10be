"""Setups, strategies and builders shared by the lora suite's levels.

The candidate's and the reference's LoRALinear draw lora_A at random, so tests copy the same
parameters into both through the API's parameter names (lora_A, lora_B, base.weight,
base.bias). Inputs are small integer-valued tensors so a shrunk counterexample can be checked
by hand; results are compared with tolerances per dtype.

The candidate may live in another process: every parameter is fetched by name when it is
used (never held across a call that could replace it), and gradients are read by fetching
the parameters again after backward().

What the suite passes to the candidate and what it returns stay shared with it: an in-place
edit in the worker is copied back into the judge's object. So `forward`, `delta_of` and
`multi_forward` hand the candidate copies of x and adapter_ids (the suite computes expected
values from its own afterwards) unless `share_inputs` (the tests of unchanged inputs, which
compare with a copy taken before the call), and keep results as copies (a test compares a
first result with one after later calls).
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, replace
from typing import Any, Iterator

import torch
from hypothesis import strategies as st
from torch import nn

from grader.protocol import PropertyFailure, show
from grader.suites._common import tolerance

DTYPES = (torch.float32, torch.float64)  # where results are compared at full precision
# Every dtype the statement allows for a base (lora_A and lora_B take base.weight's dtype).
ALL_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
ALPHAS = (1.0, 2.0, 4.0, 8.0, 16.0, 0.5, 3.0)


# Built once: hypothesis pays for every strategy object built inside a draw.
LEADING_DIMS = st.lists(st.integers(1, 3) | st.just(0), max_size=2)  # a 0: an empty batch
MAGNITUDES = st.sampled_from((1.0, 1.0, 1.0, 2.0**12))  # large values now and then (exact)
TOKENS = st.one_of(st.none(), st.integers(1, 3))  # x (N, IN) or (N, T, IN)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@contextlib.contextmanager
def showing(input: Any) -> Iterator[None]:
    """Inside a constructed scenario: when the candidate's code raises, the scorecard still
    shows the scenario (the calls so far), not only the line that raised."""
    try:
        yield
    except PropertyFailure:
        raise
    except Exception as exc:
        exc.add_note("Falsifying example: " + show(input))
        raise


# ------------------------------------------------------------------------------ LoRALinear


@dataclass
class Case:
    """One LoRALinear setup: base weights, adapter weights, an input."""

    r: int
    alpha: float
    weight: torch.Tensor  # (OUT, IN)
    bias: torch.Tensor | None  # (OUT,)
    lora_A: torch.Tensor  # (r, IN)
    lora_B: torch.Tensor  # (OUT, r)
    x: torch.Tensor  # (..., IN)

    @property
    def dtype(self) -> torch.dtype:
        return self.weight.dtype

    def to(self, dtype: torch.dtype) -> "Case":
        bias = None if self.bias is None else self.bias.to(dtype)
        return replace(self, weight=self.weight.to(dtype), bias=bias, lora_A=self.lora_A.to(dtype),
                       lora_B=self.lora_B.to(dtype), x=self.x.to(dtype))

    def shown(self, **extra: Any) -> dict[str, Any]:
        out_f, in_f = self.weight.shape
        shown = {"in_features": in_f, "out_features": out_f, "r": self.r, "alpha": self.alpha,
                 "dtype": dtype_name(self.dtype), "base.weight": self.weight,
                 "base.bias": self.bias, "lora_A": self.lora_A, "lora_B": self.lora_B,
                 "x": self.x}
        shown.update(extra)
        return shown


def _values_by_size(low: int, high: int) -> list[int]:
    """low..high ordered 0, 1, -1, 2, -2, ...: what a shrunk draw falls back to."""
    return sorted(range(low, high + 1), key=lambda v: (abs(v), v < 0))


@functools.lru_cache(maxsize=None)
def _codes(num_values: int, numel: int) -> st.SearchStrategy[int]:
    # Cached: a strategy built anew on every draw costs hypothesis more than the draw.
    return st.integers(0, num_values**numel - 1)


def draw_ints(draw: Any, shape: tuple[int, ...], dtype: torch.dtype, low: int = -2,
              high: int = 2) -> torch.Tensor:
    """An integer-valued tensor of `shape` in [low, high]. One draw for the whole tensor (the
    digits of one integer), not one per element: several times faster to generate and
    shrink, and a shrunk tensor still reads as small integers, mostly zeros."""
    values = _values_by_size(low, high)
    n = math.prod(shape)
    code = draw(_codes(len(values), n)) if n else 0
    digits = []
    for _ in range(n):
        code, digit = divmod(code, len(values))
        digits.append(values[digit])
    return torch.tensor(digits, dtype=torch.float64).reshape(shape).to(dtype)


@st.composite
def ints(draw: Any, shape: tuple[int, ...], dtype: torch.dtype, low: int = -2,
         high: int = 2) -> torch.Tensor:
    """draw_ints as a strategy."""
    return draw_ints(draw, shape, dtype, low, high)


@st.composite
def cases(draw: Any, *, max_in: int = 4, max_out: int = 4, max_r: int = 3,
          dtypes: tuple[torch.dtype, ...] = DTYPES, min_r: int = 1,
          alphas: tuple[float, ...] = ALPHAS) -> Case:
    in_f, out_f = draw(st.integers(1, max_in)), draw(st.integers(1, max_out))
    r = draw(st.integers(min_r, max_r))
    dtype = draw(st.sampled_from(dtypes))
    # Leading dims: none (x is 1-D), one or two.
    lead = tuple(draw(LEADING_DIMS))
    bias = draw_ints(draw, (out_f,), dtype) if draw(st.booleans()) else None
    magnitude = draw(MAGNITUDES)
    return Case(r=r, alpha=draw(st.sampled_from(alphas)),
                weight=draw_ints(draw, (out_f, in_f), dtype),
                bias=bias, lora_A=draw_ints(draw, (r, in_f), dtype),
                lora_B=draw_ints(draw, (out_f, r), dtype),
                x=draw_ints(draw, (*lead, in_f), dtype, -3, 3) * magnitude)


def make_base(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Linear:
    out_f, in_f = weight.shape
    base = nn.Linear(in_f, out_f, bias=bias is not None, dtype=weight.dtype)
    with torch.no_grad():
        base.weight.copy_(weight)
        if bias is not None:
            base.bias.copy_(bias)
    return base


def param(layer: nn.Module, name: str) -> nn.Parameter:
    """The layer's parameter `name`, fetched now (a later call may have replaced it)."""
    params = dict(layer.named_parameters())
    if name not in params:
        raise PropertyFailure(f"LoRALinear has a parameter named {name!r} (the state_dict "
                              "names lora_A, lora_B, base.weight, base.bias are part of the API)",
                              expected=name, got=sorted(params))
    return params[name]


def set_param(layer: nn.Module, name: str, value: torch.Tensor) -> None:
    with torch.no_grad():
        param(layer, name).copy_(value)


def build(module: Any, case: Case, *, with_adapter: bool = True, **kwargs: Any) -> Any:
    """module.LoRALinear on a fresh base from `case`, with the case's A and B copied in."""
    layer = module.LoRALinear(make_base(case.weight, case.bias), case.r, case.alpha, **kwargs)
    if with_adapter:
        set_param(layer, "lora_A", case.lora_A)
        set_param(layer, "lora_B", case.lora_B)
    return layer


def base_out(case: Case, x: torch.Tensor | None = None) -> torch.Tensor:
    with torch.no_grad():
        return make_base(case.weight, case.bias)(case.x if x is None else x)


def lora_update(case: Case, scaling: float) -> torch.Tensor:
    """scaling * x @ A.T @ B.T in float64, cast back to the case's dtype."""
    x, A, B = case.x.double(), case.lora_A.double(), case.lora_B.double()
    return (scaling * (x @ A.T @ B.T)).to(case.dtype)


def kept(result: Any) -> Any:
    """A tensor result as a copy the candidate's later calls cannot reach."""
    return result.detach().clone() if isinstance(result, torch.Tensor) else result


def forward(layer: nn.Module, x: torch.Tensor, *, share_inputs: bool = False) -> torch.Tensor:
    """layer(x) without grad, on a copy of x unless share_inputs; the result kept as a copy."""
    with torch.no_grad():
        return kept(layer(x if share_inputs else x.clone()))


def delta_of(layer: Any) -> torch.Tensor:
    """layer.delta_weight() without grad, kept as a copy."""
    with torch.no_grad():
        return kept(layer.delta_weight())


# ------------------------------------------------------------------------------ dropout probe
# With lora_A = ones (1, IN), lora_B = ones (OUT, 1), scaling 1 and every row of x equal to
# (1, 2, 4, ..., 2^(IN-1)), forward(x) - base(x) is (sum of the kept x_j) / (1 - p) in every
# output: times (1 - p) it is an integer whose bits are the row's dropout mask. Dropout in the
# wrong place shows: on the output, the two outputs of a row disagree; on x @ lora_A.T, a row
# keeps all of its inputs or none; on the base path or without the 1 / (1 - p), no integer.

PROBE_IN, PROBE_OUT, PROBE_ROWS = 6, 2, 64


@dataclass
class DropoutProbe:
    p: float
    case: Case

    @property
    def shown(self) -> dict[str, Any]:
        return {"in_features": PROBE_IN, "out_features": PROBE_OUT, "r": 1, "alpha": 1.0,
                "dropout": self.p, "lora_A": "ones (1, 6)", "lora_B": "ones (2, 1)",
                "base.weight": self.case.weight, "base.bias": self.case.bias,
                "x": f"{PROBE_ROWS} rows, each [1., 2., 4., 8., 16., 32.] (float64)"}


def dropout_probe(p: float) -> DropoutProbe:
    weight = torch.tensor([[1, -2, 3, -1, 2, 1], [2, 1, -1, 3, -2, 1]], dtype=torch.float64)
    x = (2.0 ** torch.arange(PROBE_IN, dtype=torch.float64)).expand(PROBE_ROWS, PROBE_IN)
    case = Case(r=1, alpha=1.0, weight=weight, bias=torch.tensor([1.0, -1.0], dtype=torch.float64),
                lora_A=torch.ones(1, PROBE_IN, dtype=torch.float64),
                lora_B=torch.ones(PROBE_OUT, 1, dtype=torch.float64), x=x.contiguous())
    return DropoutProbe(p, case)


def probe_codes(probe: DropoutProbe, got: torch.Tensor) -> torch.Tensor:
    """(forward(x) - base(x)) * (1 - p): (ROWS, OUT) float64, an integer mask code when the
    dropout is where it belongs."""
    return (got.detach().double() - base_out(probe.case)) * (1 - probe.p)


def codes_are_masks(codes: torch.Tensor) -> torch.Tensor:
    """(ROWS, OUT) bool: the code is an integer in [0, 2^IN)."""
    rounded = codes.round()
    return ((codes - rounded).abs() <= 1e-6) & (rounded >= 0) & (rounded < 2**PROBE_IN)


def kept_bits(codes: torch.Tensor) -> torch.Tensor:
    """(ROWS, IN) bool: which inputs each row kept, from its first output's code."""
    code = codes[:, 0].round().long()
    return (code[:, None] >> torch.arange(PROBE_IN)) & 1 == 1


# ------------------------------------------------------------------------------ merging


@st.composite
def float_cases(draw: Any, dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64,
                                                               torch.bfloat16)) -> Case:
    """Non-integer weights, so merging really rounds (tolerance per dtype, bf16 included)."""
    case = draw(cases(dtypes=dtypes))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    for field in ("weight", "lora_A", "lora_B", "x"):
        value = getattr(case, field)
        normal = torch.randn(value.shape, generator=gen, dtype=torch.float64)
        setattr(case, field, normal.to(case.dtype))
    return case


def merge_atol(case: Case, scaling: float | None = None) -> float:
    """Rounding allowance for merging: a few ulps of |x| @ (|W| + |delta|).T, on top of the
    dtype's atol, so a correct merge passes even where the output cancels to near zero. It
    scales with the magnitudes already, so comparisons use it with rtol = 0: an update
    rounded to a lower precision than the weight's is caught on every seed."""
    scaling = case.alpha / case.r if scaling is None else scaling
    w = case.weight.double().abs()
    delta = (case.lora_B.double() @ case.lora_A.double()).abs() * abs(scaling)
    magnitude = float((case.x.double().abs() @ (w + delta).T).max()) if case.x.numel() else 0.0
    magnitude = max(magnitude, float((w + delta).max()))
    return tolerance(case.dtype)[0] + 8 * torch.finfo(case.dtype).eps * magnitude


# ------------------------------------------------------------------------------ MultiLoRALinear


@dataclass
class Adapter:
    name: str
    lora_A: torch.Tensor  # (r, IN)
    lora_B: torch.Tensor  # (OUT, r)
    alpha: float

    @property
    def r(self) -> int:
        return self.lora_A.shape[0]


@dataclass
class MultiCase:
    """A base, adapters to load in order, and a batch: rows[n] indexes adapters (-1: base)."""

    max_rank: int
    weight: torch.Tensor  # (OUT, IN)
    bias: torch.Tensor | None  # (OUT,)
    adapters: list[Adapter]
    rows: list[int]
    x: torch.Tensor  # (N, IN) or (N, T, IN)

    def shown(self, slots: list[int] | None = None, **extra: Any) -> dict[str, Any]:
        out_f, in_f = self.weight.shape
        adapters = [{"name": a.name, "slot": None if slots is None else slots[k], "r": a.r,
                     "alpha": a.alpha, "lora_A": a.lora_A, "lora_B": a.lora_B}
                    for k, a in enumerate(self.adapters)]
        shown = {"in_features": in_f, "out_features": out_f, "max_rank": self.max_rank,
                 "dtype": dtype_name(self.weight.dtype),
                 "base.weight": self.weight, "base.bias": self.bias, "adapters": adapters,
                 "x": self.x}
        if slots is not None:
            shown["adapter_ids"] = ids_for(self.rows, slots).tolist()
        shown.update(extra)
        return shown


def draw_adapter(draw: Any, name: str, in_f: int, out_f: int, dtype: torch.dtype,
                 ranks: tuple[int, int]) -> Adapter:
    r = draw(st.integers(*ranks))
    return Adapter(name, draw_ints(draw, (r, in_f), dtype), draw_ints(draw, (out_f, r), dtype),
                   draw(st.sampled_from(ALPHAS)))


@st.composite
def adapters(draw: Any, name: str, in_f: int, out_f: int, dtype: torch.dtype,
             ranks: tuple[int, int]) -> Adapter:
    return draw_adapter(draw, name, in_f, out_f, dtype, ranks)


@st.composite
def multi_cases(draw: Any, *, max_adapters: int = 4, dtypes: tuple[torch.dtype, ...] = DTYPES,
                with_base_row: bool = False) -> MultiCase:
    in_f, out_f = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    max_rank, dtype = draw(st.integers(1, 3)), draw(st.sampled_from(dtypes))
    num_adapters = draw(st.integers(1, max_adapters))
    loaded = [draw_adapter(draw, f"tenant{k}", in_f, out_f, dtype, (1, max_rank))
              for k in range(num_adapters)]
    num_rows = draw(st.integers(1, 5))
    rows = draw(st.lists(st.integers(-1, num_adapters - 1), min_size=num_rows, max_size=num_rows))
    if with_base_row:
        rows[draw(st.integers(0, num_rows - 1))] = -1
    tokens = draw(TOKENS)
    shape = (num_rows, in_f) if tokens is None else (num_rows, tokens, in_f)
    bias = draw_ints(draw, (out_f,), dtype) if draw(st.booleans()) else None
    magnitude = draw(MAGNITUDES)
    return MultiCase(max_rank, draw_ints(draw, (out_f, in_f), dtype), bias, loaded, rows,
                     draw_ints(draw, shape, dtype, -3, 3) * magnitude)


def ids_for(rows: list[int], slots: list[int]) -> torch.Tensor:
    return torch.tensor([slots[k] if k >= 0 else -1 for k in rows], dtype=torch.int64)


def add(layer: Any, adapter: Adapter) -> int:
    """add_adapter with copies of the adapter's tensors; the slot it returns, as returned."""
    return layer.add_adapter(adapter.name, adapter.lora_A.clone(), adapter.lora_B.clone(),
                             adapter.alpha)


def load(module: Any, mc: MultiCase) -> tuple[nn.Module, list[int]]:
    layer = module.MultiLoRALinear(make_base(mc.weight, mc.bias), mc.max_rank)
    return layer, [int(add(layer, a)) for a in mc.adapters]


def per_row_expected(reference: Any, weight: torch.Tensor, bias: torch.Tensor | None,
                     row_adapters: list[Adapter | None], x: torch.Tensor) -> torch.Tensor:
    """Each row through its own reference LoRALinear (or the bare base for None)."""
    base = make_base(weight, bias)
    if not row_adapters:  # an empty batch
        return forward(base, x)
    layers: dict[int, nn.Module] = {}
    rows = []
    for n, adapter in enumerate(row_adapters):
        if adapter is None:
            rows.append(forward(base, x[n]))
            continue
        if id(adapter) not in layers:
            case = Case(r=adapter.r, alpha=adapter.alpha, weight=weight, bias=bias,
                        lora_A=adapter.lora_A, lora_B=adapter.lora_B, x=x[n])
            layers[id(adapter)] = build(reference, case)
        rows.append(forward(layers[id(adapter)], x[n]))
    return torch.stack(rows)


def multi_forward(layer: nn.Module, x: torch.Tensor, ids: torch.Tensor, *,
                  share_inputs: bool = False) -> torch.Tensor:
    """layer(x, ids) without grad, on copies of x and ids unless share_inputs; the result
    kept as a copy."""
    if not share_inputs:
        x, ids = x.clone(), ids.clone()
    with torch.no_grad():
        return kept(layer(x, ids))


def ones_adapter(name: str, in_f: int, out_f: int, r: int = 1, alpha: float = 1.0,
                 dtype: torch.dtype = torch.float32) -> Adapter:
    return Adapter(name, torch.ones(r, in_f, dtype=dtype), torch.ones(out_f, r, dtype=dtype), alpha)


def raises(exc_type: type[BaseException], fn: Any) -> BaseException | None:
    """The exception of type exc_type that fn() raised, or None when it returned."""
    try:
        fn()
    except exc_type as exc:
        return exc
    return None
