"""Hidden suite for the `sampling` kata.

Level 1: top_k_top_p_filter and sample. Level 2: beam_search. Level 3: speculative_verify.

Statistical tests. Sampling is checked by Pearson chi-square goodness-of-fit tests on fixed
generator seeds (the grade is reproducible). Bins whose expected count is below
MIN_EXPECTED_COUNT are pooled; a test fails when the chi-square tail probability of the
statistic is below ALPHA_PER_TEST = 1e-9 (computed exactly from the chi-square distribution
with torch.special.gammaincc, no approximation of the quantile). Because counts are discrete,
the true tail of the Pearson statistic is heavier than the chi-square tail; for the worst case
(a two-bin split with expected count 200) the exact binomial tail is 5.3e-9, so each
evaluation raises a false alarm with probability below 1e-8. The suite evaluates at most
MAX_CHI_SQUARE_EVALUATIONS = 20 such tests per run: a correct solution is rejected with
probability below 2e-7 per run. Anything sampled with probability exactly 0 fails at once.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import assume, given, settings, strategies as st

from grader.protocol import call_many, PropertyFailure, call, expect, kata_test
from grader.suites._common import count_ops

ALPHA_PER_TEST = 1e-9
MIN_EXPECTED_COUNT = 200
MAX_CHI_SQUARE_EVALUATIONS = 20
NEG_INF = float("-inf")

# ============================================================================ helpers

def chi_square_tail(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X ~ chi-square(dof): the regularized upper incomplete gamma."""
    a = torch.tensor(dof / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(a, torch.tensor(statistic / 2, dtype=torch.float64)))

def pooled_bins(probs: list[float], num_draws: int) -> list[list[int]]:
    """Group token ids so that every group's expected count is >= MIN_EXPECTED_COUNT:
    large bins alone, the small ones pooled (and the pool merged into the smallest large bin
    when it is still too small). Zero-probability tokens are left out (checked separately)."""
    ids = sorted((i for i, p in enumerate(probs) if p > 0), key=lambda i: probs[i])
    small = [i for i in ids if probs[i] * num_draws < MIN_EXPECTED_COUNT]
    groups = [[i] for i in ids if probs[i] * num_draws >= MIN_EXPECTED_COUNT]
    if small:
        if sum(probs[i] for i in small) * num_draws >= MIN_EXPECTED_COUNT or not groups:
            groups.append(small)
        else:
            groups[0] = groups[0] + small
    return groups

def check_frequencies(counts: list[int], probs: list[float], prop: str, *, input: Any) -> None:
    """Chi-square goodness of fit of `counts` (per token id) against `probs`."""
    num_draws = sum(counts)
    impossible = [i for i, (c, p) in enumerate(zip(counts, probs)) if c > 0 and p <= 0]
    expect(not impossible, prop + " (a token with probability 0 was drawn)", input=input,
           expected=f"probabilities {[round(p, 4) for p in probs]}",
           got=f"counts {counts} over {num_draws} draws; token(s) {impossible} are impossible")
    groups = pooled_bins(probs, num_draws)
    if len(groups) < 2:
        return
    statistic = 0.0
    for group in groups:
        expected = num_draws * sum(probs[i] for i in group)
        observed = sum(counts[i] for i in group)
        statistic += (observed - expected) ** 2 / expected
    tail = chi_square_tail(statistic, len(groups) - 1)
    expect(tail >= ALPHA_PER_TEST, prop, input=input,
           expected=f"frequencies {[round(num_draws * p) for p in probs]} (probabilities "
                    f"{[round(p, 4) for p in probs]}) over {num_draws} draws",
           got=f"counts {counts}",
           note=f"chi-square = {statistic:.1f} with {len(groups) - 1} degrees of freedom, "
                f"p-value {tail:.2g} < {ALPHA_PER_TEST:g} (false-alarm rate per run < 1e-6)")

def kept_mask(out: torch.Tensor) -> torch.Tensor:
    return out != NEG_INF

def check_filter_output(logits: torch.Tensor, out: Any, inp: dict) -> torch.Tensor:
    """Shape, dtype, kept values unchanged and in place, removed ones -inf. Returns the mask."""
    expect(isinstance(out, torch.Tensor), "top_k_top_p_filter returns a tensor", input=inp,
           expected="torch.Tensor", got=type(out).__name__)
    expect(tuple(out.shape) == tuple(logits.shape) and out.dtype == logits.dtype,
           "the result has the shape and dtype of logits", input=inp,
           expected=f"shape {tuple(logits.shape)}, {logits.dtype}",
           got=f"shape {tuple(out.shape)}, {out.dtype}")
    keep = kept_mask(out)
    same = torch.where(keep, out == logits, torch.ones_like(keep))
    expect(bool(same.all()), "kept logits keep their value and position; removed ones are -inf",
           input=inp, expected="each entry equal to its logit, or -inf", got=out)
    return keep

def top_k_set(row: torch.Tensor, top_k: int, min_tokens_to_keep: int) -> torch.Tensor:
    """Mask of the tokens top-k keeps in one (V,) row (ties with the k-th value included)."""
    if top_k <= 0:
        return torch.ones_like(row, dtype=torch.bool)
    k = min(max(top_k, min_tokens_to_keep), row.numel())
    return row >= row.sort(descending=True).values[k - 1]

def nucleus_mass(row: torch.Tensor, allowed: torch.Tensor, keep: torch.Tensor) -> tuple[float, torch.Tensor]:
    """(mass of `keep` under the softmax over `allowed`, the probabilities) in float64."""
    probs = row.double().masked_fill(~allowed, NEG_INF).softmax(-1)
    return float(probs[keep].sum()), probs

