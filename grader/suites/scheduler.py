"""Hidden suite for the `scheduler` kata.

Three kinds of tests:

* lockstep: a hypothesis state machine adds requests (bursts, long prompts, mixed
  priorities, duplicates, aborts) and steps the solution and the reference together; the
  first step whose Batch differs fails, naming the step, the field and the request, with
  the calls that led there;
* trace properties that need no reference: the solution alone is driven through a
  generated scenario and its Batches are replayed on a plain-Python model of the rules
  (budget, seats, KV blocks inferred from the trace, preemption order, admission order,
  progress accounting, liveness);
* contract, concurrency and efficiency checks.
"""

from __future__ import annotations

import gc
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule, run_state_machine_as_test)

from grader.protocol import PropertyFailure, expect, kata_test

# ----------------------------------------------------------------------------- configs

_BIG_POOL = 10_000  # level 1: memory never binding


@st.composite
def configs(draw: Any, level: int) -> dict:
    cfg = {"max_num_batched_tokens": draw(st.integers(1, 8)),
           "max_num_seqs": draw(st.integers(1, 4)),
           "num_blocks": _BIG_POOL, "block_size": draw(st.integers(1, 4)),
           "aging_steps": None}
    if level >= 2:  # a pool of a few blocks: preemption and misfits are common
        cfg["num_blocks"] = draw(st.integers(2, 6))
        cfg["block_size"] = draw(st.integers(1, 3))
    if level >= 3:
        cfg["aging_steps"] = draw(st.sampled_from([None, 1, 2, 3]))
    return cfg


def _capacity(cfg: dict) -> int:
    return cfg["num_blocks"] * cfg["block_size"]


def _fit(cfg: dict, prompt_len: int, max_new_tokens: int) -> tuple[int, int]:
    """Shrink a drawn request so that it fits the pool (always >= 1 and 1)."""
    cap = min(_capacity(cfg), 10**6)
    prompt_len = max(1, min(prompt_len, cap - 1))
    return prompt_len, max(1, min(max_new_tokens, cap - prompt_len))


def _config_text(cfg: dict) -> str:
    return "Scheduler(" + ", ".join(f"{k}={v}" for k, v in cfg.items()) + ")"


def _request_text(rid: str, p: int, m: int, prio: int, t: float) -> str:
    return f"add_request(Request({rid!r}, prompt_len={p}, max_new_tokens={m}, priority={prio}, arrival_time={t:g}))"


def _view(batch: Any) -> dict:
    """A Batch as plain data; fails readably when a field is missing or mistyped."""
    try:
        view = {"prefill": dict(batch.prefill), "decode": list(batch.decode),
                "preempted": list(batch.preempted), "finished": list(batch.finished)}
    except (AttributeError, TypeError, ValueError) as exc:
        raise PropertyFailure("step() returns a Batch with prefill (dict), decode, preempted "
                              "and finished (lists)", got=repr(batch), note=str(exc)) from exc
    return view


# ----------------------------------------------------------------------------- lockstep


def _first_difference(expected: dict, got: dict) -> str:
    for name in ("preempted", "decode", "prefill", "finished"):
        want, have = expected[name], got[name]
        if want == have:
            continue
        if name == "prefill":
            for rid in sorted(set(want) | set(have)):
                if want.get(rid) != have.get(rid):
                    return (f"prefill of request {rid!r}: expected "
                            f"{want.get(rid, 'none')}, got {have.get(rid, 'none')}")
        missing = [r for r in want if r not in have]
        extra = [r for r in have if r not in want]
        if missing:
            return f"{name}: request {missing[0]!r} is missing"
        if extra:
            return f"{name}: request {extra[0]!r} should not be there"
        return f"{name}: wrong order (expected {want}, got {have})"
    return "same"


def _lockstep_add(machine: Any, solution: Any, reference: Any, rid: str, p: int, m: int,
                  prio: int) -> None:
    """add_request on both; they must accept or reject (ValueError) alike."""
    p, m = _fit(machine.cfg, p, m)
    t = float(machine.num_steps)
    machine.calls.append(_request_text(rid, p, m, prio, t))
    errors = []
    for sched, mod in ((machine.ref, reference), (machine.sol, solution)):
        try:
            sched.add_request(mod.Request(rid, p, m, prio, t))
            errors.append(None)
        except ValueError:
            errors.append("ValueError")
    expect(errors[0] == errors[1], "add_request raises ValueError exactly for a reused id",
           input=machine.calls, expected=errors[0] or "accepted", got=errors[1] or "accepted")
    machine.ids.append(rid)


def _lockstep_abort(machine: Any, rid: str) -> None:
    """abort on both; they must raise KeyError alike."""
    machine.calls.append(f"abort({rid!r})")
    errors = []
    for sched in (machine.ref, machine.sol):
        try:
            sched.abort(rid)
            errors.append(None)
        except KeyError:
            errors.append("KeyError")
    expect(errors[0] == errors[1],
           "abort() raises KeyError exactly for ids that are not waiting or running",
           input=machine.calls, expected=errors[0] or "aborted", got=errors[1] or "aborted")


def _lockstep_step(machine: Any) -> None:
    """step() on both; the first differing Batch fails, naming the step and the request."""
    machine.num_steps += 1
    want = _view(machine.ref.step())
    got = _view(machine.sol.step())
    machine.calls.append(f"step() #{machine.num_steps}")
    if want != got:
        raise PropertyFailure(
            f"step {machine.num_steps} is the first whose Batch differs from the correct "
            f"schedule: {_first_difference(want, got)}",
            input=machine.calls, expected=want, got=got)


