"""Level 1: top_k_top_p_filter and sample.

Each rule of the statement (README "API", level 1, and the stub's docstrings) maps to the
test that builds the situation where that rule decides the outcome. The random tests after
them compare with the reference and check properties on drawn batches.
"""

from __future__ import annotations

import torch
from hypothesis import assume, given, settings, strategies as st

from grader.protocol import call, expect, kata_test
from grader.suites._common import count_ops
from grader.suites.sampling.chi_square import check_frequencies
from grader.suites.sampling.strategies import (
    FLOAT_DTYPES, NEG_INF, check_filter_output, expect_kept, expect_value_error, filter_case,
    filtered_probs, gen, kept, kept_mask, near_boundary, nucleus_mass, run_filter, sample_counts,
    sample_ids, settings_fast, top_k_set, top_k_values, top_p_values)

RULES = {
    "filter: a new (B, V) tensor of logits' dtype (every float dtype), kept entries unchanged, "
    "removed ones -inf; logits not modified": ("test_filter_returns_new_tensor_and_keeps_input",
                                               "test_filter_keeps_every_float_dtype"),
    "top-k keeps every token >= the k-th largest logit (ties with the k-th value kept)":
        "test_top_k_keeps_every_token_at_least_kth_value",
    "top_k <= 0 disables top-k (also with min_tokens_to_keep > 1); top_k >= V keeps everything":
        "test_disabled_filters_keep_everything",
    "k is raised to min_tokens_to_keep when smaller": "test_top_k_raised_to_min_tokens_to_keep",
    "top-p runs second, on the softmax over the top-k survivors": "test_top_p_applied_after_top_k",
    "top-p keeps the smallest most-probable set of mass >= top_p; the crossing token is kept":
        ("test_top_p_keeps_the_crossing_token", "test_top_p_set_is_minimal",
         "test_top_p_set_is_a_prefix_by_probability"),
    "top-p at an exact boundary keeps the set that reaches top_p and nothing more":
        "test_top_p_exact_boundary",
    "top-p's softmax is over the logits as given, whatever their magnitude: adding a constant "
    "to a row (+-1000 included) keeps the same tokens": "test_top_p_ignores_a_constant_shift",
    "top_p = 1.0 disables top-p (tokens of vanishing probability survive)":
        "test_top_p_one_disables_top_p",
    "at least min_tokens_to_keep tokens (the most probable) survive in every row":
        "test_at_least_min_tokens_to_keep_survive",
    "the result equals HF TopKLogitsWarper then TopPLogitsWarper": "test_filter_matches_reference",
    "ValueError: top_p outside (0, 1] (0.0 included) or min_tokens_to_keep < 1, whatever the "
    "other arguments; the next call is unaffected": "test_filter_rejects_bad_arguments",
    "constraint: no Python loop over the rows": "test_filter_has_no_python_loop_over_rows",
    "sample: (B, V) -> (B,) int64 for every float dtype": "test_sample_accepts_every_float_dtype",
    "sample: temperature == 0 is greedy argmax, the lowest id on ties": "test_temperature_zero_is_argmax",
    "sample: any temperature > 0 (tiny ones too) divides the logits, then filter, softmax, "
    "multinomial": ("test_temperature_scales_logits_before_softmax", "test_tiny_temperature_is_not_greedy",
                    "test_filter_applies_to_tempered_logits",
                    "test_sample_frequencies_match_filtered_distribution"),
    "sample: a token the filter removes is never drawn": "test_sample_never_picks_a_filtered_token",
    "sample: top-k keeps the tokens tied with the k-th value, and sample draws among them "
    "(top_k = 1 is not greedy)": "test_sample_draws_among_tokens_tied_at_top_k",
    "sample: each row is drawn from its own logits": "test_sample_rows_use_their_own_logits",
    "sample: every draw comes from the generator given (its current state)":
        "test_sample_uses_the_generator",
    "sample: generator=None draws from torch's global generator": "test_sample_without_generator_uses_the_global_rng",
    "sample: ValueError when temperature < 0; the rejected call draws nothing":
        "test_sample_rejects_negative_temperature",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    "filter: a new (B, V) tensor of logits' dtype (every float dtype), kept entries "
    'unchanged, removed ones -inf; logits not modified':
        'ask',
    'top-k keeps every token >= the k-th largest logit (ties with the k-th value kept)':
        'topk-ties',
    'top_k <= 0 disables top-k (also with min_tokens_to_keep > 1); top_k >= V keeps '
    'everything':
        'disabled',
    'k is raised to min_tokens_to_keep when smaller':
        'min-keep',
    'top-p runs second, on the softmax over the top-k survivors':
        'filter-order',
    'top-p keeps the smallest most-probable set of mass >= top_p; the crossing token is '
    'kept':
        'nucleus',
    'top-p at an exact boundary keeps the set that reaches top_p and nothing more':
        'nucleus',
    "top-p's softmax is over the logits as given, whatever their magnitude: adding a "
    'constant to a row (+-1000 included) keeps the same tokens':
        'filter-order',
    'top_p = 1.0 disables top-p (tokens of vanishing probability survive)':
        'disabled',
    'at least min_tokens_to_keep tokens (the most probable) survive in every row':
        'min-keep',
    'the result equals HF TopKLogitsWarper then TopPLogitsWarper':
        'ask',
    'ValueError: top_p outside (0, 1] (0.0 included) or min_tokens_to_keep < 1, whatever '
    'the other arguments; the next call is unaffected':
        'filter-errors',
    'constraint: no Python loop over the rows':
        'ask',
    'sample: (B, V) -> (B,) int64 for every float dtype':
        ('ask', 'sample-rows'),
    'sample: temperature == 0 is greedy argmax, the lowest id on ties':
        'temperature',
    'sample: any temperature > 0 (tiny ones too) divides the logits, then filter, '
    'softmax, multinomial':
        'temperature',
    'sample: a token the filter removes is never drawn':
        ('ask', 'temperature'),
    'sample: top-k keeps the tokens tied with the k-th value, and sample draws among them'
    ' (top_k = 1 is not greedy)':
        'topk-ties',
    'sample: each row is drawn from its own logits':
        'sample-rows',
    'sample: every draw comes from the generator given (its current state)':
        'ask',
    "sample: generator=None draws from torch's global generator":
        'ask',
    'sample: ValueError when temperature < 0; the rejected call draws nothing':
        'filter-errors',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# Hugging Face's quirk of raising k to min_tokens_to_keep; a top-p set at an exact floating
# boundary; tokens of vanishing probability under top_p = 1.0 (a top-p pass that runs anyway
# drops only those); half-precision logits in sample (torch.multinomial's dtype support).
DETAILS = {
    'k is raised to min_tokens_to_keep when smaller',
    'sample: (B, V) -> (B,) int64 for every float dtype',
    'top-p at an exact boundary keeps the set that reaches top_p and nothing more',
    'top_p = 1.0 disables top-p (tokens of vanishing probability survive)',
}


# ============================================================================ targeted: filter


@kata_test(level=1, category="edge cases",
           description="top_k <= 0 or >= V and top_p = 1 keep every token")
@settings(max_examples=6)
@given(data=st.data())
def test_disabled_filters_keep_everything(solution, data):
    fixed = torch.tensor([[3.0, 1.0, 2.0, 0.0], [0.5, 0.5, -1.0, 2.0]])
    for logits in (fixed, filter_case(data.draw)["logits"]):
        vocab = logits.shape[-1]
        for top_k in (0, -3, vocab, vocab + 2):
            for mtk in (1, 3):
                out, inp = run_filter(solution, logits, top_k=top_k, top_p=1.0, min_tokens_to_keep=mtk)
                check_filter_output(logits, out, inp)
                expect(torch.equal(out, logits), "top_k <= 0 disables top-k (whatever "
                       "min_tokens_to_keep), top_k >= V keeps everything, top_p = 1 disables "
                       "top-p: nothing is filtered", input=inp, expected=logits, got=out)


@kata_test(level=1, category="edge cases",
           description="top_k smaller than min_tokens_to_keep is raised to it")
def test_top_k_raised_to_min_tokens_to_keep(solution):
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0, 4.0]])
    for top_k, mtk, num_kept in ((1, 3, 3), (2, 2, 2), (1, 7, 5), (4, 2, 4)):
        want = [[v >= 4 - num_kept + 1 for v in row] for row in logits.tolist()]
        expect_kept(solution, logits, want, f"top_k = {top_k} with min_tokens_to_keep = {mtk} "
                    f"keeps the {num_kept} largest logits (k = min(max(top_k, "
                    "min_tokens_to_keep), V))", top_k=top_k, min_tokens_to_keep=mtk)


