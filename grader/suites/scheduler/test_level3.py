"""Level 3 — abort, aging, thread safety and the cost of a step.

Aging is checked on constructed queues where the effective priority decides who gets the
one free seat (floor of wait // aging_steps, counted from 0, never clamped), after a
preemption (the count restarts, the preemption step counts) and for running requests (base
priority). The thread test runs its producer threads in the candidate's own process
(threads.py), where their calls land inside step(); the cost test compares growth exponents
with the reference, best of several timings, and measures again before failing.
"""

from __future__ import annotations

import gc
from typing import Any

from hypothesis import example, given, settings, strategies as st

from grader.protocol import PropertyFailure, expect, kata_test, run_in_one_process
from grader.suites.scheduler.lockstep import add_all, add_request, compare_script, error_of, run_lockstep, view
from grader.suites.scheduler.strategies import config, config_text, fit, request_text, scenarios
from grader.suites.scheduler.threads import concurrent_trial, under_thread_sanitizer
from grader.suites.scheduler.trace import abort, drive, expect_admitted_next_step

RULES = {
    "abort drops a waiting or running request; it never runs again; an aborted id cannot be "
    "added again (ValueError)": ("test_abort_errors", "test_batches_match_reference_with_aborts_and_aging"),
    "abort frees the KV blocks of a running request (the next step can use them)":
        ("test_blocks_freed_on_abort", "test_failed_abort_leaves_no_trace"),
    "KeyError: abort of an unknown, finished or already aborted id":
        ("test_abort_errors", "test_abort_only_live_requests"),
    "a failed abort changes nothing: the unknown id may still be added, the next steps are unchanged":
        "test_failed_abort_leaves_no_trace",
    "aging: a waiting request's effective priority is priority - wait // aging_steps (floor, "
    "not clamped at 0), wait counted from 0 when it was added":
        "test_aging_lifts_effective_priority",
    "aging: a preempted request's wait count restarts at 0 and the step it was preempted in counts":
        "test_aging_restarts_after_preemption",
    "aging: a running request uses its base priority (decode order, choice of victim)":
        "test_running_request_uses_base_priority",
    "liveness with aging: a request below a stream of urgent arrivals finishes within "
    "4 * (gap + 1) * aging_steps + 8 steps": "test_aging_prevents_starvation",
    "threads: add_request and abort from other threads while step() runs lose, duplicate or "
    "half-apply nothing": "test_concurrent_add_and_abort",
    "step() costs O(n log n) in queued requests": "test_step_cost_grows_at_most_n_log_n",
    "the whole schedule is exact with aborts and aging": "test_batches_match_reference_with_aborts_and_aging",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'abort drops a waiting or running request; it never runs again; an aborted id cannot '
    'be added again (ValueError)':
        ('ask', 'abort-id'),
    'abort frees the KV blocks of a running request (the next step can use them)':
        'ask',
    'KeyError: abort of an unknown, finished or already aborted id':
        'ask',
    'a failed abort changes nothing: the unknown id may still be added, the next steps '
    'are unchanged':
        'abort-fail',
    "aging: a waiting request's effective priority is priority - wait // aging_steps "
    '(floor, not clamped at 0), wait counted from 0 when it was added':
        'aging',
    "aging: a preempted request's wait count restarts at 0 and the step it was preempted "
    'in counts':
        'aging-preempt',
    'aging: a running request uses its base priority (decode order, choice of victim)':
        'aging-running',
    'liveness with aging: a request below a stream of urgent arrivals finishes within 4 *'
    ' (gap + 1) * aging_steps + 8 steps':
        'starvation',
    'threads: add_request and abort from other threads while step() runs lose, duplicate '
    'or half-apply nothing':
        ('ask', 'threads'),
    'step() costs O(n log n) in queued requests':
        'step-cost',
    'the whole schedule is exact with aborts and aging':
        ('ask', 'abort-id', 'aging', 'aging-running'),
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# None: a preempted request's wait count is an edge (rulings.md), but the exact schedule
# (core) catches it under some seeds (buggy_aging_never_resets.py); a failed abort's test
# also decides 'abort frees the KV blocks', a core rule.
DETAILS: set[str] = set()


@kata_test(level=3, category="correctness", weight=3,
           description="with aborts and aging, every Batch equals the correct schedule")
def test_batches_match_reference_with_aborts_and_aging(solution, reference):
    run_lockstep(solution, reference, level=3, max_examples=30)


# ------------------------------------------------------------------------- abort


@kata_test(level=3, category="correctness",
           description="abort() raises KeyError exactly for ids that are not waiting or running")
@settings(max_examples=15, report_multiple_bugs=False)
@given(scenario=scenarios(3))
@example(scenario=(config(4, 2, 8, 2), [("add", 1, 1, 0), ("add", 2, 1, 1), ("step", 1), ("abort", 1),
                                        ("step", 3), ("abort", 0), ("abort", 1)]))
def test_abort_only_live_requests(solution, scenario):
    drive(solution, scenario, "abort")


@kata_test(level=3, category="correctness",
           description="abort() frees the request's KV blocks")
@settings(max_examples=15, report_multiple_bugs=False)
@given(scenario=scenarios(3))
@example(scenario=(config(4, 2, 3, 2), [("add", 3, 1, 0), ("add", 1, 1, 1), ("step", 1)]))
def test_blocks_freed_on_abort(solution, scenario):
    sched, model = drive(solution, scenario, None, drain=False)
    for r in model.live("waiting") + model.live("running"):
        abort(sched, model, r.rid)
    expect(not sched.has_unfinished(), "after aborting every live request, nothing is unfinished",
           input=model.calls, expected=False, got=True)
    expect_admitted_next_step(sched, solution, model, "whole",
                              "after aborting every request, all KV blocks are free again")


@kata_test(level=3, category="api contract",
           description="a failed abort leaves no trace, a successful one frees the blocks (next add and steps compared)")
def test_failed_abort_leaves_no_trace(solution, reference):
    compare_script(solution, reference, config(4, 2, 3, 2), [
        ("abort_rejected", "ghost"), ("add", "ghost", 2, 1, 1), ("step", 1), ("abort", "ghost"),
        ("abort_rejected", "ghost"), ("add_rejected", "ghost", 1, 1, 0), ("add", "whole", 5, 1, 0),
        ("step", 1), ("abort", "whole"), ("add", "w2", 1, 1, 0), ("drain",), ("abort_rejected", "w2"),
        ("add_rejected", "w2", 1, 1, 0), ("add", "w3", 5, 1, 0), ("step", 2)],
        headline="abort: KeyError changes nothing; a successful abort frees the request's blocks")


@kata_test(level=3, category="api contract",
           description="abort(): KeyError for unknown, finished or aborted ids; an aborted id cannot be added again")
def test_abort_errors(solution):
    R = solution.Request
    sched = solution.Scheduler(4, 2, 8, 2)
    calls = ["Scheduler(4, 2, 8, 2)"]

    def raises(fn, exc: type, what: str) -> bool:
        return error_of(fn, exc, what, calls) is not None

    expect(raises(lambda: sched.abort("nope"), KeyError, "abort"), "abort of an unknown id raises KeyError",
           input=calls + ["abort('nope')"], expected="KeyError", got="no error")
    sched.add_request(R("a", 2, 1))
    sched.add_request(R("b", 2, 1))
    calls += ["add_request(Request('a', 2, 1))", "add_request(Request('b', 2, 1))", "step()"]
    sched.step()
    sched.abort("b")
    calls.append("abort('b')")
    expect(raises(lambda: sched.abort("b"), KeyError, "abort"), "a second abort of the same id raises KeyError",
           input=calls + ["abort('b')"], expected="KeyError", got="no error")
    expect(raises(lambda: sched.add_request(R("b", 1, 1)), ValueError, "add_request"),
           "an aborted id cannot be added again (ValueError)", input=calls + ["add_request(Request('b', 1, 1))"],
           expected="ValueError", got="accepted")
    batch = view(sched.step())
    calls.append("step()")
    expect("b" not in batch["decode"] and "b" not in batch["prefill"],
           "an aborted request never runs again", input=calls, expected="no 'b'", got=batch)
    for _ in range(5):
        if not sched.has_unfinished():
            break
        sched.step()
    expect(raises(lambda: sched.abort("a"), KeyError, "abort"), "abort of a finished id raises KeyError",
           input=calls + ["... 'a' finished", "abort('a')"], expected="KeyError", got="no error")


# ------------------------------------------------------------------------- aging


def _aging_ladder(aging_steps: int, gap: int, late: bool) -> tuple[dict, list[tuple]]:
    """One seat; `low` (priority gap) waits while a priority-0 request arrives every step.
    With `late`, low's arrival_time is the largest and the newcomers' the smallest: only
    an effective priority below 0 puts low first."""
    ops: list[tuple] = [("add", "low", 1, 1, gap, 5.0 if late else 0.0)]
    for i in range(8):
        ops += [("add", f"n{i}", 1, 1, 0, 0.5 * i if late else float(i + 1)), ("step", 1)]
    return config(2, 1, aging=aging_steps), ops + [("drain",)]


@kata_test(level=3, category="correctness",
           description="aging: effective priority = priority - wait // aging_steps (from 0, floor, below 0 too)")
@settings(max_examples=6, report_multiple_bugs=False)
@given(aging_steps=st.integers(1, 3), gap=st.integers(0, 3), late=st.booleans())
@example(aging_steps=1, gap=0, late=True)
@example(aging_steps=2, gap=3, late=False)
def test_aging_lifts_effective_priority(solution, reference, aging_steps, gap, late):
    compare_script(solution, reference, *_aging_ladder(aging_steps, gap, late),
                   headline="aging: effective priority = priority - wait // aging_steps")


@kata_test(level=3, category="correctness",
           description="aging: a preempted request's wait count restarts at 0 (the step it was preempted in counts)")
@settings(max_examples=15, report_multiple_bugs=False)
@given(budget=st.integers(2, 4), num_blocks=st.integers(3, 6), aging_steps=st.integers(1, 2),
       requests=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(0, 2)),
                         min_size=3, max_size=4))