def _run_lockstep(solution: Any, reference: Any, level: int, max_examples: int) -> None:
    class Lockstep(RuleBasedStateMachine):
        """Drive the solution and the reference together and compare every Batch."""

        @initialize(cfg=configs(level))
        def setup(self, cfg: dict) -> None:
            self.cfg = cfg
            self.ref = reference.Scheduler(**cfg)
            self.sol = solution.Scheduler(**cfg)
            self.calls = [_config_text(cfg)]
            self.num_steps = 0
            self.ids: list[str] = []

        def _add(self, num: int, p: int, m: int, prio: int) -> None:
            _lockstep_add(self, solution, reference, f"q{num}", p, m, prio)

        @rule(num=st.integers(0, 20), p=st.integers(1, 6), m=st.integers(1, 4),
              prio=st.integers(0, 3))
        def add(self, num: int, p: int, m: int, prio: int) -> None:
            self._add(num, p, m, prio)

        @rule(num=st.integers(0, 20), p=st.integers(8, 24), m=st.integers(1, 3),
              prio=st.integers(0, 3))
        def add_long_prompt(self, num: int, p: int, m: int, prio: int) -> None:
            self._add(num, p, m, prio)

        @rule(nums=st.lists(st.integers(0, 20), min_size=2, max_size=4),
              p=st.integers(1, 6), m=st.integers(1, 4), prios=st.lists(st.integers(0, 3), min_size=4, max_size=4))
        def burst(self, nums: list[int], p: int, m: int, prios: list[int]) -> None:
            for i, num in enumerate(nums):
                self._add(num, p + i, m, prios[i])

        @rule(repeat=st.integers(1, 3))
        def step(self, repeat: int) -> None:
            for _ in range(repeat):
                self._step()

        if level >= 3:
            @precondition(lambda self: bool(self.ids))
            @rule(pick=st.integers(0, 30))
            def abort(self, pick: int) -> None:
                _lockstep_abort(self, self.ids[pick % len(self.ids)])

        def _step(self) -> None:
            _lockstep_step(self)

        @invariant()
        def same_unfinished(self) -> None:
            """has_unfinished() agrees with the reference between calls."""
            if not hasattr(self, "ref"):
                return
            want, got = self.ref.has_unfinished(), self.sol.has_unfinished()
            expect(want == got, "has_unfinished() is True exactly while requests wait or run",
                   input=self.calls, expected=want, got=got)

        @rule()
        def drain(self) -> None:
            """Step until the reference has nothing left (arrivals stop for a while)."""
            for _ in range(40):
                if not self.ref.has_unfinished():
                    break
                self._step()

    run_state_machine_as_test(
        Lockstep, settings=settings(max_examples=max_examples, stateful_step_count=12,
                                  report_multiple_bugs=False))


@kata_test(level=1, category="correctness", weight=3,
           description="every step's Batch equals the correct schedule (priorities, budget, chunks, decodes first)")
def test_batches_match_reference(solution, reference):
    _run_lockstep(solution, reference, level=1, max_examples=30)


@kata_test(level=2, category="correctness", weight=3,
           description="with a small KV pool, every Batch equals the correct schedule (preemption by recompute)")
def test_batches_match_reference_with_preemption(solution, reference):
    _run_lockstep(solution, reference, level=2, max_examples=50)


@kata_test(level=3, category="correctness", weight=3,
           description="with aborts and aging, every Batch equals the correct schedule")
def test_batches_match_reference_with_aborts_and_aging(solution, reference):
    _run_lockstep(solution, reference, level=3, max_examples=40)


def compare_script(solution: Any, reference: Any, cfg: dict, ops: list[tuple]) -> None:
    """Run a fixed list of calls on both; fail at the first Batch that differs."""
    ref, sol = reference.Scheduler(**cfg), solution.Scheduler(**cfg)
    calls = [_config_text(cfg)]
    num_steps = 0
    for op in ops:
        if op[0] == "add":
            rid, p, m, prio = op[1:]
            p, m = _fit(cfg, p, m)
            calls.append(_request_text(rid, p, m, prio, float(num_steps)))
            ref.add_request(reference.Request(rid, p, m, prio, float(num_steps)))
            sol.add_request(solution.Request(rid, p, m, prio, float(num_steps)))
            continue
        for _ in range(op[1]):
            num_steps += 1
            calls.append(f"step() #{num_steps}")
            want, got = _view(ref.step()), _view(sol.step())
            if want != got:
                raise PropertyFailure(
                    f"step {num_steps} is the first whose Batch differs from the correct "
                    f"schedule: {_first_difference(want, got)}",
                    input=calls, expected=want, got=got)


@kata_test(level=2, category="correctness",
           description="a victim preempted after it got tokens this step gives them back to the budget")
@settings(max_examples=30, report_multiple_bugs=False)
@given(budget=st.integers(2, 6), num_blocks=st.integers(3, 8), prompt_len=st.integers(4, 16),
       num_decoders=st.integers(1, 2), num_steps=st.integers(2, 8))
def test_preempted_victim_tokens_refunded(solution, reference, budget, num_blocks, prompt_len,
                                          num_decoders, num_steps):
    cfg = {"max_num_batched_tokens": budget, "max_num_seqs": 3, "num_blocks": num_blocks,
           "block_size": 1, "aging_steps": None}
    ops = [("add", f"low{i}", 1, 8, 1) for i in range(num_decoders)] + [("step", 1)]
    ops += [("add", "urgent", prompt_len, 1, 0), ("step", num_steps)]
    compare_script(solution, reference, cfg, ops)