@kata_test(level=1, category="edge cases",
           description="top_p = 1 keeps every token, even ones of vanishing probability")
def test_top_p_one_disables_top_p(solution):
    # exp(-1000) is 0 in every float dtype: a top-p pass that ran anyway would drop it.
    logits = torch.tensor([[0.0, -1000.0, 5.0, -200.0], [-1000.0, -1000.0, 0.0, -30.0]])
    expect_kept(solution, logits, [[True] * 4] * 2, "top_p = 1.0 disables top-p: no token is "
                "removed, however improbable", top_p=1.0)
    expect_kept(solution, logits, [[True, False, True, False], [False, False, True, True]],
                "with top_p = 1.0 only top-k filters (ties with the k-th value kept)",
                top_k=2, top_p=1.0)


@kata_test(level=1, category="api contract",
           description="in every float dtype the filter returns a new tensor of that dtype; logits untouched")
def test_filter_keeps_every_float_dtype(solution):
    # Probabilities .6/.25/.1/.05, far from every boundary used: top_k = 3 leaves .63/.26/.11,
    # top_p = .8 then keeps the same tokens in every dtype as in float32.
    logits = torch.tensor([[0.6, 0.25, 0.1, 0.05], [0.05, 0.1, 0.25, 0.6]]).log()
    as_float32, _ = run_filter(solution, logits, top_k=3, top_p=0.8)
    for dtype in FLOAT_DTYPES:
        x = logits.to(dtype)
        out, inp = run_filter(solution, x, top_k=3, top_p=0.8)
        expect(isinstance(out, torch.Tensor) and out.dtype == dtype, "the result has the "
               "dtype of logits", input=inp, expected=str(dtype),
               got=str(out.dtype) if isinstance(out, torch.Tensor) else type(out).__name__)
        keep = check_filter_output(x, out, inp)
        want = kept_mask(as_float32).tolist() if isinstance(as_float32, torch.Tensor) else None
        expect(keep.tolist() == want, f"in {dtype} the same tokens are kept as in float32",
               input=inp, expected=f"kept {want} (your float32 result)", got=f"kept {keep.tolist()}")
        # The caller's own tensor, filtered and unfiltered: a cast to a working dtype is a
        # copy for the other dtypes but the tensor itself for its own (e.g. .to(float64)).
        for k, p in ((3, 0.8), (0, 1.0)):
            given_logits = x.clone()
            out = call(solution.top_k_top_p_filter, given_logits, k, p, what="top_k_top_p_filter")
            inp = {"logits": x, "top_k": k, "top_p": p}
            expect(torch.equal(given_logits, x), f"{dtype} logits are not modified", input=inp,
                   expected=x, got=given_logits)
            expect(isinstance(out, torch.Tensor) and out is not given_logits
                   and out.data_ptr() != given_logits.data_ptr(), f"for {dtype} logits the result "
                   "is a new tensor, not the input", input=inp)


