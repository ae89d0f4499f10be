"""Visible examples for the `slow-decode` kata: the worked example of the statement, and the
first measurement of each level. `kata check` runs them against your file; the hidden suite
checks much more."""

from __future__ import annotations

from grader.protocol import expect, kata_test
from grader.suites._measure import count_flops, count_ops, count_syncs
from slow_decode_model import TinyLM

PROMPTS = [[5, 9, 2], [7]]
# generate_slow's FLOPs on the call of test_fewer_flops_than_generate_slow, as count_flops
# counts them (counting them again at every check took a tenth of a second).
SLOW_FLOPS = 11_010_560


@kata_test(level=1, category="correctness", description="the worked example: generate_slow's tokens")
def test_worked_example_tokens(solution):
    want = [[15, 56, 15, 56, 57, 60], [11, 39, 14, 38, 62, 48]]
    got = solution.generate(TinyLM(seed=0), PROMPTS, 6)
    expect(got == want, "the tokens generate returns (those generate_slow returns)",
           input="generate(TinyLM(seed=0), prompts=[[5, 9, 2], [7]], max_new_tokens=6)", expected=want, got=got)


@kata_test(level=1, category="efficiency", description="FLOPs against generate_slow's")
def test_fewer_flops_than_generate_slow(solution):
    prompts = [[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]]
    model = TinyLM(seed=0)
    slow = SLOW_FLOPS  # count_flops(lambda: generate_slow(model, prompts, 10))
    fast = count_flops(lambda: solution.generate(model, prompts, 10))
    expect(fast * 3 <= slow, "FLOPs of generate, against a third of generate_slow's on the same call",
           input="generate(TinyLM(seed=0), prompts=[[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]], max_new_tokens=10)",
           expected=f"<= {slow / 3 / 1e6:.2f} MFLOPs", got=f"{fast / 1e6:.2f} MFLOPs")


@kata_test(level=2, category="efficiency", description="the same operations per step for 1 and 8 requests")
def test_ops_per_step_with_more_requests(solution):
    model = TinyLM(seed=0)

    def per_step(prompts):
        short = count_ops(lambda: solution.generate(model, prompts, 2))
        long = count_ops(lambda: solution.generate(model, prompts, 6))
        return (long - short) / 4

    one, eight = per_step([[5, 9, 2]]), per_step([[5, 9, 2], [7], [1, 2, 3, 4], [8, 8]] * 2)
    expect(eight <= one + 2, "torch operations per decoding step with 8 requests, against 1 request (+ 2)",
           input="generate(TinyLM(seed=0), prompts, max_new_tokens=6) minus max_new_tokens=2, over 4 steps; "
                 "prompts [[5, 9, 2]], then [[5, 9, 2], [7], [1, 2, 3, 4], [8, 8]] * 2",
           expected=f"<= {one + 2:.0f}", got=f"{eight:.0f}")


@kata_test(level=3, category="correctness", description="the worked example with eos_id=56")
def test_worked_example_eos(solution):
    want = [[15, 56], [11, 39, 14, 38, 62, 48]]
    got = solution.generate(TinyLM(seed=0), PROMPTS, 6, eos_id=56)
    call = "generate(TinyLM(seed=0), prompts=[[5, 9, 2], [7]], max_new_tokens=6, eos_id=56)"
    expect(got == want, "the tokens generate returns with eos_id=56", input=call, expected=want, got=got)
    model = TinyLM(seed=0)
    syncs = count_syncs(lambda: solution.generate(model, PROMPTS, 6, eos_id=56))
    expect(syncs <= 7, "host-device syncs during the call", input=call, expected="<= 7", got=syncs)
