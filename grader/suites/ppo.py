"""Hidden suite for the `ppo` kata: the PPO loss for RLHF.

Level 1: ppo_policy_loss. Level 2: compute_gae and ppo_value_loss. Level 3: kl_shaped_rewards,
masked_whiten and ppo_loss. Inputs are small right-padded (B, T) batches (B <= 3, T <= 5)
with values on a grid of eighths, so a shrunk counterexample can be checked by hand.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from hypothesis import given, settings, strategies as st

from grader.protocol import PropertyFailure, call, expect, kata_test
from grader.suites._common import check_close, count_ops, tolerance

NAN, INF = float("nan"), float("inf")
# What padding may hold: the functions must give the same answer whatever is there.
PAD_SPECIALS = (NAN, INF, -INF, 1e30, -1e30, 1e4)
DTYPES = (torch.float64, torch.float32)
FAST = settings(max_examples=15)
MEDIUM = settings(max_examples=25)
FEW = settings(max_examples=8)  # tests that loop over every case themselves

# ---------------------------------------------------------------------------- strategies

@st.composite
def valid_masks(draw: Any, *, max_b: int = 3, max_t: int = 5, min_total: int = 1) -> torch.Tensor:
    """A right-padded bool mask (B, T), every row with at least one valid token."""
    B = draw(st.integers(1, max_b))
    need_two = B == 1 and min_total >= 2
    T = draw(st.integers(2 if need_two else 1, max_t))
    lengths = draw(st.lists(st.integers(2 if need_two else 1, T), min_size=B, max_size=B))
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]

def grid(draw: Any, shape: tuple[int, ...], dtype: torch.dtype, lo: int = -16,
         hi: int = 16) -> torch.Tensor:
    """Values k / 8 for integers k in [lo, hi]: exact in every float dtype. Drawn from a seed
    (one draw per tensor, not one per element: grading stays fast); shapes still shrink."""
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    ints = torch.randint(lo, hi + 1, shape, generator=gen, dtype=torch.int64)
    return (ints.to(torch.float64) / 8).to(dtype)

def with_padding(x: torch.Tensor, valid: torch.Tensor, fill: float) -> torch.Tensor:
    return torch.where(valid, x, torch.full_like(x, fill))

def as_mask(valid: torch.Tensor, kind: str, dtype: torch.dtype) -> torch.Tensor:
    """The mask in the form a caller may pass: bool, or 0/1 float."""
    return valid if kind == "bool" else valid.to(dtype)

@st.composite
def batches(draw: Any, names: tuple[str, ...], *, min_total: int = 1, dtypes=DTYPES,
            specials: bool = False, lo: int = -16, hi: int = 16) -> dict[str, Any]:
    """Named (B, T) tensors on the grid plus a mask; padding holds finite junk, or (with
    `specials`) one of PAD_SPECIALS per tensor, alongside a copy `clean` padded with 0."""
    valid = draw(valid_masks(min_total=min_total))
    dtype = draw(st.sampled_from(dtypes))
    kind = draw(st.sampled_from(("bool", "float")))
    out: dict[str, Any] = {"mask": as_mask(valid, kind, dtype)}
    clean: dict[str, Any] = {"mask": out["mask"]}
    for name in names:
        x = grid(draw, tuple(valid.shape), dtype, lo, hi)
        clean[name] = with_padding(x, valid, 0.0)
        fill = draw(st.sampled_from(PAD_SPECIALS)) if specials else draw(st.sampled_from((0.0, 5.0, -3.0)))
        out[name] = with_padding(x, valid, fill)
    if specials:
        out["clean"] = clean
    return out

def valid_of(mask: torch.Tensor) -> torch.Tensor:
    return mask if mask.dtype == torch.bool else mask != 0

def leaf(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_(True)

def token_mean(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum()

# ---------------------------------------------------------------------------- checks

def scalar_of(value: Any, what: str, input: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.detach().reshape(())
    raise PropertyFailure(f"{what} must be a scalar tensor", input=input,
                          expected="0-d tensor", got=value)

def check_stats(got: Any, expected: dict[str, torch.Tensor], prop: str, input: Any) -> None:
    expect(isinstance(got, dict), f"{prop}: the stats must be a dict", input=input,
           expected=f"dict with keys {sorted(expected)}", got=type(got).__name__)
    for key, want in expected.items():
        expect(key in got, f"{prop}: stats['{key}'] is missing", input=input,
               expected=sorted(expected), got=sorted(got))
        value = scalar_of(got[key], f"stats['{key}']", input)
        atol, rtol = tolerance(want.dtype)
        check_close(value.double(), want.detach().double(), f"{prop}: stats['{key}']",
                    input=input, atol=atol, rtol=rtol)

def check_grad(got: torch.Tensor | None, expected: torch.Tensor, prop: str, input: Any) -> None:
    got = torch.zeros_like(expected) if got is None else got
    check_close(got, expected, prop, input=input)

def expect_value_error(fn: Callable[[], Any], prop: str, input: Any) -> None:
    try:
        fn()
    except ValueError:
        return
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - the wrong exception is the verdict
        raise PropertyFailure(prop, input=input, expected="ValueError",
                              got=f"{type(exc).__name__}: {exc}") from exc
    raise PropertyFailure(prop, input=input, expected="ValueError", got="no exception")

def shapes_of(inp: dict[str, Any]) -> dict[str, Any]:
    return {k: (f"shape {tuple(v.shape)}" if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}

def expect_unchanged(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor], what: str) -> None:
    for name, old in before.items():
        same = torch.allclose(old.double(), after[name].double(), rtol=0, atol=0, equal_nan=True)
        expect(same, f"{what} must not modify its input '{name}'", expected=old, got=after[name])

# ============================================================================ level 1

def policy_inputs(b: dict[str, Any], clip_eps: float) -> dict[str, Any]:
    return {"logprobs": b["logprobs"], "old_logprobs": b["old"], "advantages": b["adv"],
            "mask": b["mask"], "clip_eps": clip_eps}

def run_policy(module: Any, inp: dict[str, Any]) -> tuple[Any, Any, torch.Tensor]:
    logprobs = leaf(inp["logprobs"])
    loss, stats = call(module.ppo_policy_loss, logprobs, inp["old_logprobs"], inp["advantages"],
                       inp["mask"], inp["clip_eps"], what="ppo_policy_loss")
    scalar_of(loss, "the policy loss", inp)
    expect(loss.requires_grad, "the policy loss must carry a gradient to logprobs", input=inp)
    loss.backward()
    return loss, stats, logprobs.grad

CLIP_EPS = st.sampled_from((0.1, 0.2, 0.3))
POLICY = ("logprobs", "old", "adv")

@kata_test(level=1, category="correctness", weight=3,
           description="policy loss, clipfrac and approx_kl match the reference")
@MEDIUM
@given(b=batches(POLICY), clip_eps=CLIP_EPS)
def test_policy_loss_matches_reference(solution, reference, b, clip_eps):
    inp = policy_inputs(b, clip_eps)
    loss, stats, _ = run_policy(solution, inp)
    want, want_stats, _ = run_policy(reference, inp)
    check_close(loss.detach(), want.detach(), "the policy loss equals the reference's", input=inp)
    check_stats(stats, want_stats, "policy loss", inp)

@kata_test(level=1, category="correctness", weight=2,
           description="the gradient with respect to logprobs matches the reference")
@FAST
@given(b=batches(POLICY), clip_eps=CLIP_EPS)
def test_policy_gradient_matches_reference(solution, reference, b, clip_eps):
    inp = policy_inputs(b, clip_eps)
    _, _, grad = run_policy(solution, inp)
    _, _, want = run_policy(reference, inp)
    check_grad(grad, want, "d(loss)/d(logprobs) equals the reference's", inp)

@kata_test(level=1, category="correctness", weight=2,
           description="at logprobs == old_logprobs: loss == -mean(A), clipfrac 0, approx_kl 0")
@FAST
@given(b=batches(("logprobs", "adv")), clip_eps=CLIP_EPS)
def test_policy_loss_at_old_policy_is_minus_mean_advantage(solution, b, clip_eps):
    inp = {"logprobs": b["logprobs"], "old_logprobs": b["logprobs"].clone(),
           "advantages": b["adv"], "mask": b["mask"], "clip_eps": clip_eps}
    loss, stats, _ = run_policy(solution, inp)
    valid = valid_of(b["mask"])
    want = -token_mean(b["adv"], valid)
    check_close(loss.detach(), want, "at ratio 1 the policy loss is -(token mean of A)", input=inp)
    zero = torch.zeros((), dtype=torch.float64)
    check_stats(stats, {"clipfrac": zero, "approx_kl": zero}, "at ratio 1", inp)

@kata_test(level=1, category="correctness", weight=2,
           description="zero gradient on tokens where the ratio left the clip range in the "
                       "direction the advantage pushes")
@MEDIUM
@given(b=batches(POLICY), clip_eps=CLIP_EPS)
def test_policy_gradient_zero_where_clipped(solution, b, clip_eps):
    inp = policy_inputs(b, clip_eps)
    _, _, grad = run_policy(solution, inp)
    valid = valid_of(b["mask"])
    ratio = torch.exp(b["logprobs"].double() - b["old"].double())
    adv = b["adv"].double()
    pushed_out = valid & (((adv > 0) & (ratio > 1 + clip_eps)) | ((adv < 0) & (ratio < 1 - clip_eps)))
    grad = torch.zeros_like(b["logprobs"]) if grad is None else grad
    expect(bool((grad[pushed_out] == 0).all()),
           "the gradient is exactly 0 where the clipped branch is active (A > 0 and ratio > "
           "1 + eps, or A < 0 and ratio < 1 - eps)", input=inp,
           expected=f"0 at positions {pushed_out.nonzero().tolist()}", got=grad)
    free = valid & ~pushed_out & (adv != 0)
    expect(bool((grad[free] != 0).all()),
           "the gradient is non-zero where the ratio is inside the clip range (or clipped on "
           "the side the advantage does not push) and A != 0", input=inp,
           expected=f"non-zero at positions {free.nonzero().tolist()}", got=grad)

@kata_test(level=1, category="correctness", weight=1,
           description="the loss is the token mean over the whole batch, not a mean of "
                       "per-sequence means")
@FAST
@given(b=batches(POLICY), clip_eps=CLIP_EPS)
def test_policy_loss_is_token_mean_over_batch(solution, b, clip_eps):
    inp = policy_inputs(b, clip_eps)
    loss, stats, _ = run_policy(solution, inp)
    valid = valid_of(b["mask"])
    counts = valid.sum(dim=1).double()
    per_row = []
    for row in range(valid.shape[0]):
        row_inp = {k: (v[row:row + 1] if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
        row_loss, row_stats, _ = run_policy(solution, row_inp)
        per_row.append([row_loss.detach().double()] + [scalar_of(row_stats[k], k, row_inp).double()
                                                      for k in ("clipfrac", "approx_kl")])
    per_row_t = torch.tensor(per_row, dtype=torch.float64)           # (B, 3)
    want = (per_row_t * counts[:, None]).sum(0) / counts.sum()       # (3,)
    got = torch.stack([loss.detach().double()] + [scalar_of(stats[k], k, inp).double()
                                                  for k in ("clipfrac", "approx_kl")])
    atol, rtol = tolerance(b["logprobs"].dtype)
    check_close(got, want, "[loss, clipfrac, approx_kl] of the batch is the token-count-weighted"
                " mean of the per-row values", input=inp, atol=atol, rtol=rtol)

@kata_test(level=1, category="edge cases", weight=2,
           description="padding holding NaN, inf or huge values changes neither loss nor stats")
@MEDIUM
@given(b=batches(POLICY, specials=True), clip_eps=CLIP_EPS)
def test_policy_loss_padding_changes_nothing(solution, b, clip_eps):
    inp = policy_inputs(b, clip_eps)
    loss, stats, _ = run_policy(solution, inp)
    want, want_stats, _ = run_policy(solution, policy_inputs(b["clean"], clip_eps))
    check_close(loss.detach(), want.detach(), "the loss with junk padding equals the loss with "
                "zero padding", input=inp)
    check_stats(stats, {k: scalar_of(v, k, inp) for k, v in want_stats.items()},
                "with junk padding", inp)

@kata_test(level=1, category="edge cases", weight=1,
           description="the gradient is exactly 0 on padding, even when padding holds NaN or inf")
@FAST
@given(b=batches(POLICY, specials=True), clip_eps=CLIP_EPS)
def test_policy_gradient_zero_on_padding(solution, reference, b, clip_eps):
    inp = policy_inputs(b, clip_eps)
    _, _, grad = run_policy(solution, inp)
    _, _, want = run_policy(reference, policy_inputs(b["clean"], clip_eps))
    check_grad(grad, want, "d(loss)/d(logprobs) is 0 on padding and unchanged elsewhere", inp)

@kata_test(level=1, category="edge cases", weight=1,
           description="clipfrac counts clipped valid tokens only, divided by the valid count")
@FAST
@given(b=batches(("logprobs", "adv")), clip_eps=CLIP_EPS)
def test_clipfrac_counts_valid_tokens_only(solution, b, clip_eps):
    valid = valid_of(b["mask"])
    # Every ratio is e^0.5 > 1 + eps: the clipped term is strictly larger exactly where A > 0.
    # Padding is set up to look clipped (A = 1) were it counted.
    old = b["logprobs"] - 0.5
    adv = torch.where(valid, b["adv"], torch.ones_like(b["adv"]))
    inp = {"logprobs": b["logprobs"], "old_logprobs": old, "advantages": adv,
           "mask": b["mask"], "clip_eps": clip_eps}
    _, stats, _ = run_policy(solution, inp)
    clipped = valid & (adv > 0)
    want = clipped.sum().double() / valid.sum()
    check_stats(stats, {"clipfrac": want}, "clipfrac = #(valid tokens where the clipped term is "
                "strictly larger) / #valid", inp)

@kata_test(level=1, category="api contract", weight=1,
           description="returns (0-d loss of logprobs.dtype, dict of detached 0-d stats); "
                       "inputs unchanged")
@FAST
@given(b=batches(POLICY), clip_eps=CLIP_EPS)
def test_policy_loss_returns_scalar_and_detached_stats(solution, b, clip_eps):
    inp = policy_inputs(b, clip_eps)
    before = {k: v.clone() for k, v in inp.items() if isinstance(v, torch.Tensor)}
    out = call(solution.ppo_policy_loss, *[inp[k] for k in ("logprobs", "old_logprobs",
               "advantages", "mask")], clip_eps=clip_eps, what="ppo_policy_loss")
    expect(isinstance(out, tuple) and len(out) == 2, "returns a tuple (loss, stats)", input=inp,
           got=type(out).__name__)
    loss, stats = out
    expect(isinstance(loss, torch.Tensor) and loss.dim() == 0 and loss.dtype == b["logprobs"].dtype,
           "the loss is a 0-d tensor of logprobs.dtype", input=inp,
           expected=f"0-d {b['logprobs'].dtype}", got=loss)
    expect(isinstance(stats, dict) and {"clipfrac", "approx_kl"} <= set(stats),
           "stats has the keys 'clipfrac' and 'approx_kl'", input=inp, got=stats)
    for key in ("clipfrac", "approx_kl"):
        value = stats[key]
        expect(isinstance(value, torch.Tensor) and value.dim() == 0 and not value.requires_grad,
               f"stats['{key}'] is a detached 0-d tensor", input=inp, got=value)
    expect_unchanged(before, inp, "ppo_policy_loss")

@kata_test(level=1, category="api contract", weight=1,
           description="gradients flow to logprobs only, not to old_logprobs or advantages")
@FAST
@given(b=batches(POLICY), clip_eps=CLIP_EPS)
def test_policy_gradients_flow_to_logprobs_only(solution, b, clip_eps):
    logprobs, old, adv = leaf(b["logprobs"]), leaf(b["old"]), leaf(b["adv"])
    inp = policy_inputs(b, clip_eps)
    loss, _ = call(solution.ppo_policy_loss, logprobs, old, adv, b["mask"], clip_eps,
                   what="ppo_policy_loss")
    loss.backward()
    for name, tensor in (("old_logprobs", old), ("advantages", adv)):
        expect(tensor.grad is None or bool((tensor.grad == 0).all()),
               f"no gradient reaches {name} (treat it as a constant)", input=inp,
               expected="no gradient", got=tensor.grad)

@kata_test(level=1, category="api contract", weight=1,
           description="ValueError on mismatched shapes and on clip_eps <= 0")
@FEW
@given(b=batches(POLICY))
def test_policy_loss_rejects_bad_input(solution, b):
    for which in ("logprobs", "old_logprobs", "advantages", "mask", "clip_eps"):
        inp = policy_inputs(b, 0.2)
        if which == "clip_eps":
            inp["clip_eps"] = 0.0
        else:
            inp[which] = torch.cat([inp[which], inp[which][:, :1]], dim=1)
        expect_value_error(lambda: solution.ppo_policy_loss(**inp),
                           f"ppo_policy_loss raises ValueError for a bad '{which}'", shapes_of(inp))

@kata_test(level=1, category="api contract", weight=1,
           description="a bool mask and the same mask as 0/1 floats give the same results")
@FAST
@given(b=batches(POLICY), clip_eps=CLIP_EPS)
def test_bool_and_float_masks_agree(solution, b, clip_eps):
    valid = valid_of(b["mask"])
    as_bool = policy_inputs({**b, "mask": valid}, clip_eps)
    as_float = policy_inputs({**b, "mask": valid.to(b["logprobs"].dtype)}, clip_eps)
    loss_b, stats_b, grad_b = run_policy(solution, as_bool)
    loss_f, stats_f, grad_f = run_policy(solution, as_float)
    check_close(loss_f.detach(), loss_b.detach(), "float mask gives the bool mask's loss", input=as_float)
    check_stats(stats_f, {k: scalar_of(v, k, as_bool) for k, v in stats_b.items()},
                "float mask vs bool mask", as_float)
    check_grad(grad_f, torch.zeros_like(valid, dtype=b["logprobs"].dtype) if grad_b is None else grad_b,
               "float mask gives the bool mask's gradient", as_float)

def op_count_ratio_ok(fn_at: Callable[[int, int], Callable[[], Any]], small: tuple[int, int],
                      large: tuple[int, int]) -> tuple[int, int]:
    return count_ops(fn_at(*small)), count_ops(fn_at(*large))

@kata_test(level=1, category="efficiency", weight=1,
           description="no Python loop over rows or tokens: the work is a fixed number of "
                       "tensor operations")
def test_policy_loss_has_no_python_loop(solution):
    def at(B: int, T: int) -> Callable[[], Any]:
        gen = torch.Generator().manual_seed(B * 100 + T)
        lp, old, adv = (torch.randn(B, T, generator=gen) for _ in range(3))
        mask = torch.arange(T)[None, :] < torch.randint(1, T + 1, (B, 1), generator=gen)
        return lambda: call(solution.ppo_policy_loss, lp, old, adv, mask, 0.2, what="ppo_policy_loss")

    small, large = op_count_ratio_ok(at, (2, 3), (16, 24))
    expect(large <= small + 4, "the number of tensor operations does not grow with B and T",
           input={"(B, T)": [(2, 3), (16, 24)]}, expected=f"about {small} operations at both sizes",
           got=f"{small} at (2, 3), {large} at (16, 24)")

# ============================================================================ level 2

GAMMA = st.sampled_from((1.0, 0.9, 0.5))
LAM = st.sampled_from((1.0, 0.95, 0.5, 0.0))
GAE = ("rewards", "values")

def run_gae(module: Any, inp: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    out = call(module.compute_gae, inp["rewards"], inp["values"], inp["mask"], inp["gamma"],
               inp["lam"], what="compute_gae")
    expect(isinstance(out, tuple) and len(out) == 2, "compute_gae returns (advantages, returns)",
           input=inp, got=type(out).__name__)
    return out

def gae_inputs(b: dict[str, Any], gamma: float, lam: float) -> dict[str, Any]:
    return {"rewards": b["rewards"], "values": b["values"], "mask": b["mask"], "gamma": gamma,
            "lam": lam}

def row_tail_sums(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """sum_{s >= t, s valid} x[:, s], by a reversed cumulative sum."""
    x = torch.where(valid, x, torch.zeros_like(x))
    return torch.where(valid, x.flip(1).cumsum(1).flip(1), torch.zeros_like(x))

def next_values_in_row(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """V_{t+1}, 0 after a row's last valid token."""
    v = torch.where(valid, values, torch.zeros_like(values))
    return torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], dim=1)

