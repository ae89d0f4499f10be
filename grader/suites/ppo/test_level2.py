"""Level 2: compute_gae and ppo_value_loss.

Each rule of the statement (README "API", level 2) maps to the test that builds the situation
where it decides the outcome; the random tests below compare with the reference and check the
limits the statement names (lam = gamma = 1: Monte-Carlo return; lam = 0: TD residual).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from hypothesis import given, strategies as st

from grader.protocol import call, expect, kata_test
from grader.suites._common import check_close, count_ops, tolerance
from grader.suites.ppo.checks import (
    check_grad, check_low_precision, expect_unchanged, expect_value_error, kept, same_result,
    shapes_of, snapshot)
from grader.suites.ppo.runners import (
    GAE, GAMMA, LAM, VALUE, gae_inputs, run_gae, run_value, value_inputs)
from grader.suites.ppo.strategies import (
    ALL_FLOAT_DTYPES, FAST, FIXED_MASKS, LONG_ROW_LENGTHS, MASK_FLOAT_DTYPES, MEDIUM, batches,
    fixed_batch, leaf, right_padded_rows, token_mean, valid_of, with_padding)

RULES = {
    "GAE: delta_t = r_t + gamma * V_{t+1} - V_t, A_t = delta_t + gamma * lam * A_{t+1}, "
    "backwards over valid tokens": ("test_gae_satisfies_backward_recursion", "test_gae_matches_reference"),
    "GAE: the value after a row's last valid token is 0 (nothing bootstrapped past the end)":
        "test_gae_last_valid_token_does_not_bootstrap",
    "GAE: gamma and lam anywhere in [0, 1], 0 and 1 included":
        ("test_gae_edge_discounts", "test_gae_lam1_gamma1_is_monte_carlo_return_minus_value",
         "test_gae_lam0_is_td_residual"),
    "GAE: (advantages, returns = advantages + values), 0 on padding, without gradient; inputs "
    "unchanged": "test_gae_returns_detached_tensors",
    "GAE: both outputs of rewards.dtype, for every float dtype (values may differ)":
        "test_gae_keeps_rewards_dtype",
    "GAE: padding may hold anything": "test_gae_padding_changes_nothing",
    "value loss: 0.5 * token mean of max((v - R)^2, (clip(v, old_v - eps, old_v + eps) - R)^2)":
        ("test_value_loss_matches_reference", "test_value_loss_is_half_mse_inside_clip_range",
         "test_clipped_value_loss_at_least_unclipped"),
    "value loss: clip_eps_value = 0 is a clip range of width 0, not 'no clipping'":
        "test_value_loss_clip_zero_pins_values_to_old",
    "value loss: gradient to values only, 0 where the clipped term is strictly larger":
        ("test_value_gradients_flow_to_values_only", "test_value_gradient_zero_where_clipped"),
    "value loss: padding changes nothing, gradient 0 on padding": "test_value_loss_padding_changes_nothing",
    "value loss: a 0-d tensor of values.dtype, for every float dtype; inputs unchanged":
        "test_value_loss_keeps_every_float_dtype",
    "value loss: the token count of the mean is exact: no overflow past float16's 65,504":
        "test_value_loss_counts_tokens_beyond_float16_range",
    "both: one valid token, T = 1, rows without padding": "test_level2_edge_masks",
    "both: a bool mask and 0/1 floats of any float dtype agree (the value loss also with token "
    "counts bfloat16 and float16 cannot hold)": "test_level2_bool_and_float_masks_agree",
    "ValueError: a shape differs from mask's; the next call is unaffected": "test_level2_rejects_shape_mismatch",
    "constraint: GAE has no Python loop over batch rows": "test_gae_vectorized_over_batch",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'GAE: delta_t = r_t + gamma * V_{t+1} - V_t, A_t = delta_t + gamma * lam * A_{t+1}, '
    'backwards over valid tokens':
        'gae-def',
    "GAE: the value after a row's last valid token is 0 (nothing bootstrapped past the "
    'end)':
        'episode-end',
    'GAE: gamma and lam anywhere in [0, 1], 0 and 1 included':
        ('ask', 'discount-range'),
    'GAE: (advantages, returns = advantages + values), 0 on padding, without gradient; '
    'inputs unchanged':
        ('ask', 'gae-def'),
    'GAE: both outputs of rewards.dtype, for every float dtype (values may differ)':
        'ask',
    'GAE: padding may hold anything':
        'padding',
    'value loss: 0.5 * token mean of max((v - R)^2, (clip(v, old_v - eps, old_v + eps) - '
    'R)^2)':
        ('value-clip', 'aggregation'),
    "value loss: clip_eps_value = 0 is a clip range of width 0, not 'no clipping'":
        'clip-zero',
    'value loss: gradient to values only, 0 where the clipped term is strictly larger':
        ('ask', 'value-clip'),
    'value loss: padding changes nothing, gradient 0 on padding':
        'padding',
    'value loss: a 0-d tensor of values.dtype, for every float dtype; inputs unchanged':
        'ask',
    "value loss: the token count of the mean is exact: no overflow past float16's 65,504":
        'token-count',
    'both: one valid token, T = 1, rows without padding':
        'ask',
    'both: a bool mask and 0/1 floats of any float dtype agree (the value loss also with '
    'token counts bfloat16 and float16 cannot hold)':
        ('ask', 'token-count'),
    "ValueError: a shape differs from mask's; the next call is unaffected":
        'ask',
    'constraint: GAE has no Python loop over batch rows':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# clip_eps_value = 0 (a falsy but valid clip range) and token counts float16 cannot hold.
DETAILS = {
    "value loss: clip_eps_value = 0 is a clip range of width 0, not 'no clipping'",
    "value loss: the token count of the mean is exact: no overflow past float16's 65,504",
}

# Not multiples of 1/8: no exact ties between the clipped and unclipped terms on the grid.
CLIP_EPS_VALUE = st.sampled_from((0.1, 0.2, 0.3))


def next_values_in_row(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """V_{t+1}, 0 after a row's last valid token."""
    v = torch.where(valid, values, torch.zeros_like(values))
    return torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], dim=1)


