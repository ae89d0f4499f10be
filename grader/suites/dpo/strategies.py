"""Strategies, tolerances and checks shared by the dpo suite's levels.

Inputs are small (B <= 4, T <= 6, V <= 6) and drawn from a seed, so shrinking is cheap and a
counterexample prints in a few lines. Logits for the general tests sit on a grid of 1/16 in
[-8, 8], exact in every float dtype, so the oracle sees exactly what the solution sees.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from hypothesis import strategies as st

from grader.protocol import PropertyFailure, call, expect
from grader.suites._common import check_close, tolerance

LOGIT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
LOSS_DTYPES = (torch.float32, torch.float64)
MASK_KINDS = ("bool", "int64", "int32", "float32", "float64")
# Labels a padded position may hold: the usual ignore index, -1, and ids past the vocabulary.
PADDING_IDS = (-100, -1, "V", "V+5", 10**6)

_UNIT_ROUNDOFF = {torch.float32: 6e-8, torch.float64: 1.2e-16}


def compute_dtype(logits_dtype: torch.dtype) -> torch.dtype:
    """The dtype the statement says the math (and the result) uses."""
    return torch.float64 if logits_dtype == torch.float64 else torch.float32


def leaf(x: torch.Tensor, requires_grad: bool = True) -> torch.Tensor:
    return x.detach().clone().requires_grad_(requires_grad)


def as_mask(scored: torch.Tensor, kind: str) -> torch.Tensor:
    """A bool mask in one of the forms the statement allows."""
    return scored if kind == "bool" else scored.to(getattr(torch, kind))


# ------------------------------------------------------------------ level 1 inputs


@st.composite
def logprob_cases(draw: Any, *, dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64),
                  min_t: int = 2, min_b: int = 1, scale: float | None = None,
                  padded: bool = False) -> dict[str, Any]:
    """logits (B, T, V), in-vocabulary labels, a bool mask with loss_mask[:, 0] = 0 and at
    least one scored position per row (so averaging is legal), and `average`. With `padded`,
    position 1 of every row is unscored too (there is padding to fill)."""
    B = draw(st.integers(min_b, 3))
    T = draw(st.integers(3 if padded else min_t, 6))
    V = draw(st.integers(2, 6))
    dtype = draw(st.sampled_from(dtypes))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    spread = draw(st.sampled_from((1.0, 3.0))) if scale is None else scale
    raw = torch.randn(B, T, V, generator=gen, dtype=torch.float64) * spread
    logits = ((raw * 16).round() / 16).clamp(-8, 8) if scale is None else raw
    labels = torch.randint(0, V, (B, T), generator=gen)
    scored = torch.rand(B, T, generator=gen) < 0.7
    scored[:, 0] = False
    if padded:
        scored[:, 1] = False
    if T > 1:
        last = torch.randint(2 if padded else 1, T, (B,), generator=gen)
        scored[torch.arange(B), last] = True          # every row scores something
    return {"logits": logits.to(dtype), "labels": labels, "loss_mask": scored,
            "average": draw(st.booleans())}


def logprob_tolerance(logits: torch.Tensor) -> float:
    """Absolute tolerance of a (B,) sequence log-prob against the float64 oracle: a few
    roundoffs of the compute dtype per position, scaled by the logits' magnitude."""
    unit = _UNIT_ROUNDOFF[compute_dtype(logits.dtype)]
    magnitude = 1.0 + float(logits.detach().double().abs().max()) if logits.numel() else 1.0
    positions = max(logits.shape[1], 1)
    return 32 * unit * magnitude * positions


def run_logprobs(module: Any, case: dict[str, Any], *, grad: bool = False,
                 share_inputs: bool = False) -> tuple[Any, Any]:
    """module.sequence_logprobs on copies of the case's tensors (the oracle later reads the
    case itself: a solution that edits its inputs must not change the expected value); with
    `share_inputs`, labels and loss_mask are the case's own (for a test of unchanged inputs,
    whose expected value then comes from copies taken before the call). With `grad`, also
    d(sum of result * w)/d logits for fixed weights w (None when no gradient reached the logits)."""
    logits = leaf(case["logits"], grad)
    labels, loss_mask = case["labels"], case["loss_mask"]
    if not share_inputs:
        labels, loss_mask = labels.clone(), loss_mask.clone()
    out = call(module.sequence_logprobs, logits, labels, loss_mask,
               average=case["average"], what="sequence_logprobs")
    if not grad:
        return out, None
    expect(isinstance(out, torch.Tensor) and out.requires_grad,
           "sequence_logprobs: gradients flow to logits (the result must carry a grad_fn)",
           input=case, expected="a tensor with requires_grad=True",
           got=out if not isinstance(out, torch.Tensor) else f"requires_grad={out.requires_grad}")
    weights = row_weights(out.shape[0])
    (out.double() * weights).sum().backward()
    return out, logits.grad