@kata_test(level=2, category="correctness", weight=3,
           description="GAE advantages and returns match the reference")
@MEDIUM
@given(b=batches(GAE), gamma=GAMMA, lam=LAM)
def test_gae_matches_reference(solution, reference, b, gamma, lam):
    inp = gae_inputs(b, gamma, lam)
    adv, ret = run_gae(solution, inp)
    want_adv, want_ret = run_gae(reference, inp)
    check_close(adv, want_adv, "the advantages equal the reference's", input=inp)
    check_close(ret, want_ret, "the returns equal the reference's", input=inp)

@kata_test(level=2, category="correctness", weight=2,
           description="with lam = 1 and gamma = 1, GAE is the Monte-Carlo return minus V")
@FAST
@given(b=batches(GAE))
def test_gae_lam1_gamma1_is_monte_carlo_return_minus_value(solution, b):
    inp = gae_inputs(b, 1.0, 1.0)
    adv, ret = run_gae(solution, inp)
    valid = valid_of(b["mask"])
    mc_return = row_tail_sums(b["rewards"], valid)
    want = torch.where(valid, mc_return - b["values"], torch.zeros_like(mc_return))
    check_close(adv, want, "A_t = (r_t + r_{t+1} + ... to the row's end) - V_t", input=inp)
    check_close(ret, mc_return, "returns = the Monte-Carlo return", input=inp)