# ----------------------------------------------------------------------------- trace model


@st.composite
def scenarios(draw: Any, level: int) -> tuple[dict, list[tuple]]:
    """A config and a list of calls: ("add", prompt_len, max_new_tokens, priority),
    ("step", repeat) and, from level 3, ("abort", pick)."""
    cfg = draw(configs(level))
    add = st.tuples(st.just("add"), st.integers(1, 6), st.integers(1, 4), st.integers(0, 3))
    ops = [add, add, st.tuples(st.just("add"), st.integers(8, 24), st.integers(1, 3), st.integers(0, 3)),
           st.tuples(st.just("step"), st.integers(1, 3))]
    if level >= 3:
        ops.append(st.tuples(st.just("abort"), st.integers(0, 30)))
    return cfg, draw(st.lists(st.one_of(ops), min_size=3, max_size=20))


@st.composite
def admission_scenarios(draw: Any) -> tuple[dict, list[tuple]]:
    """A running request holds part of the pool, then a burst of mixed sizes and
    priorities queues up: admission order and misfits are what matter."""
    cfg = dict(draw(configs(2)), max_num_batched_tokens=draw(st.integers(4, 8)),
               max_num_seqs=draw(st.integers(3, 4)))
    filler = ("add", draw(st.integers(1, 6)), draw(st.integers(1, 4)), 0)
    burst = draw(st.lists(st.tuples(st.just("add"), st.integers(1, 8), st.integers(1, 3),
                                    st.integers(0, 3)), min_size=2, max_size=5))
    return cfg, [filler, ("step", 1), *burst, ("step", 2)]


@dataclass
class _Req:
    rid: str
    prompt_len: int
    max_new_tokens: int
    priority: int
    arrival_time: float
    state: str = "waiting"  # waiting | running | done | aborted
    num_computed: int = 0
    num_decoded: int = 0
    num_wait_steps: int = 0
    was_preempted: bool = False

    def base_key(self) -> tuple:
        return (self.priority, self.arrival_time, self.rid)