def filter_case(draw: Any, *, distinct: bool = False, max_vocab: int = 6, spread: int = 3) -> dict:
    """A small batch of logits and filter settings."""
    batch = draw(st.integers(1, 3))
    vocab = draw(st.integers(1, max_vocab))
    if distinct:
        rows = [draw(st.permutations(range(vocab))) for _ in range(batch)]
        scale = draw(st.sampled_from([0.5, 1.0, 1.5]))
        logits = torch.tensor(rows, dtype=torch.float32) * scale
    else:
        values = draw(st.lists(st.integers(-spread, spread), min_size=batch * vocab,
                               max_size=batch * vocab))
        logits = torch.tensor(values, dtype=torch.float32).reshape(batch, vocab)
    return {"logits": logits}

def run_filter(solution: Any, logits: torch.Tensor, **kwargs: Any) -> tuple[torch.Tensor, dict]:
    inp = {"logits": logits.clone(), **kwargs}
    out = call(solution.top_k_top_p_filter, logits.clone(), what="top_k_top_p_filter", **kwargs)
    return out, inp

def near_boundary(logits: torch.Tensor, top_k: int, top_p: float, mtk: int) -> bool:
    """Whether some cumulative probability (after top-k) is within 1e-4 of top_p: rounding
    may then legitimately decide either way."""
    for row in logits:
        allowed = top_k_set(row, top_k, mtk)
        probs = row.double().masked_fill(~allowed, NEG_INF).softmax(-1).sort(descending=True).values
        if bool(((probs.cumsum(0) - top_p).abs() < 1e-4).any()):
            return True
    return False

settings_fast = settings(max_examples=15)
top_p_values = st.sampled_from([1e-9, 0.05, 0.3, 0.5, 0.6, 0.75, 0.9, 0.99, 1.0]) | st.floats(0.01, 1.0)
top_k_values = st.integers(-2, 7)

# ============================================================================ level 1: filter

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
        check_crossing_token_kept(solution, logits, k, p)

def check_crossing_token_kept(solution: Any, logits: torch.Tensor, top_k: int, top_p: float) -> None:
    out, inp = run_filter(solution, logits, top_k=top_k, top_p=top_p)
    keep = check_filter_output(logits, out, inp)
    for row, row_keep in zip(logits, keep):
        mass, _ = nucleus_mass(row, top_k_set(row, top_k, 1), row_keep)
        expect(mass >= top_p - 1e-5, "the kept tokens carry at least top_p of the probability "
               "(after top-k)", input=inp, expected=f"kept mass >= {top_p:.6g}",
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

@kata_test(level=1, category="correctness",
           description="top-p is computed on the distribution left after top-k")
def test_top_p_applied_after_top_k(solution):
    # probs .4/.3/.2/.1; top_k=2 leaves 4/7, 3/7, so top_p=.5 keeps one token (not two).
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]]).log()
    out, inp = run_filter(solution, logits, top_k=2, top_p=0.5)
    keep = check_filter_output(logits, out, inp)
    expected = [[True, False, False, False], [False, False, False, True]]
    expect(keep.tolist() == expected, "top-p renormalizes over the top-k survivors", input=inp,
           expected=f"kept {expected}", got=f"kept {keep.tolist()}")

@kata_test(level=1, category="edge cases",
           description="at least min_tokens_to_keep tokens survive, even for a tiny top_p")
@settings_fast
@given(data=st.data(), top_k=top_k_values, top_p=st.sampled_from([1e-12, 1e-9, 1e-3, 0.2]),
       mtk=st.integers(1, 4))
