"""Level 2: beam_search with a length penalty.

The numbered rules are the statement's (README "API", beam_search). Constructed cases use a
table model: next-token probabilities per generated prefix, so the ranking of every step can
be checked by hand; each runs with step_fn returning float64 and float32 log-probabilities.
"""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings, strategies as st

from grader.protocol import PropertyFailure, call, expect, kata_test
from grader.suites.sampling.beam_models import (
    TinyModel, all_sequences, beam_cases, case_input, make_model, reference_beam, run_beam,
    run_table_case, same_hypotheses, same_hypothesis_set, shown_hypotheses, table_case)

RULES = {
    "1. the search starts from one live beam: the prompt (which may be empty) with sum 0":
        "test_starts_from_one_live_beam",
    "step_fn gets a LongTensor (N, T): each row the prompt followed by the generated tokens":
        "test_step_fn_sees_prompt_plus_generated",
    "2. candidates are ranked by sum; ties go to the lower beam index, then the lower token id "
    "(also among many tied candidates)": "test_ties_broken_by_beam_then_token",
    "2./3. every live beam x every token is a candidate, one of probability 0 (sum -inf) too: "
    "it can become a live beam or a hypothesis (score -inf)":
        "test_zero_probability_candidates_still_count",
    "3. an EOS candidate (whatever the EOS id) is a finished hypothesis only at rank < num_beams":
        "test_eos_counts_only_below_rank_num_beams",
    "3. other candidates become the live beams, in rank order, until there are num_beams":
        ("test_beam_matches_reference", "test_one_beam_is_greedy"),
    "3. score = sum / gen_len ** length_penalty, gen_len without the prompt":
        "test_scores_recomputable_from_step_fn",
    "4. an offered hypothesis not better than the worst of a full set is dropped":
        "test_equal_score_does_not_replace_worst",
    "4. a better one replaces the worst (not the oldest, not the newest); the worst is "
    "recomputed after each replacement":
        "test_better_hypothesis_replaces_the_worst",
    "5. the search goes on while a live beam can still beat the worst finished one":
        "test_keeps_searching_while_a_live_beam_can_win",
    "5. it stops once the set is full and no live beam can (bound s / max_new_tokens ** lp "
    "when lp > 0, s / cur_len ** lp otherwise)": "test_stops_once_no_live_beam_can_win",
    "6. at the end, live beams are scored and offered by the same rule; fewer than num_beams "
    "hypotheses when fewer sequences exist": "test_beam_is_exhaustive_with_enough_beams",
    "returns at most num_beams distinct hypotheses, best first, each ending at its first EOS or "
    "at max_new_tokens": "test_hypotheses_end_with_eos_or_max_length",
    "a call does not depend on earlier calls (another step_fn, the same prompt)":
        "test_beam_search_calls_are_independent",
    "ValueError when num_beams < 1 or max_new_tokens < 1; the next call is unaffected":
        "test_beam_rejects_bad_arguments",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    '1. the search starts from one live beam: the prompt (which may be empty) with sum 0':
        'beam-start',
    'step_fn gets a LongTensor (N, T): each row the prompt followed by the generated '
    'tokens':
        ('ask', 'beam-start'),
    '2. candidates are ranked by sum; ties go to the lower beam index, then the lower '
    'token id (also among many tied candidates)':
        'ask',
    '2./3. every live beam x every token is a candidate, one of probability 0 (sum -inf) '
    'too: it can become a live beam or a hypothesis (score -inf)':
        'beam-candidates',
    '3. an EOS candidate (whatever the EOS id) is a finished hypothesis only at rank < '
    'num_beams':
        'beam-eos',
    '3. other candidates become the live beams, in rank order, until there are num_beams':
        'beam-eos',
    '3. score = sum / gen_len ** length_penalty, gen_len without the prompt':
        'beam-score',
    '4. an offered hypothesis not better than the worst of a full set is dropped':
        'beam-set',
    '4. a better one replaces the worst (not the oldest, not the newest); the worst is '
    'recomputed after each replacement':
        'beam-set',
    '5. the search goes on while a live beam can still beat the worst finished one':
        'beam-stop',
    '5. it stops once the set is full and no live beam can (bound s / max_new_tokens ** '
    'lp when lp > 0, s / cur_len ** lp otherwise)':
        'beam-stop',
    '6. at the end, live beams are scored and offered by the same rule; fewer than '
    'num_beams hypotheses when fewer sequences exist':
        ('beam-stop', 'beam-return'),
    'returns at most num_beams distinct hypotheses, best first, each ending at its first '
    'EOS or at max_new_tokens':
        ('ask', 'beam-return'),
    'a call does not depend on earlier calls (another step_fn, the same prompt)':
        'ask',
    'ValueError when num_beams < 1 or max_new_tokens < 1; the next call is unaffected':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# Candidates of probability 0 only matter when fewer than num_beams finite ones exist (the
# rulings follow Hugging Face's top-k over -inf scores); an equal score not replacing the
# worst is a tie rule (strict > in Hugging Face's BeamHypotheses.add).
DETAILS = {
    '2./3. every live beam x every token is a candidate, one of probability 0 (sum -inf) '
    'too: it can become a live beam or a hypothesis (score -inf)',
    '4. an offered hypothesis not better than the worst of a full set is dropped',
}


def relabel(table: dict, a: int, b: int) -> dict:
    """The same model with token ids a and b swapped (in prefixes and in probability rows)."""
    swap = {a: b, b: a}
    out = {}
    for prefix, row in table.items():
        row = list(row)
        row[a], row[b] = row[b], row[a]
        out[tuple(swap.get(t, t) for t in prefix)] = row
    return out


# ============================================================================ targeted


@kata_test(level=2, category="correctness",
           description="the search starts from one live beam: the prompt (empty or not)")
def test_starts_from_one_live_beam(solution):
    for prompt in ([], [3, 1]):
        case = {"vocab_size": 4, "eos_token_id": 0, "prompt": prompt, "num_beams": 3,
                "max_new_tokens": 2, "length_penalty": 1.0, "seed": 5}
        model = make_model(case)
        run_beam(solution, model, case)
        first = model.calls[0] if model.calls else None
        ok = isinstance(first, torch.Tensor) and first.dim() == 2 and first.shape[0] == 1 and (
            [int(t) for t in first[0].tolist()] == prompt)
        expect(ok, "the first call to step_fn gets one sequence: the prompt itself (one live beam "
               "with sum 0, not num_beams copies)", input=case_input(case),
               expected=f"a (1, {len(prompt)}) tensor holding {prompt}", got=first)


@kata_test(level=2, category="edge cases", weight=1.5,
           description="an EOS candidate ranked exactly num_beams is not a hypothesis; at num_beams - 1 it is")
def test_eos_counts_only_below_rank_num_beams(solution, reference):
    # Step 2 ranks [1, EOS] (.3), [2, 1] (.2), [2, EOS] (.12, rank 2), [1, 1] (.1): with two
    # beams [2, EOS] is skipped (and is not a live beam either), so [2, 1, EOS] (.08) ends up
    # second. With three beams it counts.
    table = {(): [0.05, 0.5, 0.4, 0.05], (1,): [0.6, 0.2, 0.1, 0.1], (2,): [0.3, 0.5, 0.1, 0.1],
             (2, 1): [0.4, 0.3, 0.2, 0.1], (1, 1): [0.45, 0.25, 0.2, 0.1]}
    run_table_case(solution, reference, table_case(table, num_beams=2, max_new_tokens=3),
                   "an EOS candidate at rank num_beams is skipped ([2, EOS] ranks 2 with 2 beams)")
    run_table_case(solution, reference, table_case(table, num_beams=3, max_new_tokens=3),
                   "an EOS candidate at rank num_beams - 1 becomes a hypothesis")
    # The same model with EOS = 3 (token ids 0 and 3 swapped): nothing about id 0 is special.
    run_table_case(solution, reference, table_case(relabel(table, 0, 3), eos_token_id=3,
                                                   num_beams=2, max_new_tokens=3),
                   "the EOS rules apply to eos_token_id, whatever its id (here 3)")
    # EOS at rank 0 of the first step: a one-token hypothesis, gen_len 1.
    first = {(): [0.7, 0.2, 0.05, 0.05]}
    run_table_case(solution, reference, table_case(first, num_beams=2, max_new_tokens=2,
                                                   length_penalty=1.0),
                   "an EOS ranked first at step 1 is a hypothesis of one generated token")


@kata_test(level=2, category="correctness",
           description="a better hypothesis replaces the worst of a full set")
def test_better_hypothesis_replaces_the_worst(solution, reference):
    # A (length_penalty 0): [EOS] (.3, step 1) and [2, EOS] (.1, step 2) fill the set; at the
    # end the live [1, 1] (.24) is offered: better than the worst, not than the best.
    table_a = {(): [0.3, 0.4, 0.2, 0.1], (1,): [0.1, 0.6, 0.2, 0.1], (2,): [0.5, 0.3, 0.1, 0.1]}
    run_table_case(solution, reference, table_case(table_a, num_beams=2, max_new_tokens=2),
                   "an offered hypothesis better than the worst of a full set replaces the worst "
                   "(here the newest)")
    # B (length_penalty 1): [EOS] (log .3) then [1, EOS] (log(.2) / 2) fill the set; the live
    # [1, 1] (log(.25) / 2) then replaces [EOS], the worst and the oldest.
    table_b = {(): [0.3, 0.5, 0.15, 0.05], (1,): [0.4, 0.5, 0.05, 0.05], (2,): [0.2, 0.5, 0.2, 0.1]}
    run_table_case(solution, reference, table_case(table_b, num_beams=2, max_new_tokens=2,
                                                   length_penalty=1.0),
                   "an offered hypothesis better than the worst of a full set replaces the worst "
                   "(here the oldest)")
    # C (length_penalty 1): [EOS] (log .2) and [1, EOS] (log(.16) / 2) fill the set;
    # [1, 1, EOS] (log(.384) / 3) replaces [EOS], and the worst is now [1, EOS]: [1, 1, 1, EOS]
    # (log(.1536) / 4) replaces it; the live [1, 1, 1, 1] (log(.1024) / 4) is then dropped.
    # A worst score cached as the newcomer's (or kept as the evicted one's) goes wrong here.
    table_c = {(): [0.2, 0.8], (1,): [0.2, 0.8], (1, 1): [0.6, 0.4], (1, 1, 1): [0.6, 0.4]}
    run_table_case(solution, reference, table_case(table_c, vocab_size=2, num_beams=2,
                                                   max_new_tokens=4, length_penalty=1.0),
                   "after a replacement the worst of the set is the lowest score it now holds: "
                   "two replacements in a row each evict the worst")


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
    # length_penalty -1: after step 2 the live [1, 2] (sum log .16) can still win by
    # s * cur_len = 2 log .16 > 2 log .12, the worst; by s * max_new_tokens it could not.
    table = {(): [0.3, 0.4, 0.15, 0.15], (1,): [0.3, 0.25, 0.4, 0.05], (2,): [0.1, 0.05, 0.35, 0.5]}
    run_table_case(solution, reference,
                   table_case(table, num_beams=2, max_new_tokens=3, length_penalty=-1.0),
                   "with length_penalty <= 0 a live beam's best score is s / cur_len ** "
                   "length_penalty: the search goes on while that beats the worst")


def steps_taken(model: TinyModel, prompt_len: int) -> int:
    """Search steps as the longest sequence step_fn saw: robust to one call per live beam."""
    return max((t.shape[1] for t in model.calls if isinstance(t, torch.Tensor)), default=prompt_len) - prompt_len + 1


@kata_test(level=2, category="correctness",
           description="the search stops once no live beam can beat the worst finished hypothesis")
def test_stops_once_no_live_beam_can_win(solution, reference):
    # EOS (.9) ranks first and fills the one-slot set; the live [1] (log .05) cannot beat it
    # under any length penalty: the search stops after step 1, not at max_new_tokens = 4.
    # Then a tie: EOS and token 1 both have probability .5; with length_penalty 0 the live [1]
    # can at best equal the finished [EOS], which is not beating it: stop after step 1 too.
    cases = [({(): [0.9, 0.05, 0.03, 0.02]}, 4, lp) for lp in (1.0, 0.0, -1.0)]
    cases.append(({(): [0.5, 0.5], (1,): [0.5, 0.5]}, 2, 0.0))
    for table, vocab_size, length_penalty in cases:
        case = table_case(table, vocab_size=vocab_size, num_beams=1, max_new_tokens=4,
                          length_penalty=length_penalty)
        model, ref_model = make_model(case), make_model(case)
        run_beam(solution, model, case)
        reference.beam_search(ref_model, [], 1, 4, 0, length_penalty)
        want, steps = steps_taken(ref_model, 0), steps_taken(model, 0)
        expect(steps == want, "once the set is full and no live beam can beat its worst, the "
               "search stops (step_fn is not asked for more tokens)", input=case_input(case),
               expected=f"{want} step(s)", got=f"{steps} step(s): step_fn saw generated lengths "
               f"{sorted({t.shape[1] for t in model.calls})}")


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
    # Every probability 1/20 (EOS = 19): 20 tied candidates at step 1, 40 at step 2. The
    # live beams are [0] and [1], then [0, 0] and [0, 1]; an unstable sort picks others once
    # a tie is this wide. Both hypotheses score 2 log(1/20): compared in any order.
    uniform = [1 / 20] * 20
    table = {(): uniform, **{(token,): uniform for token in range(20)}}
    case = table_case(table, vocab_size=20, eos_token_id=19, num_beams=2, max_new_tokens=2)
    for dtype in (torch.float64, torch.float32):
        got = run_beam(solution, make_model(case, dtype), case)
        expected = reference_beam(reference, case, dtype)
        expect(same_hypothesis_set(got, expected), "among many equal sums (40 candidates) the "
               "lower beam index, then the lower token id, still wins",
               input={"next-token probabilities": "1/20 for every token after every prefix",
                      "eos_token_id": 19, "prompt": [], "num_beams": 2, "max_new_tokens": 2,
                      "length_penalty": 0.0, "step_fn returns": str(dtype)},
               expected=shown_hypotheses(expected), got=shown_hypotheses(got))


@kata_test(level=2, category="edge cases",
           description="candidates of probability 0 (sum -inf) still become live beams and hypotheses")
def test_zero_probability_candidates_still_count(solution, reference):
    # Three candidates, three beams: [EOS] (.6) is a hypothesis, [1] (.4) and [2] (0, sum -inf)
    # the live beams, offered at the end: ([2], -inf) is the third hypothesis.
    run_table_case(solution, reference, table_case({(): [0.6, 0.4, 0.0]}, vocab_size=3,
                                                   num_beams=3, max_new_tokens=1, length_penalty=1.0),
                   "every live beam x every token is a candidate, one of probability 0 too: with "
                   "enough beams it becomes a live beam, then a hypothesis of score -inf")
    # [EOS] has probability 0 but rank 2 < num_beams: a hypothesis of score -inf.
    run_table_case(solution, reference, table_case({(): [0.0, 0.6, 0.4]}, vocab_size=3,
                                                   num_beams=3, max_new_tokens=1, length_penalty=1.0),
                   "an EOS candidate of probability 0 ranked below num_beams is a hypothesis "
                   "(score -inf)")


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


@kata_test(level=2, category="correctness",
           description="each call is independent: another step_fn with the same prompt gets its own answer")
def test_beam_search_calls_are_independent(solution, reference):
    # A prompt no other test uses: the first call sees it fresh. A solution that gets that
    # first call right must get the next calls (other step_fns, same prompt) right too.
    base = {"vocab_size": 4, "eos_token_id": 1, "prompt": [3, 2, 3, 1], "num_beams": 2,
            "max_new_tokens": 3, "length_penalty": 1.0}
    for i, seed in enumerate((11, 12, 13, 11)):
        case = {**base, "seed": seed}
        got = run_beam(solution, make_model(case), case)
        expected = reference_beam(reference, case)
        if i == 0 and not same_hypotheses(got, expected):
            return  # wrong on its own: other tests say why
        expect(same_hypotheses(got, expected), "a call's result depends on its own step_fn only "
               "(nothing is kept from an earlier call with the same prompt)",
               input={**case_input(case), "earlier calls": "the same prompt, other step_fns"},
               expected=shown_hypotheses(expected), got=shown_hypotheses(got))


@kata_test(level=2, category="api contract",
           description="ValueError for num_beams < 1 or max_new_tokens < 1")
def test_beam_rejects_bad_arguments(solution):
    case = {"vocab_size": 3, "eos_token_id": 0, "prompt": [1], "num_beams": 2,
            "max_new_tokens": 2, "length_penalty": 1.0, "seed": 3}
    before = run_beam(solution, make_model(case), case)
    for num_beams, max_new_tokens in ((0, 2), (-1, 2), (2, 0), (2, -3)):
        inp = {"num_beams": num_beams, "max_new_tokens": max_new_tokens}
        try:
            call(solution.beam_search, make_model(case), [1], num_beams, max_new_tokens, 0,
                 what="beam_search")
        except ValueError:
            pass
        except PropertyFailure:
            raise
        except Exception as exc:  # the wrong exception is the verdict
            raise PropertyFailure("invalid arguments raise ValueError", input=inp,
                                  expected="ValueError", got=f"{type(exc).__name__}: {exc}") from exc
        else:
            raise PropertyFailure("invalid arguments raise ValueError", input=inp,
                                  expected="ValueError", got="no exception")
        got = run_beam(solution, make_model(case), case)
        expect(same_hypotheses(got, before), "a rejected call changes nothing: the next valid "
               "call gives the same result as before it", input={**case_input(case), "after": inp},
               expected=shown_hypotheses(before), got=shown_hypotheses(got))


# ============================================================================ random


@kata_test(level=2, category="api contract",
           description="step_fn gets a LongTensor (N, T) of prompt + tokens generated so far")
@settings(max_examples=10)
@given(case=beam_cases())
def test_step_fn_sees_prompt_plus_generated(solution, case):
    fixed = {"vocab_size": 3, "eos_token_id": 2, "num_beams": 2, "max_new_tokens": 3,
             "length_penalty": 1.0, "seed": 1}
    for run_case in ({**fixed, "prompt": []}, {**fixed, "prompt": [2, 0, 1]}, case):
        model = make_model(run_case)
        run_beam(solution, model, run_case)
        prompt = run_case["prompt"]
        expect(len(model.calls) >= 1, "step_fn is called", input=case_input(run_case))
        for tokens in model.calls:
            ok = (tokens.dtype == torch.long and tokens.dim() == 2 and tokens.shape[0] >= 1
                  and tokens.shape[1] >= len(prompt)
                  and all(row[: len(prompt)] == prompt for row in tokens.tolist()))
            expect(ok, "each row passed to step_fn is the prompt followed by the generated tokens "
                   "(int64, shape (N, T), also for an empty prompt)", input=case_input(run_case), got=tokens)
        lengths = [t.shape[1] - len(prompt) for t in model.calls]
        expect(max(lengths) <= run_case["max_new_tokens"] - 1, "step_fn is never asked beyond "
               "max_new_tokens", input=case_input(run_case), got=f"generated lengths passed: {lengths}")


@kata_test(level=2, category="correctness", weight=2,
           description="beam_search agrees with the reference on small random models")
@settings(max_examples=40)
@given(case=beam_cases())
def test_beam_matches_reference(solution, reference, case):
    got = run_beam(solution, make_model(case), case)
    expected = reference_beam(reference, case)
    expect(same_hypotheses(got, expected), "the same hypotheses and scores, best first",
           input=case_input(case), expected=shown_hypotheses(expected), got=shown_hypotheses(got))


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