@kata_test(level=2, category="correctness", weight=2,
           description="with lam = 0, GAE is the TD residual r_t + gamma * V_{t+1} - V_t")
@FAST
@given(b=batches(GAE), gamma=GAMMA)
def test_gae_lam0_is_td_residual(solution, b, gamma):
    inp = gae_inputs(b, gamma, 0.0)
    adv, _ = run_gae(solution, inp)
    valid = valid_of(b["mask"])
    values = torch.where(valid, b["values"], torch.zeros_like(b["values"]))
    delta = b["rewards"] + gamma * next_values_in_row(b["values"], valid) - values
    want = torch.where(valid, delta, torch.zeros_like(delta))
    check_close(adv, want, "A_t = r_t + gamma * V_{t+1} - V_t (V after the row's end is 0)",
                input=inp)

@kata_test(level=2, category="correctness", weight=1,
           description="A_t = delta_t + gamma * lam * A_{t+1}, computed backwards from the row end")
@FAST
@given(b=batches(GAE), gamma=GAMMA, lam=LAM)
def test_gae_satisfies_backward_recursion(solution, b, gamma, lam):
    inp = gae_inputs(b, gamma, lam)
    adv, _ = run_gae(solution, inp)
    valid = valid_of(b["mask"])
    values = torch.where(valid, b["values"], torch.zeros_like(b["values"]))
    delta = b["rewards"] + gamma * next_values_in_row(b["values"], valid) - values
    adv_next = torch.cat([adv.detach()[:, 1:], torch.zeros_like(adv[:, :1])], dim=1)
    want = torch.where(valid, delta + gamma * lam * adv_next, torch.zeros_like(delta))
    check_close(adv, want, "A_t = delta_t + gamma * lam * A_{t+1}", input=inp)