def test_at_least_min_tokens_to_keep_survive(solution, data, top_k, top_p, mtk):
    logits = filter_case(data.draw)["logits"]
    out, inp = run_filter(solution, logits, top_k=top_k, top_p=top_p, min_tokens_to_keep=mtk)
    keep = check_filter_output(logits, out, inp)
    want = min(mtk, logits.shape[-1])
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
@settings(max_examples=15)
@given(data=st.data(), top_k=top_k_values, top_p=top_p_values,
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_filter_returns_new_tensor_and_keeps_input(solution, data, top_k, top_p, dtype):
    logits = filter_case(data.draw)["logits"].to(dtype)
    before = logits.clone()
    inp = {"logits": before, "top_k": top_k, "top_p": top_p}
    out = call(solution.top_k_top_p_filter, logits, top_k, top_p, what="top_k_top_p_filter")
    expect(torch.equal(logits, before), "the input logits are not modified", input=inp,
           expected=before, got=logits)
    check_filter_output(before, out, inp)
    expect(out.data_ptr() != logits.data_ptr(), "the result is a new tensor, not the input",
           input=inp)

@kata_test(level=1, category="edge cases",
           description="top_k <= 0 or >= V and top_p = 1 keep every token")
@settings(max_examples=10)
@given(data=st.data(), k_choice=st.sampled_from(["zero", "negative", "V", "beyond V"]))
def test_disabled_filters_keep_everything(solution, data, k_choice):
    logits = filter_case(data.draw)["logits"]
    vocab = logits.shape[-1]
    top_k = {"zero": 0, "negative": -3, "V": vocab, "beyond V": vocab + 2}[k_choice]
    out, inp = run_filter(solution, logits, top_k=top_k, top_p=1.0)
    check_filter_output(logits, out, inp)
    expect(torch.equal(out, logits), "nothing is filtered", input=inp, expected=logits, got=out)

@kata_test(level=1, category="api contract",
           description="ValueError for top_p outside (0, 1] or min_tokens_to_keep < 1")
def test_filter_rejects_bad_arguments(solution):
    logits = torch.tensor([[1.0, 0.0, -1.0]])
    for kwargs in ({"top_p": 0.0}, {"top_p": -0.5}, {"top_p": 1.5}, {"min_tokens_to_keep": 0}):
        try:
            call(solution.top_k_top_p_filter, logits.clone(), what="top_k_top_p_filter", **kwargs)
        except ValueError:
            continue
        raise PropertyFailure("invalid arguments raise ValueError", input={"logits": logits, **kwargs},
                              expected="ValueError", got="no exception")

@kata_test(level=1, category="efficiency", weight=0.5,
           description="the filter is vectorized: no Python loop over the rows of the batch")
def test_filter_has_no_python_loop_over_rows(solution):
    gen = torch.Generator().manual_seed(0)
    def ops(batch: int) -> int:
        logits = torch.randn(batch, 16, generator=gen)
        return count_ops(lambda: solution.top_k_top_p_filter(logits, 5, 0.8))
    small, large = ops(1), ops(64)
    expect(large <= 2 * small + 16, "the number of tensor operations does not grow with the batch",
           expected=f"about {small} operations for 64 rows", got=f"{small} for 1 row, {large} for 64")

# ============================================================================ level 1: sample

@kata_test(level=1, category="correctness",
           description="temperature 0 is greedy: argmax, the lowest id on ties")
@settings_fast
@given(data=st.data())
def test_temperature_zero_is_argmax(solution, data):
    logits = filter_case(data.draw)["logits"]
    got = call(solution.sample, logits.clone(), 0.0, what="sample")
    expected = torch.tensor([row.tolist().index(max(row.tolist())) for row in logits])
    expect(isinstance(got, torch.Tensor) and got.dtype == torch.int64 and torch.equal(got, expected),
           "greedy picks the first maximum of each row (int64, shape (B,))",
           input={"logits": logits, "temperature": 0.0}, expected=expected, got=got)

@kata_test(level=1, category="api contract",
           description="sample returns (B,) int64 ids that survive the filter, reproducibly")
@settings(max_examples=10)
@given(data=st.data(), top_k=top_k_values, top_p=top_p_values,
       temperature=st.sampled_from([0.5, 1.0, 2.0]), seed=st.integers(0, 2**16))
def test_sample_never_picks_a_filtered_token(solution, reference, data, top_k, top_p, temperature, seed):
    logits = filter_case(data.draw, distinct=True)["logits"]
    assume(not near_boundary(logits / temperature, top_k, top_p, 1))
    inp = {"logits": logits, "temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
    got = call(solution.sample, logits.clone(), temperature, top_k, top_p,
               generator=torch.Generator().manual_seed(seed), what="sample")
    expect(isinstance(got, torch.Tensor) and got.dtype == torch.int64
           and tuple(got.shape) == (logits.shape[0],), "one int64 id per row", input=inp,
           expected=f"int64 tensor of shape ({logits.shape[0]},)", got=got)
    allowed = kept_mask(reference.top_k_top_p_filter(logits / temperature, top_k, top_p))
    ok = allowed.gather(1, got.clamp(0, logits.shape[-1] - 1)[:, None]).squeeze(1)
    expect(bool(ok.all()) and bool((got < logits.shape[-1]).all()), "sampled ids are tokens the "
           "filter keeps", input=inp, expected=logits.masked_fill(~allowed, NEG_INF), got=got)
    again = solution.sample(logits.clone(), temperature, top_k, top_p,
                            generator=torch.Generator().manual_seed(seed))
    expect(torch.equal(got, again), "the same generator seed gives the same samples", input=inp,
           expected=got, got=again)

@kata_test(level=1, category="api contract",
           description="sample draws from the generator it is given (same seed, same samples)")
def test_sample_uses_the_generator(solution):
    logits = torch.zeros(64, 4)
    inp = {"logits": "64 rows of 4 equal logits", "generator seed": 7}
    torch.manual_seed(1)
    first = call(solution.sample, logits.clone(), generator=torch.Generator().manual_seed(7), what="sample")
    torch.manual_seed(2)
    second = call(solution.sample, logits.clone(), generator=torch.Generator().manual_seed(7), what="sample")
    expect(isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)
           and torch.equal(first, second), "two calls with equally seeded generators give the "
           "same samples, whatever torch's global seed", input=inp, expected=first, got=second)

SAMPLE_DRAWS = 20000

def _sample_counts(solution: Any, logits: list[float], seed: int, **kwargs: Any) -> tuple[list[int], dict]:
    row = torch.tensor([logits], dtype=torch.float32)
    inp = {"logits": row, **kwargs, "draws": f"{SAMPLE_DRAWS} rows, generator seed {seed}"}
    got = call(solution.sample, row.repeat(SAMPLE_DRAWS, 1), generator=torch.Generator().manual_seed(seed),
               what="sample", **kwargs)
    expect(isinstance(got, torch.Tensor) and tuple(got.shape) == (SAMPLE_DRAWS,),
           "sample returns one id per row", input=inp, got=got)
    expect(bool(((got >= 0) & (got < len(logits))).all()), "sampled ids are in [0, V)", input=inp,
           got=got)
    return torch.bincount(got.long(), minlength=len(logits)).tolist(), inp

def _filtered_probs(reference: Any, logits: list[float], temperature: float, top_k: int, top_p: float) -> list[float]:
    row = torch.tensor([logits], dtype=torch.float32) / temperature
    return reference.top_k_top_p_filter(row, top_k, top_p).double().softmax(-1)[0].tolist()

@kata_test(level=1, category="correctness", weight=2,
           description="sample frequencies match the filtered distribution (chi-square, 20000 draws)")
def test_sample_frequencies_match_filtered_distribution(solution, reference):
    cases = [([2.0, 1.0, 0.0, -1.0, 0.5], 1.0, 0, 1.0, 11),
             ([1.5, 0.2, 1.0, -0.5, 0.6, 1.2], 1.0, 4, 0.8, 12)]
    for logits, temperature, top_k, top_p, seed in cases:
        counts, inp = _sample_counts(solution, logits, seed, temperature=temperature,
                                     top_k=top_k, top_p=top_p)
        check_frequencies(counts, _filtered_probs(reference, logits, temperature, top_k, top_p),
                          "sampling frequencies match softmax of the filtered logits", input=inp)

@kata_test(level=1, category="correctness", weight=1.5,
           description="temperature divides the logits before the softmax (chi-square)")
def test_temperature_scales_logits_before_softmax(solution, reference):
    cases = [([1.0, 0.0, -0.5, 0.5], 0.5, 13), ([1.0, 0.0, -0.5, 0.5], 2.5, 14)]
    for logits, temperature, seed in cases:
        counts, inp = _sample_counts(solution, logits, seed, temperature=temperature)
        check_frequencies(counts, _filtered_probs(reference, logits, temperature, 0, 1.0),
                          "sampling frequencies match softmax(logits / temperature)", input=inp)

@kata_test(level=1, category="correctness",
           description="top-k/top-p filter the tempered logits (logits / temperature)")
def test_filter_applies_to_tempered_logits(solution):
    # probs .5/.3/.2 at temperature .5 become .66/.24/.10: top_p = .6 then keeps token 0 only
    # (on the untempered distribution it would keep tokens 0 and 1).
    logits = torch.tensor([[0.5, 0.3, 0.2]]).log()
    inp = {"logits": logits, "temperature": 0.5, "top_p": 0.6, "draws": 2000}
    got = call(solution.sample, logits.repeat(2000, 1), 0.5, 0, 0.6,
               generator=torch.Generator().manual_seed(5), what="sample")
    expect(isinstance(got, torch.Tensor) and bool((got == 0).all()), "only token 0 survives "
           "top_p = .6 on softmax(logits / .5) = [.66, .24, .10]", input=inp,
           expected="token 0 in every row", got=f"token counts {torch.bincount(got.long(), minlength=3).tolist()}"
           if isinstance(got, torch.Tensor) else got)

@kata_test(level=1, category="api contract", description="sample raises ValueError for temperature < 0")
def test_sample_rejects_negative_temperature(solution):
    logits = torch.tensor([[1.0, 0.0]])
    try:
        call(solution.sample, logits, -0.5, what="sample")
    except ValueError:
        return
    raise PropertyFailure("temperature < 0 raises ValueError", input={"logits": logits, "temperature": -0.5},
                          expected="ValueError", got="no exception")

# ============================================================================ level 2: beam search

DEFAULT_TABLE_ROW = [0.4, 0.3, 0.2, 0.1]  # next-token probabilities for prefixes not in a table

class TinyModel:
    """A step_fn whose next-token log-probs are a pseudo-random function of the whole sequence
    (prompt + generated), or read from `table` (prefix of generated tokens -> probabilities).
    It records every call so the suite can check what beam_search passed in."""

    def __init__(self, vocab_size: int, seed: int, *, scale: float = 1.5, eos_token_id: int = 0,
                 eos_bias: float = 0.0, prompt: list[int] | None = None,
                 table: dict[tuple[int, ...], list[float]] | None = None) -> None:
        self.vocab_size, self.seed, self.scale = vocab_size, seed, scale
        self.eos_token_id, self.eos_bias = eos_token_id, eos_bias
        self.prompt = list(prompt or [])
        self.table = table
        self.calls: list[torch.Tensor] = []
        self._cache: dict[tuple[int, ...], torch.Tensor] = {}

    def log_probs(self, sequence: tuple[int, ...]) -> torch.Tensor:
        """(V,) float64 log-probabilities of the next token after `sequence`."""
        if sequence not in self._cache:
            if self.table is not None:
                generated = sequence[len(self.prompt):]
                row = self.table.get(generated, DEFAULT_TABLE_ROW[: self.vocab_size])
                self._cache[sequence] = torch.tensor(row, dtype=torch.float64).log()
            else:
                key = hash((self.seed,) + sequence) & 0x7FFFFFFF
                gen = torch.Generator().manual_seed(key)
                logits = torch.randn(self.vocab_size, generator=gen, dtype=torch.float64) * self.scale
                logits[self.eos_token_id] += self.eos_bias
                self._cache[sequence] = logits.log_softmax(-1)
        return self._cache[sequence]

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        self.calls.append(tokens.detach().clone() if isinstance(tokens, torch.Tensor) else tokens)
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
            raise PropertyFailure("step_fn is called with a LongTensor of shape (N, T)",
                                  got=tokens if isinstance(tokens, torch.Tensor) else type(tokens).__name__)
        return torch.stack([self.log_probs(tuple(row)) for row in tokens.tolist()])

    def sequence_score(self, generated: list[int], length_penalty: float) -> float:
        total = sum(float(self.log_probs(tuple(self.prompt + generated[:i]))[tok])
                    for i, tok in enumerate(generated))
        return total / len(generated) ** length_penalty

@st.composite
def beam_cases(draw: Any, *, max_vocab: int = 4, max_steps: int = 4) -> dict:
    vocab = draw(st.integers(2, max_vocab))
    eos = draw(st.integers(0, vocab - 1))
    prompt = draw(st.lists(st.integers(0, vocab - 1), min_size=0, max_size=3))
    return {"vocab_size": vocab, "eos_token_id": eos, "prompt": prompt,
            "num_beams": draw(st.integers(1, 4)), "max_new_tokens": draw(st.integers(1, max_steps)),
            "length_penalty": draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0])),
            "seed": draw(st.integers(0, 2**16)), "eos_bias": draw(st.sampled_from([-1.0, 0.0, 1.5]))}