def row_tail_sums(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """sum_{s >= t, s valid} x[:, s], by a reversed cumulative sum."""
    x = torch.where(valid, x, torch.zeros_like(x))
    return torch.where(valid, x.flip(1).cumsum(1).flip(1), torch.zeros_like(x))


# ============================================================================ targeted


@kata_test(level=2, category="edge cases", weight=1.5,
           description="GAE with gamma or lam equal to 0 or 1 (falsy but valid discounts)")
def test_gae_edge_discounts(solution, reference):
    b = fixed_batch(FIXED_MASKS["three rows of 2, 1 and 3 tokens"], GAE, seed=2, fill=5.0)
    for gamma, lam in ((0.0, 0.95), (0.9, 0.0), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (0.5, 1.0)):
        inp = gae_inputs(b, gamma, lam)
        adv, ret = run_gae(solution, inp)
        want_adv, want_ret = run_gae(reference, inp)
        check_close(adv, want_adv, f"advantages with gamma = {gamma:g}, lam = {lam:g} (every "
                    "discount in [0, 1] is valid)", input=inp)
        check_close(ret, want_ret, f"returns with gamma = {gamma:g}, lam = {lam:g}", input=inp)


@kata_test(level=2, category="api contract",
           description="GAE outputs have rewards.dtype (float32/64, float16, bfloat16; values may differ)")
def test_gae_keeps_rewards_dtype(solution):
    base = fixed_batch(FIXED_MASKS["three rows of 2, 1 and 3 tokens"], GAE, seed=4, fill=5.0, lo=-8, hi=8)
    pairs = [(d, d) for d in ALL_FLOAT_DTYPES] + [(torch.float64, torch.float32), (torch.float32, torch.float64)]
    for rewards_dtype, values_dtype in pairs:
        inp = gae_inputs({"rewards": base["rewards"].to(rewards_dtype),
                          "values": base["values"].to(values_dtype), "mask": base["mask"]}, 0.9, 0.95)
        adv, ret = run_gae(solution, inp)
        exact = gae_inputs({"rewards": inp["rewards"].double(), "values": inp["values"].double(),
                            "mask": base["mask"]}, 0.9, 0.95)
        want_adv, want_ret = run_gae(solution, exact)  # your float64 result: dtypes only here
        what = f"rewards {rewards_dtype}, values {values_dtype}; vs your float64 result"
        check_low_precision(adv, want_adv, rewards_dtype, f"advantages ({what})", inp)
        check_low_precision(ret, want_ret, rewards_dtype, f"returns ({what})", inp)


@kata_test(level=2, category="edge cases", weight=1.5,
           description="clip_eps_value = 0 clips the values to old_values (it does not disable clipping)")
def test_value_loss_clip_zero_pins_values_to_old(solution):
    # v = 1, old_v = 0, R = 2: clipping with eps 0 gives (0 - 2)^2 = 4 > (1 - 2)^2 = 1, so the
    # loss is 0.5 * 4 = 2 and the gradient is 0; without clipping it would be 0.5 and -1.
    inp = {"values": torch.tensor([[1.0, 1.0]], dtype=torch.float64),
           "old_values": torch.zeros(1, 2, dtype=torch.float64),
           "returns": torch.tensor([[2.0, 5.0]], dtype=torch.float64),
           "mask": torch.tensor([[True, False]]), "clip_eps_value": 0.0}
    loss, grad = run_value(solution, inp)
    check_close(loss, torch.tensor(2.0, dtype=torch.float64), "with clip_eps_value = 0 the "
                "clipped value is old_values: 0.5 * max((1 - 2)^2, (0 - 2)^2) = 2", input=inp)
    check_grad(grad, torch.zeros(1, 2, dtype=torch.float64), "with clip_eps_value = 0 the "
               "clipped term is constant and larger: no gradient", inp)


@kata_test(level=2, category="api contract",
           description="the value loss has values.dtype (float32/64, float16, bfloat16); inputs unchanged")
def test_value_loss_keeps_every_float_dtype(solution):
    base = fixed_batch(FIXED_MASKS["three rows of 2, 1 and 3 tokens"], VALUE, seed=6, fill=5.0, lo=-8, hi=8)
    for dtype in ALL_FLOAT_DTYPES + (torch.float64,):
        inp = value_inputs({**base, **{k: base[k].to(dtype) for k in VALUE}}, 0.2)
        before = snapshot(inp)
        loss, grad = run_value(solution, inp, share_inputs=True)
        expect_unchanged(before, inp, "ppo_value_loss")
        exact = {**inp, **{k: inp[k].double() for k in VALUE}}
        want, want_grad = run_value(solution, exact)  # your float64 result: dtypes only here
        check_low_precision(loss, want, dtype, f"the {dtype} value loss (vs your float64 loss)", inp)
        check_low_precision(grad, want_grad, dtype, f"d(value loss)/d(values) in {dtype} (vs float64)", inp)


@kata_test(level=2, category="edge cases",
           description="GAE and the value loss on one valid token, T = 1 and rows without padding")
def test_level2_edge_masks(solution, reference):
    for i, (layout, rows) in enumerate(FIXED_MASKS.items()):
        b = fixed_batch(rows, GAE + VALUE[1:], seed=10 + i, fill=5.0)
        inp = gae_inputs(b, 0.9, 0.95)
        for got, want, what in zip(run_gae(solution, inp), run_gae(reference, inp), ("advantages", "returns")):
            check_close(got, want, f"GAE {what} ({layout})", input=inp)
        inp = value_inputs(b, 0.2)
        (loss, grad), (want, want_grad) = run_value(solution, inp), run_value(reference, inp)
        check_close(loss, want, f"the value loss ({layout})", input=inp)
        check_grad(grad, want_grad, f"d(value loss)/d(values) ({layout})", inp)


@kata_test(level=2, category="api contract",
           description="GAE and the value loss give the same results for bool and 0/1 float masks")
def test_level2_bool_and_float_masks_agree(solution):
    b = fixed_batch(FIXED_MASKS["rows of 1 and 4 valid tokens"], GAE + VALUE[1:], seed=8, fill=5.0)
    # The value loss also on token counts bfloat16 and float16 cannot hold (257 and 2,057).
    long_b = fixed_batch(right_padded_rows(LONG_ROW_LENGTHS, 300), VALUE, seed=8, fill=5.0)
    gae_bool, value_bool = run_gae(solution, gae_inputs(b, 0.9, 0.95)), run_value(solution, value_inputs(b, 0.2))
    long_bool = run_value(solution, value_inputs(long_b, 0.2))
    for kind in MASK_FLOAT_DTYPES:
        fb = {**b, "mask": b["mask"].to(kind)}
        for got, want, what in zip(run_gae(solution, gae_inputs(fb, 0.9, 0.95)), gae_bool, ("advantages", "returns")):
            check_close(got, want, f"GAE {what} with a {kind} 0/1 mask equal those with the bool mask",
                        input=gae_inputs(fb, 0.9, 0.95))
        for batch, want_value in ((fb, value_bool), ({**long_b, "mask": long_b["mask"].to(kind)}, long_bool)):
            for got, want, what in zip(run_value(solution, value_inputs(batch, 0.2)), want_value,
                                       ("value loss", "its gradient")):
                check_close(got, want, f"the {what} with a {kind} 0/1 mask equals the bool mask's",
                            input=value_inputs(batch, 0.2))


@kata_test(level=2, category="edge cases",
           description="65,536 valid float16 tokens: the value loss's token count does not overflow")
def test_value_loss_counts_tokens_beyond_float16_range(solution, reference):
    # float16's largest finite value is 65,504: a token count taken in the inputs' dtype is
    # inf here and the loss 0. Values in [-0.5, 0.5] keep the reference's float16 sums in range.
    b = fixed_batch(right_padded_rows((32768, 32768), 32770), VALUE, seed=12, fill=5.0, lo=-4, hi=4)
    half = value_inputs({**b, **{k: b[k].half() for k in VALUE}}, 0.2)
    loss, _ = run_value(solution, half)
    want, _ = run_value(reference, value_inputs(b, 0.2))
    check_low_precision(loss, want, torch.float16, "the value loss is the token mean over 65,536 valid "
                        "float16 tokens (count them in an integer or wider type)",
                        {**shapes_of(half), "valid tokens": 65536, "dtype": "float16"})


@kata_test(level=2, category="api contract", weight=1,
           description="compute_gae and ppo_value_loss raise ValueError on mismatched shapes")
def test_level2_rejects_shape_mismatch(solution):
    b = fixed_batch(FIXED_MASKS["three rows of 2, 1 and 3 tokens"], GAE + VALUE[1:], seed=7, fill=5.0)
    calls = {"compute_gae": (solution.compute_gae, gae_inputs(b, 0.9, 0.95), ("rewards", "values", "mask")),
             "ppo_value_loss": (solution.ppo_value_loss, value_inputs(b, 0.2),
                                ("values", "old_values", "returns", "mask"))}
    for name, (fn, good, args) in calls.items():
        before = snapshot(good)
        first = kept(call(fn, **good, what=name))
        for arg in args:
            inp = {**good, arg: torch.cat([good[arg], good[arg][:, :1]], dim=1)}
            expect_value_error(lambda: call(fn, **inp, what=name), f"{name} raises ValueError when "
                               f"'{arg}' has a different shape", shapes_of(inp))
            expect_unchanged(before, good, f"a rejected {name} call")
            again = call(fn, **good, what=name)
            expect(same_result(again, first), f"a rejected {name} call changes nothing: the next "
                   "valid call gives the same result as before it",
                   input={**shapes_of(good), "after": arg}, expected=first, got=again)


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


# ============================================================================ random: GAE


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
    before = snapshot(inp)
    valid = valid_of(b["mask"]).clone()  # before the call, which gets the mask itself
    adv, ret = run_gae(solution, inp, share_inputs=True)
    for name, x in (("advantages", adv), ("returns", ret)):
        expect(isinstance(x, torch.Tensor) and x.shape == b["rewards"].shape
               and x.dtype == b["rewards"].dtype and not x.requires_grad,
               f"{name} is a (B, T) tensor of rewards.dtype without gradient", input=inp,
               expected=f"shape {tuple(b['rewards'].shape)}, {b['rewards'].dtype}, no grad", got=x)
    check_close(ret, torch.where(valid, adv + b["values"], torch.zeros_like(adv)),
                "returns = advantages + values on valid tokens, 0 on padding", input=inp)
    expect_unchanged(before, inp, "compute_gae")


# ============================================================================ random: value loss


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