@kata_test(level=2, category="edge cases", weight=1,
           description="at a row's last valid token A = r - V: nothing is bootstrapped past "
                       "the row end")
@FAST
@given(b=batches(GAE), gamma=GAMMA, lam=LAM)
def test_gae_last_valid_token_does_not_bootstrap(solution, b, gamma, lam):
    valid = valid_of(b["mask"])
    padded = {**b, "values": with_padding(b["values"], valid, 2.0),
              "rewards": with_padding(b["rewards"], valid, 1.0)}
    inp = gae_inputs(padded, gamma, lam)
    adv, _ = run_gae(solution, inp)
    rows = torch.arange(valid.shape[0])
    last_ids = valid.sum(1) - 1
    got = adv.detach()[rows, last_ids]
    want = b["rewards"][rows, last_ids] - b["values"][rows, last_ids]
    check_close(got, want, "A at each row's last valid token is r - V (the episode ends; padding "
                "holds rewards 1 and values 2 here)", input=inp)

@kata_test(level=2, category="edge cases", weight=2,
           description="padding holding NaN, inf or huge values changes nothing; outputs are 0 "
                       "on padding")
@MEDIUM
@given(b=batches(GAE, specials=True), gamma=GAMMA, lam=LAM)
def test_gae_padding_changes_nothing(solution, reference, b, gamma, lam):
    inp = gae_inputs(b, gamma, lam)
    adv, ret = run_gae(solution, inp)
    want_adv, want_ret = run_gae(reference, gae_inputs(b["clean"], gamma, lam))
    check_close(adv, want_adv, "advantages with junk padding equal those with zero padding "
                "(and are 0 on padding)", input=inp)
    check_close(ret, want_ret, "returns with junk padding equal those with zero padding "
                "(and are 0 on padding)", input=inp)

