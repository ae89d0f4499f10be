"""Visible examples for the `sampling` kata (`kata check` runs them on your file).

Small fixed inputs whose answers you can check by hand. The hidden suite tests much more.
"""

import math

import torch

from grader.protocol import expect, kata_test

NEG_INF = float("-inf")


def kept(out):
    return (out != NEG_INF).tolist()


@kata_test(level=1, category="correctness", description="top-p on probabilities .5/.25/.25, top_p .5 and .8")
def test_top_p_boundary_keeps_crossing_token(solution):
    logits = torch.tensor([[0.5, 0.25, 0.25]]).log()
    out = solution.top_k_top_p_filter(logits, top_p=0.5)
    expect(kept(out) == [[True, False, False]], "which tokens top_k_top_p_filter keeps (not -inf)",
           input="top_k_top_p_filter(logits=log([[0.5, 0.25, 0.25]]), top_p=0.5)",
           expected=[[True, False, False]], got=kept(out))
    out = solution.top_k_top_p_filter(logits, top_p=0.8)
    expect(kept(out) == [[True, True, True]], "which tokens top_k_top_p_filter keeps (not -inf)",
           input="top_k_top_p_filter(logits=log([[0.5, 0.25, 0.25]]), top_p=0.8)",
           expected=[[True, True, True]], got=kept(out))


@kata_test(level=1, category="correctness", description="top-k keeps ties with the k-th largest logit")
def test_top_k_keeps_ties(solution):
    logits = torch.tensor([[1.0, 2.0, 2.0, 0.0]])
    out = solution.top_k_top_p_filter(logits, top_k=1)
    expected = torch.tensor([[NEG_INF, 2.0, 2.0, NEG_INF]])
    call = "top_k_top_p_filter(logits=[[1., 2., 2., 0.]], top_k=1)"
    expect(torch.equal(out, expected), "the output of top_k_top_p_filter", input=call,
           expected=expected, got=out)
    expect(torch.equal(logits, torch.tensor([[1.0, 2.0, 2.0, 0.0]])), "logits after the call", input=call,
           expected=[[1.0, 2.0, 2.0, 0.0]], got=logits)


@kata_test(level=1, category="correctness", description="top-p is computed after top-k")
def test_top_p_after_top_k(solution):
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1]]).log()
    out = solution.top_k_top_p_filter(logits, top_k=2, top_p=0.5)
    expect(kept(out) == [[True, False, False, False]], "which tokens top_k_top_p_filter keeps (not -inf)",
           input="top_k_top_p_filter(logits=log([[0.4, 0.3, 0.2, 0.1]]), top_k=2, top_p=0.5)",
           expected=[[True, False, False, False]], got=kept(out))


@kata_test(level=1, category="correctness", description="temperature 0 is argmax (lowest id on ties)")
def test_greedy(solution):
    logits = torch.tensor([[0.0, 3.0, 3.0], [5.0, 1.0, 2.0]])
    got = solution.sample(logits, temperature=0.0)
    expect(torch.equal(got, torch.tensor([1, 0])) and got.dtype == torch.int64,
           "the tokens sample returns (int64)", input="sample(logits=[[0., 3., 3.], [5., 1., 2.]], temperature=0.0)",
           expected=torch.tensor([1, 0]), got=got)


@kata_test(level=1, category="correctness", description="sampling never picks a filtered token")
def test_sample_respects_top_k(solution):
    logits = torch.tensor([[0.0, 1.0, 5.0, 2.0]]).repeat(200, 1)
    got = solution.sample(logits, temperature=1.0, top_k=2, generator=torch.Generator().manual_seed(0))
    expect(set(got.tolist()) <= {2, 3}, "the set of tokens sample returns",
           input="sample(logits=[[0., 1., 5., 2.]] repeated in 200 rows, temperature=1.0, top_k=2, "
                 "generator=torch.Generator().manual_seed(0))", expected="ids in {2, 3}",
           got=sorted(set(got.tolist())))


def table_model(table):
    """step_fn reading next-token probabilities from a table keyed by the generated prefix."""
    def step_fn(tokens):
        return torch.tensor([table[tuple(row)] for row in tokens.tolist()], dtype=torch.float64).log()
    return step_fn


