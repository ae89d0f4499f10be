"""Level 3: speculative_verify.

Deterministic rules (a token the target gives probability 0 is rejected, one with
p_target >= p_draft is accepted, every draw comes from the caller's generator) are checked
on constructed cases that force the event on every run; the distribution of the emitted
tokens by chi-square tests on 4000 calls with fixed generator seeds.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import assume, given, settings, strategies as st

from grader.protocol import call, call_many, expect, kata_test
from grader.suites.sampling.chi_square import check_frequencies
from grader.suites.sampling.strategies import FLOAT_DTYPES, gen, run_verify, spec_cases, token_list

RULES = {
    "x_i is accepted with probability min(1, p_target / p_draft): always when p_target >= p_draft":
        "test_target_at_least_draft_is_always_accepted",
    "... never when p_target(x_i) = 0": "test_zero_target_probability_is_rejected",
    "... so the number of emitted tokens follows the acceptance rates":
        "test_number_of_emitted_tokens_distribution",
    "at the first rejection a replacement comes from normalize(max(0, p_target - p_draft)) and "
    "the result ends": ("test_rejection_replaced_from_residual", "test_zero_draft_mass_reached_through_residual"),
    "all K accepted: a bonus token from target_probs[K]": "test_draft_equal_to_target_accepts_all_plus_bonus",
    "K = 0: one token drawn from target_probs[0]": "test_no_draft_tokens_emits_one_target_token",
    "the emitted tokens follow the target model's distribution exactly":
        ("test_first_token_follows_target_distribution", "test_later_tokens_follow_target_distribution"),
    "every draw (acceptance, replacement, bonus, the K = 0 token) uses the generator given":
        ("test_every_draw_uses_the_generator", "test_verify_is_reproducible_with_a_generator"),
    "generator=None draws from torch's global generator": "test_verify_without_generator_uses_the_global_rng",
    "returns a list of 1 to K + 1 Python ints (accepted, replacement and bonus tokens alike)":
        "test_verify_returns_python_ints",
    "probabilities in any float dtype": "test_verify_accepts_every_float_dtype",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'x_i is accepted with probability min(1, p_target / p_draft): always when p_target >='
    ' p_draft':
        'acceptance',
    '... never when p_target(x_i) = 0':
        'acceptance',
    '... so the number of emitted tokens follows the acceptance rates':
        ('ask', 'acceptance'),
    'at the first rejection a replacement comes from normalize(max(0, p_target - '
    'p_draft)) and the result ends':
        ('ask', 'acceptance'),
    'all K accepted: a bonus token from target_probs[K]':
        'bonus',
    'K = 0: one token drawn from target_probs[0]':
        'no-draft',
    "the emitted tokens follow the target model's distribution exactly":
        'ask',
    'every draw (acceptance, replacement, bonus, the K = 0 token) uses the generator '
    'given':
        ('ask', 'verify-generator'),
    "generator=None draws from torch's global generator":
        ('ask', 'verify-generator'),
    'returns a list of 1 to K + 1 Python ints (accepted, replacement and bonus tokens '
    'alike)':
        ('ask', 'verify-types'),
    'probabilities in any float dtype':
        'verify-types',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# Half-precision probabilities test dtype handling, not the verification rule.
DETAILS = {
    'probabilities in any float dtype',
}

WIDE_VOCAB = 32  # a draw uniform over 31-32 tokens: two independent draws agree 1 time in 31


FORCED_SHOWN = {
    "bonus": "K = 1, V = 32: draft token 0 with draft_probs[0] = target_probs[0] = one-hot on "
             "token 0 (always accepted); target_probs[1] uniform (the bonus)",
    "replacement": "K = 1, V = 32: draft token 0, draft_probs[0] one-hot on token 0, "
                   "target_probs[0] = 0 on token 0 and uniform over tokens 1-31 (always rejected)",
    "acceptance": "K = 12, V = 2: draft tokens all 0, draft_probs rows [1, 0], target_probs rows "
                  "[.5, .5] (each accepted with probability 1/2, a rejection replaced by token 1), "
                  "then [1, 0] (bonus token 0)",
    "no draft": "K = 0, V = 32: no draft tokens, target_probs[0] uniform (one token drawn from it)",
}


def forced_cases(dtype: torch.dtype = torch.float32) -> dict[str, dict]:
    """Cases where one kind of draw alone decides the result, whatever the seed."""
    uniform = torch.full((WIDE_VOCAB,), 1.0 / WIDE_VOCAB, dtype=torch.float64)
    first = torch.zeros(WIDE_VOCAB, dtype=torch.float64)
    first[0] = 1.0
    rest = torch.cat([torch.zeros(1, dtype=torch.float64), torch.full((WIDE_VOCAB - 1,), 1.0 / (WIDE_VOCAB - 1),
                                                                      dtype=torch.float64)])
    half = torch.tensor([0.5, 0.5], dtype=torch.float64)
    cases = {
        # The draft equals the target: always accepted; the bonus is uniform over 32 tokens.
        "bonus": (torch.tensor([0]), first[None], torch.stack([first, uniform])),
        # The target gives the draft token 0: always rejected; the replacement is uniform.
        "replacement": (torch.tensor([0]), first[None], torch.stack([rest, uniform])),
        # Accepted with probability 1/2 at each of 12 positions; a rejection is replaced by
        # token 1 and the bonus is token 0: only the acceptance draws decide the result.
        "acceptance": (torch.zeros(12, dtype=torch.long), torch.tensor([[1.0, 0.0]] * 12),
                       torch.cat([half.expand(12, 2), torch.tensor([[1.0, 0.0]])])),
        # K = 0: the one token is drawn from target_probs[0], uniform over 32 tokens.
        "no draft": (torch.zeros(0, dtype=torch.long), torch.zeros(0, WIDE_VOCAB), uniform[None]),
    }
    return {name: {"draft_tokens": t, "draft_probs": q.to(dtype), "target_probs": p.to(dtype), "seed": 0}
            for name, (t, q, p) in cases.items()}


@kata_test(level=3, category="api contract",
           description="every draw (acceptance, replacement, bonus) comes from the generator given")
def test_every_draw_uses_the_generator(solution):
    what = {"bonus": "the bonus token (every draft accepted)",
            "replacement": "the replacement token (the draft token is rejected)",
            "acceptance": "the accept / reject decisions",
            "no draft": "the one token of a K = 0 call"}
    for name, case in forced_cases().items():
        for seed in range(6):
            first, second = run_verify(solution, case, seed), run_verify(solution, case, seed)
            expect(first == second, f"{what[name]} is drawn from the generator passed in: two calls "
                   "with equally seeded generators give the same tokens",
                   input={"case": FORCED_SHOWN[name], "generator seed": seed}, expected=first, got=second)


@kata_test(level=3, category="api contract",
           description="with generator=None, speculative_verify draws from torch's global generator")
def test_verify_without_generator_uses_the_global_rng(solution):
    case = forced_cases()["replacement"]
    args = [case["draft_tokens"], case["draft_probs"], case["target_probs"]]
    draws = [token_list(call(solution.speculative_verify, *[a.clone() for a in args],
                             what="speculative_verify"), 1, case) for _ in range(6)]
    expect(len({tuple(d) for d in draws}) > 1, "generator=None draws from torch's global "
           "generator, whose state moves on: six calls do not all give the same token",
           input={"case": FORCED_SHOWN["replacement"], "generator": None}, got=draws)


@kata_test(level=3, category="api contract",
           description="speculative_verify returns a list of Python ints (accepted, replacement, bonus)")
def test_verify_returns_python_ints(solution):
    # Each forced case ends its result one way: an accepted token then the bonus, a
    # replacement, accepted tokens then a replacement or the bonus, the K = 0 token.
    for name, case in forced_cases().items():
        got = call(solution.speculative_verify, case["draft_tokens"].clone(), case["draft_probs"].clone(),
                   case["target_probs"].clone(), generator=gen(1), what="speculative_verify")
        expect(isinstance(got, list) and len(got) >= 1 and all(type(t) is int for t in got),
               "the emitted tokens (accepted, replacement and bonus alike) are a list of Python "
               "ints (not tensors)", input=FORCED_SHOWN[name], expected="list[int]",
               got=f"{type(got).__name__} of {[type(t).__name__ for t in got]}"
               if isinstance(got, list) else type(got).__name__)


@kata_test(level=3, category="correctness",
           description="a draft token with p_target >= p_draft is always accepted")
def test_target_at_least_draft_is_always_accepted(solution):
    # Position 0: p_target = p_draft = .4 (ratio exactly 1); position 1: .7 >= .2;
    # position 2: p_target = 1. All three are accepted on every seed, then a bonus token.
    draft = torch.tensor([[0.4, 0.6, 0.0], [0.2, 0.3, 0.5], [0.5, 0.5, 0.0]], dtype=torch.float64)
    target = torch.tensor([[0.4, 0.1, 0.5], [0.7, 0.2, 0.1], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]],
                          dtype=torch.float64)
    for dtype in (torch.float32, torch.float64):
        case = {"draft_tokens": torch.tensor([0, 0, 1]), "draft_probs": draft.to(dtype),
                "target_probs": target.to(dtype), "seed": 0}
        for seed in range(8):
            got = run_verify(solution, case, seed)
            expect(got[:3] == [0, 0, 1], "a draft token is accepted with probability "
                   "min(1, p_target / p_draft) = 1 when p_target >= p_draft",
                   input={**case, "seed": seed}, expected="[0, 0, 1] accepted", got=got)


@kata_test(level=3, category="api contract",
           description="speculative_verify works for float32, float64, float16 and bfloat16 probabilities")
def test_verify_accepts_every_float_dtype(solution):
    # Probabilities 0 and 1 only: the result is the same for every seed and every dtype.
    one_hot = torch.eye(3)
    accept = {"draft_tokens": torch.tensor([1]), "draft_probs": one_hot[[1]],
              "target_probs": one_hot[[1, 2]], "seed": 3}
    reject = {"draft_tokens": torch.tensor([0]), "draft_probs": one_hot[[0]],
              "target_probs": one_hot[[2, 1]], "seed": 3}
    for case in (accept, reject):
        as_float32 = run_verify(solution, case)
        for dtype in FLOAT_DTYPES[1:]:
            typed = {**case, "draft_probs": case["draft_probs"].to(dtype),
                     "target_probs": case["target_probs"].to(dtype)}
            got = run_verify(solution, typed)
            expect(got == as_float32, f"with {dtype} probabilities the result is the same as "
                   "with float32 ones", input=typed, expected=f"{as_float32} (your float32 result)",
                   got=got)


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


# ============================================================================ statistics

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
        g = gen(seed)
        drafts = torch.multinomial(q, SPEC_CALLS, replacement=True, generator=g).T  # (calls, K)
        # One round trip for all the calls (the candidate may run in another process); each
        # call gets its own copies of the tensors, made where it runs.
        got = call_many(solution.speculative_verify,
                        [((d, q, p), {"generator": g}) for d in drafts.unbind(0)],
                        what="speculative_verify", clone_args=True)
        _spec_runs[key] = [token_list(run, q.shape[0], inp) for run in got]
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