@kata_test(level=1, category="edge cases", weight=1.5,
           description="exact top-p boundaries: probs .5/.25/.25 at p=.5 keep one token")
def test_top_p_exact_boundary(solution):
    cases = [([0.5, 0.25, 0.25], 0.5, [True, False, False]),
             ([0.25, 0.5, 0.25], 0.5, [False, True, False]),
             ([0.5, 0.25, 0.125, 0.125], 0.75, [True, True, False, False]),
             ([0.125, 0.5, 0.125, 0.25], 0.5, [False, True, False, False])]
    for probs, top_p, expected in cases:
        logits = torch.tensor([probs], dtype=torch.float32).log()
        out, inp = run_filter(solution, logits, top_p=top_p)
        inp["probabilities"] = probs
        keep = check_filter_output(logits, out, inp)
        expect(keep[0].tolist() == expected, "at an exact boundary the set that reaches top_p "
               "exactly is kept, and nothing more", input=inp,
               expected=f"kept {expected}", got=f"kept {keep[0].tolist()}")


@kata_test(level=1, category="edge cases",
           description="top-p keeps the same tokens when a constant is added to the logits (+-1000)")
def test_top_p_ignores_a_constant_shift(solution):
    # Probabilities .705/.259/.035/0 (top_k = 3 removes the last): top_p = .5 keeps token 0,
    # top_p = .9 tokens 0 and 1. Softmax is shift-invariant, but exp(100) overflows float32
    # and exp(-1000) underflows every dtype: only a max-subtracted softmax gets these rows.
    base = torch.tensor([0.0, -1.0, -3.0, -100.0])
    for shift in (0.0, 100.0, 1000.0, -1000.0):
        logits = torch.stack([base + shift, base.flip(0) + shift])  # exact in float32
        for top_k, top_p, num_kept in ((0, 0.5, 1), (0, 0.9, 2), (3, 0.9, 2)):
            want = [[i < num_kept for i in range(4)], [i >= 4 - num_kept for i in range(4)]]
            expect_kept(solution, logits, want, f"top-p on logits shifted by {shift:+g} keeps the "
                        "tokens it keeps unshifted (the softmax over the survivors must not "
                        "overflow or underflow)", top_k=top_k, top_p=top_p)


@kata_test(level=1, category="correctness",
           description="top-p is computed on the distribution left after top-k")