@kata_test(level=2, category="api contract", weight=1,
           description="compute_gae returns (B, T) tensors without gradient, returns = A + V; "
                       "inputs unchanged")
@FAST
@given(b=batches(GAE), gamma=GAMMA, lam=LAM)
def test_gae_returns_detached_tensors(solution, b, gamma, lam):
    inp = gae_inputs(b, gamma, lam)
    inp["values"] = leaf(b["values"])
    before = {"rewards": b["rewards"].clone(), "values": b["values"].clone(), "mask": b["mask"].clone()}
    adv, ret = run_gae(solution, inp)
    for name, x in (("advantages", adv), ("returns", ret)):
        expect(isinstance(x, torch.Tensor) and x.shape == b["rewards"].shape
               and x.dtype == b["rewards"].dtype and not x.requires_grad,
               f"{name} is a (B, T) tensor of rewards.dtype without gradient", input=inp,
               expected=f"shape {tuple(b['rewards'].shape)}, {b['rewards'].dtype}, no grad", got=x)
    valid = valid_of(b["mask"])
    check_close(ret, torch.where(valid, adv + b["values"], torch.zeros_like(adv)),
                "returns = advantages + values on valid tokens, 0 on padding", input=inp)
    expect_unchanged(before, {k: inp[k].detach() for k in before}, "compute_gae")

@kata_test(level=2, category="efficiency", weight=1,
           description="GAE is vectorised over the batch: no Python loop over rows")
def test_gae_vectorized_over_batch(solution):
    def at(B: int) -> Callable[[], Any]:
        gen = torch.Generator().manual_seed(B)
        rewards, values = torch.randn(B, 4, generator=gen), torch.randn(B, 4, generator=gen)
        mask = torch.arange(4)[None, :] < torch.randint(1, 5, (B, 1), generator=gen)
        return lambda: call(solution.compute_gae, rewards, values, mask, 0.9, 0.95, what="compute_gae")

    small, large = count_ops(at(2)), count_ops(at(32))
    expect(large <= small + 4, "the number of tensor operations does not grow with the batch size",
           input={"B": [2, 32], "T": 4}, expected=f"about {small} operations at both sizes",
           got=f"{small} at B=2, {large} at B=32")

VALUE = ("values", "old_values", "returns")
# Not multiples of 1/8: no exact ties between the clipped and unclipped terms on the grid.
CLIP_EPS_VALUE = st.sampled_from((0.1, 0.2, 0.3))

def value_inputs(b: dict[str, Any], clip_eps_value: float) -> dict[str, Any]:
    return {"values": b["values"], "old_values": b["old_values"], "returns": b["returns"],
            "mask": b["mask"], "clip_eps_value": clip_eps_value}