@dataclass
class _Model:
    """The rules replayed on the solution's own Batches: KV blocks, seats, progress and
    wait counts are inferred from the trace. `check` names the one property that may fail."""

    cfg: dict
    check: str | None
    calls: list[str] = field(default_factory=list)
    reqs: dict[str, _Req] = field(default_factory=dict)
    num_steps: int = 0

    def fail(self, name: str, prop: str, expected: Any = None, got: Any = None,
             note: str | None = None) -> None:
        if name == self.check:
            raise PropertyFailure(prop, input=self.calls, expected=expected, got=got, note=note)

    def live(self, state: str) -> list[_Req]:
        return [r for r in self.reqs.values() if r.state == state]

    def waiting_key(self, r: _Req) -> tuple:
        aging = self.cfg["aging_steps"]
        return (r.priority - (r.num_wait_steps // aging if aging else 0), r.arrival_time, r.rid)

    def on_batch(self, b: dict) -> None:
        """Check one step's Batch against the state before it, then apply it."""
        here = f"step {self.num_steps}"
        running = {r.rid for r in self.live("running")}
        waiting = {r.rid for r in self.live("waiting")}
        self._check_once(b, running | waiting, here)
        tokens = sum(b["prefill"].values()) + len(b["decode"])
        if tokens > self.cfg["max_num_batched_tokens"] or any(c < 1 for c in b["prefill"].values()):
            self.fail("budget", f"{here}: prefill tokens + decodes stay within "
                      "max_num_batched_tokens, and every chunk is >= 1 token",
                      expected=f"<= {self.cfg['max_num_batched_tokens']} tokens",
                      got=f"{tokens} tokens: {b}")
        victims = [rid for rid in b["preempted"] if rid in running]
        self._check_victims(victims, running, here)
        for rid in victims:
            r = self.reqs[rid]
            r.state, r.num_computed, r.num_decoded = "waiting", 0, 0
            r.num_wait_steps, r.was_preempted = 0, True
        # A victim given a chunk again in the same step counts as admitted too.
        admitted = [rid for rid in b["prefill"] if rid in waiting or rid in victims]
        self._check_admission(admitted, victims, waiting, here)
        for rid in admitted:
            self.reqs[rid].state = "running"
        self._check_progress(b, here)
        self._check_blocks_and_seats(here)
        self._check_finished(b, here)
        for r in self.live("waiting"):
            r.num_wait_steps += 1

    def _check_once(self, b: dict, live: set[str], here: str) -> None:
        named = list(b["prefill"]) + b["decode"] + b["preempted"] + b["finished"]
        prop = f"{here}: a batch names only live requests, each at most once (one chunk or one decode)"
        unknown = [rid for rid in named if rid not in live]
        if unknown:
            self.fail("once", prop, expected="waiting or running requests",
                      got=f"{unknown[0]!r} in {b}")
        for name in ("decode", "preempted", "finished"):
            if len(set(b[name])) != len(b[name]):
                self.fail("once", prop, expected=f"no repeats in {name}", got=b[name])
        both = set(b["prefill"]) & set(b["decode"])
        if both:
            self.fail("once", prop, expected="prefill or decode, not both", got=sorted(both))
        paid = set(b["preempted"]) & (set(b["prefill"]) | set(b["decode"]) | set(b["finished"]))
        if paid:
            self.fail("once", f"{here}: a preempted request has its tokens removed from the batch",
                      expected=f"{sorted(paid)} only in preempted", got=b)
        if not set(b["finished"]) <= set(b["decode"]):
            self.fail("finish", f"{here}: a request finishes only in a step where it decodes",
                      got=b)
        for rid in unknown:
            b["prefill"].pop(rid, None)
        for name in ("decode", "finished"):
            b[name] = [rid for rid in dict.fromkeys(b[name]) if rid in live]

    def _check_victims(self, victims: list[str], running: set[str], here: str) -> None:
        left = set(running)
        for rid in victims:
            want = max((self.reqs[x] for x in left), key=_Req.base_key).rid
            if rid != want:
                self.fail("victim", f"{here}: preemption evicts the least urgent running request",
                          expected=want, got=rid,
                          note=f"running then: {sorted(left)}; urgency = (priority, arrival_time, request_id)")
            left.discard(rid)

    def _check_admission(self, admitted: list[str], victims: list[str], waiting: set[str],
                         here: str) -> None:
        if admitted and victims:
            self.fail("no_admit", f"{here}: no waiting request is admitted in a step that preempted",
                      expected="no new requests in prefill", got=f"preempted {victims}, admitted {admitted}")
        for rid in admitted:
            if rid not in waiting:
                continue
            key = self.waiting_key(self.reqs[rid])
            skipped = [w for w in waiting if w not in admitted
                       and self.waiting_key(self.reqs[w]) < key]
            if skipped:
                self.fail("order", f"{here}: a waiting request is admitted only if every more "
                          "urgent waiting request is admitted too (the first that does not fit ends admission)",
                          expected=f"{min(skipped, key=lambda w: self.waiting_key(self.reqs[w]))!r} "
                                   f"before {rid!r}", got=f"admitted {admitted}")

    def _check_progress(self, b: dict, here: str) -> None:
        for rid, chunk in b["prefill"].items():
            r = self.reqs[rid]
            if chunk > r.prompt_len - r.num_computed:
                self._progress_failure(r, f"{here}: a chunk is at most the rest of the prompt",
                                       f"<= {r.prompt_len - r.num_computed}", chunk)
            r.num_computed += chunk
        for rid in b["decode"]:
            r = self.reqs[rid]
            if r.num_computed != r.prompt_len:
                self._progress_failure(
                    r, f"{here}: {rid!r} decodes only after chunks covering its whole prompt",
                    f"chunks adding up to {r.prompt_len}", f"{r.num_computed} prompt tokens so far")
            r.num_decoded += 1

    def _progress_failure(self, r: _Req, prop: str, expected: Any, got: Any) -> None:
        if r.was_preempted:
            self.fail("restart", prop + " (a preempted request recomputes its prompt from zero)",
                      expected=expected, got=got)
        else:
            self.fail("prompt", prop, expected=expected, got=got)

    def _check_blocks_and_seats(self, here: str) -> None:
        running = self.live("running")
        if len(running) > self.cfg["max_num_seqs"]:
            self.fail("seats", f"{here}: at most max_num_seqs requests run",
                      expected=f"<= {self.cfg['max_num_seqs']}", got=sorted(r.rid for r in running))
        bs = self.cfg["block_size"]
        used = sum(math.ceil((r.num_computed + r.num_decoded) / bs) for r in running)
        if used > self.cfg["num_blocks"]:
            self.fail("blocks", f"{here}: running requests never hold more than num_blocks KV blocks",
                      expected=f"<= {self.cfg['num_blocks']} blocks",
                      got=f"{used} blocks for slots " + str({r.rid: r.num_computed + r.num_decoded for r in running}))

    def _check_finished(self, b: dict, here: str) -> None:
        done = sorted((r for r in self.live("running") if r.num_decoded >= r.max_new_tokens),
                      key=_Req.base_key)
        want = [r.rid for r in done]
        if b["finished"] != want:
            self.fail("finish", f"{here}: a request finishes with its max_new_tokens-th decode "
                      "(finished in urgency order)", expected=want, got=b["finished"])
        for r in done:
            r.state = "done"


def drive(solution: Any, scenario: tuple[dict, list[tuple]], check: str | None,
          drain: bool = True) -> tuple[Any, _Model]:
    """Run the scenario on the solution alone, replaying each Batch on the model; then
    (when `drain`) step until nothing is unfinished, within the statement's bound."""
    cfg, ops = scenario
    model = _Model(cfg, check, calls=[_config_text(cfg)])
    sched = solution.Scheduler(**cfg)
    ids: list[str] = []
    for op in ops:
        if op[0] == "add":
            rid = f"q{99 - len(ids)}"  # later arrivals get smaller ids: arrival must decide ties
            p, m = _fit(cfg, op[1], op[2])
            t = float(model.num_steps)
            model.calls.append(_request_text(rid, p, m, op[3], t))
            sched.add_request(solution.Request(rid, p, m, op[3], t))
            model.reqs[rid] = _Req(rid, p, m, op[3], t)
            ids.append(rid)
        elif op[0] == "abort" and ids:
            _abort(sched, model, ids[op[1] % len(ids)])
        elif op[0] == "step":
            for _ in range(op[1]):
                _step(sched, model)
    if drain:
        _drain(sched, model)
    return sched, model


def _step(sched: Any, model: _Model) -> None:
    model.num_steps += 1
    model.calls.append(f"step() #{model.num_steps}")
    model.on_batch(_view(sched.step()))
    want = bool(model.live("waiting") or model.live("running"))
    got = sched.has_unfinished()
    if got != want:
        model.fail("finish", f"step {model.num_steps}: has_unfinished() is True exactly while "
                   "requests wait or run", expected=want, got=got)


def _abort(sched: Any, model: _Model, rid: str) -> None:
    model.calls.append(f"abort({rid!r})")
    live = model.reqs[rid].state in ("waiting", "running")
    try:
        sched.abort(rid)
        raised = False
    except KeyError:
        raised = True
    if raised == live:
        model.fail("abort", "abort() raises KeyError exactly for ids that are not waiting or running",
                   expected="KeyError" if not live else "aborted",
                   got="KeyError" if raised else "aborted")
    if not raised:
        model.reqs[rid].state = "aborted"


def liveness_bound(model: _Model) -> int:
    """The statement's bound: N * W steps, N unfinished requests with total work W."""
    left = model.live("waiting") + model.live("running")
    return len(left) * sum(r.prompt_len + r.max_new_tokens for r in left)


def _drain(sched: Any, model: _Model) -> None:
    bound = liveness_bound(model)
    model.calls.append(f"... step until has_unfinished() is False (at most {bound} steps)")
    for _ in range(bound):
        if not sched.has_unfinished():
            break
        _step(sched, model)
    left = sorted(r.rid for r in model.live("waiting") + model.live("running"))
    if left or sched.has_unfinished():
        model.fail("liveness", "once arrivals stop, every request finishes within N * W steps "
                   "(N unfinished requests, W their total prompt_len + max_new_tokens)",
                   expected=f"all finished within {bound} steps", got=f"still unfinished: {left}")


# ----------------------------------------------------------------------------- trace properties


@kata_test(level=1, category="correctness",
           description="prefill tokens + decodes in a step never exceed max_num_batched_tokens")
@settings(max_examples=20, report_multiple_bugs=False)
@given(scenario=scenarios(1))
def test_token_budget_respected(solution, scenario):
    drive(solution, scenario, "budget")


@kata_test(level=1, category="correctness",
           description="at most max_num_seqs requests are running at any time")
@settings(max_examples=20, report_multiple_bugs=False)
@given(scenario=scenarios(1))
def test_running_never_exceeds_max_num_seqs(solution, scenario):
    drive(solution, scenario, "seats")


@kata_test(level=1, category="correctness",
           description="a Batch names only live requests, each once; preempted requests keep no tokens")
@settings(max_examples=25, report_multiple_bugs=False)
@given(scenario=scenarios(2))
def test_no_request_twice_in_a_batch(solution, scenario):
    drive(solution, scenario, "once")


@kata_test(level=1, category="correctness",
           description="a request decodes only after chunks covering its whole prompt")
@settings(max_examples=20, report_multiple_bugs=False)
@given(scenario=scenarios(1))
def test_prompt_fully_computed_before_decoding(solution, scenario):
    drive(solution, scenario, "prompt")


@kata_test(level=1, category="correctness",
           description="a request finishes with its max_new_tokens-th decode; has_unfinished() agrees")
@settings(max_examples=20, report_multiple_bugs=False)
@given(scenario=scenarios(1))
def test_finishes_after_max_new_tokens(solution, scenario):
    drive(solution, scenario, "finish")


@kata_test(level=2, category="correctness",
           description="admission never skips a more urgent waiting request (the first misfit ends it)")
@settings(max_examples=40, report_multiple_bugs=False)
@given(scenario=st.one_of(admission_scenarios(), scenarios(2)))
def test_admission_never_skips_a_more_urgent_request(solution, scenario):
    drive(solution, scenario, "order")


@kata_test(level=2, category="correctness",
           description="blocks in use (inferred from the batches) never exceed num_blocks")
@settings(max_examples=25, report_multiple_bugs=False)
@given(scenario=scenarios(2))
def test_kv_blocks_within_pool(solution, scenario):
    drive(solution, scenario, "blocks")


@kata_test(level=2, category="correctness",
           description="preemption evicts the least urgent running request first")
@settings(max_examples=25, report_multiple_bugs=False)
@given(scenario=scenarios(2))
def test_preemption_evicts_least_urgent(solution, scenario):
    drive(solution, scenario, "victim")


@kata_test(level=2, category="correctness",
           description="no waiting request is admitted in a step that preempted")
@settings(max_examples=25, report_multiple_bugs=False)
@given(scenario=scenarios(2))
def test_no_admission_in_a_step_that_preempted(solution, scenario):
    drive(solution, scenario, "no_admit")


@kata_test(level=2, category="correctness",
           description="a preempted request loses its progress and recomputes its prompt from zero")
@settings(max_examples=25, report_multiple_bugs=False)
@given(scenario=scenarios(2))
def test_preempted_request_restarts_from_zero(solution, scenario):
    drive(solution, scenario, "restart")


@kata_test(level=2, category="correctness",
           description="once arrivals stop, every request finishes within the bound the statement gives")
@settings(max_examples=25, report_multiple_bugs=False)
@given(scenario=scenarios(2))
def test_every_request_finishes(solution, scenario):
    drive(solution, scenario, "liveness")


@kata_test(level=3, category="correctness",
           description="abort() raises KeyError exactly for ids that are not waiting or running")
@settings(max_examples=25, report_multiple_bugs=False)
@given(scenario=scenarios(3))
def test_abort_only_live_requests(solution, scenario):
    drive(solution, scenario, "abort")


# ----------------------------------------------------------------------------- memory release


def _whole_pool_request(mod: Any, cfg: dict, rid: str) -> Any:
    """A request that needs every block of the pool."""
    cap = _capacity(cfg)
    return mod.Request(rid, cap - 1, 1)


def _expect_admitted_next_step(sched: Any, mod: Any, model: _Model, rid: str, why: str) -> None:
    model.calls.append(_request_text(rid, _capacity(model.cfg) - 1, 1, 0, 0.0))
    sched.add_request(_whole_pool_request(mod, model.cfg, rid))
    model.calls.append("step()")
    batch = _view(sched.step())
    expect(rid in batch["prefill"], why, input=model.calls,
           expected=f"{rid!r} (needs all {model.cfg['num_blocks']} blocks) gets its first chunk",
           got=batch)


@kata_test(level=2, category="correctness",
           description="a finished request's KV blocks are free again in the next step")
@settings(max_examples=30, report_multiple_bugs=False)
@given(cfg=configs(2), requests=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 4)),
                                         min_size=1, max_size=3))