def row_weights(B: int) -> torch.Tensor:
    """Distinct weights per row, so a gradient landing on the wrong row shows."""
    return torch.arange(1, B + 1, dtype=torch.float64)


def check_logprobs(got: Any, case: dict[str, Any], prop: str) -> None:
    """got matches the oracle's values, in the compute dtype."""
    from grader.suites.dpo import oracle

    want, _ = oracle.sequence_logprobs(case["logits"], case["labels"], case["loss_mask"], case["average"])
    want = want.to(compute_dtype(case["logits"].dtype))
    check_close(got, want, prop, input=case, atol=logprob_tolerance(case["logits"]), rtol=0.0)


def check_logprob_grad(grad: torch.Tensor | None, case: dict[str, Any], prop: str) -> None:
    from grader.suites.dpo import oracle

    logits = case["logits"]
    _, want = oracle.sequence_logprobs(logits, case["labels"], case["loss_mask"], case["average"])
    want = want * row_weights(logits.shape[0])[:, None, None]
    got = torch.zeros_like(logits) if grad is None else grad
    atol, rtol = tolerance(logits.dtype)
    check_close(got, want.to(logits.dtype), prop, input=case, atol=atol * 4, rtol=rtol)


# ------------------------------------------------------------------ level 2 and 3 inputs


@st.composite
def preference_batches(draw: Any, *, dtypes: tuple[torch.dtype, ...] = LOSS_DTYPES,
                       scale: float | None = None, grid: bool = False) -> dict[str, torch.Tensor]:
    """Four (B,) tensors of sequence log-probs: policy_chosen, policy_rejected, ref_chosen,
    ref_rejected. Continuous values (ties have probability 0) unless `grid`, where values are
    multiples of 1/4 in [-4, 0] and ties are common."""
    B = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(dtypes))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    if grid:
        values = -torch.randint(0, 17, (4, B), generator=gen).double() / 4
    else:
        spread = draw(st.sampled_from((1.0, 5.0))) if scale is None else scale
        values = -torch.rand(4, B, generator=gen, dtype=torch.float64) * spread * 4
        values += torch.randn(4, B, generator=gen, dtype=torch.float64) * spread
    names = ("policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected")
    return {name: values[i].to(dtype) for i, name in enumerate(names)}


BETAS = st.sampled_from((0.1, 0.5, 1.0, 2.0))
EXACT_BETAS = st.sampled_from((0.25, 0.5, 1.0, 2.0))   # powers of two: exact products
SMOOTHINGS = st.sampled_from((0.0, 0.1, 0.3, 0.45))


def loss_tolerance(scale: float, dtype: torch.dtype) -> tuple[float, float]:
    atol, rtol = tolerance(dtype)
    return atol * (1.0 + scale), rtol


