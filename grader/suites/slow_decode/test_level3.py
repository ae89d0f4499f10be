"""Level 3 — stop early and stay on the device: with eos_id each request stops right after
its EOS (included) and costs no FLOPs from the next step on; at most one device-to-host sync
per decoding step.

Each rule of the statement for this level maps to the test that builds the situation where
that rule decides the outcome. The EOS scenarios are searched deterministically (see
strategies.eos_scenario): requests finish at three or four different steps, the first at
step 0, and (in one kind) one request never finishes.
"""

from __future__ import annotations

from hypothesis import assume, given, settings, strategies as st

from grader.protocol import expect, kata_test
from grader.suites._measure import count_flops, count_syncs
from grader.suites.slow_decode.strategies import (FLOPS_BUDGET, cached_flops, check_tokens,
                                                  clear_margin, eos_scenario, eos_zero_workload, fresh_model,
                                                  run_generate, same_step_scenario, shown, slow_tokens,
                                                  workloads)

RULES = {
    "with eos_id, a request stops right after generating it; the EOS is included":
        ("test_eos_stops_each_request", "test_requests_finish_at_different_steps"),
    "several requests that generate the EOS at the same step all stop": "test_requests_finish_at_the_same_step",
    "eos_id = 0 is an EOS like any other id (not 'no eos_id')": "test_eos_id_zero_stops_too",
    "only generated tokens count: an eos_id inside a prompt stops nothing":
        "test_eos_in_prompt_stops_nothing",
    "a finished request costs no FLOPs from the next step on": "test_finished_requests_cost_no_flops",
    "when every request has finished, nothing more is computed": "test_nothing_computed_after_all_finished",
    "at most one device-to-host sync per decoding step (n + 1 for a longest output of n tokens)":
        "test_at_most_one_sync_per_decoding_step",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'with eos_id, a request stops right after generating it; the EOS is included':
        'ask',
    'several requests that generate the EOS at the same step all stop':
        ('ask', 'eos-same-step'),
    "eos_id = 0 is an EOS like any other id (not 'no eos_id')":
        'eos-zero',
    'only generated tokens count: an eos_id inside a prompt stops nothing':
        'eos-prompt',
    'a finished request costs no FLOPs from the next step on':
        ('ask', 'finished-cost'),
    'when every request has finished, nothing more is computed':
        ('ask', 'finished-cost'),
    'at most one device-to-host sync per decoding step (n + 1 for a longest output of n '
    'tokens)':
        ('ask', 'what-syncs', 'sync-count'),
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# None: eos_id = 0 and an EOS inside a prompt are edges, but core tests catch both
# (buggy_eos_zero_is_no_eos.py every seed, buggy_eos_in_prompt_counts.py under some).
DETAILS: set[str] = set()

SCENARIO_SEEDS = st.sampled_from((0, 1, 2, 3))


def _flops_check(solution, work, prop):
    model = fresh_model(work["model_seed"])   # built outside the count
    got = count_flops(lambda: run_generate(solution, model, work))
    want = slow_tokens(work["model_seed"], work["prompts"], work["max_new_tokens"], work["eos_id"])
    budget = cached_flops(work["prompts"], want)
    expect(got <= FLOPS_BUDGET * budget, prop,
           input=shown(work, finishing_steps=work["finish_steps"]),
           expected=f"<= {FLOPS_BUDGET * budget / 1e6:.2f} MFLOPs (a cached generation that drops "
                    f"finished requests: {budget / 1e6:.2f})",
           got=f"{got / 1e6:.2f} MFLOPs ({got / budget:.1f}x)")


@kata_test(level=3, category="correctness", weight=3,
           description="with eos_id, each request stops right after its EOS, which is included")
@settings(max_examples=5)
@given(work=workloads(equal_lengths=False, min_requests=2, max_new=10), pick=st.integers(0, 10**6))
def test_eos_stops_each_request(solution, work, pick):
    seed, prompts, n = work["model_seed"], work["prompts"], work["max_new_tokens"]
    assume(n > 0 and clear_margin(seed, prompts, n))
    generated = sorted({t for out in slow_tokens(seed, prompts, n) for t in out})
    work = dict(work, eos_id=generated[pick % len(generated)])
    got = run_generate(solution, fresh_model(seed), work)
    check_tokens(got, slow_tokens(seed, prompts, n, work["eos_id"]),
                 "with eos_id, a request's output ends right after its first generated EOS "
                 "(included); the others run on", shown(work))


@kata_test(level=3, category="correctness", weight=2,
           description="requests that finish at different steps (the first at once) each stop after their EOS")
@settings(max_examples=2)
@given(seed=SCENARIO_SEEDS)
def test_requests_finish_at_different_steps(solution, seed):
    work = eos_scenario(seed, runner=True)
    got = run_generate(solution, fresh_model(seed), work)
    check_tokens(got, slow_tokens(seed, work["prompts"], work["max_new_tokens"], work["eos_id"]),
                 "requests finishing at steps " + str(work["finish_steps"]) + " (one at its first "
                 "token) stop right after their EOS; the last one runs to max_new_tokens", shown(work))


@kata_test(level=3, category="correctness", weight=2,
           description="requests that generate the EOS at the same step all stop after it")
def test_requests_finish_at_the_same_step(solution):
    for seed in (0, 1):
        work = same_step_scenario(seed)
        got = run_generate(solution, fresh_model(seed), work)
        check_tokens(got, slow_tokens(seed, work["prompts"], work["max_new_tokens"], work["eos_id"]),
                     "every request that generates the EOS stops right after it, also when another "
                     "generates it at the same step (two requests finish at each of steps "
                     f"{sorted(set(work['finish_steps']))}); the runner goes on", shown(work))


@kata_test(level=3, category="edge cases", weight=1,
           description="eos_id=0 is an EOS: a request that generates token 0 stops there")
def test_eos_id_zero_stops_too(solution):
    work = eos_zero_workload()
    seed, prompts, n = work["model_seed"], work["prompts"], work["max_new_tokens"]
    got = run_generate(solution, fresh_model(seed), work)
    check_tokens(got, slow_tokens(seed, prompts, n, 0),
                 f"eos_id=0 is a token id like any other, not 'no eos_id' (test `eos_id is not None`): "
                 f"the first request generates 0 at step {work['finish_steps'][0]} and stops there, "
                 f"the second never does", shown(work))


@kata_test(level=3, category="edge cases", weight=1,
           description="an eos_id inside a prompt stops nothing")
def test_eos_in_prompt_stops_nothing(solution):
    moved = _eos_in_prompt_workload()
    want = slow_tokens(moved["model_seed"], moved["prompts"], moved["max_new_tokens"], moved["eos_id"])
    got = run_generate(solution, fresh_model(moved["model_seed"]), moved)
    check_tokens(got, want, "only generated tokens count: an eos_id in the prompt does not stop "
                            "the request", shown(moved))


def _eos_in_prompt_workload() -> dict:
    """Prompts holding eos_id (first, last but one, last) whose continuations never generate it."""
    for seed in range(40):
        scenario = eos_scenario(seed, runner=True)
        eos, n = scenario["eos_id"], scenario["max_new_tokens"]
        runner = list(scenario["prompts"][-1])
        prompts = [[eos] + runner, runner + [eos, runner[-1]], runner + [eos]]
        generated = slow_tokens(seed, prompts, n)
        if clear_margin(seed, prompts, n) and not any(eos in out for out in generated):
            return {"model_seed": seed, "prompts": prompts, "max_new_tokens": n, "eos_id": eos}
    raise AssertionError("no workload with eos_id in the prompt")  # pragma: no cover


@kata_test(level=3, category="efficiency", weight=3,
           description="a finished request costs no FLOPs from the next step on")
@settings(max_examples=2)
@given(seed=SCENARIO_SEEDS)
def test_finished_requests_cost_no_flops(solution, seed):
    work = eos_scenario(seed, runner=True)
    _flops_check(solution, work,
                 "a finished request stops costing FLOPs from the next step on: drop its row "
                 "from the batch and from the caches (at most 1.2x the FLOPs of a generation "
                 "that does)")


@kata_test(level=3, category="efficiency", weight=2,
           description="when every request has finished, nothing more is computed")
@settings(max_examples=2)
@given(seed=SCENARIO_SEEDS)
def test_nothing_computed_after_all_finished(solution, seed):
    work = eos_scenario(seed, runner=False)
    _flops_check(solution, work,
                 f"every request has finished by step {work['finish_steps'][-1]} of "
                 f"{work['max_new_tokens']}: no FLOPs after that")


@kata_test(level=3, category="efficiency", weight=3,
           description="at most one device-to-host sync per decoding step")
@settings(max_examples=2)
@given(seed=SCENARIO_SEEDS)
def test_at_most_one_sync_per_decoding_step(solution, seed):
    for runner in (True, False):
        work = eos_scenario(seed, runner=runner)
        want = slow_tokens(seed, work["prompts"], work["max_new_tokens"], work["eos_id"])
        steps = max(len(out) for out in want)
        model = fresh_model(seed)
        syncs = count_syncs(lambda: run_generate(solution, model, work))
        expect(syncs <= steps + 1,
               "at most one device-to-host sync per decoding step (item, tolist, cpu, bool/int "
               "of a tensor, nonzero, torch.where(cond), boolean-mask indexing x[mask], ...): "
               "drop finished rows with integer indexing, built from values already read",
               input=shown(work, finishing_steps=work["finish_steps"]),
               expected=f"<= {steps + 1} syncs ({steps} decoding steps, plus one)",
               got=f"{syncs} syncs")