def make_model(case: dict) -> TinyModel:
    return TinyModel(case["vocab_size"], case["seed"], eos_token_id=case["eos_token_id"],
                     eos_bias=case.get("eos_bias", 0.0), prompt=case["prompt"])

def run_beam(solution: Any, model: TinyModel, case: dict) -> list:
    prompt = list(case["prompt"])
    got = call(solution.beam_search, model, prompt, case["num_beams"], case["max_new_tokens"],
               case["eos_token_id"], case["length_penalty"], what="beam_search")
    shape_ok = isinstance(got, list) and all(
        isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], list)
        and all(isinstance(t, int) for t in h[0]) and isinstance(h[1], float) for h in got)
    expect(shape_ok, "beam_search returns a list of (list of int tokens, float score)",
           input=case_input(case), got=got)
    return got

def case_input(case: dict) -> dict:
    shown = {k: v for k, v in case.items() if k not in ("seed", "eos_bias", "table")}
    if "table" in case:
        shown["next-token probabilities after each generated prefix"] = case["table"]
    else:
        shown["model"] = f"TinyModel(seed={case['seed']}, eos_bias={case.get('eos_bias', 0.0)})"
    return shown

def same_hypotheses(got: list, expected: list) -> bool:
    if [tokens for tokens, _ in got] != [tokens for tokens, _ in expected]:
        return False
    return all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) for (_, a), (_, b) in zip(got, expected))

