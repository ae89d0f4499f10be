"""Trace properties that need no reference: the solution alone is driven through a workload
and each of its Batches is replayed on a plain-Python model of the rules. KV blocks, seats,
progress and wait counts are inferred from the trace; `check` names the one property a test
asks about, so one bug fails one property (the others are not reported by that test)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from grader.protocol import PropertyFailure, Script, expect
from grader.suites.scheduler.lockstep import STEP_ENTRY, add_request, added, call, error_of, outcome_value, step_reads, view
from grader.suites.scheduler.strategies import capacity, config_text, fit, request_text


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
class TraceModel:
    cfg: dict
    check: str | None
    calls: list[str] = field(default_factory=list)
    reqs: dict[str, _Req] = field(default_factory=dict)
    num_steps: int = 0
    unfinished: Any = None  # has_unfinished() as read with the last step

    def fail(self, name: str, prop: str, expected: Any = None, got: Any = None,
             note: str | None = None) -> None:
        if name == self.check:
            raise PropertyFailure(prop, input=list(self.calls), expected=expected, got=got, note=note)

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
            self.fail("victim_tokens", f"{here}: rule 3 — a preempted request's tokens of this "
                      "step are removed from the batch (and from finished)",
                      expected=f"{sorted(paid)} only in preempted", got=b)
        if not set(b["finished"]) <= set(b["decode"]):
            self.fail("finish", f"{here}: a request finishes only in a step where it decodes", got=b)
        for rid in unknown:
            b["prefill"].pop(rid, None)
        for name in ("decode", "finished"):
            b[name] = [rid for rid in dict.fromkeys(b[name]) if rid in live]

    def _check_victims(self, victims: list[str], running: set[str], here: str) -> None:
        left = set(running)
        for rid in victims:
            want = max((self.reqs[x] for x in left), key=_Req.base_key).rid
            if rid != want:
                self.fail("victim", f"{here}: rule 3 — preemption evicts the least urgent running request",
                          expected=want, got=rid,
                          note=f"running then: {sorted(left)}; urgency = (priority, arrival_time, request_id)")
            left.discard(rid)

    def _check_admission(self, admitted: list[str], victims: list[str], waiting: set[str],
                         here: str) -> None:
        if admitted and victims:
            self.fail("no_admit", f"{here}: rule 4 — no waiting request is admitted in a step that preempted",
                      expected="no new requests in prefill", got=f"preempted {victims}, admitted {admitted}")
        for rid in admitted:
            if rid not in waiting:
                continue
            key = self.waiting_key(self.reqs[rid])
            skipped = [w for w in waiting if w not in admitted and self.waiting_key(self.reqs[w]) < key]
            if skipped:
                self.fail("order", f"{here}: rule 4 — a waiting request is admitted only if every more "
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
            self.fail("restart", prop + " (rule 3: a preempted request recomputes its prompt from zero)",
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
            self.fail("blocks", f"{here}: running requests never hold more than num_blocks KV blocks "
                      "(ceil(slots / block_size) each)", expected=f"<= {self.cfg['num_blocks']} blocks",
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


# ------------------------------------------------------------------------ driving


def drive(solution: Any, scenario: tuple[dict, list[tuple]], check: str | None,
          drain: bool = True) -> tuple[Any, TraceModel]:
    """Run the scenario on the solution alone, replaying each Batch on the model; then
    (when `drain`) step until nothing is unfinished, within the statement's bound. The calls
    are fixed in advance: the candidate's scheduler makes them in one round trip (a Script),
    and the model takes their outcomes in order, as if each were made then."""
    cfg, ops = scenario
    model = TraceModel(cfg, check, calls=[config_text(cfg)])
    source = getattr(solution, "__file__", None)
    sched = call(lambda: solution.Scheduler(**cfg), "Scheduler(...)", model.calls, source)
    plan: list[tuple] = []
    ids: list[str] = []
    steps = 0
    for op in ops:
        if op[0] == "add":
            rid = f"q{99 - len(ids)}"  # later arrivals get smaller ids: arrival must decide ties
            p, m = fit(cfg, op[1], op[2])
            t = float(op[4]) if len(op) > 4 else float(steps)  # the step, unless given
            plan.append(("add", rid, p, m, op[3], t))
            ids.append(rid)
        elif op[0] == "abort" and ids:
            plan.append(("abort", ids[op[1] % len(ids)]))
        elif op[0] == "step":
            plan += [("step",)] * op[1]
            steps += op[1]
    script = Script(sched, _entries(solution, plan))
    for item in plan:
        if item[0] == "add":
            _, rid, p, m, prio, t = item
            model.calls.append(request_text(rid, p, m, prio, t))
            record = script.take()
            call(lambda: add_request(sched, solution, (rid, p, m, prio, t)) if record is None
                 else added(record), "add_request", model.calls, source)
            model.reqs[rid] = _Req(rid, p, m, prio, t)
        elif item[0] == "abort":
            abort(sched, model, item[1], source, script.take())
        else:
            step(sched, model, source, script.take())
    if drain:
        _drain(sched, model, source)
    return sched, model


def _entries(solution: Any, plan: list[tuple]) -> list[tuple]:
    """The script of a plan; none when the module has no Request to build one with (the
    test's own add_request call then fails as it should)."""
    try:
        request = solution.Request
    except Exception:  # noqa: BLE001 - reported by the add_request made without a script
        return []
    entries: list[tuple] = []
    for item in plan:
        if item[0] == "add":
            entries.append(("new", "add_request", request, item[1:], {}, [], ()))
        elif item[0] == "abort":
            entries.append(("call", "abort", (item[1],), [], [], ("KeyError",)))
        else:
            entries.append(STEP_ENTRY)
    return entries


def step(sched: Any, model: TraceModel, source: str | None = None, record: tuple | None = None) -> dict:
    """One step, checked on the model; `record`: its outcomes from a script (else it is
    made now)."""
    model.num_steps += 1
    model.calls.append(f"step() #{model.num_steps}")
    if record is None:
        stepped, unfinished, fields = step_reads(sched)  # one round trip
    else:
        stepped, unfinished, fields = (lambda: outcome_value(record[1])), record[2][0], record[3]
    batch = view(call(stepped, f"step() #{model.num_steps}", model.calls, source), fields)
    model.on_batch(dict(batch, prefill=dict(batch["prefill"])))
    want = bool(model.live("waiting") or model.live("running"))
    got = model.unfinished = call(lambda: outcome_value(unfinished), "has_unfinished()", model.calls, source)
    if got != want:
        model.fail("finish", f"step {model.num_steps}: has_unfinished() is True exactly while "
                   "requests wait or run", expected=want, got=got)
    return batch


def abort(sched: Any, model: TraceModel, rid: str, source: str | None = None,
          record: tuple | None = None) -> None:
    model.calls.append(f"abort({rid!r})")
    live = model.reqs[rid].state in ("waiting", "running")
    made = (lambda: sched.abort(rid)) if record is None else (lambda: outcome_value(record[1]))
    raised = error_of(made, KeyError, "abort", model.calls, source) is not None
    if raised == live:
        model.fail("abort", "abort() raises KeyError exactly for ids that are not waiting or running",
                   expected="KeyError" if not live else "aborted",
                   got="KeyError" if raised else "aborted")
    if not raised:
        model.reqs[rid].state = "aborted"


def liveness_bound(model: TraceModel) -> int:
    """The statement's bound: N * W steps, N unfinished requests with total work W."""
    left = model.live("waiting") + model.live("running")
    return len(left) * sum(r.prompt_len + r.max_new_tokens for r in left)


def _drain(sched: Any, model: TraceModel, source: str | None) -> None:
    bound = liveness_bound(model)
    model.calls.append(f"... step until has_unfinished() is False (at most {bound} steps)")
    script = Script(sched, [("repeat", STEP_ENTRY, bound, ("has_unfinished", ()))])
    first = script.take()
    unfinished = call(sched.has_unfinished if first is None else lambda: outcome_value(first[1]),
                      "has_unfinished()", model.calls, source)
    for _ in range(bound):
        if not unfinished:
            break
        step(sched, model, source, script.take())
        unfinished = model.unfinished  # read with the step
    left = sorted(r.rid for r in model.live("waiting") + model.live("running"))
    if left or sched.has_unfinished():
        model.fail("liveness", "once arrivals stop, every request finishes within N * W steps "
                   "(N unfinished requests, W their total prompt_len + max_new_tokens)",
                   expected=f"all finished within {bound} steps", got=f"still unfinished: {left}")


def expect_admitted_next_step(sched: Any, mod: Any, model: TraceModel, rid: str, why: str) -> None:
    """Look forward: a request needing every block of the pool gets its first chunk now."""
    cap = capacity(model.cfg)
    model.calls.append(request_text(rid, cap - 1, 1, 0, 0.0))
    add_request(sched, mod, (rid, cap - 1, 1))
    model.calls.append("step()")
    batch = view(sched.step())
    expect(rid in batch["prefill"], why, input=model.calls,
           expected=f"{rid!r} (needs all {model.cfg['num_blocks']} blocks) gets its first chunk",
           got=batch)