def test_aging_restarts_after_preemption(solution, reference, budget, num_blocks, aging_steps,
                                         requests):
    headline = "aging: the wait count restarts at 0 on preemption, and the preemption step counts"
    # a is preempted in step 3 (and 5), then competes with c by effective priority.
    compare_script(solution, reference, config(3, 2, 8, 1, aging=1),
                   [("add", "a", 6, 2, 1), ("add", "b", 3, 4, 0), ("step", 1), ("add", "c", 1, 4, 2),
                    ("drain",)], headline)
    compare_script(solution, reference, config(4, 2, 4, 2, aging=2),
                   [("add", "a", 6, 2, 2), ("step", 1), ("add", "b", 1, 4, 0), ("add", "c", 2, 4, 0),
                    ("drain",)], headline)
    cfg = config(budget, 2, num_blocks, 1, aging=aging_steps)
    ops = [("add", f"q{i}", *fit(cfg, p, m), prio) for i, (p, m, prio) in enumerate(requests)]
    compare_script(solution, reference, cfg, ops + [("step", 10)], headline)


@kata_test(level=3, category="correctness",
           description="aging: a request admitted thanks to aging runs (decodes, is preempted) at its base priority")
def test_running_request_uses_base_priority(solution, reference):
    # l (priority 2) ages to -2 while a and m run; once admitted it decodes after m (priority 1).
    compare_script(solution, reference, config(4, 2, aging=1),
                   [("add", "a", 1, 3, 0, 0.0), ("add", "m", 1, 8, 1, 0.0), ("add", "l", 1, 4, 2, 0.0),
                    ("drain",)], headline="aging: a running request uses its base priority")