def shown_hypotheses(hyps: list) -> list:
    return [(tokens, round(score, 6)) for tokens, score in hyps]

@kata_test(level=2, category="correctness", weight=2,
           description="beam_search agrees with the reference on small random models")
@settings(max_examples=40)
@given(case=beam_cases())
def test_beam_matches_reference(solution, reference, case):
    got = run_beam(solution, make_model(case), case)
    expected = reference.beam_search(make_model(case), case["prompt"], case["num_beams"],
                                     case["max_new_tokens"], case["eos_token_id"], case["length_penalty"])
    expect(same_hypotheses(got, expected), "the same hypotheses and scores, best first",
           input=case_input(case), expected=shown_hypotheses(expected), got=shown_hypotheses(got))

def all_sequences(vocab: int, eos: int, max_new_tokens: int) -> list[list[int]]:
    """Every sequence beam search could return: ends with EOS, or has max_new_tokens tokens."""
    done: list[list[int]] = []
    frontier: list[list[int]] = [[]]
    while frontier:
        prefix = frontier.pop()
        for token in range(vocab):
            seq = prefix + [token]
            (done if token == eos or len(seq) == max_new_tokens else frontier).append(seq)
    return done

@kata_test(level=2, category="correctness", weight=1.5,
           description="with num_beams >= the number of sequences, beam search is exhaustive")
@settings(max_examples=30)
@given(case=beam_cases(max_vocab=3, max_steps=3), extra=st.integers(0, 2))
def test_beam_is_exhaustive_with_enough_beams(solution, case, extra):
    sequences = all_sequences(case["vocab_size"], case["eos_token_id"], case["max_new_tokens"])
    case = {**case, "num_beams": len(sequences) + extra}
    model = make_model(case)
    got = run_beam(solution, model, case)
    expected = sorted(((seq, model.sequence_score(seq, case["length_penalty"])) for seq in sequences),
                      key=lambda h: -h[1])
    same = sorted(tuple(t) for t, _ in got) == sorted(tuple(t) for t, _ in expected)
    expect(same, "every possible sequence is returned (brute force)", input=case_input(case),
           expected=shown_hypotheses(expected), got=shown_hypotheses(got))
    want = {tuple(t): s for t, s in expected}
    for tokens, score in got:
        expect(math.isclose(score, want[tuple(tokens)], rel_tol=1e-5, abs_tol=1e-6),
               "each score is sum of log-probs / generated length ** length_penalty",
               input=case_input(case), expected=(tokens, want[tuple(tokens)]), got=(tokens, score))

@kata_test(level=2, category="correctness",
           description="num_beams = 1 with length_penalty <= 0 is greedy decoding")
@settings(max_examples=25)
@given(case=beam_cases(max_vocab=4, max_steps=5), length_penalty=st.sampled_from([0.0, -0.5, -1.0]))
def test_one_beam_is_greedy(solution, case, length_penalty):
    case = {**case, "num_beams": 1, "length_penalty": length_penalty}
    model = make_model(case)
    got = run_beam(solution, model, case)
    tokens: list[int] = []
    while len(tokens) < case["max_new_tokens"]:
        tokens.append(int(model.log_probs(tuple(case["prompt"] + tokens)).argmax()))
        if tokens[-1] == case["eos_token_id"]:
            break
    expected = [(tokens, model.sequence_score(tokens, length_penalty))]
    expect(same_hypotheses(got, expected), "one beam picks the most likely token at every step",
           input=case_input(case), expected=shown_hypotheses(expected), got=shown_hypotheses(got))

@kata_test(level=2, category="correctness", weight=1.5,
           description="scores are descending and recomputable from step_fn (generated length only)")
@settings(max_examples=25)
@given(case=beam_cases(), prompt=st.lists(st.integers(0, 1), min_size=1, max_size=3),
       length_penalty=st.sampled_from([-1.0, 0.5, 1.0, 2.0]))
def test_scores_recomputable_from_step_fn(solution, case, prompt, length_penalty):
    case = {**case, "prompt": prompt, "length_penalty": length_penalty}
    model = make_model(case)
    got = run_beam(solution, model, case)
    expect(len(got) >= 1, "at least one hypothesis is returned", input=case_input(case), got=got)
    for tokens, score in got:
        expect(len(tokens) >= 1, "hypotheses hold the generated tokens (at least one)",
               input=case_input(case), got=shown_hypotheses(got))
        want = model.sequence_score(tokens, length_penalty)
        expect(math.isclose(score, want, rel_tol=1e-5, abs_tol=1e-6),
               "score == sum of log-probs / len(generated tokens) ** length_penalty (the prompt "
               "does not count)", input=case_input(case), expected=(tokens, round(want, 6)),
               got=(tokens, round(score, 6)))
    scores = [s for _, s in got]
    expect(scores == sorted(scores, reverse=True), "hypotheses are returned best first",
           input=case_input(case), got=shown_hypotheses(got))

@kata_test(level=2, category="correctness",
           description="every hypothesis ends with EOS or has max_new_tokens tokens; at most num_beams")