def test_top_p_applied_after_top_k(solution):
    # probs .4/.3/.2/.1; top_k=2 leaves 4/7, 3/7, so top_p=.5 keeps one token (not two).
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]]).log()
    expect_kept(solution, logits, [[True, False, False, False], [False, False, False, True]],
                "top-p renormalizes over the top-k survivors", top_k=2, top_p=0.5)


BAD_FILTER_ARGS = ({"top_p": 0.0}, {"top_p": -0.5}, {"top_p": 1.5}, {"top_p": 1.0001},
                   {"min_tokens_to_keep": 0}, {"min_tokens_to_keep": -2},
                   {"top_k": 2, "top_p": 1.5}, {"top_k": 2, "top_p": 0.0},
                   {"top_k": 2, "top_p": 0.5, "min_tokens_to_keep": 0})


@kata_test(level=1, category="api contract",
           description="ValueError for top_p outside (0, 1] or min_tokens_to_keep < 1")
def test_filter_rejects_bad_arguments(solution):
    pristine = torch.tensor([[1.0, 0.0, -1.0, 0.5], [2.0, 2.0, -3.0, 0.0]])
    before = kept(call(solution.top_k_top_p_filter, pristine.clone(), 2, 0.6, what="top_k_top_p_filter"))
    for kwargs in BAD_FILTER_ARGS:
        logits = pristine.clone()
        inp = {"logits": pristine, **kwargs}
        expect_value_error(lambda: call(solution.top_k_top_p_filter, logits, what="top_k_top_p_filter",
                                        **kwargs),
                           "top_p outside (0, 1] or min_tokens_to_keep < 1 raises ValueError "
                           "(also when top-k or top-p would not run)", inp)
        expect(torch.equal(logits, pristine), "a rejected call leaves logits unchanged",
               input=inp, expected=pristine, got=logits)
        # Look forward: the next valid call on the same tensor gives what it gave before.
        out = call(solution.top_k_top_p_filter, logits, 2, 0.6, what="top_k_top_p_filter")
        expect(isinstance(out, torch.Tensor) and torch.equal(out, before), "a rejected call "
               "changes nothing: the next valid call gives the same result as before it",
               input={**inp, "then": "top_k=2, top_p=0.6"}, expected=before, got=out)


@kata_test(level=1, category="efficiency", weight=0.5,
           description="the filter is vectorized: no Python loop over the rows of the batch")
def test_filter_has_no_python_loop_over_rows(solution):
    g = gen(0)

    def ops(batch: int) -> int:
        logits = torch.randn(batch, 16, generator=g)
        return count_ops(lambda: solution.top_k_top_p_filter(logits, 5, 0.8))
    small, large = ops(1), ops(64)
    expect(large <= 2 * small + 16, "the number of tensor operations does not grow with the batch",
           expected=f"about {small} operations for 64 rows", got=f"{small} for 1 row, {large} for 64")


# ============================================================================ random: filter


@kata_test(level=1, category="correctness", weight=2,
           description="top_k_top_p_filter agrees with the reference (HF top-k then top-p)")
@settings_fast
@given(data=st.data(), top_k=top_k_values, top_p=top_p_values, mtk=st.integers(1, 3))
def test_filter_matches_reference(solution, reference, data, top_k, top_p, mtk):
    logits = filter_case(data.draw, distinct=True)["logits"]
    assume(not near_boundary(logits, top_k, top_p, mtk))
    out, inp = run_filter(solution, logits, top_k=top_k, top_p=top_p, min_tokens_to_keep=mtk)
    check_filter_output(logits, out, inp)
    expected = reference.top_k_top_p_filter(logits, top_k, top_p, mtk)
    expect(torch.equal(kept_mask(out), kept_mask(expected)), "the same tokens are kept",
           input=inp, expected=expected, got=out)


@kata_test(level=1, category="correctness",
           description="top-k keeps every token whose logit is >= the k-th largest (ties kept)")
@settings_fast
@given(data=st.data(), top_k=st.integers(1, 7), mtk=st.integers(1, 3))
def test_top_k_keeps_every_token_at_least_kth_value(solution, data, top_k, mtk):
    tied = ([[1.0, 2.0, 2.0, 0.0]], 1, 1), ([[3.0, 1.0, 1.0, 1.0]], 2, 1), ([[0.0, 0.0]], 1, 1)
    cases = [(torch.tensor(rows), k, m) for rows, k, m in tied]  # ties at the k-th value first
    cases.append((filter_case(data.draw, spread=1)["logits"], top_k, mtk))
    for logits, k, m in cases:
        out, inp = run_filter(solution, logits, top_k=k, min_tokens_to_keep=m)
        keep = check_filter_output(logits, out, inp)
        expected = torch.stack([top_k_set(row, k, m) for row in logits])
        expect(torch.equal(keep, expected), "top-k keeps exactly the tokens >= the k-th largest "
               "logit (k raised to min_tokens_to_keep)", input=inp,
               expected=logits.masked_fill(~expected, NEG_INF), got=out)