@kata_test(level=3, category="correctness",
           description="with aging, a low-priority request is not starved by a stream of urgent arrivals")
@settings(max_examples=8, report_multiple_bugs=False)
@given(gap=st.integers(1, 4), aging_steps=st.integers(1, 3))
def test_aging_prevents_starvation(solution, gap, aging_steps):
    cfg = {"max_num_batched_tokens": 4, "max_num_seqs": 1, "num_blocks": 64,
           "block_size": 4, "aging_steps": aging_steps}
    sched = solution.Scheduler(**cfg)
    calls = [config_text(cfg), request_text("low", 1, 1, gap, 0.0)]
    add_request(sched, solution, ("low", 1, 1, gap, 0.0))
    bound = 4 * (gap + 1) * aging_steps + 8
    for n in range(bound):
        add_request(sched, solution, (f"u{n}", 1, 1, 0, float(n)))
        if "low" in view(sched.step())["finished"]:
            return
    calls.append("then each step: add_request(Request('u<n>', 1, 1, priority=0, arrival_time=n)); step()")
    raise PropertyFailure("aging lifts a waiting request's effective priority until it runs",
                          input=calls, expected=f"'low' finished within {bound} steps",
                          got="'low' still unfinished")


# ------------------------------------------------------------------------- concurrency

_NUM_PRODUCERS, _NUM_ADDS, _ABORT_EVERY = 6, 40, 5
_TRIAL_CONFIGS = (config(8, 3, 16, 2, aging=2), config(5, 2, 12, 3, aging=None))
# Under ThreadSanitizer, crowded trials as well: a backlog of never-ending requests makes each
# step() long, and the producers abort every second add. A race is reported only when two
# calls overlap inside the scheduler; in the plain trials an abort's unlocked body rarely
# overlaps another call (measured on one core: a temporary lock_guard in abort() went
# unreported in 21 of 200 trials with aborts alone, 13 of 200 with the backlog alone, 0 of
# 200 with both; with a busy process on that core too, 9 of 100).
_CROWDED_BACKLOG, _CROWDED_ABORT_EVERY, _CROWDED_TRIALS = 2000, 2, 6
_CROWDED_CONFIGS = (config(8192, 8192, 10**6, 16, aging=2), config(8192, 8192, 10**6, 16, aging=None))


