"""Level 2 — batch the requests: prompts of different lengths run together (padding, masks,
positions per request), and the operations dispatched per decoding step do not grow with the
number of requests or heads.

Each rule of the statement for this level maps to the test that builds the situation where
that rule decides the outcome. Operations per decoding step are measured as the difference
between a generation of 7 and one of 3 new tokens, over 4: fixed costs (padding the prompts,
building the output) cancel.
"""

from __future__ import annotations

from itertools import islice

from hypothesis import assume, given, settings

from grader.protocol import expect, kata_test
from grader.suites._measure import count_ops
from grader.suites.slow_decode.strategies import (check_tokens, clear_margin, fresh_model,
                                                  random_prompts, run_generate, shown, slow_tokens,
                                                  workloads)

RULES = {
    "prompts of different lengths give generate_slow's tokens: padding never attended to, "
    "positions count each request's own tokens": ("test_mixed_prompt_lengths_match_generate_slow",
                                                  "test_one_token_prompt_beside_long_ones"),
    "operations per decoding step do not grow with the number of requests":
        "test_ops_per_step_do_not_grow_with_requests",
    "operations per decoding step do not grow with the number of heads":
        "test_ops_per_step_do_not_grow_with_heads",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    "prompts of different lengths give generate_slow's tokens: padding never attended to,"
    " positions count each request's own tokens":
        ('ask', 'positions', 'one-token-prompt'),
    'operations per decoding step do not grow with the number of requests':
        ('ask', 'ops-count', 'loops'),
    'operations per decoding step do not grow with the number of heads':
        ('ask', 'ops-count', 'loops'),
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS: set[str] = set()

SHORT, LONG = 3, 7          # new tokens of the two generations whose difference is measured
SLACK_OPS = 2               # per step: "does not grow", with room for a stray branch


def _ops_per_step(solution, model, prompts) -> float:
    work = {"prompts": prompts}
    short = count_ops(lambda: run_generate(solution, model, work, SHORT))
    long = count_ops(lambda: run_generate(solution, model, work, LONG))
    return (long - short) / (LONG - SHORT)


@kata_test(level=2, category="correctness", weight=3,
           description="prompts of different lengths give generate_slow's tokens")
@settings(max_examples=6)
@given(work=workloads(equal_lengths=False, min_requests=2, max_requests=4))
def test_mixed_prompt_lengths_match_generate_slow(solution, work):
    assume(clear_margin(work["model_seed"], work["prompts"], work["max_new_tokens"]))
    got = run_generate(solution, fresh_model(work["model_seed"]), work)
    check_tokens(got, slow_tokens(work["model_seed"], work["prompts"], work["max_new_tokens"]),
                 "prompts of different lengths in one call: padding is never attended to and "
                 "each request's positions count its own tokens only", shown(work))


@kata_test(level=2, category="edge cases", weight=2,
           description="a one-token prompt next to 8-token ones")
def test_one_token_prompt_beside_long_ones(solution):
    seeds = list(islice((s for s in range(5, 40) if clear_margin(s, random_prompts(s, [8, 1, 8]), 6)), 2))
    for seed in seeds:
        prompts = random_prompts(seed, [8, 1, 8])
        work = {"model_seed": seed, "prompts": prompts, "max_new_tokens": 6}
        got = run_generate(solution, fresh_model(seed), work)
        check_tokens(got, slow_tokens(seed, prompts, 6),
                     "a 1-token prompt batched with 8-token ones: 7 padding slots that must "
                     "change nothing (masked keys, positions from 0)", shown(work))


@kata_test(level=2, category="efficiency", weight=2,
           description="operations per decoding step do not grow with the number of requests")
def test_ops_per_step_do_not_grow_with_requests(solution):
    model = fresh_model(7)
    one = _ops_per_step(solution, model, random_prompts(7, [5]))
    many_lengths = [5, 2, 8, 1, 6, 3, 7, 4, 5, 2, 8, 6]
    many = _ops_per_step(solution, model, random_prompts(8, many_lengths))
    expect(many <= one + SLACK_OPS,
           "the torch operations per decoding step do not grow with the number of requests: one "
           "batched step for all of them (no Python loop over requests, no .item() per request)",
           input={"model": "TinyLM(seed=7)", "requests": f"1, then {len(many_lengths)}",
                  "ops per step": f"difference of {LONG} and {SHORT} new tokens, over {LONG - SHORT}"},
           expected=f"<= {one + SLACK_OPS:.0f} per step with {len(many_lengths)} requests "
                    f"(1 request: {one:.0f})",
           got=f"{many:.0f} per step")


@kata_test(level=2, category="efficiency", weight=2,
           description="operations per decoding step do not grow with the number of heads")
def test_ops_per_step_do_not_grow_with_heads(solution):
    prompts = random_prompts(9, [4, 6])
    one = _ops_per_step(solution, fresh_model(9, num_heads=1), prompts)
    eight = _ops_per_step(solution, fresh_model(9, num_heads=8), prompts)
    expect(eight <= one + SLACK_OPS,
           "the torch operations per decoding step do not grow with the number of heads: all "
           "heads in one batched matmul (tensors (B, H, T, D)), no Python loop over heads",
           input={"model": "TinyLM(seed=9, num_heads=1), then num_heads=8 (d_model 32)",
                  "prompts": prompts},
           expected=f"<= {one + SLACK_OPS:.0f} per step with 8 heads (1 head: {one:.0f})",
           got=f"{eight:.0f} per step")