@kata_test(level=1, category="correctness",
           description="top-p keeps the token that crosses top_p: kept mass >= top_p")
@settings_fast
@given(data=st.data(), top_k=top_k_values, top_p=top_p_values)
def test_top_p_keeps_the_crossing_token(solution, data, top_k, top_p):
    # A fixed case first: .5/.3/.2 at top_p = .6 needs tokens 0 and 1.
    fixed = torch.tensor([[0.5, 0.3, 0.2]]).log()
    for logits, k, p in ((fixed, 0, 0.6), (filter_case(data.draw)["logits"], top_k, top_p)):
        out, inp = run_filter(solution, logits, top_k=k, top_p=p)
        keep = check_filter_output(logits, out, inp)
        for row, row_keep in zip(logits, keep):
            mass, _ = nucleus_mass(row, top_k_set(row, k, 1), row_keep)
            expect(mass >= p - 1e-5, "the kept tokens carry at least top_p of the probability "
                   "(after top-k)", input=inp, expected=f"kept mass >= {p:.6g}",
                   got=f"kept mass {mass:.6g} in {out}")


@kata_test(level=1, category="correctness",
           description="the top-p set is minimal: dropping its least likely token falls below top_p")
@settings_fast
@given(data=st.data(), top_k=top_k_values, top_p=top_p_values, mtk=st.integers(1, 3))
def test_top_p_set_is_minimal(solution, data, top_k, top_p, mtk):
    logits = filter_case(data.draw)["logits"]
    out, inp = run_filter(solution, logits, top_k=top_k, top_p=top_p, min_tokens_to_keep=mtk)
    keep = check_filter_output(logits, out, inp)
    if top_p >= 1.0:
        return
    for row, row_keep in zip(logits, keep):
        if int(row_keep.sum()) <= mtk:
            continue
        mass, probs = nucleus_mass(row, top_k_set(row, top_k, mtk), row_keep)
        smallest = float(probs[row_keep].min())
        expect(mass - smallest < top_p + 1e-5, "top-p keeps the smallest set with mass >= top_p",
               input=inp, expected=f"without its least likely token the set has mass < {top_p:.6g}",
               got=f"{out}: mass {mass:.6g}, still {mass - smallest:.6g} without the least "
                   f"likely kept token")


@kata_test(level=1, category="correctness",
           description="the top-p set is a prefix of the tokens sorted by probability")
@settings_fast
@given(data=st.data(), top_k=top_k_values, top_p=top_p_values, mtk=st.integers(1, 3))
def test_top_p_set_is_a_prefix_by_probability(solution, data, top_k, top_p, mtk):
    logits = filter_case(data.draw)["logits"]
    out, inp = run_filter(solution, logits, top_k=top_k, top_p=top_p, min_tokens_to_keep=mtk)
    keep = check_filter_output(logits, out, inp)
    for row, row_keep in zip(logits, keep):
        allowed = top_k_set(row, top_k, mtk)
        expect(not bool((row_keep & ~allowed).any()), "no token outside the top-k survives",
               input=inp, expected=logits.masked_fill(~allowed, NEG_INF), got=out)
        if row_keep.any():
            lowest_kept = float(row[row_keep].min())
            missing = allowed & ~row_keep & (row > lowest_kept)
            expect(not bool(missing.any()), "a token more likely than a kept one is kept too",
                   input=inp, got=out)


@kata_test(level=1, category="edge cases",
           description="at least min_tokens_to_keep tokens survive, even for a tiny top_p")
@settings_fast
@given(data=st.data(), top_k=top_k_values, top_p=st.sampled_from([1e-12, 1e-9, 1e-3, 0.2]),
       mtk=st.integers(1, 4))
def test_at_least_min_tokens_to_keep_survive(solution, data, top_k, top_p, mtk):
    # A fixed case first: top_p = .2 alone would keep one token of .84/.11/.04/.02.
    fixed = torch.tensor([[3.0, 1.0, 0.0, -1.0]])
    for logits, k, p, m in ((fixed, 0, 0.2, 3), (filter_case(data.draw)["logits"], top_k, top_p, mtk)):
        out, inp = run_filter(solution, logits, top_k=k, top_p=p, min_tokens_to_keep=m)
        keep = check_filter_output(logits, out, inp)
        want = min(m, logits.shape[-1])
        expect(bool((keep.sum(-1) >= want).all()), "every row keeps at least min_tokens_to_keep "
               "tokens", input=inp, expected=f">= {want} kept per row",
               got=f"{keep.sum(-1).tolist()} kept: {out}")


