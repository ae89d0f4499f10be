"""Level 3: kl_shaped_rewards, masked_whiten and ppo_loss.

Each rule of the statement (README "API", level 3) maps to the test that builds the situation
where it decides the outcome; the random tests below compare with the reference and check the
properties the statement names (the score on the last valid token only, whitened values of
mean 0 and variance 1, value targets taken before whitening).
"""

from __future__ import annotations

import torch
from hypothesis import given

from grader.protocol import call, expect, kata_test
from grader.suites._common import check_close
from grader.suites.ppo.checks import (
    check_grad, check_low_precision, check_stats, expect_unchanged, expect_value_error, same_result,
    scalar_of, shapes_of, snapshot)
from grader.suites.ppo.runners import (
    LOSS, check_loss_against, close_results, kl_fixed, kl_inputs, loss_fixed, loss_inputs,
    run_kl, run_loss, run_whiten, whiten_inputs)
from grader.suites.ppo.strategies import (
    ALL_FLOAT_DTYPES, FAST, FIXED_MASKS, LONG_ROW_LENGTHS, MASK_FLOAT_DTYPES, MEDIUM, fixed_batch,
    last_valid_one_hot, leaf, right_padded_rows, token_mean, valid_of)

RULES = {
    "KL rewards: -kl_coef * (logprobs - ref_logprobs) on valid tokens, plus scores[b] at row b's "
    "last valid token, 0 on padding": ("test_kl_rewards_match_reference", "test_score_on_last_valid_token_only",
                                       "test_kl_term_zero_when_policy_equals_reference"),
    "KL rewards: kl_coef = 0 leaves the scores alone; one valid token, T = 1, full rows":
        "test_kl_rewards_edge_cases",
    "KL rewards: no gradient": "test_kl_rewards_carry_no_gradient",
    "KL rewards: (B, T) of logprobs.dtype, for every float dtype (scores may differ)":
        "test_kl_rewards_keep_every_float_dtype",
    "KL rewards: padding changes nothing": "test_kl_rewards_padding_changes_nothing",
    "whiten: mean and unbiased variance over the valid entries of the whole batch":
        ("test_whitened_has_mean_0_and_variance_1", "test_masked_whiten_matches_reference",
         "test_whiten_two_valid_entries_in_different_rows"),
    "whiten: accurate for values far from 0 (the variance of the centred values, not "
    "sum x^2 - n * mean^2)": "test_whiten_values_far_from_zero",
    "whiten: eps is added to the variance (0 and large eps included)": "test_whiten_uses_eps",
    "whiten: shift_mean=False adds the mean back": "test_whiten_shift_mean_false_keeps_mean",
    "whiten: padding is 0 whatever it held": "test_whiten_ignores_padding",
    "whiten: x's dtype, for every float dtype": "test_whiten_keeps_every_float_dtype",
    "whiten: ValueError with fewer than 2 valid entries or a mismatched mask; the next call is "
    "unaffected": "test_whiten_rejects_bad_input",
    "ppo_loss: GAE on values.detach(), whitening when asked, total = policy + vf_coef * value":
        ("test_ppo_loss_matches_reference", "test_ppo_loss_combines_policy_and_value_loss"),
    "ppo_loss: the value targets are the returns before whitening":
        "test_ppo_loss_value_targets_before_whitening",
    "ppo_loss: defaults gamma 1, lam .95, clip_eps .2, clip_eps_value .2, vf_coef .1, whitening on":
        "test_ppo_loss_defaults",
    "ppo_loss: falsy but valid arguments (vf_coef 0, gamma 0, lam 0 or 1, no whitening, one "
    "valid token without whitening)": "test_ppo_loss_edge_arguments",
    "ppo_loss: gradients reach logprobs and values only": "test_ppo_loss_gradients_reach_logprobs_and_values_only",
    "ppo_loss: padding changes nothing": "test_ppo_loss_padding_changes_nothing",
    "every function: a bool mask and 0/1 floats of any float dtype agree (also with token counts "
    "bfloat16 and float16 cannot hold)": "test_level3_bool_and_float_masks_agree",
    "constraint: inputs are never modified, also by a rejected call": "test_level3_inputs_unchanged",
    "ValueError: a shape differs from mask's, scores not (B,), or a part raises (clip_eps <= 0, "
    "whitening fewer than 2 entries); the next call is unaffected": "test_level3_rejects_bad_input",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'KL rewards: -kl_coef * (logprobs - ref_logprobs) on valid tokens, plus scores[b] at '
    "row b's last valid token, 0 on padding":
        ('kl-penalty', 'score-token'),
    'KL rewards: kl_coef = 0 leaves the scores alone; one valid token, T = 1, full rows':
        ('kl-penalty', 'score-token'),
    'KL rewards: no gradient':
        'reward-grad',
    'KL rewards: (B, T) of logprobs.dtype, for every float dtype (scores may differ)':
        'ask',
    'KL rewards: padding changes nothing':
        'padding',
    'whiten: mean and unbiased variance over the valid entries of the whole batch':
        'whiten-stats',
    'whiten: accurate for values far from 0 (the variance of the centred values, not sum '
    'x^2 - n * mean^2)':
        'whiten-precision',
    'whiten: eps is added to the variance (0 and large eps included)':
        'whiten-stats',
    'whiten: shift_mean=False adds the mean back':
        ('ask', 'whiten-stats'),
    'whiten: padding is 0 whatever it held':
        ('ask', 'padding'),
    "whiten: x's dtype, for every float dtype":
        'ask',
    'whiten: ValueError with fewer than 2 valid entries or a mismatched mask; the next '
    'call is unaffected':
        'ask',
    'ppo_loss: GAE on values.detach(), whitening when asked, total = policy + vf_coef * '
    'value':
        ('ask', 'gae-detach'),
    'ppo_loss: the value targets are the returns before whitening':
        'value-targets',
    'ppo_loss: defaults gamma 1, lam .95, clip_eps .2, clip_eps_value .2, vf_coef .1, '
    'whitening on':
        'ask',
    'ppo_loss: falsy but valid arguments (vf_coef 0, gamma 0, lam 0 or 1, no whitening, '
    'one valid token without whitening)':
        'falsy-args',
    'ppo_loss: gradients reach logprobs and values only':
        ('ask', 'gae-detach'),
    'ppo_loss: padding changes nothing':
        'padding',
    'every function: a bool mask and 0/1 floats of any float dtype agree (also with token'
    ' counts bfloat16 and float16 cannot hold)':
        ('ask', 'token-count'),
    'constraint: inputs are never modified, also by a rejected call':
        'ask',
    "ValueError: a shape differs from mask's, scores not (B,), or a part raises (clip_eps"
    ' <= 0, whitening fewer than 2 entries); the next call is unaffected':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# A one-pass variance far from 0 (numerics) and falsy-but-valid arguments of ppo_loss.
DETAILS = {
    'ppo_loss: falsy but valid arguments (vf_coef 0, gamma 0, lam 0 or 1, no whitening, '
    'one valid token without whitening)',
    'whiten: accurate for values far from 0 (the variance of the centred values, not sum '
    'x^2 - n * mean^2)',
}

STAT_KEYS = ("policy_loss", "value_loss", "clipfrac", "approx_kl")
MIXED = FIXED_MASKS["three rows of 2, 1 and 3 tokens"]


# ============================================================================ targeted: KL


@kata_test(level=3, category="edge cases",
           description="KL rewards with kl_coef 0, one valid token, T = 1 and rows without padding")
def test_kl_rewards_edge_cases(solution, reference):
    for i, (layout, rows) in enumerate(FIXED_MASKS.items()):
        for kl_coef in (0.0, 0.5, 10.0):
            inp = kl_fixed(rows, seed=i, kl_coef=kl_coef)
            check_close(run_kl(solution, inp), run_kl(reference, inp), f"the shaped rewards equal "
                        f"the reference's ({layout}, kl_coef {kl_coef:g})", input=inp)


@kata_test(level=3, category="api contract",
           description="KL rewards have logprobs.dtype (float32/64, float16, bfloat16; scores may differ)")
def test_kl_rewards_keep_every_float_dtype(solution):
    base = kl_fixed(MIXED, seed=3)
    cases = [(d, d) for d in ALL_FLOAT_DTYPES] + [(torch.float64, torch.float32), (torch.float32, torch.float64)]
    for dtype, scores_dtype in cases:
        inp = {**base, "scores": base["scores"].to(scores_dtype), "logprobs": base["logprobs"].to(dtype),
               "ref_logprobs": base["ref_logprobs"].to(dtype)}
        exact = {**inp, **{k: inp[k].double() for k in ("scores", "logprobs", "ref_logprobs")}}
        check_low_precision(run_kl(solution, inp), run_kl(solution, exact), dtype,
                            f"rewards for {dtype} logprobs and {scores_dtype} scores (vs your "
                            "float64 result)", inp)


# ============================================================================ targeted: whiten


@kata_test(level=3, category="edge cases",
           description="masked_whiten adds eps to the variance: eps = 0 and a large eps")
def test_whiten_uses_eps(solution, reference):
    # Variance 5e-9: eps 1e-8 (the default), 0 and 1 give clearly different results. No
    # padding here: padding has its own tests.
    x = torch.tensor([[0.0, 1e-4]], dtype=torch.float64)
    mask = torch.tensor([[True, True]])
    for eps in (None, 0.0, 1.0):
        inp = {"x": x, "mask": mask, "shift_mean": True, **({} if eps is None else {"eps": eps})}
        check_close(run_whiten(solution, inp), run_whiten(reference, inp), "(x - mean) * rsqrt(var "
                    f"+ eps) with eps = {'the default 1e-8' if eps is None else eps}", input=inp)


@kata_test(level=3, category="edge cases",
           description="masked_whiten is accurate for values far from 0 (a large common offset)")
def test_whiten_values_far_from_zero(solution, reference):
    # Spread 0.5 on top of an offset: a one-pass variance, (sum x^2 - n * mean^2) / (n - 1),
    # subtracts two numbers near n * offset^2 and keeps only rounding noise; the two-pass
    # variance of the centred values is exact here. Padding holds 5.
    shape = torch.tensor([[0.0, 0.5, 1.0, 5.0], [1.5, 5.0, 5.0, 5.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    for dtype, offset in ((torch.float16, 100.0), (torch.float32, 1e4), (torch.float64, 1e8)):
        x = torch.where(mask, shape + offset, shape).to(dtype)
        inp = {"x": x, "mask": mask, "shift_mean": True}
        want = run_whiten(reference, {**inp, "x": x.double()})
        check_low_precision(run_whiten(solution, inp), want, dtype, f"{dtype} values {offset:g} + [0, 0.5, 1, "
                            "1.5] whiten to mean 0 and unbiased variance 1: [-1.16, -0.39, 0.39, 1.16]", inp)


@kata_test(level=3, category="edge cases",
           description="two valid entries in two different rows are enough to whiten")
def test_whiten_two_valid_entries_in_different_rows(solution, reference):
    for shift_mean in (True, False):
        inp = {"x": torch.tensor([[1.5, 9.0], [-0.5, 9.0]], dtype=torch.float64),
               "mask": torch.tensor([[True, False], [True, False]]), "shift_mean": shift_mean}
        check_close(run_whiten(solution, inp), run_whiten(reference, inp), "mean and unbiased "
                    "variance are over the valid entries of the whole batch (here 2, one per row)",
                    input=inp)


@kata_test(level=3, category="api contract",
           description="masked_whiten keeps x's dtype (float32/64, float16, bfloat16)")
def test_whiten_keeps_every_float_dtype(solution):
    b = fixed_batch(MIXED, ("x",), seed=5, fill=5.0, lo=-8, hi=8)
    for dtype in ALL_FLOAT_DTYPES:
        inp = {"x": b["x"].to(dtype), "mask": b["mask"], "shift_mean": True}
        check_low_precision(run_whiten(solution, inp), run_whiten(solution, {**inp, "x": inp["x"].double()}),
                            dtype, f"whitened {dtype} values (vs your float64 result)", inp)


@kata_test(level=3, category="api contract", weight=1,
           description="masked_whiten raises ValueError with fewer than 2 valid entries or a "
                       "mismatched mask")
def test_whiten_rejects_bad_input(solution):
    good = {"x": torch.tensor([[1.0, 2.0, 4.0]], dtype=torch.float64),
            "mask": torch.tensor([[True, True, False]]), "shift_mean": True}
    first = run_whiten(solution, good)
    for T in (1, 3):
        x = torch.arange(T, dtype=torch.float64)[None, :] + 1.0
        for what, mask in (("only 1 valid entry", torch.arange(T)[None, :] < 1),
                           ("mask shape differs from x", torch.ones(1, T + 1, dtype=torch.bool))):
            inp = {"x": x, "mask": mask}
            expect_value_error(lambda: call(solution.masked_whiten, x, mask, what="masked_whiten"),
                               f"masked_whiten raises ValueError ({what})", inp)
            again = run_whiten(solution, good)
            expect(same_result(again, first), "a rejected call changes nothing: the next valid "
                   "call gives the same result as before it", input={**good, "after": what},
                   expected=first, got=again)


# ============================================================================ targeted: ppo_loss


@kata_test(level=3, category="api contract",
           description="ppo_loss defaults: gamma 1, lam 0.95, clip 0.2 / 0.2, vf_coef 0.1, whitening")
def test_ppo_loss_defaults(solution):
    inp = loss_fixed(MIXED, seed=1)
    explicit = {**inp, "gamma": 1.0, "lam": 0.95, "clip_eps": 0.2, "clip_eps_value": 0.2,
                "vf_coef": 0.1, "whiten_advantages": True}
    got, want = run_loss(solution, inp), run_loss(solution, explicit)
    expect(close_results(got, want), "ppo_loss with every keyword left out equals ppo_loss with gamma=1.0, "
           "lam=0.95, clip_eps=0.2, clip_eps_value=0.2, vf_coef=0.1, whiten_advantages=True",
           input=shapes_of(inp), expected=f"total {want[0]}", got=f"total {got[0]}")


@kata_test(level=3, category="edge cases", weight=1.5,
           description="ppo_loss with vf_coef 0, gamma 0, lam 0 or 1, no whitening, one valid token")
def test_ppo_loss_edge_arguments(solution, reference):
    base = {"gamma": 0.9, "lam": 0.5, "clip_eps": 0.1, "clip_eps_value": 0.3, "vf_coef": 0.5,
            "whiten_advantages": True}
    for i, change in enumerate(({}, {"vf_coef": 0.0}, {"gamma": 0.0}, {"lam": 0.0}, {"lam": 1.0},
                                {"whiten_advantages": False})):
        inp = loss_fixed(MIXED, seed=20 + i, **{**base, **change})
        check_loss_against(solution, reference, inp, ", ".join(f"{k} {v}" for k, v in change.items())
                           or "gamma 0.9, lam 0.5, clip_eps 0.1, clip_eps_value 0.3")
    one = loss_fixed(FIXED_MASKS["one valid token then padding"], seed=30, **{**base, "whiten_advantages": False})
    check_loss_against(solution, reference, one, "one valid token, no whitening")


@kata_test(level=3, category="api contract",
           description="ppo_loss: no gradient reaches rewards, old_logprobs or old_values")
def test_ppo_loss_gradients_reach_logprobs_and_values_only(solution):
    inp = loss_fixed(MIXED, seed=4, gamma=0.9, lam=0.95)
    leaves = {k: leaf(inp[k]) for k in LOSS}
    total, _ = call(solution.ppo_loss, *[leaves[k] for k in LOSS], inp["mask"], gamma=0.9,
                    lam=0.95, what="ppo_loss")
    total.backward()
    for name in ("rewards", "old_logprobs", "old_values"):
        grad = leaves[name].grad
        expect(grad is None or bool((grad == 0).all()), f"no gradient reaches {name} (GAE, the "
               "old policy and the old values are constants)", input=shapes_of(inp),
               expected="no gradient", got=grad)


# ============================================================================ targeted: all


@kata_test(level=3, category="api contract",
           description="bool and 0/1 float masks give the same KL rewards, whitening and loss")
def test_level3_bool_and_float_masks_agree(solution):
    kl = kl_fixed(FIXED_MASKS["rows of 1 and 4 valid tokens"], seed=6)
    wh = {"x": kl["logprobs"], "mask": kl["mask"], "shift_mean": True}
    lo = loss_fixed(FIXED_MASKS["rows of 1 and 4 valid tokens"], seed=6)
    # Token counts bfloat16 and float16 cannot hold (a row of 257, 2,057 in all): the score's
    # index and the whitening's n must not be counted in the mask's dtype.
    long_kl = kl_fixed(right_padded_rows(LONG_ROW_LENGTHS, 300), seed=6)
    long_wh = {"x": long_kl["logprobs"], "mask": long_kl["mask"], "shift_mean": True}
    cases = (("kl_shaped_rewards", run_kl, kl), ("masked_whiten", run_whiten, wh), ("ppo_loss", run_loss, lo),
             ("kl_shaped_rewards", run_kl, long_kl), ("masked_whiten", run_whiten, long_wh))
    as_bool = [fn(solution, inp) for _, fn, inp in cases]
    for kind in MASK_FLOAT_DTYPES:
        for (name, fn, inp), want in zip(cases, as_bool):
            typed = {**inp, "mask": inp["mask"].to(kind)}
            got = fn(solution, typed)
            expect(same_result(got, want) or close_results(got, want), f"{name} with a {kind} 0/1 mask "
                   "gives what it gives with the bool mask", input=typed, expected=want, got=got)


@kata_test(level=3, category="api contract",
           description="kl_shaped_rewards, masked_whiten and ppo_loss never modify their inputs")
def test_level3_inputs_unchanged(solution):
    kl = kl_fixed(MIXED, seed=7, fill=float("nan"))
    wh = {"x": kl["logprobs"], "mask": kl["mask"], "shift_mean": False}
    lo = loss_fixed(MIXED, seed=7)
    one = {"x": torch.tensor([[2.0, float("nan")]], dtype=torch.float64), "mask": torch.tensor([[True, False]])}
    for name, inp, run in (("kl_shaped_rewards", kl, lambda: run_kl(solution, kl, share_inputs=True)),
                           ("masked_whiten", wh, lambda: run_whiten(solution, wh, share_inputs=True)),
                           ("ppo_loss", lo, lambda: call(solution.ppo_loss, *[lo[k] for k in LOSS], lo["mask"],
                                                         what="ppo_loss")),
                           ("a rejected masked_whiten", one,
                            lambda: expect_value_error(lambda: call(solution.masked_whiten, one["x"], one["mask"],
                                                                    what="masked_whiten"),
                                                       "masked_whiten raises ValueError (only 1 valid entry)", one))):
        before = snapshot(inp)
        run()
        expect_unchanged(before, inp, name)


@kata_test(level=3, category="api contract", weight=1,
           description="kl_shaped_rewards and ppo_loss raise ValueError on bad shapes or arguments")
def test_level3_rejects_bad_input(solution):
    kl = kl_fixed(MIXED, seed=8)
    lo = loss_fixed(MIXED, seed=8, whiten_advantages=False)
    first_kl, first_loss = run_kl(solution, kl), run_loss(solution, lo)
    B = kl["mask"].shape[0]
    cases = [("kl_shaped_rewards", {**kl, "scores": s}, f"scores of shape {tuple(s.shape)}")
             for s in (kl["scores"][:, None], torch.zeros(B + 1, dtype=torch.float64), torch.zeros((), dtype=torch.float64))]
    cases += [("kl_shaped_rewards", {**kl, arg: torch.cat([kl[arg], kl[arg][:, :1]], dim=1)},
               f"'{arg}' of another shape") for arg in ("logprobs", "ref_logprobs", "mask")]
    cases += [("ppo_loss", {**lo, arg: torch.cat([lo[arg], lo[arg][:, :1]], dim=1)}, f"'{arg}' of another shape")
              for arg in LOSS + ("mask",)]
    cases += [("ppo_loss", {**lo, "clip_eps": 0.0}, "clip_eps = 0"),
              ("ppo_loss", {**loss_fixed(FIXED_MASKS["one valid token then padding"], seed=8),
                            "whiten_advantages": True}, "whitening a single valid token")]
    for name, inp, what in cases:
        if name == "kl_shaped_rewards":
            fn = lambda inp=inp: run_kl(solution, inp)  # noqa: E731 - binds inp, like the branch below
        else:
            fn = lambda inp=inp: call(solution.ppo_loss, *[inp[k] for k in LOSS], inp["mask"], what="ppo_loss",  # noqa: E731 - binds inp
                                      **{k: inp[k] for k in ("clip_eps", "whiten_advantages") if k in inp})
        expect_value_error(fn, f"{name} raises ValueError ({what})", shapes_of(inp))
        again = (run_kl(solution, kl), first_loss) if name == "kl_shaped_rewards" else (first_kl, run_loss(solution, lo))
        expect(same_result(again[0], first_kl) and close_results(again[1], first_loss), f"a rejected {name} "
               "call changes nothing: the next valid call gives the same result as before it",
               input={**shapes_of(inp), "after": what})


# ============================================================================ random: KL


@kata_test(level=3, category="correctness", weight=2, description="KL-shaped rewards match the reference")
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
    inp = {**inp, "ref_logprobs": inp["logprobs"].clone(), "scores": torch.zeros_like(inp["scores"])}
    check_close(run_kl(solution, inp), torch.zeros_like(inp["logprobs"]),
                "with logprobs == ref_logprobs and zero scores every reward is 0", input=inp)


@kata_test(level=3, category="correctness", weight=2,
           description="the score lands on each row's last valid token only")
@FAST
@given(inp=kl_inputs())
def test_score_on_last_valid_token_only(solution, inp):
    without = run_kl(solution, {**inp, "scores": torch.zeros_like(inp["scores"])})
    with_scores = run_kl(solution, inp)
    is_last = last_valid_one_hot(valid_of(inp["mask"]))
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


# ============================================================================ random: whiten


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


@kata_test(level=3, category="correctness", weight=1, description="shift_mean=False keeps the masked mean of x")
@FAST
@given(inp=whiten_inputs())
def test_whiten_shift_mean_false_keeps_mean(solution, inp):
    inp = {**inp, "shift_mean": False}
    got = run_whiten(solution, inp)
    valid = valid_of(inp["mask"])
    check_close(token_mean(got.detach(), valid), token_mean(inp["x"], valid),
                "with shift_mean=False the masked mean of the output is the masked mean of x",
                input=inp)


# ============================================================================ random: ppo_loss


@kata_test(level=3, category="correctness", weight=3,
           description="ppo_loss: total, stats and gradients match the reference")
@MEDIUM
@given(inp=loss_inputs())
def test_ppo_loss_matches_reference(solution, reference, inp):
    check_loss_against(solution, reference, inp, "GAE on values.detach(): d(total)/d(values) only "
                       "through the value loss")


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