@settings(max_examples=25)
@given(case=beam_cases())
def test_hypotheses_end_with_eos_or_max_length(solution, case):
    got = run_beam(solution, make_model(case), case)
    expect(1 <= len(got) <= case["num_beams"], "between 1 and num_beams hypotheses",
           input=case_input(case), got=shown_hypotheses(got))
    eos, limit = case["eos_token_id"], case["max_new_tokens"]
    for tokens, _ in got:
        ok = (1 <= len(tokens) <= limit and eos not in tokens[:-1]
              and (tokens[-1] == eos or len(tokens) == limit))
        expect(ok, "a hypothesis stops at its first EOS or after max_new_tokens tokens",
               input=case_input(case), got=shown_hypotheses(got))
    expect(len({tuple(t) for t, _ in got}) == len(got), "hypotheses are distinct",
           input=case_input(case), got=shown_hypotheses(got))

def table_case(table: dict, **settings_: Any) -> dict:
    base = {"vocab_size": 4, "eos_token_id": 0, "prompt": [], "length_penalty": 0.0, "seed": 0}
    return {**base, **settings_, "table": table}

def run_table_case(solution: Any, reference: Any, case: dict, prop: str) -> None:
    model = TinyModel(case["vocab_size"], 0, prompt=case["prompt"], table=case["table"])
    got = run_beam(solution, model, case)
    ref_model = TinyModel(case["vocab_size"], 0, prompt=case["prompt"], table=case["table"])
    expected = reference.beam_search(ref_model, case["prompt"], case["num_beams"],
                                     case["max_new_tokens"], case["eos_token_id"], case["length_penalty"])
    expect(same_hypotheses(got, expected), prop, input=case_input(case),
           expected=shown_hypotheses(expected), got=shown_hypotheses(got))

UNIFORM = [0.25, 0.25, 0.25, 0.25]

@kata_test(level=2, category="edge cases", weight=1.5,
           description="an EOS candidate ranked exactly num_beams is not a hypothesis; at num_beams - 1 it is")
def test_eos_counts_only_below_rank_num_beams(solution, reference):
    # Step 2 ranks [1, EOS] (.3), [2, 1] (.2), [2, EOS] (.12, rank 2), [1, 1] (.1): with two
    # beams [2, EOS] is skipped, so [2, 1, EOS] (.08) ends up second. With three beams it counts.
    table = {(): [0.05, 0.5, 0.4, 0.05], (1,): [0.6, 0.2, 0.1, 0.1], (2,): [0.3, 0.5, 0.1, 0.1],
             (2, 1): [0.4, 0.3, 0.2, 0.1], (1, 1): [0.45, 0.25, 0.2, 0.1]}
    run_table_case(solution, reference, table_case(table, num_beams=2, max_new_tokens=3),
                   "an EOS candidate at rank num_beams is skipped ([2, EOS] ranks 2 with 2 beams)")
    run_table_case(solution, reference, table_case(table, num_beams=3, max_new_tokens=3),
                   "an EOS candidate at rank num_beams - 1 becomes a hypothesis")

@kata_test(level=2, category="correctness",
           description="search continues while a live beam can still beat the worst finished one")
def test_keeps_searching_while_a_live_beam_can_win(solution, reference):
    # EOS first (.4) fills the one-slot set, but with length_penalty 1 the live beam [1]
    # (.35, then .95 twice) can still reach a better average log-prob.
    table = {(): [0.4, 0.35, 0.15, 0.1], (1,): [0.02, 0.95, 0.02, 0.01],
             (1, 1): [0.02, 0.95, 0.02, 0.01]}
    run_table_case(solution, reference,
                   table_case(table, num_beams=1, max_new_tokens=3, length_penalty=1.0),
                   "a full set does not stop the search while a live beam can still beat it")

@kata_test(level=2, category="correctness",
           description="equal sums are ranked by lower beam index, then lower token id")
def test_ties_broken_by_beam_then_token(solution, reference):
    # Tokens 1, 2, 3 tie at step 1: one beam must continue from token 1.
    table = {(): [0.1, 0.3, 0.3, 0.3], (1,): [0.6, 0.2, 0.1, 0.1], (2,): [0.9, 0.05, 0.03, 0.02],
             (3,): [0.9, 0.05, 0.03, 0.02]}
    run_table_case(solution, reference, table_case(table, num_beams=1, max_new_tokens=2),
                   "among equal sums the lower token id wins")
    # Step 2: [2, 3] leads; [1, 3] (beam 0) ties [2, 1] (beam 1) for the second slot.
    table = {(): [0.1, 0.3, 0.3, 0.3], (1,): [0.1, 0.2, 0.3, 0.4], (2,): [0.05, 0.4, 0.05, 0.5]}
    run_table_case(solution, reference, table_case(table, num_beams=2, max_new_tokens=2),
                   "among equal sums the lower beam index wins")

@kata_test(level=2, category="edge cases",
           description="a hypothesis that only ties the worst of a full set does not replace it")
def test_equal_score_does_not_replace_worst(solution, reference):
    # [EOS] and [1] both have log-prob log .5; [EOS] ranks first (lower token id) and fills the
    # one-slot set; [1], offered at the end with the same score, is not better: dropped.
    table = {(): [0.5, 0.5]}
    for length_penalty in (0.0, 1.0):
        run_table_case(solution, reference,
                       table_case(table, vocab_size=2, num_beams=1, max_new_tokens=1,
                                  length_penalty=length_penalty),
                       "an offered hypothesis equal to the worst of a full set is dropped")

@kata_test(level=2, category="api contract",
           description="step_fn gets a LongTensor (N, T) of prompt + tokens generated so far")
