"""Level 2 — KV blocks and preemption by recompute (no aging, no aborts).

The targeted tests build the step in which a rule decides the outcome (several victims
for one chunk, a finishing request holding its blocks, a victim that already got its
token, a request that is itself the least urgent) and compare every Batch with the
reference; the trace tests replay random workloads on a model of the rules.
"""

from __future__ import annotations

from hypothesis import example, given, settings, strategies as st

from grader.protocol import expect, kata_test
from grader.suites.scheduler.lockstep import add_request, compare_script, run_lockstep, view
from grader.suites.scheduler.strategies import (MULTI_VICTIM_CASES, admission_scenarios, capacity,
                                                config, config_text, configs, fit, multi_victim_case,
                                                request_text, scenarios)
from grader.suites.scheduler.trace import TraceModel, drive, expect_admitted_next_step

RULES = {
    "a request holds ceil(slots / block_size) KV blocks; running requests never hold more "
    "than num_blocks": ("test_kv_blocks_within_pool", "test_blocks_are_ceil_of_slots"),
    "a chunk or a decode runs only if its new blocks are free; a first chunk is admitted only "
    "if its blocks are free": ("test_blocks_are_ceil_of_slots", "test_admission_never_skips_a_more_urgent_request"),
    "rule 3: the victim is the least urgent running request (base priority, arrival, id), "
    "whatever the order the running requests were admitted in (a request added later with an "
    "equal or earlier arrival_time is the more urgent)": "test_preemption_evicts_least_urgent",
    "rule 3: preemption repeats until the blocks fit — two or more victims for one chunk, "
    "listed in preemption order; the pool is never over-committed": "test_one_step_preempts_several_victims",
    "a request finishing in this step holds its blocks until the step is applied":
        "test_finishing_request_holds_blocks_until_applied",
    "rule 3: a victim's blocks are freed and its progress reset to zero (recompute)":
        "test_preempted_request_restarts_from_zero",
    "rule 3: a victim goes back to waiting with its original arrival time, in its urgency place "
    "there: behind more urgent waiting requests, ahead of less urgent ones":
        "test_victim_keeps_its_arrival_time",
    "rule 3: tokens a victim got this step are removed from the batch and refunded; the "
    "retried chunk is recomputed (a refund can enlarge it)":
        ("test_preempted_victim_tokens_refunded", "test_preempted_request_keeps_no_tokens"),
    "rule 3: a victim that was finishing in this step is removed from finished":
        "test_finishing_victim_leaves_finished",
    "rule 3: if the least urgent running request is the request itself, it is preempted and "
    "phase 1 moves on": "test_request_preempts_itself_when_least_urgent",
    "rule 3: victims go one at a time, least urgent first: every less urgent running request is "
    "preempted before the request preempts itself, even when they cannot free enough blocks":
        "test_request_preempts_itself_when_least_urgent",
    "rule 4: nothing is admitted in a step that preempted": "test_no_admission_in_a_step_that_preempted",
    "rule 4: admission resumes in the next step that does not preempt":
        "test_admission_resumes_after_a_preemption_step",
    "rule 4: the first waiting request whose first chunk does not fit ends admission":
        "test_admission_never_skips_a_more_urgent_request",
    "rule 5: a finished request's blocks are free again in the next step": "test_blocks_freed_on_finish",
    "liveness: once arrivals stop, every request finishes within N * W steps": "test_every_request_finishes",
    "the whole schedule is exact with a small pool": "test_batches_match_reference_with_preemption",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'a request holds ceil(slots / block_size) KV blocks; running requests never hold more'
    ' than num_blocks':
        'slots',
    'a chunk or a decode runs only if its new blocks are free; a first chunk is admitted '
    'only if its blocks are free':
        ('slots', 'admit-memory'),
    'rule 3: the victim is the least urgent running request (base priority, arrival, id),'
    ' whatever the order the running requests were admitted in (a request added later '
    'with an equal or earlier arrival_time is the more urgent)':
        'victim',
    'rule 3: preemption repeats until the blocks fit — two or more victims for one chunk,'
    ' listed in preemption order; the pool is never over-committed':
        'victim',
    'a request finishing in this step holds its blocks until the step is applied':
        'finish-blocks',
    "rule 3: a victim's blocks are freed and its progress reset to zero (recompute)":
        'recompute',
    'rule 3: a victim goes back to waiting with its original arrival time, in its urgency'
    ' place there: behind more urgent waiting requests, ahead of less urgent ones':
        'recompute',
    'rule 3: tokens a victim got this step are removed from the batch and refunded; the '
    'retried chunk is recomputed (a refund can enlarge it)':
        'refund',
    'rule 3: a victim that was finishing in this step is removed from finished':
        'refund',
    'rule 3: if the least urgent running request is the request itself, it is preempted '
    'and phase 1 moves on':
        'self-preempt',
    'rule 3: victims go one at a time, least urgent first: every less urgent running '
    'request is preempted before the request preempts itself, even when they cannot free '
    'enough blocks':
        ('victim', 'self-preempt'),
    'rule 4: nothing is admitted in a step that preempted':
        'no-admit',
    'rule 4: admission resumes in the next step that does not preempt':
        'no-admit',
    'rule 4: the first waiting request whose first chunk does not fit ends admission':
        'admit-memory',
    "rule 5: a finished request's blocks are free again in the next step":
        'finish-blocks',
    'liveness: once arrivals stop, every request finishes within N * W steps':
        'liveness',
    'the whole schedule is exact with a small pool':
        ('ask', 'slots', 'victim', 'self-preempt', 'recompute', 'refund', 'no-admit', 'admit-memory', 'finish-blocks'),
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# None: a victim that was finishing in its step is an edge, but core tests of the level
# catch it (buggy_finished_victim_stays_finished.py, every seed).
DETAILS: set[str] = set()

# Trace workloads (ids q99, q98, ... in order of arrival) that force a rule on every seed.
# q99 (priority 0) takes 2 of 3 blocks; q98 (priority 1) needs 2 and does not fit, so q97
# (priority 2, needs 1) must not be admitted ahead of it.
SKIP_BLOCKED = (config(4, 3, 3, 1), [("add", 2, 1, 0), ("add", 2, 1, 1), ("add", 1, 1, 2), ("step", 2)])
# Two equal requests on a 2-block pool: same priority and arrival, so q99 (the larger id,
# added first) is the least urgent and the victim.
LEAST_URGENT_VICTIM = (config(2, 2, 2, 1), [("add", 1, 1, 0), ("add", 1, 1, 0), ("step", 2)])
# multi_victim_case(2, 2, False, 8, 11) as a trace: two decoders preempted for one chunk.
TWO_VICTIMS = (config(8, 4, 9, 2), [("add", 2, 2, 0), ("add", 2, 9, 2), ("add", 2, 9, 3), ("step", 1),
                                    ("add", 11, 1, 1), ("step", 3)])
# q99 is admitted in step 1, q98 in step 2 with the same priority and an equal (or earlier)
# arrival_time: q98 is the more urgent, so q99, admitted first, is the victim in step 4.
TIED_VICTIM_ADMITTED_FIRST = (config(4, 2, 5, 1), [("add", 1, 4, 0, 0.0), ("step", 1),
                                                   ("add", 1, 4, 0, 0.0), ("step", 3)])
LATER_ARRIVAL_VICTIM_ADMITTED_FIRST = (config(4, 2, 5, 1), [("add", 1, 4, 0, 5.0), ("step", 1),
                                                            ("add", 1, 4, 0, 0.0), ("step", 3)])


@kata_test(level=2, category="correctness", weight=3,
           description="with a small KV pool, every Batch equals the correct schedule (preemption by recompute)")
def test_batches_match_reference_with_preemption(solution, reference):
    run_lockstep(solution, reference, level=2, max_examples=35)


# ------------------------------------------------------------------------- preemption


@kata_test(level=2, category="correctness",
           description="one chunk may need several victims (while a finishing request still holds its blocks)")
def test_one_step_preempts_several_victims(solution, reference):
    for case in MULTI_VICTIM_CASES:
        cfg, ops = multi_victim_case(*case)
        compare_script(solution, reference, cfg, ops,
                       headline="rule 3: preempt the least urgent, again and again until the blocks fit")


@kata_test(level=2, category="correctness",
           description="a request finishing in this step holds its KV blocks until the step is applied")
def test_finishing_request_holds_blocks_until_applied(solution, reference):
    headline = "a finishing request holds its blocks until its step is applied"
    # f fills the pool and finishes in step 2: w fits only from step 3.
    compare_script(solution, reference, config(4, 2, 2, 2),
                   [("add", "f", 3, 1, 0), ("add", "w", 1, 1, 1), ("drain",)], headline)
    for case in MULTI_VICTIM_CASES:
        if not case[2]:
            compare_script(solution, reference, *multi_victim_case(*case), headline=headline)


@kata_test(level=2, category="correctness",
           description="a victim that was finishing in this step is removed from decode and finished")
def test_finishing_victim_leaves_finished(solution, reference):
    for case in MULTI_VICTIM_CASES:
        if case[2] and case[0] > 1:
            compare_script(solution, reference, *multi_victim_case(*case),
                           headline="rule 3: a victim's tokens of this step leave the batch and finished")


@kata_test(level=2, category="correctness",
           description="a request that is itself the least urgent is preempted, and phase 1 moves on")
def test_request_preempts_itself_when_least_urgent(solution, reference):
    headline = "rule 3: if the least urgent is the request itself, it is preempted and phase 1 moves on"
    # Step 3: low's decode needs a block; low is the least urgent, so low goes; urgent's
    # chunk still runs.
    compare_script(solution, reference, config(6, 4, 5, 2),
                   [("add", "low", 3, 5, 3), ("step", 1), ("add", "urgent", 6, 4, 0), ("drain",)], headline)
    compare_script(solution, reference, config(2, 3, 5, 2),
                   [("add", "low", 7, 3, 3), ("step", 1), ("add", "urgent", 5, 2, 0), ("drain",)], headline)
    # Step 3: s's chunk needs more blocks than even preempting every less urgent decoder frees
    # (v; v1 after v2 was preempted for v1's decode). They still go first, one at a time, their
    # decodes refunded, and only then s itself: m alone decodes.
    headline = ("rule 3: victims go least urgent first, one at a time — every less urgent running "
                "request is preempted before the request itself, even when that cannot free enough")
    compare_script(solution, reference, config(8, 3, 14, 1),
                   [("add", "m", 1, 9, 0), ("add", "v", 1, 9, 2), ("step", 1), ("add", "s", 12, 1, 1),
                    ("drain",)], headline)
    compare_script(solution, reference, config(8, 4, 12, 1),
                   [("add", "m", 1, 9, 0), ("add", "v1", 1, 9, 2), ("add", "v2", 1, 9, 3), ("step", 1),
                    ("add", "s", 10, 1, 1), ("drain",)], headline)


@kata_test(level=2, category="correctness",
           description="a preempted request goes back to waiting with its original arrival time")
def test_victim_keeps_its_arrival_time(solution, reference):
    # a and b tie in priority and arrival; a (smaller id) is preempted by u and must still
    # be admitted before b.
    compare_script(solution, reference, config(3, 2, 4, 2),
                   [("add", "a", 3, 2, 1, 0.0), ("add", "b", 5, 2, 1, 0.0), ("step", 1),
                    ("add", "u", 6, 1, 0), ("drain",)],
                   headline="rule 3: a victim keeps its original arrival time")
    # Step 3: v (priority 2) preempts itself while w (1) and x (3) wait: w is admitted before
    # v, and v before x (a victim is queued by urgency, neither at the front nor at the back).
    compare_script(solution, reference, config(4, 2, 5, 1),
                   [("add", "a", 1, 4, 0, 0.0), ("add", "v", 1, 4, 2, 0.0), ("step", 1),
                    ("add", "w", 1, 1, 1), ("add", "x", 1, 1, 3), ("drain",)],
                   headline="rule 3: a victim waits in its urgency place (behind more urgent waiting "
                            "requests, ahead of less urgent ones)")


@kata_test(level=2, category="correctness",
           description="a victim preempted after it got tokens this step gives them back to the budget")
@settings(max_examples=10, report_multiple_bugs=False)
@given(budget=st.integers(2, 6), num_blocks=st.integers(3, 8), prompt_len=st.integers(4, 16),
       num_decoders=st.integers(1, 2), num_steps=st.integers(2, 8))
@example(budget=2, num_blocks=4, prompt_len=3, num_decoders=1, num_steps=2)
def test_preempted_victim_tokens_refunded(solution, reference, budget, num_blocks, prompt_len,
                                          num_decoders, num_steps):
    # The low-priority decoders decode first in each step; urgent's chunk then needs their
    # blocks: a victim's decode is refunded and the chunk recomputed (2 in the example).
    cfg = config(budget, 3, num_blocks, 1)
    ops = [("add", f"low{i}", *fit(cfg, 1, 8), 1) for i in range(num_decoders)] + [("step", 1)]
    ops += [("add", "urgent", *fit(cfg, prompt_len, 1), 0), ("step", num_steps)]
    compare_script(solution, reference, cfg, ops,
                   headline="rule 3: a victim's tokens are refunded and the chunk recomputed")
    for case in MULTI_VICTIM_CASES[:2]:
        compare_script(solution, reference, *multi_victim_case(*case),
                       headline="rule 3: a victim's tokens are refunded and the chunk recomputed")


@kata_test(level=2, category="correctness",
           description="admission resumes in the first step after a preemption")
def test_admission_resumes_after_a_preemption_step(solution, reference):
    headline = "rule 4: only a step that preempted skips admission"
    for case in MULTI_VICTIM_CASES[:2]:
        cfg, ops = multi_victim_case(*case)
        compare_script(solution, reference, cfg, ops + [("drain",)], headline)
    compare_script(solution, reference, config(3, 2, 4, 2),
                   [("add", "a", 3, 2, 1, 0.0), ("add", "b", 5, 2, 1, 0.0), ("step", 1),
                    ("add", "u", 6, 1, 0), ("drain",)], headline)


@kata_test(level=2, category="correctness",
           description="a request holds ceil(slots / block_size) blocks: new blocks exactly at block boundaries")
def test_blocks_are_ceil_of_slots(solution, reference):
    headline = "a request holds ceil(slots / block_size) KV blocks"
    # Both prompts fill one block of 3 exactly; the 4th slot needs a second block.
    compare_script(solution, reference, config(6, 2, 3, 3),
                   [("add", "a", 3, 3, 0), ("add", "b", 3, 3, 1), ("drain",)], headline)
    # A pool of one block: b waits until a's block is free again.
    compare_script(solution, reference, config(4, 2, 1, 4),
                   [("add", "a", 2, 2, 0), ("add", "b", 1, 1, 1), ("drain",)], headline)
    # A first chunk of 4 slots needs 2 blocks of 2, not 3 (and not 1).
    compare_script(solution, reference, config(4, 3, 3, 2),
                   [("add", "a", 1, 3, 0), ("add", "b", 4, 1, 1), ("add", "c", 2, 1, 2), ("drain",)], headline)


# ------------------------------------------------------------------------- trace properties


@kata_test(level=2, category="correctness",
           description="admission never skips a more urgent waiting request (the first misfit ends it)")
@settings(max_examples=20, report_multiple_bugs=False)
@given(scenario=st.one_of(admission_scenarios(), scenarios(2)))
@example(scenario=SKIP_BLOCKED)
def test_admission_never_skips_a_more_urgent_request(solution, scenario):
    drive(solution, scenario, "order")


@kata_test(level=2, category="correctness",
           description="blocks in use (inferred from the batches) never exceed num_blocks")
@settings(max_examples=15, report_multiple_bugs=False)
@given(scenario=scenarios(2))
@example(scenario=TWO_VICTIMS)
def test_kv_blocks_within_pool(solution, scenario):
    drive(solution, scenario, "blocks")


@kata_test(level=2, category="correctness",
           description="preemption evicts the least urgent running request first")
@settings(max_examples=15, report_multiple_bugs=False)
@given(scenario=scenarios(2))
@example(scenario=LEAST_URGENT_VICTIM)
@example(scenario=TWO_VICTIMS)
@example(scenario=TIED_VICTIM_ADMITTED_FIRST)
@example(scenario=LATER_ARRIVAL_VICTIM_ADMITTED_FIRST)
def test_preemption_evicts_least_urgent(solution, scenario):
    drive(solution, scenario, "victim")


@kata_test(level=2, category="correctness",
           description="no waiting request is admitted in a step that preempted")
@settings(max_examples=15, report_multiple_bugs=False)
@given(scenario=scenarios(2))
@example(scenario=TWO_VICTIMS)
def test_no_admission_in_a_step_that_preempted(solution, scenario):
    drive(solution, scenario, "no_admit")


@kata_test(level=2, category="correctness",
           description="a preempted request loses its progress and recomputes its prompt from zero")
@settings(max_examples=15, report_multiple_bugs=False)
@given(scenario=scenarios(2))
@example(scenario=TWO_VICTIMS)
def test_preempted_request_restarts_from_zero(solution, scenario):
    drive(solution, scenario, "restart")


@kata_test(level=2, category="correctness",
           description="a preempted request keeps none of this step's tokens (not in prefill, decode or finished)")
@settings(max_examples=10, report_multiple_bugs=False)
@given(scenario=scenarios(2))
@example(scenario=TWO_VICTIMS)
def test_preempted_request_keeps_no_tokens(solution, scenario):
    drive(solution, scenario, "victim_tokens")


@kata_test(level=2, category="correctness",
           description="once arrivals stop, every request finishes within the bound the statement gives")
@settings(max_examples=15, report_multiple_bugs=False)
@given(scenario=scenarios(2))
@example(scenario=TWO_VICTIMS)
def test_every_request_finishes(solution, scenario):
    drive(solution, scenario, "liveness")


# ------------------------------------------------------------------------- memory release


@kata_test(level=2, category="correctness",
           description="a finished request's KV blocks are free again in the next step")
@settings(max_examples=15, report_multiple_bugs=False)
@given(cfg=configs(2), requests=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 4)),
                                         min_size=1, max_size=3))
@example(cfg=config(4, 2, 2, 2), requests=[(1, 1), (3, 1)])
def test_blocks_freed_on_finish(solution, cfg, requests):
    model = TraceModel(cfg, None, calls=[config_text(cfg)])
    sched = solution.Scheduler(**cfg)
    for i, (p, m) in enumerate(requests):
        p, m = fit(cfg, p, m)
        rid = f"q{i}"
        model.calls.append(request_text(rid, p, m, 0, 0.0))
        add_request(sched, solution, (rid, p, m))
        finished = False
        for _ in range(p + m):
            model.calls.append("step()")
            if rid in view(sched.step())["finished"]:
                finished = True
                break
        expect(finished, "a request running alone finishes within prompt_len + max_new_tokens steps",
               input=model.calls, expected=f"{rid!r} finished", got="still unfinished")
        expect_admitted_next_step(sched, solution, model, f"whole{i}",
                                  "rule 5: after every request finished, all KV blocks are free again")
        for _ in range(capacity(cfg) + 1):
            if not sched.has_unfinished():
                break
            sched.step()
        model.calls.append(f"... step until whole{i} finished")