@kata_test(level=1, category="correctness", description="the top-p set only grows with top_p")
@settings_fast
@given(data=st.data(), top_k=top_k_values, p1=st.floats(0.01, 1.0), p2=st.floats(0.01, 1.0))
def test_top_p_set_grows_with_p(solution, data, top_k, p1, p2):
    low, high = sorted((p1, p2))
    logits = filter_case(data.draw)["logits"]
    out_low, inp = run_filter(solution, logits, top_k=top_k, top_p=low)
    out_high, _ = run_filter(solution, logits, top_k=top_k, top_p=high)
    inp["larger top_p"] = high
    grown = kept_mask(out_high) | ~kept_mask(out_low)
    expect(bool(grown.all()), "a token kept at some top_p is kept at every larger top_p",
           input=inp, expected=f"at top_p={high:.6g}, a superset of {out_low}", got=out_high)


@kata_test(level=1, category="correctness",
           description="permuting the vocabulary permutes the result the same way")
@settings_fast
@given(data=st.data(), top_k=top_k_values, top_p=top_p_values)
def test_filter_is_permutation_equivariant(solution, data, top_k, top_p):
    logits = filter_case(data.draw, distinct=True)["logits"]
    assume(not near_boundary(logits, top_k, top_p, 1))
    perm = torch.tensor(data.draw(st.permutations(range(logits.shape[-1]))), dtype=torch.long)
    out, inp = run_filter(solution, logits, top_k=top_k, top_p=top_p)
    out_perm, _ = run_filter(solution, logits[:, perm], top_k=top_k, top_p=top_p)
    inp["permutation"] = perm.tolist()
    expect(torch.equal(out_perm, out[:, perm]), "filter(logits[:, perm]) == filter(logits)[:, perm]",
           input=inp, expected=out[:, perm], got=out_perm)


@kata_test(level=1, category="api contract",
           description="the filter returns a new tensor, leaves logits untouched, keeps the dtype")
@settings(max_examples=10)
@given(data=st.data(), top_k=top_k_values, top_p=top_p_values)
def test_filter_returns_new_tensor_and_keeps_input(solution, data, top_k, top_p):
    # Both filters disabled first: returning `logits` itself is then the tempting shortcut.
    # (Other dtypes than float32: test_filter_keeps_every_float_dtype.)
    drawn = filter_case(data.draw)["logits"]
    for logits, k, p in ((drawn.clone(), 0, 1.0), (drawn, top_k, top_p)):
        before = logits.clone()
        inp = {"logits": before, "top_k": k, "top_p": p}
        out = call(solution.top_k_top_p_filter, logits, k, p, what="top_k_top_p_filter")
        expect(torch.equal(logits, before), "the input logits are not modified", input=inp,
               expected=before, got=logits)
        check_filter_output(before, out, inp)
        expect(out is not logits and out.data_ptr() != logits.data_ptr(),
               "the result is a new tensor, not the input (also when nothing is filtered)",
               input=inp)


# ============================================================================ targeted: sample


@kata_test(level=1, category="api contract",
           description="sample returns (B,) int64 ids for float32, float64, float16 and bfloat16 logits")
def test_sample_accepts_every_float_dtype(solution):
    # Row b: logit 0 at token b, -1000 elsewhere: token b has probability exactly 1.
    logits = torch.full((4, 5), -1000.0).fill_diagonal_(0.0)
    for dtype in FLOAT_DTYPES:
        for temperature in (0.0, 1.0):
            inp = {"logits": logits.to(dtype), "temperature": temperature}
            got = call(solution.sample, logits.to(dtype), temperature, generator=gen(1), what="sample")
            ok = (isinstance(got, torch.Tensor) and got.dtype == torch.int64
                  and tuple(got.shape) == (4,) and got.tolist() == [0, 1, 2, 3])
            expect(ok, f"sample of {dtype} logits returns int64 ids of shape (B,): here token b "
                   "in row b", input=inp, expected="tensor([0, 1, 2, 3]) (int64)", got=got)


@kata_test(level=1, category="correctness",
           description="each row is sampled from its own logits")
def test_sample_rows_use_their_own_logits(solution):
    logits = torch.full((5, 5), -1000.0).fill_diagonal_(0.0)[[3, 0, 4, 1, 2]]
    for temperature, top_k, top_p in ((1.0, 0, 1.0), (0.5, 2, 0.9)):
        inp = {"logits": logits, "temperature": temperature, "top_k": top_k, "top_p": top_p}
        got = sample_ids(call(solution.sample, logits.clone(), temperature, top_k, top_p,
                              generator=gen(2), what="sample"), 5, 5, inp)
        expect(got.tolist() == [3, 0, 4, 1, 2], "row b is drawn from row b's distribution (here "
               "one token has probability 1 in each row)", input=inp, expected=[3, 0, 4, 1, 2],
               got=got)