def run_value(module: Any, inp: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    values = leaf(inp["values"])
    loss = call(module.ppo_value_loss, values, inp["old_values"], inp["returns"], inp["mask"],
                inp["clip_eps_value"], what="ppo_value_loss")
    scalar_of(loss, "the value loss", inp)
    expect(loss.requires_grad, "the value loss must carry a gradient to values", input=inp)
    loss.backward()
    grad = torch.zeros_like(values) if values.grad is None else values.grad
    return loss.detach(), grad

@kata_test(level=2, category="correctness", weight=3,
           description="the clipped value loss and its gradient match the reference")
@MEDIUM
@given(b=batches(VALUE), clip_eps_value=CLIP_EPS_VALUE)
def test_value_loss_matches_reference(solution, reference, b, clip_eps_value):
    inp = value_inputs(b, clip_eps_value)
    loss, grad = run_value(solution, inp)
    want, want_grad = run_value(reference, inp)
    check_close(loss, want, "the value loss equals the reference's", input=inp)
    check_grad(grad, want_grad, "d(value loss)/d(values) equals the reference's", inp)

@kata_test(level=2, category="correctness", weight=2,
           description="the clipped value loss is >= the unclipped 0.5 * mean((v - R)^2)")
@FAST
@given(b=batches(VALUE), clip_eps_value=CLIP_EPS_VALUE)
def test_clipped_value_loss_at_least_unclipped(solution, b, clip_eps_value):
    inp = value_inputs(b, clip_eps_value)
    loss, _ = run_value(solution, inp)
    valid = valid_of(b["mask"])
    unclipped = 0.5 * token_mean((b["values"] - b["returns"]) ** 2, valid)
    atol, rtol = tolerance(b["values"].dtype)
    expect(bool(loss >= unclipped - atol - rtol * unclipped.abs()),
           "the clipped value loss is at least the unclipped 0.5 * token mean of (v - R)^2",
           input=inp, expected=f">= {unclipped.item():.6g}", got=loss)

@kata_test(level=2, category="correctness", weight=1,
           description="when values == old_values the loss is 0.5 * token mean of (v - R)^2")
@FAST
@given(b=batches(("values", "returns")), clip_eps_value=CLIP_EPS_VALUE)
def test_value_loss_is_half_mse_inside_clip_range(solution, b, clip_eps_value):
    inp = value_inputs({**b, "old_values": b["values"].clone()}, clip_eps_value)
    loss, _ = run_value(solution, inp)
    want = 0.5 * token_mean((b["values"] - b["returns"]) ** 2, valid_of(b["mask"]))
    check_close(loss, want, "inside the clip range the loss is 0.5 * token mean of (v - R)^2",
                input=inp)

@kata_test(level=2, category="correctness", weight=1,
           description="zero value gradient on tokens where the clipped term is strictly larger")
@FAST
@given(b=batches(VALUE), clip_eps_value=CLIP_EPS_VALUE)
def test_value_gradient_zero_where_clipped(solution, b, clip_eps_value):
    inp = value_inputs(b, clip_eps_value)
    _, grad = run_value(solution, inp)
    v, old, ret = (b[k].double() for k in VALUE)
    clipped_v = torch.minimum(torch.maximum(v, old - clip_eps_value), old + clip_eps_value)
    clipped_active = valid_of(b["mask"]) & ((clipped_v - ret) ** 2 > (v - ret) ** 2)
    expect(bool((grad[clipped_active] == 0).all()),
           "the gradient is exactly 0 where the clipped term (clip(v, old_v -+ eps) - R)^2 is "
           "strictly larger: the critic may not move further from old_v", input=inp,
           expected=f"0 at positions {clipped_active.nonzero().tolist()}", got=grad)

@kata_test(level=2, category="edge cases", weight=1,
           description="value loss: padding holding NaN, inf or huge values changes nothing, "
                       "gradient 0 on padding")
@FAST
@given(b=batches(VALUE, specials=True), clip_eps_value=CLIP_EPS_VALUE)
def test_value_loss_padding_changes_nothing(solution, reference, b, clip_eps_value):
    inp = value_inputs(b, clip_eps_value)
    loss, grad = run_value(solution, inp)
    want, want_grad = run_value(reference, value_inputs(b["clean"], clip_eps_value))
    check_close(loss, want, "the value loss with junk padding equals the loss with zero padding",
                input=inp)
    check_grad(grad, want_grad, "d(value loss)/d(values) is 0 on padding and unchanged elsewhere", inp)

@kata_test(level=2, category="api contract", weight=1,
           description="value loss: a 0-d tensor; gradients flow to values only")
@FAST
@given(b=batches(VALUE), clip_eps_value=CLIP_EPS_VALUE)
def test_value_gradients_flow_to_values_only(solution, b, clip_eps_value):
    values, old, ret = leaf(b["values"]), leaf(b["old_values"]), leaf(b["returns"])
    inp = value_inputs(b, clip_eps_value)
    loss = call(solution.ppo_value_loss, values, old, ret, b["mask"], clip_eps_value,
                what="ppo_value_loss")
    expect(isinstance(loss, torch.Tensor) and loss.dim() == 0 and loss.dtype == b["values"].dtype,
           "the value loss is a 0-d tensor of values.dtype", input=inp, got=loss)
    loss.backward()
    for name, tensor in (("old_values", old), ("returns", ret)):
        expect(tensor.grad is None or bool((tensor.grad == 0).all()),
               f"no gradient reaches {name} (treat it as a constant)", input=inp,
               expected="no gradient", got=tensor.grad)

@kata_test(level=2, category="api contract", weight=1,
           description="compute_gae and ppo_value_loss raise ValueError on mismatched shapes")
@FEW
@given(b=batches(VALUE + ("rewards",)))
def test_level2_rejects_shape_mismatch(solution, b):
    cases = [("gae", arg) for arg in ("rewards", "values", "mask")]
    cases += [("value", arg) for arg in ("values", "old_values", "returns", "mask")]
    for fn_name, arg in cases:
        if fn_name == "gae":
            inp = gae_inputs(b, 0.9, 0.95)
            fn = solution.compute_gae
        else:
            inp = value_inputs(b, 0.2)
            fn = solution.ppo_value_loss
        inp[arg] = torch.cat([inp[arg], inp[arg][:, :1]], dim=1)
        expect_value_error(lambda: fn(**inp), f"{fn.__name__} raises ValueError when '{arg}' "
                           "has a different shape", shapes_of(inp))

# ============================================================================ level 3

KL_COEF = st.sampled_from((0.1, 0.5, 1.0))
KL = ("logprobs", "ref")

def draw_scores(draw: Any, b: dict[str, Any]) -> torch.Tensor:
    B = b["mask"].shape[0]
    dtype = b["logprobs"].dtype
    return grid(draw, (B,), dtype, -16, 16)

def run_kl(module: Any, inp: dict[str, Any]) -> torch.Tensor:
    return call(module.kl_shaped_rewards, inp["scores"], inp["logprobs"], inp["ref_logprobs"],
                inp["mask"], inp["kl_coef"], what="kl_shaped_rewards")

@st.composite
def kl_inputs(draw: Any, specials: bool = False) -> dict[str, Any]:
    b = draw(batches(KL, specials=specials))
    kl_coef = draw(KL_COEF)
    scores = draw_scores(draw, b)
    inp = {"scores": scores, "logprobs": b["logprobs"], "ref_logprobs": b["ref"],
           "mask": b["mask"], "kl_coef": kl_coef}
    if specials:
        inp["clean"] = {**inp, "logprobs": b["clean"]["logprobs"],
                        "ref_logprobs": b["clean"]["ref"]}
    return inp

@kata_test(level=3, category="correctness", weight=2,
           description="KL-shaped rewards match the reference")
@FAST
@given(inp=kl_inputs())
def test_kl_rewards_match_reference(solution, reference, inp):
    check_close(run_kl(solution, inp), run_kl(reference, inp),
                "the shaped rewards equal the reference's", input=inp)

@kata_test(level=3, category="correctness", weight=1,
           description="the KL term is zero when the policy equals the reference")
@FAST
@given(inp=kl_inputs())
def test_kl_term_zero_when_policy_equals_reference(solution, inp):
    inp = {**inp, "ref_logprobs": inp["logprobs"].clone(),
           "scores": torch.zeros_like(inp["scores"])}
    got = run_kl(solution, inp)
    check_close(got, torch.zeros_like(inp["logprobs"]),
                "with logprobs == ref_logprobs and zero scores every reward is 0", input=inp)

@kata_test(level=3, category="correctness", weight=2,
           description="the score lands on each row's last valid token only")
@FAST
@given(inp=kl_inputs())
def test_score_on_last_valid_token_only(solution, inp):
    without = run_kl(solution, {**inp, "scores": torch.zeros_like(inp["scores"])})
    with_scores = run_kl(solution, inp)
    valid = valid_of(inp["mask"])
    is_last = torch.arange(valid.shape[1])[None, :] == (valid.sum(1) - 1)[:, None]
    want = torch.where(is_last, inp["scores"][:, None].expand_as(without), torch.zeros_like(without))
    check_close(with_scores - without, want, "rewards(scores) - rewards(0) is scores[b] at row "
                "b's last valid token and 0 everywhere else", input=inp)

@kata_test(level=3, category="api contract", weight=1,
           description="the shaped rewards carry no gradient (even when logprobs does)")
@FAST
@given(inp=kl_inputs())
def test_kl_rewards_carry_no_gradient(solution, inp):
    inp = {**inp, "logprobs": leaf(inp["logprobs"])}
    got = run_kl(solution, inp)
    expect(isinstance(got, torch.Tensor) and got.shape == inp["mask"].shape
           and got.dtype == inp["logprobs"].dtype,
           "the rewards are a (B, T) tensor of logprobs.dtype", input=inp, got=got)
    expect(not got.requires_grad, "the rewards are constants for the loss: no gradient",
           input=inp, expected="requires_grad=False", got="requires_grad=True")

@kata_test(level=3, category="edge cases", weight=1,
           description="KL rewards: padding holding NaN, inf or huge values changes nothing; 0 "
                       "on padding")
@FAST
@given(inp=kl_inputs(specials=True))
def test_kl_rewards_padding_changes_nothing(solution, reference, inp):
    clean = inp.pop("clean")
    check_close(run_kl(solution, inp), run_kl(reference, clean), "rewards with junk padding "
                "equal those with zero padding (and are 0 on padding)", input=inp)

# ---------------------------------------------------------------------------- masked_whiten

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

def run_whiten(module: Any, inp: dict[str, Any]) -> torch.Tensor:
    return call(module.masked_whiten, inp["x"], inp["mask"], inp["shift_mean"],
                what="masked_whiten")

@kata_test(level=3, category="correctness", weight=2,
           description="masked_whiten matches the reference (shift_mean True and False)")
@FAST
@given(inp=whiten_inputs())
def test_masked_whiten_matches_reference(solution, reference, inp):
    check_close(run_whiten(solution, inp), run_whiten(reference, inp),
                "the whitened values equal the reference's", input=inp)

@kata_test(level=3, category="correctness", weight=2,
           description="whitened values have masked mean 0 and unbiased masked variance 1")
@FAST
@given(inp=whiten_inputs())
def test_whitened_has_mean_0_and_variance_1(solution, inp):
    inp = {**inp, "shift_mean": True}
    got = run_whiten(solution, inp)
    valid = valid_of(inp["mask"])
    values = got.detach().double()[valid]
    n = values.numel()
    mean = values.mean()
    var = ((values - mean) ** 2).sum() / (n - 1)
    x = inp["x"].double()[valid]
    var_x = ((x - x.mean()) ** 2).sum() / (n - 1)
    want_var = (var_x / (var_x + 1e-8)).item()  # 1, up to the eps under the square root
    tol = 1e-4 if inp["x"].dtype == torch.float32 else 1e-7
    expect(abs(mean.item()) <= tol and abs(var.item() - want_var) <= tol,
           "over the valid entries the mean is 0 and the unbiased variance (divide by n - 1) is 1",
           input=inp, expected="mean 0, variance 1", got=f"mean {mean.item():.6g}, "
           f"variance {var.item():.6g} over {n} valid entries")

@kata_test(level=3, category="edge cases", weight=2,
           description="whitening uses the valid entries only; padding is 0 whatever it held")
@FAST
@given(inp=whiten_inputs(specials=True))
def test_whiten_ignores_padding(solution, reference, inp):
    clean = inp.pop("clean")
    check_close(run_whiten(solution, inp), run_whiten(reference, clean),
                "whitening with junk padding equals whitening with zero padding, and padding "
                "comes out 0", input=inp)

@kata_test(level=3, category="correctness", weight=1,
           description="shift_mean=False keeps the masked mean of x")
@FAST
@given(inp=whiten_inputs())
def test_whiten_shift_mean_false_keeps_mean(solution, inp):
    inp = {**inp, "shift_mean": False}
    got = run_whiten(solution, inp)
    valid = valid_of(inp["mask"])
    check_close(token_mean(got.detach(), valid), token_mean(inp["x"], valid),
                "with shift_mean=False the masked mean of the output is the masked mean of x",
                input=inp)

@kata_test(level=3, category="api contract", weight=1,
           description="masked_whiten raises ValueError with fewer than 2 valid entries or a "
                       "mismatched mask")
@FEW
@given(T=st.integers(1, 5), dtype=st.sampled_from(DTYPES))
def test_whiten_rejects_bad_input(solution, T, dtype):
    x = torch.arange(T, dtype=dtype)[None, :]
    for what, mask in (("only 1 valid entry", torch.arange(T)[None, :] < 1),
                       ("mask shape differs from x", torch.ones(1, T + 1, dtype=torch.bool))):
        inp = {"x": x, "mask": mask}
        expect_value_error(lambda: solution.masked_whiten(x, mask),
                           f"masked_whiten raises ValueError ({what})", inp)

# ---------------------------------------------------------------------------- ppo_loss

LOSS = ("logprobs", "old_logprobs", "values", "old_values", "rewards")

@st.composite
def loss_inputs(draw: Any, specials: bool = False, whiten: bool | None = None) -> dict[str, Any]:
    whiten = draw(st.booleans()) if whiten is None else whiten
    # Whitening near-constant advantages amplifies rounding by up to 1e4: float64 only then.
    b = draw(batches(LOSS, min_total=2, specials=specials,
                     dtypes=(torch.float64,) if whiten else DTYPES))
    kwargs = {"gamma": draw(GAMMA), "lam": draw(LAM), "clip_eps": draw(CLIP_EPS),
              "clip_eps_value": draw(CLIP_EPS_VALUE), "vf_coef": draw(st.sampled_from((0.1, 0.5))),
              "whiten_advantages": whiten}
    inp = {**{k: b[k] for k in LOSS}, "mask": b["mask"], **kwargs}
    if specials:
        inp["clean"] = {**inp, **{k: b["clean"][k] for k in LOSS}}
    return inp

def run_loss(module: Any, inp: dict[str, Any]) -> tuple[torch.Tensor, Any, torch.Tensor, torch.Tensor]:
    logprobs, values = leaf(inp["logprobs"]), leaf(inp["values"])
    kwargs = {k: inp[k] for k in ("gamma", "lam", "clip_eps", "clip_eps_value", "vf_coef",
                                  "whiten_advantages")}
    out = call(module.ppo_loss, logprobs, inp["old_logprobs"], values, inp["old_values"],
               inp["rewards"], inp["mask"], what="ppo_loss", **kwargs)
    expect(isinstance(out, tuple) and len(out) == 2, "ppo_loss returns (total, stats)",
           input=inp, got=type(out).__name__)
    total, stats = out
    scalar_of(total, "the total loss", inp)
    expect(total.requires_grad, "the total loss carries gradients", input=inp)
    total.backward()
    zeros = torch.zeros_like(logprobs)
    return (total.detach(), stats, zeros if logprobs.grad is None else logprobs.grad,
            zeros if values.grad is None else values.grad)

STAT_KEYS = ("policy_loss", "value_loss", "clipfrac", "approx_kl")

@kata_test(level=3, category="correctness", weight=3,
           description="ppo_loss: total, stats and gradients match the reference")
@MEDIUM
@given(inp=loss_inputs())
def test_ppo_loss_matches_reference(solution, reference, inp):
    total, stats, g_lp, g_v = run_loss(solution, inp)
    want, want_stats, want_lp, want_v = run_loss(reference, inp)
    check_close(total, want, "the total loss equals the reference's", input=inp)
    check_stats(stats, want_stats, "ppo_loss", inp)
    check_grad(g_lp, want_lp, "d(total)/d(logprobs) equals the reference's", inp)
    check_grad(g_v, want_v, "d(total)/d(values) equals the reference's (only through the value "
               "loss: GAE runs on values.detach())", inp)

@kata_test(level=3, category="correctness", weight=2,
           description="value targets are the returns before whitening: whitening changes "
                       "only the policy loss")
@FAST
@given(inp=loss_inputs(whiten=True))
def test_ppo_loss_value_targets_before_whitening(solution, inp):
    _, stats, _, _ = run_loss(solution, inp)
    _, raw_stats, _, _ = run_loss(solution, {**inp, "whiten_advantages": False})
    check_stats(stats, {"value_loss": scalar_of(raw_stats["value_loss"], "value_loss", inp)},
                "value_loss with whitening equals value_loss without (returns = raw advantages "
                "+ values)", inp)

@kata_test(level=3, category="api contract", weight=1,
           description="ppo_loss: total = policy_loss + vf_coef * value_loss; stats are "
                       "detached 0-d tensors")
@FAST
@given(inp=loss_inputs())
def test_ppo_loss_combines_policy_and_value_loss(solution, inp):
    total, stats, _, _ = run_loss(solution, inp)
    expect(isinstance(stats, dict) and set(STAT_KEYS) <= set(stats),
           f"stats has the keys {list(STAT_KEYS)}", input=inp, got=stats)
    for key in STAT_KEYS:
        value = stats[key]
        expect(isinstance(value, torch.Tensor) and value.dim() == 0 and not value.requires_grad,
               f"stats['{key}'] is a detached 0-d tensor", input=inp, got=value)
    want = stats["policy_loss"] + inp["vf_coef"] * stats["value_loss"]
    check_close(total, want.to(total.dtype), "total = policy_loss + vf_coef * value_loss", input=inp)

@kata_test(level=3, category="edge cases", weight=1,
           description="ppo_loss: padding holding NaN, inf or huge values changes nothing")
@FAST
@given(inp=loss_inputs(specials=True))
def test_ppo_loss_padding_changes_nothing(solution, reference, inp):
    clean = inp.pop("clean")
    total, stats, g_lp, g_v = run_loss(solution, inp)
    want, want_stats, want_lp, want_v = run_loss(reference, clean)
    check_close(total, want, "the total loss with junk padding equals the loss with zero padding",
                input=inp)
    check_stats(stats, want_stats, "ppo_loss with junk padding", inp)
    check_grad(g_lp, want_lp, "d(total)/d(logprobs) is 0 on padding and unchanged elsewhere", inp)
    check_grad(g_v, want_v, "d(total)/d(values) is 0 on padding and unchanged elsewhere", inp)

@kata_test(level=3, category="api contract", weight=1,
           description="kl_shaped_rewards and ppo_loss raise ValueError on mismatched shapes")
@FEW
@given(inp=loss_inputs(whiten=False))
def test_level3_rejects_shape_mismatch(solution, inp):
    cases = [("kl", arg) for arg in ("scores", "logprobs", "ref_logprobs", "mask")]
    cases += [("loss", arg) for arg in LOSS + ("mask",)]
    for fn_name, arg in cases:
        if fn_name == "kl":
            args = {"scores": inp["rewards"][:, 0], "logprobs": inp["logprobs"],
                    "ref_logprobs": inp["old_logprobs"], "mask": inp["mask"], "kl_coef": 0.1}
            fn = solution.kl_shaped_rewards
        else:
            args = {k: inp[k] for k in LOSS + ("mask",)}
            fn = solution.ppo_loss
        grown = args[arg]
        args[arg] = torch.cat([grown, grown[..., :1]], dim=-1)
        expect_value_error(lambda: fn(**args), f"{fn.__name__} raises ValueError when '{arg}' "
                           "has the wrong shape", shapes_of(args))