def scalar_of(value: Any, what: str, input: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        return value
    raise PropertyFailure(f"{what} must be a 0-d tensor", input=input, expected="0-d tensor",
                          got=f"shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else value)


def check_stats(stats: Any, want: dict[str, torch.Tensor], names: tuple[str, ...], prop: str,
                input: Any, dtype: torch.dtype, scale: float = 1.0) -> None:
    """Each named stat is present, detached, of the oracle's shape, and within tolerance."""
    expect(isinstance(stats, dict), f"{prop}: the stats must be a dict", input=input,
           expected=f"dict with keys {list(names)}", got=type(stats).__name__)
    for name in names:
        expect(name in stats, f"{prop}: stats['{name}'] is missing", input=input,
               expected=list(names), got=sorted(stats))
        value = stats[name]
        expect(isinstance(value, torch.Tensor), f"{prop}: stats['{name}'] must be a tensor",
               input=input, got=type(value).__name__)
        expect(not value.requires_grad, f"{prop}: stats['{name}'] must be detached (no gradient)",
               input=input, expected="requires_grad=False", got="requires_grad=True")
        expect(tuple(value.shape) == tuple(want[name].shape),
               f"{prop}: stats['{name}'] has shape {tuple(want[name].shape)}", input=input,
               expected=f"shape {tuple(want[name].shape)}", got=f"shape {tuple(value.shape)}")
        atol, rtol = loss_tolerance(scale, dtype)
        check_close(value.detach().double(), want[name], f"{prop}: stats['{name}']", input=input,
                    atol=atol, rtol=rtol)


def check_grad(grad: torch.Tensor | None, want: torch.Tensor, prop: str, input: Any,
               dtype: torch.dtype) -> None:
    got = torch.zeros_like(want) if grad is None else grad.double()
    atol, rtol = tolerance(dtype)
    check_close(got, want, prop, input=input, atol=atol, rtol=rtol)


def expect_value_error(fn: Callable[[], Any], prop: str, input: Any) -> None:
    try:
        got = fn()
    except ValueError:
        return
    except (NotImplementedError, PropertyFailure):
        raise
    except Exception as exc:  # the wrong exception is the verdict
        raise PropertyFailure(prop, input=input, expected="ValueError",
                              got=f"{type(exc).__name__}: {exc}") from exc
    raise PropertyFailure(prop, input=input, expected="ValueError",
                          got=f"no exception (returned {type(got).__name__})")


def expect_accepted(fn: Callable[[], Any], prop: str, input: Any) -> Any:
    """fn() must not raise; NotImplementedError stays a 'not implemented' verdict."""
    try:
        return fn()
    except (NotImplementedError, PropertyFailure):
        raise
    except Exception as exc:  # any exception is the verdict
        raise PropertyFailure(prop, input=input, expected="no exception",
                              got=f"{type(exc).__name__}: {exc}") from exc


def expect_unchanged(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor], what: str,
                     input: Any) -> None:
    for name, old in before.items():
        new = after[name]
        same = old.shape == new.shape and bool((old.double() == new.double()).all()) if old.numel() else True
        expect(same, f"{what} must not modify its input '{name}'", input=input, expected=old, got=new)


def check_value(got: Any, want: torch.Tensor, prop: str, input: Any, dtype: torch.dtype,
                scale: float = 1.0) -> None:
    """A tensor of want's shape whose values (in float64) are within the tolerance of `dtype`,
    widened by the magnitude `scale` of the quantities involved."""
    if isinstance(got, torch.Tensor):
        got = got.detach().double()
    atol, rtol = loss_tolerance(scale, dtype)
    check_close(got, want, prop, input=input, atol=atol, rtol=rtol)


# ------------------------------------------------------------------ calling the losses

POLICY = ("policy_chosen", "policy_rejected")
REFERENCE = ("ref_chosen", "ref_rejected")
DPO_STATS = ("chosen_rewards", "rejected_rewards", "reward_accuracy", "reward_margin")
BT_STATS = ("accuracy", "mean_difference")


def run_dpo(module: Any, batch: dict[str, torch.Tensor], **options: Any) -> dict[str, Any]:
    """dpo_loss on leaves that all require grad (the reference's too); backward through the
    loss. Returns loss, stats, and the .grad of each of the four inputs (None if untouched)."""
    leaves = {name: leaf(t) for name, t in batch.items()}
    loss, stats = call(module.dpo_loss, *(leaves[n] for n in POLICY + REFERENCE), **options,
                       what="dpo_loss")
    shown = dict(batch, **options)
    scalar_of(loss, "the DPO loss", shown)
    if loss.requires_grad:
        loss.backward()
    return {"loss": loss, "stats": stats, **{f"grad_{n}": leaves[n].grad for n in leaves}}


def run_bt(module: Any, chosen: torch.Tensor, rejected: torch.Tensor, margin: Any) -> dict[str, Any]:
    c, r = leaf(chosen), leaf(rejected)
    # A copy of a tensor margin: the oracle reads the caller's margin after the call.
    given = margin.clone() if isinstance(margin, torch.Tensor) else margin
    loss, stats = call(module.bradley_terry_loss, c, r, given, what="bradley_terry_loss")
    scalar_of(loss, "the Bradley–Terry loss", {"chosen": chosen, "rejected": rejected, "margin": margin})
    if loss.requires_grad:
        loss.backward()
    return {"loss": loss, "stats": stats, "grad_chosen": c.grad, "grad_rejected": r.grad}


def magnitude(*tensors: torch.Tensor, factor: float = 1.0) -> float:
    return factor * max(float(t.detach().double().abs().max()) for t in tensors if t.numel())