def test_blocks_freed_on_finish(solution, cfg, requests):
    model = _Model(cfg, None, calls=[_config_text(cfg)])
    sched = solution.Scheduler(**cfg)
    for i, (p, m) in enumerate(requests):
        p, m = _fit(cfg, p, m)
        rid = f"q{i}"
        model.calls.append(_request_text(rid, p, m, 0, 0.0))
        sched.add_request(solution.Request(rid, p, m))
        finished = False
        for _ in range(p + m):
            model.calls.append("step()")
            if rid in _view(sched.step())["finished"]:
                finished = True
                break
        expect(finished, "a request running alone finishes within prompt_len + max_new_tokens steps",
               input=model.calls, expected=f"{rid!r} finished", got="still unfinished")
        _expect_admitted_next_step(sched, solution, model, f"whole{i}",
                                   "after every request finished, all KV blocks are free again")
        for _ in range(_capacity(cfg) + 1):
            if not sched.has_unfinished():
                break
            sched.step()
        model.calls.append(f"... step until whole{i} finished")


@kata_test(level=3, category="correctness",
           description="abort() frees the request's KV blocks")
@settings(max_examples=25, report_multiple_bugs=False)
@given(scenario=scenarios(3))
def test_blocks_freed_on_abort(solution, scenario):
    sched, model = drive(solution, scenario, None, drain=False)
    for r in model.live("waiting") + model.live("running"):
        _abort(sched, model, r.rid)
    expect(not sched.has_unfinished(), "after aborting every live request, nothing is unfinished",
           input=model.calls, expected=False, got=True)
    _expect_admitted_next_step(sched, solution, model, "whole",
                               "after aborting every request, all KV blocks are free again")