@settings(max_examples=20)
@given(case=beam_cases())
def test_step_fn_sees_prompt_plus_generated(solution, case):
    model = make_model(case)
    run_beam(solution, model, case)
    prompt = case["prompt"]
    expect(len(model.calls) >= 1, "step_fn is called", input=case_input(case))
    for tokens in model.calls:
        ok = (tokens.dtype == torch.long and tokens.dim() == 2 and tokens.shape[0] >= 1
              and tokens.shape[1] >= len(prompt)
              and all(row[: len(prompt)] == prompt for row in tokens.tolist()))
        expect(ok, "each row passed to step_fn is the prompt followed by the generated tokens "
               "(int64, shape (N, T))", input=case_input(case), got=tokens)
    lengths = [t.shape[1] - len(prompt) for t in model.calls]
    expect(max(lengths) <= case["max_new_tokens"] - 1, "step_fn is never asked beyond "
           "max_new_tokens", input=case_input(case), got=f"generated lengths passed: {lengths}")

@kata_test(level=2, category="api contract",
           description="ValueError for num_beams < 1 or max_new_tokens < 1")
def test_beam_rejects_bad_arguments(solution):
    model = TinyModel(3, 0)
    for num_beams, max_new_tokens in ((0, 2), (-1, 2), (2, 0)):
        try:
            call(solution.beam_search, model, [1], num_beams, max_new_tokens, 0, what="beam_search")
        except ValueError:
            continue
        raise PropertyFailure("invalid arguments raise ValueError",
                              input={"num_beams": num_beams, "max_new_tokens": max_new_tokens},
                              expected="ValueError", got="no exception")

# ============================================================================ level 3: speculative

@st.composite
def spec_cases(draw: Any, *, equal: bool = False) -> dict:
    """Random draft/target distributions and draft tokens drawn from the draft."""
    num_draft = draw(st.integers(1, 3))
    vocab = draw(st.integers(2, 5))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    target = (torch.randn(num_draft + 1, vocab, generator=gen, dtype=torch.float64) * 1.5).softmax(-1)
    if draw(st.booleans()):  # some zero-probability tokens in the target
        target[:, 0] = 0.0
        target = target / target.sum(-1, keepdim=True)
    draft = target[:num_draft].clone() if equal else (
        torch.randn(num_draft, vocab, generator=gen, dtype=torch.float64) * 1.5).softmax(-1)
    draft_tokens = torch.multinomial(draft, 1, generator=gen).squeeze(-1)
    return {"draft_tokens": draft_tokens, "draft_probs": draft.float(), "target_probs": target.float(),
            "seed": draw(st.integers(0, 2**16))}

def run_verify(solution: Any, case: dict, seed: int | None = None) -> list:
    args = [case["draft_tokens"].clone(), case["draft_probs"].clone(), case["target_probs"].clone()]
    gen = torch.Generator().manual_seed(case["seed"] if seed is None else seed)
    got = call(solution.speculative_verify, *args, generator=gen, what="speculative_verify")
    num_draft = case["draft_tokens"].numel()
    ok = (isinstance(got, list) and 1 <= len(got) <= num_draft + 1
          and all(isinstance(t, int) for t in got))
    expect(ok, f"speculative_verify returns a list of 1 to K + 1 = {num_draft + 1} int token ids",
           input=case, got=got)
    return got

@kata_test(level=3, category="correctness",
           description="a draft equal to the target is always accepted, plus a bonus token")
@settings(max_examples=10)
@given(case=spec_cases(equal=True))
def test_draft_equal_to_target_accepts_all_plus_bonus(solution, case):
    got = run_verify(solution, case)
    draft = case["draft_tokens"].tolist()
    expect(len(got) == len(draft) + 1 and got[:-1] == draft, "every draft token is accepted and "
           "a bonus token follows", input=case, expected=f"{draft} + [bonus]", got=got)
    expect(float(case["target_probs"][-1, got[-1]]) > 0, "the bonus token is drawn from "
           "target_probs[K]", input=case, got=got)

@kata_test(level=3, category="correctness",
           description="the accepted prefix matches the draft; a rejection is replaced from the residual")
@settings(max_examples=15)
@given(case=spec_cases())
def test_rejection_replaced_from_residual(solution, case):
    got = run_verify(solution, case)
    draft, p, q = case["draft_tokens"].tolist(), case["target_probs"], case["draft_probs"]
    accepted = got[:-1]
    expect(accepted == draft[: len(accepted)], "all emitted tokens but the last are the accepted "
           "draft prefix", input=case, expected=f"a prefix of {draft}", got=got)
    i, last = len(accepted), got[-1]
    if i < len(draft):  # the last token replaces the rejected draft token i
        expect(last != draft[i], "after an accepted draft token verification goes on (the "
               "result ends with a replacement or the bonus token)", input=case, got=got)
        residual = (p[i] - q[i]).clamp(min=0)
        expect(float(residual[last]) > 0, "the replacement is drawn from max(0, p_target - p_draft)",
               input=case, expected=f"a token with positive residual {residual.tolist()}", got=got)
        expect(float(p[i, draft[i]]) < float(q[i, draft[i]]), "a draft token with p_target >= "
               "p_draft is always accepted", input=case, got=got)
    else:
        expect(float(p[i, last]) > 0, "the bonus token is drawn from target_probs[K]",
               input=case, got=got)

@kata_test(level=3, category="edge cases",
           description="draft tokens the target gives probability 0 are always rejected")
@settings(max_examples=10)
@given(case=spec_cases(), seed=st.integers(0, 2**16))
def test_zero_target_probability_is_rejected(solution, case, seed):
    p = case["target_probs"].clone()
    first = int(case["draft_tokens"][0])
    p[0, first] = 0.0
    assume(float(p[0].sum()) > 0)
    case = {**case, "target_probs": p / p.sum(-1, keepdim=True), "seed": seed}
    got = run_verify(solution, case)
    expect(got[0] != first and len(got) == 1, "a token with p_target = 0 is rejected and replaced",
           input=case, expected=f"one token, not {first}", got=got)

@kata_test(level=3, category="api contract",
           description="speculative_verify is reproducible with a seeded generator")
