"""Calls into the candidate, one runner per function: each builds the call from a dict of
named inputs (the dict a failure shows), checks the form of what comes back, and runs the
backward pass where the function has a gradient. Also the input builders of each level.

A runner hands the candidate copies of the tensors (the suite reads the dict's own afterwards:
for the reference's call, an expected value, the failure shown) unless `share_inputs` (the
tests of unchanged inputs), and returns copies of what came back (a test compares a first
result with a later one; the candidate's own tensors stay shared with it)."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from grader.protocol import call, expect
from grader.suites._common import check_close
from grader.suites.ppo.checks import check_grad, check_stats, copies, kept, scalar_of
from grader.suites.ppo.strategies import (
    DTYPES, batches, fixed_batch, grid, grid_from_seed, leaf, valid_of)

POLICY = ("logprobs", "old", "adv")
GAE = ("rewards", "values")
VALUE = ("values", "old_values", "returns")
KL = ("logprobs", "ref")
LOSS = ("logprobs", "old_logprobs", "values", "old_values", "rewards")
GAMMA = st.sampled_from((1.0, 0.9, 0.5, 0.0))
LAM = st.sampled_from((1.0, 0.95, 0.5, 0.0))
CLIP = st.sampled_from((0.1, 0.2, 0.3))
KL_COEF = st.sampled_from((0.1, 0.5, 1.0))

# ---------------------------------------------------------------------------- level 1


def policy_inputs(b: dict[str, Any], clip_eps: float) -> dict[str, Any]:
    return {"logprobs": b["logprobs"], "old_logprobs": b["old"], "advantages": b["adv"],
            "mask": b["mask"], "clip_eps": clip_eps}


def run_policy(module: Any, inp: dict[str, Any]) -> tuple[Any, Any, torch.Tensor]:
    logprobs = leaf(inp["logprobs"])
    out = call(module.ppo_policy_loss, logprobs, *copies(inp["old_logprobs"], inp["advantages"],
                                                         inp["mask"]), inp["clip_eps"], what="ppo_policy_loss")
    expect(isinstance(out, tuple) and len(out) == 2, "ppo_policy_loss returns (loss, stats)",
           input=inp, got=type(out).__name__)
    loss, stats = out
    scalar_of(loss, "the policy loss", inp)
    expect(loss.requires_grad, "the policy loss must carry a gradient to logprobs", input=inp)
    loss.backward()
    grad = torch.zeros_like(logprobs) if logprobs.grad is None else logprobs.grad
    return kept(loss), kept(stats), kept(grad)


def check_against(module: Any, reference: Any, inp: dict[str, Any], what: str) -> None:
    loss, stats, grad = run_policy(module, inp)
    want, want_stats, want_grad = run_policy(reference, inp)
    check_close(loss.detach(), want.detach(), f"the policy loss equals the reference's ({what})", input=inp)
    check_stats(stats, want_stats, f"policy loss ({what})", inp)
    check_grad(grad, want_grad, f"d(loss)/d(logprobs) equals the reference's ({what})", inp)


# ---------------------------------------------------------------------------- level 2


def gae_inputs(b: dict[str, Any], gamma: float, lam: float) -> dict[str, Any]:
    return {"rewards": b["rewards"], "values": b["values"], "mask": b["mask"], "gamma": gamma,
            "lam": lam}


def run_gae(module: Any, inp: dict[str, Any], share_inputs: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    tensors = (inp["rewards"], inp["values"], inp["mask"])
    out = call(module.compute_gae, *(tensors if share_inputs else copies(*tensors)), inp["gamma"],
               inp["lam"], what="compute_gae")
    expect(isinstance(out, tuple) and len(out) == 2, "compute_gae returns (advantages, returns)",
           input=inp, got=type(out).__name__)
    return kept(out)


def value_inputs(b: dict[str, Any], clip_eps_value: float) -> dict[str, Any]:
    return {"values": b["values"], "old_values": b["old_values"], "returns": b["returns"],
            "mask": b["mask"], "clip_eps_value": clip_eps_value}


def run_value(module: Any, inp: dict[str, Any], share_inputs: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    values = leaf(inp["values"])
    tensors = (inp["old_values"], inp["returns"], inp["mask"])
    loss = call(module.ppo_value_loss, values, *(tensors if share_inputs else copies(*tensors)),
                inp["clip_eps_value"], what="ppo_value_loss")
    scalar_of(loss, "the value loss", inp)
    expect(loss.requires_grad, "the value loss must carry a gradient to values", input=inp)
    loss.backward()
    grad = torch.zeros_like(values) if values.grad is None else values.grad
    return loss.detach().clone(), kept(grad)


# ---------------------------------------------------------------------------- level 3


def kl_fixed(rows: list[list[int]], seed: int, kl_coef: float = 0.5, fill: float = 5.0,
             dtype: torch.dtype = torch.float64) -> dict[str, Any]:
    b = fixed_batch(rows, KL, seed=seed, fill=fill, dtype=dtype)
    return {"scores": grid_from_seed(seed + 100, (len(rows),), dtype), "logprobs": b["logprobs"],
            "ref_logprobs": b["ref"], "mask": b["mask"], "kl_coef": kl_coef}


def run_kl(module: Any, inp: dict[str, Any], share_inputs: bool = False) -> torch.Tensor:
    tensors = (inp["scores"], inp["logprobs"], inp["ref_logprobs"], inp["mask"])
    return kept(call(module.kl_shaped_rewards, *(tensors if share_inputs else copies(*tensors)),
                     inp["kl_coef"], what="kl_shaped_rewards"))


@st.composite
def kl_inputs(draw: Any, specials: bool = False) -> dict[str, Any]:
    b = draw(batches(KL, specials=specials))
    inp = {"scores": grid(draw, (b["mask"].shape[0],), b["logprobs"].dtype), "logprobs": b["logprobs"],
           "ref_logprobs": b["ref"], "mask": b["mask"], "kl_coef": draw(KL_COEF)}
    if specials:
        inp["clean"] = {**inp, "logprobs": b["clean"]["logprobs"], "ref_logprobs": b["clean"]["ref"]}
    return inp


def spread(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """x with at least two distinct valid values, so the variance is well away from 0."""
    first = valid.nonzero()[0].tolist()
    values = x[valid]
    if bool((values == values[0]).all()):
        x = x.clone()
        x[tuple(first)] += 1.0
    return x


@st.composite
def whiten_inputs(draw: Any, specials: bool = False) -> dict[str, Any]:
    b = draw(batches(("x",), min_total=2, specials=specials))
    valid = valid_of(b["mask"])
    inp = {"x": spread(b["x"], valid), "mask": b["mask"], "shift_mean": draw(st.booleans())}
    if specials:
        inp["clean"] = {**inp, "x": spread(b["clean"]["x"], valid)}
    return inp


def run_whiten(module: Any, inp: dict[str, Any], share_inputs: bool = False) -> torch.Tensor:
    kwargs = {"eps": inp["eps"]} if "eps" in inp else {}
    tensors = (inp["x"], inp["mask"])
    return kept(call(module.masked_whiten, *(tensors if share_inputs else copies(*tensors)),
                     inp["shift_mean"], what="masked_whiten", **kwargs))


@st.composite
def loss_inputs(draw: Any, specials: bool = False, whiten: bool | None = None) -> dict[str, Any]:
    whiten = draw(st.booleans()) if whiten is None else whiten
    # Whitening near-constant advantages amplifies rounding by up to 1e4: float64 only then.
    b = draw(batches(LOSS, min_total=2, specials=specials,
                     dtypes=(torch.float64,) if whiten else DTYPES))
    kwargs = {"gamma": draw(GAMMA), "lam": draw(LAM), "clip_eps": draw(CLIP),
              "clip_eps_value": draw(CLIP), "vf_coef": draw(st.sampled_from((0.1, 0.5))),
              "whiten_advantages": whiten}
    inp = {**{k: b[k] for k in LOSS}, "mask": b["mask"], **kwargs}
    if specials:
        inp["clean"] = {**inp, **{k: b["clean"][k] for k in LOSS}}
    return inp


def loss_fixed(rows: list[list[int]], seed: int, **kwargs: Any) -> dict[str, Any]:
    b = fixed_batch(rows, LOSS, seed=seed, fill=5.0)
    return {**{k: b[k] for k in LOSS}, "mask": b["mask"], **kwargs}


def run_loss(module: Any, inp: dict[str, Any]) -> tuple[torch.Tensor, Any, torch.Tensor, torch.Tensor]:
    logprobs, values = leaf(inp["logprobs"]), leaf(inp["values"])
    kwargs = {k: inp[k] for k in ("gamma", "lam", "clip_eps", "clip_eps_value", "vf_coef",
                                  "whiten_advantages") if k in inp}
    old_logprobs, old_values, rewards, mask = copies(inp["old_logprobs"], inp["old_values"],
                                                     inp["rewards"], inp["mask"])
    out = call(module.ppo_loss, logprobs, old_logprobs, values, old_values, rewards, mask,
               what="ppo_loss", **kwargs)
    expect(isinstance(out, tuple) and len(out) == 2, "ppo_loss returns (total, stats)",
           input=inp, got=type(out).__name__)
    total, stats = out
    scalar_of(total, "the total loss", inp)
    expect(total.requires_grad, "the total loss carries gradients", input=inp)
    total.backward()
    zeros = torch.zeros_like(logprobs)
    return (total.detach().clone(), kept(stats), kept(zeros if logprobs.grad is None else logprobs.grad),
            kept(zeros if values.grad is None else values.grad))


def check_loss_against(solution: Any, reference: Any, inp: dict[str, Any], what: str) -> None:
    total, stats, g_lp, g_v = run_loss(solution, inp)
    want, want_stats, want_lp, want_v = run_loss(reference, inp)
    check_close(total, want, f"the total loss equals the reference's ({what})", input=inp)
    check_stats(stats, want_stats, f"ppo_loss ({what})", inp)
    check_grad(g_lp, want_lp, f"d(total)/d(logprobs) equals the reference's ({what})", inp)
    check_grad(g_v, want_v, f"d(total)/d(values) equals the reference's ({what})", inp)


def close_results(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(
            a.detach().double(), b.detach().double(), rtol=1e-6, atol=1e-9, equal_nan=True)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(close_results(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close_results(a[k], b[k]) for k in a)
    return a == b