# ----------------------------------------------------------------------------- aging


def starvation_bound(gap: int, aging_steps: int) -> int:
    """Steps within which the low-priority request of the starvation scenario must finish."""
    return 4 * (gap + 1) * aging_steps + 8


@kata_test(level=3, category="correctness",
           description="with aging, a low-priority request is not starved by a stream of urgent arrivals")
@settings(max_examples=12, report_multiple_bugs=False)
@given(gap=st.integers(1, 4), aging_steps=st.integers(1, 3))
def test_aging_prevents_starvation(solution, gap, aging_steps):
    cfg = {"max_num_batched_tokens": 4, "max_num_seqs": 1, "num_blocks": 64,
           "block_size": 4, "aging_steps": aging_steps}
    sched = solution.Scheduler(**cfg)
    calls = [_config_text(cfg), _request_text("low", 1, 1, gap, 0.0)]
    sched.add_request(solution.Request("low", 1, 1, gap, 0.0))
    bound = starvation_bound(gap, aging_steps)
    for n in range(bound):
        sched.add_request(solution.Request(f"u{n}", 1, 1, 0, float(n)))
        if "low" in _view(sched.step())["finished"]:
            return
    calls.append("then each step: add_request(Request('u<n>', 1, 1, priority=0, arrival_time=n)); step()")
    raise PropertyFailure("aging lifts a waiting request's effective priority until it runs",
                          input=calls, expected=f"'low' finished within {bound} steps",
                          got="'low' still unfinished")


@kata_test(level=3, category="correctness",
           description="aging: a preempted request's wait count restarts at 0 (the step it was preempted in counts)")
@settings(max_examples=50, report_multiple_bugs=False)
@given(budget=st.integers(2, 4), num_blocks=st.integers(3, 6), aging_steps=st.integers(1, 2),
       requests=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(0, 2)),
                         min_size=3, max_size=4))
def test_aging_restarts_after_preemption(solution, reference, budget, num_blocks, aging_steps,
                                         requests):
    cfg = {"max_num_batched_tokens": budget, "max_num_seqs": 2, "num_blocks": num_blocks,
           "block_size": 1, "aging_steps": aging_steps}
    ops = [("add", f"q{i}", p, m, prio) for i, (p, m, prio) in enumerate(requests)]
    compare_script(solution, reference, cfg, ops + [("step", 10)])


# ----------------------------------------------------------------------------- concurrency