@kata_test(level=1, category="correctness",
           description="temperature 0 is greedy: argmax, the lowest id on ties")
@settings_fast
@given(data=st.data())
def test_temperature_zero_is_argmax(solution, data):
    tied = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [-1.0, -5.0, -1.0, -1.0]])
    for logits in (tied, filter_case(data.draw)["logits"]):
        inp = {"logits": logits, "temperature": 0.0}
        got = sample_ids(call(solution.sample, logits.clone(), 0.0, what="sample"),
                         logits.shape[0], logits.shape[1], inp)
        expected = torch.tensor([row.tolist().index(max(row.tolist())) for row in logits])
        expect(torch.equal(got, expected), "greedy picks the first maximum of each row",
               input=inp, expected=expected, got=got)


@kata_test(level=1, category="correctness",
           description="a tiny positive temperature still samples (it is not greedy)")
def test_tiny_temperature_is_not_greedy(solution):
    # Two tokens tie at the top: at temperature 1e-6 each has probability 1/2, the third 0.
    logits = torch.tensor([[2.0, 2.0, 0.0]])
    inp = {"logits": logits, "temperature": 1e-6, "draws": "2000 rows, generator seed 9"}
    got = sample_ids(call(solution.sample, logits.repeat(2000, 1), 1e-6, generator=gen(9),
                          what="sample"), 2000, 3, inp)
    counts = torch.bincount(got, minlength=3).tolist()
    expect(counts[0] >= 800 and counts[1] >= 800 and counts[2] == 0, "temperature 1e-6 divides "
           "the logits like any other: the two tied tokens come out about equally often",
           input=inp, expected="about 1000 / 1000 / 0", got=f"token counts {counts}")


@kata_test(level=1, category="correctness",
           description="top_k = 1 (or 2) with tied logits samples among every tied token")
def test_sample_draws_among_tokens_tied_at_top_k(solution):
    # top_k = 1 keeps both 2.0s (probability 1/2 each); top_k = 2 keeps the three 1.0s (1/3
    # each). A shortcut to argmax or to topk's indices always picks the same tokens.
    cases = [([2.0, 2.0, 0.0], 1, [0, 1], 15), ([0.0, 1.0, 1.0, 1.0, -1.0], 2, [1, 2, 3], 16)]
    for logits, top_k, tied, seed in cases:
        row = torch.tensor([logits])
        inp = {"logits": row, "top_k": top_k, "draws": f"2000 rows, generator seed {seed}"}
        got = sample_ids(call(solution.sample, row.repeat(2000, 1), 1.0, top_k, generator=gen(seed),
                              what="sample"), 2000, len(logits), inp)
        counts = torch.bincount(got, minlength=len(logits)).tolist()
        # 3/4 of the expected count: more than 7 standard deviations below it.
        floor = 0.75 * 2000 / len(tied)
        ok = all(counts[i] >= floor for i in tied) and sum(counts[i] for i in tied) == 2000
        expect(ok, f"top_k = {top_k} keeps every token tied with the k-th largest logit and "
               "sample draws among them with equal probability (only temperature 0 is greedy)",
               input=inp, expected=f"about {2000 // len(tied)} draws of each of tokens {tied}, "
               "none of the others", got=f"token counts {counts}")


@kata_test(level=1, category="api contract",
           description="sample draws from the generator it is given (same seed, same samples)")
def test_sample_uses_the_generator(solution):
    logits = torch.zeros(64, 8)
    inp = {"logits": "64 rows of 8 equal logits", "generator seed": 7}
    # Each result copied (by sample_ids) before the next call: the candidate's own stays shared.
    first = sample_ids(call(solution.sample, logits.clone(), generator=gen(7), what="sample"), 64, 8, inp)
    second = sample_ids(call(solution.sample, logits.clone(), generator=gen(7), what="sample"), 64, 8, inp)
    expect(torch.equal(first, second), "two calls with equally seeded generators give the same "
           "samples", input=inp, expected=first, got=second)
    reused = gen(7)
    again = [sample_ids(call(solution.sample, logits.clone(), generator=reused, what="sample"),
                        64, 8, inp) for _ in range(2)]
    expect(not torch.equal(again[0], again[1]), "a generator used twice gives new samples the "
           "second time (draws come from its current state; it is not re-seeded)",
           input={**inp, "calls": "two, with the same generator object"}, got=again)


@kata_test(level=1, category="api contract",
           description="with generator=None, sample draws from torch's global generator")