def _concurrent_trial(solution: Any, trial: int, crowded: bool = False) -> None:
    configs, abort_every, backlog = ((_CROWDED_CONFIGS, _CROWDED_ABORT_EVERY, _CROWDED_BACKLOG) if crowded
                                     else (_TRIAL_CONFIGS, _ABORT_EVERY, 0))
    cfg = configs[trial % len(configs)]
    where = (f"trial {trial}: {config_text(cfg)}; "
             + (f"{backlog} requests that never finish added first (b0, b1, ...); " if backlog else "")
             + f"{_NUM_PRODUCERS} threads each add {_NUM_ADDS} requests and abort one of theirs "
             f"every {abort_every}, while the main thread calls step() until they are done"
             + (", aborts the backlog," if backlog else "") + " and nothing is unfinished")
    got = run_in_one_process(concurrent_trial, solution, cfg, _NUM_PRODUCERS, _NUM_ADDS, abort_every, backlog)
    for side, error in got["errors"]:
        if error.startswith("NotImplementedError"):
            raise PropertyFailure(f"{side} is not implemented yet (NotImplementedError)", input=where)
        raise PropertyFailure(f"{side} raised while other threads called the scheduler: {error}",
                              input=where)
    counts = {rid: 0 for rid in got["added"]}
    for rid in got["finished"] + got["aborted"]:
        counts[rid] = counts.get(rid, 0) + 1
    wrong = {rid: c for rid, c in counts.items() if c != 1}
    expect(not wrong, "every added request is finished or aborted exactly once (nothing lost or duplicated)",
           input=where, expected="each id counted once",
           got=f"{len(wrong)} ids counted wrong, e.g. " + str(dict(list(wrong.items())[:5])),
           note="count = times in Batch.finished + successful abort() calls; the threads run in "
                "your code's own process, switching every 10 µs")


@kata_test(level=3, category="correctness",
           description="add_request/abort from 6 threads while step() runs: each request finishes or is aborted exactly once")
def test_concurrent_add_and_abort(solution):
    for trial in range(2):
        _concurrent_trial(solution, trial)
    if run_in_one_process(under_thread_sanitizer, solution):
        for trial in range(_CROWDED_TRIALS):
            _concurrent_trial(solution, trial, crowded=True)


# ------------------------------------------------------------------------- efficiency

_SIZES = [50, 100, 200, 400]


def _queued_scheduler(mod: Any, num_waiting: int) -> Any:
    """One long decode holds the only seat; `num_waiting` requests are queued behind it."""
    sched = mod.Scheduler(max_num_batched_tokens=8, max_num_seqs=1, num_blocks=10**6,
                          block_size=16, aging_steps=4)
    add_all(sched, mod, [("long", 1, 10**6, 0, 0.0)])
    sched.step()
    add_all(sched, mod, [(f"w{i}", 1 + i % 7, 1, 1 + i % 5, float(i % 11)) for i in range(num_waiting)])
    return sched


def _relative_growth(solution: Any, reference: Any) -> float:
    """Slope of log(your step time / the reference's) against log(n): about 0 for the same
    complexity, about 1 for quadratic against n log n. Each time is the fastest of many
    single step() calls, taken in turns for the two: a call the machine's load interrupts
    only ever lasts longer, so the minimum is what the step costs. Collections are off while
    timing (a full collection costs the heap, not the step)."""
    from grader.suites._measure import best_time_s, exec_time_s, growth_exponent

    def time_ratio(steps: tuple[Any, Any]) -> float:
        best = [float("inf"), float("inf")]
        for _ in range(2):
            for i, step in enumerate(steps):
                once = exec_time_s(step)
                # min_time_s=1e-9: every sample is one call; a slow step needs few samples.
                best[i] = min(best[i], once, best_time_s(step, repeats=1 if once > 0.02 else 15,
                                                         min_time_s=1e-9))
            if best[1] > 0.02:
                break
        return best[1] / best[0]

    gc.collect()
    gc.disable()
    try:
        return growth_exponent(lambda n: (_queued_scheduler(reference, n).step,
                                          _queued_scheduler(solution, n).step), _SIZES, timer=time_ratio)
    finally:
        gc.enable()


@kata_test(level=3, category="efficiency",
           description="step() cost grows no faster than n log n in the number of queued requests")
def test_step_cost_grows_at_most_n_log_n(solution, reference):
    measured = [_relative_growth(solution, reference)]
    if 0.5 < measured[0] <= 1.0:  # borderline: measured again before failing
        measured.append(_relative_growth(solution, reference))
    if min(measured) <= 0.5:
        return
    raise PropertyFailure("step() time grows like n log n (or slower) in queued requests",
                          input=f"n waiting requests behind one running decode, n in {_SIZES}",
                          expected="time growing like the reference's: relative growth <= 0.5",
                          got="relative growth " + " and ".join(f"{g:.2f}" for g in measured),
                          note="relative growth = slope of log(your time / reference time) against "
                               "log(n); about 1 means quadratic work per step, e.g. a scan of the "
                               "queue per queued request")