def _producer(sched: Any, mod: Any, who: int, barrier: threading.Barrier, added: list,
              aborted: list, errors: list) -> None:
    try:
        barrier.wait()
        mine = []
        for j in range(25):
            rid = f"t{who}-{j}"
            sched.add_request(mod.Request(rid, 1 + (j * 7 + who) % 5, 1 + j % 3, (j + who) % 3,
                                          float(j)))
            added.append(rid)
            mine.append(rid)
            if j % 4 == 3:
                victim = mine[(j * 5 + who) % len(mine)]
                try:
                    sched.abort(victim)
                    aborted.append(victim)
                except KeyError:
                    pass
    except BaseException as exc:  # noqa: BLE001 - reported by the main thread
        errors.append(exc)


@kata_test(level=3, category="correctness",
           description="add_request/abort from 6 threads while step() runs: each request finishes or is aborted exactly once")
def test_concurrent_add_and_abort(solution):
    import sys
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for trial in range(3):
            _concurrent_trial(solution, trial)
    finally:
        sys.setswitchinterval(old)


def _concurrent_trial(solution: Any, trial: int) -> None:
    cfg = {"max_num_batched_tokens": 8, "max_num_seqs": 3, "num_blocks": 16,
           "block_size": 2, "aging_steps": 2}
    sched = solution.Scheduler(**cfg)
    added: list[str] = []
    aborted: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(7)
    threads = [threading.Thread(target=_producer, daemon=True,
                                args=(sched, solution, who, barrier, added, aborted, errors))
               for who in range(6)]
    for th in threads:
        th.start()
    barrier.wait()
    finished: list[str] = []
    for _ in range(20_000):
        finished.extend(_view(sched.step())["finished"])
        if not any(th.is_alive() for th in threads) and not sched.has_unfinished():
            break
    for th in threads:
        th.join(timeout=5)
    if errors:
        raise errors[0]
    counts = {rid: 0 for rid in added}
    for rid in finished + aborted:
        counts[rid] = counts.get(rid, 0) + 1
    wrong = {rid: c for rid, c in counts.items() if c != 1}
    expect(not wrong, "every added request is finished or aborted exactly once (nothing lost or duplicated)",
           input=f"trial {trial}: 6 threads x 25 add_request (+ an abort every 4th) while the main thread steps",
           expected="each id counted once",
           got=f"{len(wrong)} ids counted wrong, e.g. " + str(dict(list(wrong.items())[:5])),
           note="count = times in Batch.finished + successful abort() calls")


# ----------------------------------------------------------------------------- efficiency


def _queued_scheduler(mod: Any, num_waiting: int) -> Any:
    """One long decode holds the only seat; `num_waiting` requests are queued behind it."""
    sched = mod.Scheduler(max_num_batched_tokens=8, max_num_seqs=1, num_blocks=10**6,
                          block_size=16, aging_steps=4)
    sched.add_request(mod.Request("long", 1, 10**6, 0, 0.0))
    sched.step()
    for i in range(num_waiting):
        sched.add_request(mod.Request(f"w{i}", 1 + i % 7, 1, 1 + i % 5, float(i % 11)))
    return sched


def _time_steps(sched: Any) -> float:
    """CPU seconds of this thread per step(), looping for at least 3 ms. CPU time, not wall
    time: on a loaded machine the process is descheduled for whole time slices."""
    loops, t0 = 0, time.thread_time()
    while True:
        sched.step()
        loops += 1
        elapsed = time.thread_time() - t0
        if elapsed >= 0.003:
            return elapsed / loops


def _best_step_times(mods: list[Any], sizes: list[int], rounds: int = 3) -> list[list[float]]:
    """Min over rounds of the time of one step() at each size, the implementations
    interleaved so that machine load hits them alike (load only ever adds time)."""
    best = [[math.inf] * len(sizes) for _ in mods]
    for j, n in enumerate(sizes):
        scheds = [_queued_scheduler(mod, n) for mod in mods]
        gc.collect()
        gc.disable()  # as timeit does: a full collection costs the heap, not the step
        try:
            for r in range(rounds):
                for i, sched in enumerate(scheds):
                    best[i][j] = min(best[i][j], _time_steps(sched))
                if r >= 1 and max(row[j] for row in best) > 0.05:
                    break  # a slow step is measured well enough by two samples
        finally:
            gc.enable()
    return best


def _slope(sizes: list[int], values: list[float]) -> float:
    xs = [math.log(n) for n in sizes]
    ys = [math.log(max(v, 1e-12)) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
            / sum((x - mx) ** 2 for x in xs))


@kata_test(level=3, category="efficiency",
           description="step() cost grows no faster than n log n in the number of queued requests")
def test_step_cost_grows_at_most_n_log_n(solution, reference):
    sizes = [100, 200, 400, 800]
    ref_times, sol_times = _best_step_times([reference, solution], sizes)
    ref_exp, sol_exp = _slope(sizes, ref_times), _slope(sizes, sol_times)
    # Growth of your time relative to the reference's: about 0 for the same complexity,
    # about 1 for quadratic against n log n.
    relative = _slope(sizes, [s / r for s, r in zip(sol_times, ref_times)])
    expect(relative <= 0.5, "step() time grows like n log n (or slower) in queued requests",
           input=f"n waiting requests behind one running decode, n in {sizes}",
           expected=f"time growing like the reference's (exponent {ref_exp:.2f}), relative growth <= 0.5",
           got=f"exponent {sol_exp:.2f}, relative growth {relative:.2f}",
           note="an exponent near 2 means quadratic work per step, e.g. a scan of the queue per queued request")


# ----------------------------------------------------------------------------- API contract


def _raises(fn, exc_type) -> bool:
    try:
        fn()
    except exc_type:
        return True
    return False