def test_sample_without_generator_uses_the_global_rng(solution):
    logits = torch.zeros(64, 8)
    inp = {"logits": "64 rows of 8 equal logits", "generator": None}
    draws = [sample_ids(call(solution.sample, logits.clone(), what="sample"), 64, 8, inp)
             for _ in range(2)]
    expect(not torch.equal(draws[0], draws[1]), "generator=None draws from torch's global "
           "generator, whose state moves on: two calls give different samples", input=inp,
           got=draws)


@kata_test(level=1, category="api contract", description="sample raises ValueError for temperature < 0")
def test_sample_rejects_negative_temperature(solution):
    logits = torch.zeros(64, 8)
    for temperature in (-0.5, -1e-6, -3.0):
        g = gen(3)
        inp = {"logits": "64 rows of 8 equal logits", "temperature": temperature}
        expect_value_error(lambda: call(solution.sample, logits.clone(), temperature,
                                        generator=g, what="sample"),
                           "temperature < 0 raises ValueError", inp)
        expect(torch.equal(g.get_state(), gen(3).get_state()), "a rejected call draws nothing: "
               "the generator it was given is left as it was", input=inp,
               expected="the generator's state unchanged", got="the generator has moved on")


# ============================================================================ sample: statistics


@kata_test(level=1, category="correctness",
           description="sample never returns a token the filter removes")
@settings(max_examples=10)
@given(data=st.data(), top_k=top_k_values, top_p=top_p_values,
       temperature=st.sampled_from([0.5, 1.0, 2.0]), seed=st.integers(0, 2**16))
def test_sample_never_picks_a_filtered_token(solution, reference, data, top_k, top_p, temperature, seed):
    logits = filter_case(data.draw, distinct=True)["logits"]
    assume(not near_boundary(logits / temperature, top_k, top_p, 1))
    inp = {"logits": logits, "temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
    got = sample_ids(call(solution.sample, logits.clone(), temperature, top_k, top_p,
                          generator=gen(seed), what="sample"), logits.shape[0], logits.shape[1], inp)
    allowed = kept_mask(reference.top_k_top_p_filter(logits / temperature, top_k, top_p))
    ok = allowed.gather(1, got[:, None]).squeeze(1)
    expect(bool(ok.all()), "sampled ids are tokens the filter keeps", input=inp,
           expected=logits.masked_fill(~allowed, NEG_INF), got=got)


@kata_test(level=1, category="correctness", weight=2,
           description="sample frequencies match the filtered distribution (chi-square, 20000 draws)")
def test_sample_frequencies_match_filtered_distribution(solution, reference):
    cases = [([2.0, 1.0, 0.0, -1.0, 0.5], 1.0, 0, 1.0, 11),
             ([1.5, 0.2, 1.0, -0.5, 0.6, 1.2], 1.0, 4, 0.8, 12)]
    for logits, temperature, top_k, top_p, seed in cases:
        counts, inp = sample_counts(solution, logits, seed, temperature=temperature,
                                     top_k=top_k, top_p=top_p)
        check_frequencies(counts, filtered_probs(reference, logits, temperature, top_k, top_p),
                          "sampling frequencies match softmax of the filtered logits", input=inp)


@kata_test(level=1, category="correctness", weight=1.5,
           description="temperature divides the logits before the softmax (chi-square)")
def test_temperature_scales_logits_before_softmax(solution, reference):
    cases = [([1.0, 0.0, -0.5, 0.5], 0.5, 13), ([1.0, 0.0, -0.5, 0.5], 2.5, 14)]
    for logits, temperature, seed in cases:
        counts, inp = sample_counts(solution, logits, seed, temperature=temperature)
        check_frequencies(counts, filtered_probs(reference, logits, temperature, 0, 1.0),
                          "sampling frequencies match softmax(logits / temperature)", input=inp)


@kata_test(level=1, category="correctness",
           description="top-k/top-p filter the tempered logits (logits / temperature)")
def test_filter_applies_to_tempered_logits(solution):
    # probs .5/.3/.2 at temperature .5 become .66/.24/.10: top_p = .6 then keeps token 0 only
    # (on the untempered distribution it would keep tokens 0 and 1).
    logits = torch.tensor([[0.5, 0.3, 0.2]]).log()
    inp = {"logits": logits, "temperature": 0.5, "top_p": 0.6, "draws": 2000}
    got = sample_ids(call(solution.sample, logits.repeat(2000, 1), 0.5, 0, 0.6,
                          generator=gen(5), what="sample"), 2000, 3, inp)
    expect(bool((got == 0).all()), "only token 0 survives top_p = .6 on softmax(logits / .5) = "
           "[.66, .24, .10]", input=inp, expected="token 0 in every row",
           got=f"token counts {torch.bincount(got, minlength=3).tolist()}")