@settings(max_examples=5)
@given(case=spec_cases())
def test_verify_is_reproducible_with_a_generator(solution, case):
    first, second = run_verify(solution, case), run_verify(solution, case)
    expect(first == second, "the same generator seed gives the same result", input=case,
           expected=first, got=second)

@kata_test(level=3, category="edge cases", weight=0.5,
           description="with no draft tokens (K = 0) one token is drawn from target_probs[0]")
def test_no_draft_tokens_emits_one_target_token(solution):
    case = {"draft_tokens": torch.zeros(0, dtype=torch.long), "draft_probs": torch.zeros(0, 3),
            "target_probs": torch.tensor([[0.0, 1.0, 0.0]]), "seed": 0}
    got = run_verify(solution, case)
    expect(got == [1], "the bonus token alone", input=case, expected=[1], got=got)

SPEC_CALLS = 4000
SPEC_CASES = {
    "mixed": ([[0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]],
              [[0.1, 0.2, 0.3, 0.4], [0.5, 0.3, 0.2, 0.0], [0.1, 0.6, 0.2, 0.1]], 21),
    "peaked draft": ([[0.05, 0.8, 0.1, 0.05], [0.7, 0.1, 0.1, 0.1]],
                     [[0.3, 0.3, 0.2, 0.2], [0.2, 0.2, 0.3, 0.3], [0.4, 0.1, 0.1, 0.4]], 22),
    "zero draft mass": ([[1.0, 0.0, 0.0]], [[1 / 3, 1 / 3, 1 / 3], [0.2, 0.3, 0.5]], 23),
}
_spec_runs: dict[tuple[int, str], list[list[int]]] = {}

def spec_runs(solution: Any, name: str) -> tuple[list[list[int]], dict]:
    """SPEC_CALLS verifications of drafts drawn from the draft model (cached per solution)."""
    draft, target, seed = SPEC_CASES[name]
    q, p = torch.tensor(draft), torch.tensor(target)
    inp = {"draft_probs": q, "target_probs": p, "calls": SPEC_CALLS,
           "draft tokens": f"drawn from draft_probs, generator seed {seed}"}
    key = (id(solution), name)
    if key not in _spec_runs:
        gen = torch.Generator().manual_seed(seed)
        drafts = torch.multinomial(q, SPEC_CALLS, replacement=True, generator=gen).T  # (calls, K)
        runs = call_many(solution.speculative_verify,
                         [((d.clone(), q.clone(), p.clone()), {"generator": gen}) for d in drafts],
                         what="speculative_verify")
        for got in runs:
            expect(isinstance(got, list) and 1 <= len(got) <= q.shape[0] + 1,
                   "speculative_verify returns 1 to K + 1 token ids", input=inp, got=got)
        _spec_runs[key] = runs
    return _spec_runs[key], inp

def token_counts(tokens: list[int], vocab: int) -> list[int]:
    counts = [0] * vocab
    for token in tokens:
        expect(0 <= token < vocab, "emitted ids are in [0, V)", got=token)
        counts[token] += 1
    return counts

@kata_test(level=3, category="correctness", weight=2,
           description="the first emitted token follows target_probs[0] (chi-square, 4000 calls)")
def test_first_token_follows_target_distribution(solution):
    for name in ("mixed", "peaked draft"):
        runs, inp = spec_runs(solution, name)
        counts = token_counts([r[0] for r in runs], len(SPEC_CASES[name][1][0]))
        check_frequencies(counts, SPEC_CASES[name][1][0], "the first emitted token is distributed "
                          "as target_probs[0]", input={**inp, "case": name})

@kata_test(level=3, category="correctness", weight=1.5,
           description="later tokens (and the bonus) follow their target rows (chi-square)")
def test_later_tokens_follow_target_distribution(solution):
    for name in ("mixed", "peaked draft"):
        runs, inp = spec_runs(solution, name)
        target = SPEC_CASES[name][1]
        for position in range(1, len(target)):
            tokens = [r[position] for r in runs if len(r) > position]
            expect(len(tokens) > 0, "some calls emit a token at this position",
                   input={**inp, "case": name, "position": position}, got="none")
            check_frequencies(token_counts(tokens, len(target[0])), target[position],
                              f"the token at position {position}, when emitted, is distributed "
                              f"as target_probs[{position}]",
                              input={**inp, "case": name, "position": position})

@kata_test(level=3, category="correctness", weight=1.5,
           description="the number of emitted tokens matches the acceptance rates (chi-square)")
def test_number_of_emitted_tokens_distribution(solution):
    for name in ("mixed", "peaked draft"):
        runs, inp = spec_runs(solution, name)
        draft, target, _ = SPEC_CASES[name]
        accept = [sum(min(a, b) for a, b in zip(q, p)) for q, p in zip(draft, target)]
        probs, reach = [], 1.0
        for beta in accept:  # length i + 1: i accepted, then a rejection
            probs.append(reach * (1 - beta))
            reach *= beta
        probs.append(reach)  # all accepted: K + 1 tokens
        counts = [0] * len(probs)
        for r in runs:
            counts[len(r) - 1] += 1
        check_frequencies(counts, probs, "P(emit i + 1 tokens) = (prod of acceptance rates "
                          "before i) * (1 - acceptance rate i), acceptance rate = "
                          "sum(min(p_target, p_draft))", input={**inp, "case": name,
                          "counts are of": "1, 2, ..., K + 1 emitted tokens"})

@kata_test(level=3, category="edge cases",
           description="tokens the draft never proposes are still reached through the residual")
def test_zero_draft_mass_reached_through_residual(solution):
    runs, inp = spec_runs(solution, "zero draft mass")
    counts = token_counts([r[0] for r in runs], 3)
    check_frequencies(counts, SPEC_CASES["zero draft mass"][1][0], "with a draft that always "
                      "proposes token 0, the first token is still distributed as the target",
                      input=inp)