@kata_test(level=1, category="api contract",
           description="Scheduler(...) raises ValueError for values < 1 (aging_steps: None or >= 1)")
def test_constructor_validation(solution):
    good = {"max_num_batched_tokens": 4, "max_num_seqs": 2, "num_blocks": 8, "block_size": 2}
    solution.Scheduler(**good)
    solution.Scheduler(**good, aging_steps=None)
    solution.Scheduler(**good, aging_steps=1)
    for name in good:
        for bad in (0, -1):
            cfg = dict(good, **{name: bad})
            expect(_raises(lambda: solution.Scheduler(**cfg), ValueError),
                   f"Scheduler raises ValueError when {name} < 1", input=cfg,
                   expected="ValueError", got="accepted")
    cfg = dict(good, aging_steps=0)
    expect(_raises(lambda: solution.Scheduler(**cfg), ValueError),
           "Scheduler raises ValueError when aging_steps < 1", input=cfg,
           expected="ValueError", got="accepted")


@kata_test(level=1, category="api contract",
           description="add_request raises ValueError for a reused id, bad fields, or a request that could never fit")
def test_add_request_validation(solution):
    R = solution.Request
    cfg = {"max_num_batched_tokens": 4, "max_num_seqs": 2, "num_blocks": 3, "block_size": 2}
    sched = solution.Scheduler(**cfg)
    calls = [_config_text(cfg)]
    cases = [(R("a", 0, 1), "prompt_len 0"), (R("a", 1, 0), "max_new_tokens 0"),
             (R("a", -2, 1), "negative prompt_len"),
             (R("a", 5, 2), "needs ceil(7 / 2) = 4 > 3 blocks")]
    for req, why in cases:
        expect(_raises(lambda: sched.add_request(req), ValueError),
               f"add_request raises ValueError ({why})", input=calls + [repr(req)],
               expected="ValueError", got="accepted")
    sched.add_request(R("a", 5, 1))  # exactly 3 blocks; the rejected id was never seen
    calls.append("add_request(Request('a', 5, 1)) -> accepted")
    expect(_raises(lambda: sched.add_request(R("a", 1, 1)), ValueError),
           "add_request raises ValueError for an id already waiting", input=calls,
           expected="ValueError", got="accepted")
    for _ in range(10):
        if not sched.has_unfinished():
            break
        sched.step()
    calls.append("step() until 'a' finished")
    expect(_raises(lambda: sched.add_request(R("a", 1, 1)), ValueError),
           "add_request raises ValueError for the id of a finished request", input=calls,
           expected="ValueError", got="accepted")


@kata_test(level=1, category="api contract",
           description="Request and Batch are dataclasses with the stated fields and defaults")
def test_request_and_batch_fields(solution):
    req = solution.Request("x", 3, 2)
    got = (req.request_id, req.prompt_len, req.max_new_tokens, req.priority, req.arrival_time)
    expect(got == ("x", 3, 2, 0, 0.0), "Request(request_id, prompt_len, max_new_tokens, "
           "priority=0, arrival_time=0.0)", expected=("x", 3, 2, 0, 0.0), got=got)
    batch = solution.Batch(prefill={"x": 1}, decode=["y"], preempted=[], finished=["y"])
    expect(_view(batch) == {"prefill": {"x": 1}, "decode": ["y"], "preempted": [], "finished": ["y"]},
           "Batch(prefill, decode, preempted, finished) keeps its fields", got=repr(batch))
    sched = solution.Scheduler(4, 2, 8, 2)
    expect(sched.has_unfinished() is False, "a new scheduler has nothing unfinished",
           expected=False, got=sched.has_unfinished())
    empty = _view(sched.step())
    expect(empty == {"prefill": {}, "decode": [], "preempted": [], "finished": []},
           "step() with nothing queued returns an empty Batch", got=empty)


@kata_test(level=3, category="api contract",
           description="abort(): KeyError for unknown, finished or aborted ids; an aborted id cannot be added again")
def test_abort_errors(solution):
    R = solution.Request
    sched = solution.Scheduler(4, 2, 8, 2)
    calls = ["Scheduler(4, 2, 8, 2)"]
    expect(_raises(lambda: sched.abort("nope"), KeyError), "abort of an unknown id raises KeyError",
           input=calls + ["abort('nope')"], expected="KeyError", got="no error")
    sched.add_request(R("a", 2, 1))
    sched.add_request(R("b", 2, 1))
    calls += ["add_request(Request('a', 2, 1))", "add_request(Request('b', 2, 1))", "step()"]
    sched.step()
    sched.abort("b")
    calls.append("abort('b')")
    expect(_raises(lambda: sched.abort("b"), KeyError), "a second abort of the same id raises KeyError",
           input=calls + ["abort('b')"], expected="KeyError", got="no error")
    expect(_raises(lambda: sched.add_request(R("b", 1, 1)), ValueError),
           "an aborted id cannot be added again (ValueError)", input=calls + ["add_request(Request('b', 1, 1))"],
           expected="ValueError", got="accepted")
    batch = _view(sched.step())
    calls.append("step()")
    expect("b" not in batch["decode"] and "b" not in batch["prefill"],
           "an aborted request never runs again", input=calls, expected="no 'b'", got=batch)
    for _ in range(5):
        if not sched.has_unfinished():
            break
        sched.step()
    expect(_raises(lambda: sched.abort("a"), KeyError), "abort of a finished id raises KeyError",
           input=calls + ["... 'a' finished", "abort('a')"], expected="KeyError", got="no error")