# How a table model is shown when an example fails.
TABLE_CALL = ("beam_search(step_fn=next-token probabilities by generated prefix {table}, prompt={prompt}, "
              "num_beams={num_beams}, max_new_tokens={max_new_tokens}, eos_token_id=0, "
              "length_penalty={length_penalty})")


@kata_test(level=2, category="correctness", description="one beam with length_penalty 0")
def test_one_beam_greedy(solution):
    table = {(): [0.1, 0.6, 0.3], (1,): [0.7, 0.2, 0.1]}  # EOS = 0
    got = solution.beam_search(table_model(table), [], 1, 3, 0, 0.0)
    expected = [([1, 0], math.log(0.6) + math.log(0.7))]
    ok = len(got) == 1 and got[0][0] == [1, 0] and math.isclose(got[0][1], expected[0][1], rel_tol=1e-6)
    expect(ok, "what beam_search returns", input=TABLE_CALL.format(
        table=table, prompt=[], num_beams=1, max_new_tokens=3, length_penalty=0.0), expected=expected, got=got)


@kata_test(level=2, category="correctness", description="two beams over a table model")
def test_eos_rank(solution):
    table = {(): [0.05, 0.5, 0.4, 0.05], (1,): [0.6, 0.2, 0.1, 0.1], (2,): [0.3, 0.5, 0.1, 0.1],
             (2, 1): [0.4, 0.3, 0.2, 0.1], (1, 1): [0.45, 0.25, 0.2, 0.1]}
    got = solution.beam_search(table_model(table), [], 2, 3, 0, 0.0)
    expected = [[1, 0], [2, 1, 0]]
    expect([tokens for tokens, _ in got] == expected, "the token lists beam_search returns, in order",
           input=TABLE_CALL.format(table=table, prompt=[], num_beams=2, max_new_tokens=3, length_penalty=0.0),
           expected=expected, got=got)


@kata_test(level=2, category="correctness", description="length_penalty 1.0 after a 3-token prompt")
def test_length_penalty_uses_generated_length(solution):
    def step_fn(tokens):
        return torch.tensor([[0.5, 0.5]] * tokens.shape[0], dtype=torch.float64).log()
    got = solution.beam_search(step_fn, [1, 1, 1], 1, 2, 0, 1.0)
    expect(len(got) >= 1 and got[0][0] == [0] and math.isclose(got[0][1], math.log(0.5), rel_tol=1e-6),
           "the first (tokens, score) beam_search returns",
           input="beam_search(step_fn=probabilities [0.5, 0.5] after any prefix, prompt=[1, 1, 1], "
                 "num_beams=1, max_new_tokens=2, eos_token_id=0, length_penalty=1.0)",
           expected=([0], math.log(0.5)), got=got)


@kata_test(level=3, category="correctness", description="a draft equal to the target")
def test_equal_draft_accepted(solution):
    probs = torch.tensor([[0.2, 0.8], [0.6, 0.4]])
    target = torch.tensor([[0.2, 0.8], [0.6, 0.4], [0.0, 1.0]])
    got = solution.speculative_verify(torch.tensor([1, 0]), probs, target,
                                      generator=torch.Generator().manual_seed(0))
    expect(got == [1, 0, 1], "the tokens speculative_verify returns",
           input="speculative_verify(draft_tokens=[1, 0], draft_probs=[[0.2, 0.8], [0.6, 0.4]], "
                 "target_probs=[[0.2, 0.8], [0.6, 0.4], [0.0, 1.0]], generator=torch.Generator().manual_seed(0))",
           expected=[1, 0, 1], got=got)


@kata_test(level=3, category="correctness", description="a token the target rules out is replaced")
def test_rejection_uses_residual(solution):
    draft = torch.tensor([[1.0, 0.0, 0.0]])
    target = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    got = solution.speculative_verify(torch.tensor([0]), draft, target,
                                      generator=torch.Generator().manual_seed(0))
    expect(got == [2], "the tokens speculative_verify returns",
           input="speculative_verify(draft_tokens=[0], draft_probs=[[1.0, 0.0, 0.0]], "
                 "target_probs=[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], generator=torch.Generator().manual_seed(0))",
           expected=[2], got=got)
