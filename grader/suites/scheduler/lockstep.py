"""The solution and the reference driven side by side.

`Pair` makes every call on both and fails at the first difference: an add or abort that one
accepts and the other rejects, a Batch that differs, a has_unfinished() that disagrees. A
differing Batch is explained by the statement rule that decides the differing field
("decode list — rule 1a: ..."), read off a mirror of the reference's state before the step.
`compare_script` runs a fixed list of calls (the targeted tests), `run_lockstep` a
hypothesis state machine of random calls (bursts, long prompts, aborts).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule, run_state_machine_as_test)

from grader.protocol import PropertyFailure, Script, call_then_read, new_then_call, read_all
from grader.suites.scheduler.strategies import config_text, configs, fit, request_text

# The statement's rules, as a failure names them.
URGENCY = "urgency = (priority, arrival_time, request_id), smallest first"
RULE_DECODE = ("rule 1a: decodes first — every running request whose prompt is complete "
               "decodes, before any prefill chunk")
RULE_DECODE_ORDER = "rule 1a: decodes are listed most urgent first"
RULE_CHUNK = ("rule 1b: after the decodes, a running request with an incomplete prompt gets "
              "min(remaining prompt, remaining budget) tokens")
RULE_RETRY = ("rule 3: after a preemption the chunk is recomputed as min(remaining prompt, "
              "remaining budget); a refund can enlarge it")
RULE_PREEMPT = ("rule 3: when a request's new slots need blocks that are not free, the least "
                "urgent running request is preempted, again until they fit (a request "
                "finishing in this step still holds its blocks); if that is the request "
                "itself, it is preempted and phase 1 moves on")
RULE_VICTIM = "rule 3: the victim is always the least urgent running request (base priority)"
RULE_ADMIT = ("rule 4: waiting requests, most urgent first, while running < max_num_seqs and "
              "budget > 0, get min(prompt_len, budget) tokens if their blocks are free; the "
              "first that does not fit ends admission")
RULE_NO_ADMIT = "rule 4: nothing is admitted in a step that preempted"
RULE_AGING = ("aging: a waiting request's effective priority is priority - wait // "
              "aging_steps (wait: 0 on entering the queue, +1 at the end of every step it "
              "ends waiting); a running request uses its base priority")
RULE_FINISH = ("a request finishes with its max_new_tokens-th decode (not when preempted in "
               "that step); finished is in urgency order")
RULE_UNFINISHED = "has_unfinished() is True exactly while a request waits or runs"


FIELDS = ("prefill", "decode", "preempted", "finished")


def view(batch: Any, outcomes: list[tuple[bool, Any]] | None = None) -> dict:
    """A Batch as plain data (its four fields read in one round trip, or from `outcomes`
    already read); fails readably when a field is missing or mistyped."""
    try:
        values = []
        for ok, value in outcomes or read_all(batch, [(name, None) for name in FIELDS]):
            if not ok:
                raise value
            values.append(value)
        prefill, decode, preempted, finished = values
        return {"prefill": dict(prefill), "decode": list(decode),
                "preempted": list(preempted), "finished": list(finished)}
    except (AttributeError, TypeError, ValueError) as exc:
        raise PropertyFailure("step() returns a Batch with prefill (dict), decode, preempted "
                              "and finished (lists)", got=repr(batch), note=str(exc)) from exc


def outcome_value(outcome: tuple[bool, Any]) -> Any:
    ok, value = outcome
    if not ok:
        raise value
    return value


def add_request(sched: Any, mod: Any, fields: tuple) -> Any:
    """sched.add_request(mod.Request(*fields)), in one round trip when sched is the
    candidate's: raises what the constructor or add_request raised."""
    return added(new_then_call(sched, "add_request", mod.Request, fields))


def add_all(sched: Any, mod: Any, requests: list[tuple]) -> None:
    """add_request(Request(*fields)) for each, in order: in one round trip (a Script) when
    sched is the candidate's; raises what the first failing call raised."""
    try:
        request = mod.Request
    except AttributeError:
        request = None  # (the add_request made without a script reports it)
    entries: list[tuple] = [("new", "add_request", request, fields, {}, [], ()) for fields in requests]
    script = Script(sched, entries if request is not None else [])
    for fields in requests:
        record = script.take()
        if record is None:
            add_request(sched, mod, fields)
        else:
            added(record)


def added(outcomes: tuple) -> Any:
    """What add_request returned, from new_then_call's outcomes (or a script's "new"
    record): raises what the constructor or add_request raised."""
    made, outcome = outcomes[-3], outcomes[-2]
    outcome_value(made)
    return outcome_value(outcome)


# A step as step_reads makes it, as a Script's entry: has_unfinished() and the Batch's
# fields read with it.
STEP_ENTRY = ("call", "step", (), [("has_unfinished", ())], [(name, None) for name in FIELDS], ())


def step_reads(sched: Any) -> tuple[Callable[[], Any], tuple[bool, Any], list[tuple[bool, Any]]]:
    """sched.step(), then the Batch's fields and has_unfinished(), in one round trip: (a
    callable giving the Batch or raising what step() raised, for `call`; has_unfinished's
    outcome; the fields' outcomes, for `view`)."""
    outcome, reads, fields = call_then_read(sched, "step", (), [("has_unfinished", ())],
                                            [(name, None) for name in FIELDS])
    return (lambda: outcome_value(outcome)), reads[0], fields


def call(fn: Callable[[], Any], what: str, calls: list[str], source: str | None = None) -> Any:
    """Call the candidate's code; an unexpected exception fails showing the calls that led
    to it (NotImplementedError is left to the engine: "not implemented yet")."""
    try:
        return fn()
    except (NotImplementedError, PropertyFailure):
        raise
    except Exception as exc:  # any exception of the candidate is a verdict
        raise _raised(exc, what, calls, source) from exc


def error_of(fn: Callable[[], Any], expected: type[BaseException], what: str,
             calls: list[str], source: str | None = None) -> str | None:
    """None when fn() returns, the exception's name when it raises `expected`; any other
    exception fails like `call`."""
    try:
        fn()
    except expected:
        return expected.__name__
    except (NotImplementedError, PropertyFailure):
        raise
    except Exception as exc:
        raise _raised(exc, what, calls, source) from exc
    return None


def _raised(exc: Exception, what: str, calls: list[str], source: str | None) -> PropertyFailure:
    where = None
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if source and f.filename == source]
    if frames:
        where = f"raised at line {frames[-1].lineno}, in {frames[-1].name}: {(frames[-1].line or '').strip()}"
    return PropertyFailure(f"{what} raised {type(exc).__name__}: {exc}", input=list(calls), note=where)


# ------------------------------------------------------------------------ reference mirror


@dataclass
class _Entry:
    prompt_len: int
    max_new_tokens: int
    key: tuple
    state: str = "waiting"  # waiting | running | done | aborted
    prompt_left: int = 0


@dataclass
class Mirror:
    """What the reference's calls and Batches say about each request, for explanations."""

    cfg: dict
    entries: dict[str, _Entry] = field(default_factory=dict)
    rejected: set[str] = field(default_factory=set)

    def add(self, rid: str, p: int, m: int, prio: int, t: float, accepted: bool) -> None:
        if accepted:
            self.entries[rid] = _Entry(p, m, (prio, t, rid), prompt_left=p)
            self.rejected.discard(rid)
        else:
            self.rejected.add(rid)

    def state(self, rid: str) -> str:
        entry = self.entries.get(rid)
        return entry.state if entry else "unknown"

    def apply(self, batch: dict) -> None:
        for rid in batch["preempted"]:
            e = self.entries[rid]
            e.state, e.prompt_left = "waiting", e.prompt_len
        for rid, chunk in batch["prefill"].items():
            e = self.entries[rid]
            e.state, e.prompt_left = "running", e.prompt_left - chunk
        for rid in batch["finished"]:
            self.entries[rid].state = "done"

    def add_error_rule(self, rid: str, p: int, m: int) -> str:
        """The statement's rule that decides whether this add_request raises."""
        bs, nb = self.cfg["block_size"], self.cfg["num_blocks"]
        if rid in self.entries:
            return f"add_request raises ValueError for an id seen before (here: {self.state(rid)})"
        if p < 1 or m < 1:
            return "add_request raises ValueError when prompt_len < 1 or max_new_tokens < 1"
        if -(-(p + m) // bs) > nb:
            return ("add_request raises ValueError for a request that could never fit: "
                    "ceil((prompt_len + max_new_tokens) / block_size) > num_blocks")
        if rid in self.rejected:
            return "an id whose add_request was rejected counts as never seen: it may be added later"
        return ("add_request accepts a new id with prompt_len, max_new_tokens >= 1 that fits "
                "(ceil((prompt_len + max_new_tokens) / block_size) <= num_blocks)")


def _order_detail(want: list, got: list) -> str:
    missing = [r for r in want if r not in got]
    extra = [r for r in got if r not in want]
    if missing:
        return f"request {missing[0]!r} is missing"
    if extra:
        return f"request {extra[0]!r} should not be there"
    return f"wrong order (expected {want}, got {got})"


def explain(want: dict, got: dict, before: Mirror) -> str:
    """The first differing field of a Batch and the statement rule that decides it."""
    aging = " — " + RULE_AGING if before.cfg.get("aging_steps") else ""
    for name, phase_rule, order_rule in (("preempted", RULE_PREEMPT, RULE_VICTIM),
                                         ("decode", RULE_DECODE, RULE_DECODE_ORDER)):
        w, g = want[name], got[name]
        if w != g:
            # Who (or in which order) is the urgency rule; how many is the phase rule.
            same = len(w) == len(g) if name == "preempted" else sorted(w) == sorted(g)
            which = order_rule if same else phase_rule
            return f"{name} list — {which}; {URGENCY}: " + _order_detail(w, g)
    if want["prefill"] != got["prefill"]:
        w, g = want["prefill"], got["prefill"]
        rid = next(r for r in list(w) + list(g) if w.get(r) != g.get(r))
        detail = f"prefill of request {rid!r}: expected {w.get(rid, 'none')}, got {g.get(rid, 'none')}"
        state = before.state(rid)
        if rid in want["preempted"]:
            return f"admission — {RULE_NO_ADMIT} (a victim waits for a later step): {detail}"
        if state == "running":
            left = before.entries[rid].prompt_left
            rule = RULE_CHUNK + ("; " + RULE_RETRY if want["preempted"] else "")
            return f"prefill chunk — {rule}: {detail} ({left} prompt tokens left)"
        if state == "waiting":
            if want["preempted"]:
                return f"admission — {RULE_NO_ADMIT}: {detail}"
            return f"admission — {RULE_ADMIT}; {URGENCY}{aging}: {detail}"
        why = "its add_request was rejected" if rid in before.rejected else f"it is {state}"
        return f"prefill — only waiting or running requests are scheduled: {detail} ({why})"
    return f"finished list — {RULE_FINISH}: " + _order_detail(want["finished"], got["finished"])


# ------------------------------------------------------------------------ the pair


class Pair:
    """A reference scheduler and a solution scheduler receiving the same calls."""

    def __init__(self, solution: Any, reference: Any, cfg: dict, headline: str | None = None) -> None:
        self.sol_mod, self.ref_mod, self.cfg = solution, reference, cfg
        self.headline = headline
        self.calls = [config_text(cfg)]
        self.ref = reference.Scheduler(**cfg)
        self.source = getattr(solution, "__file__", None)
        self.sol = call(lambda: solution.Scheduler(**cfg), "Scheduler(...)", self.calls, self.source)
        self.mirror = Mirror(cfg)
        self.num_steps = 0
        self.unfinished_read: tuple[bool, Any] | None = None  # has_unfinished() read with the last call

    def fail(self, prop: str, expected: Any, got: Any, note: str | None = None) -> None:
        if self.headline:
            prop = f"{self.headline} — {prop}"
        raise PropertyFailure(prop, input=list(self.calls), expected=expected, got=got, note=note)

    def add(self, rid: str, p: int, m: int, prio: int = 0, t: float | None = None) -> bool:
        """add_request on both; True when accepted."""
        t = float(self.num_steps) if t is None else float(t)
        self.calls.append(request_text(rid, p, m, prio, t))
        want = error_of(lambda: self.ref.add_request(self.ref_mod.Request(rid, p, m, prio, t)),
                        ValueError, "reference add_request", self.calls)
        self.unfinished_read = None
        # The candidate's Request (its constructor may reject the fields), then add_request
        # of it and has_unfinished() after, in one round trip.
        sent: list[tuple] = []

        def made() -> Any:
            sent.append(new_then_call(self.sol, "add_request", self.sol_mod.Request, (rid, p, m, prio, t),
                                      reads=[("has_unfinished", ())]))
            return outcome_value(sent[0][0])

        got = error_of(made, ValueError, "add_request", self.calls, self.source)
        if got is None:
            _, outcome, reads = sent[0]
            self.unfinished_read = reads[0]
            got = error_of(lambda: outcome_value(outcome), ValueError, "add_request", self.calls, self.source)
        if want != got:
            self.fail(self.mirror.add_error_rule(rid, p, m), expected=want or "accepted",
                      got=got or "accepted")
        if want:
            self.calls[-1] += "  -> ValueError"
        self.mirror.add(rid, p, m, prio, t, accepted=want is None)
        return want is None

    def abort(self, rid: str) -> bool:
        """abort on both; True when it succeeded."""
        self.calls.append(f"abort({rid!r})")
        self.unfinished_read = None
        want = error_of(lambda: self.ref.abort(rid), KeyError, "reference abort", self.calls)
        got = self._sol_call("abort", (rid,), KeyError, "abort")
        if want != got:
            self.fail("abort raises KeyError exactly for an unknown, finished or already "
                      f"aborted id (here: {self.mirror.state(rid)})",
                      expected=want or "aborted", got=got or "aborted")
        if want:
            self.calls[-1] += "  -> KeyError"
        elif rid in self.mirror.entries:
            self.mirror.entries[rid].state = "aborted"
        return want is None

    def step(self) -> dict:
        """step() on both; the first Batch that differs fails, naming the rule."""
        return self.steps(1)[0]

    def steps(self, n: int, *, until_done: bool = False) -> list[dict]:
        """step() on both, n times (with until_done: while the reference has unfinished
        requests, at most n times), each compared as it is taken: the reference steps first,
        then the candidate's scheduler makes its steps in one round trip (a Script)."""
        plan: list[tuple[dict, bool]] = []  # the reference's Batch, and has_unfinished() after it
        for _ in range(n):
            if until_done and not self.ref.has_unfinished():
                break
            want = view(self.ref.step())
            plan.append((want, self.ref.has_unfinished()))
        script = Script(self.sol, [STEP_ENTRY] * len(plan))
        for want, ref_unfinished in plan:
            self._compare_step(want, ref_unfinished, script.take())
        return [want for want, _ in plan]

    def _compare_step(self, want: dict, ref_unfinished: bool, record: tuple | None) -> None:
        self.num_steps += 1
        self.calls.append(f"step() #{self.num_steps}")
        self.unfinished_read = None
        if record is None:
            stepped, unfinished, fields = step_reads(self.sol)
        else:
            stepped, unfinished, fields = (lambda: outcome_value(record[1])), record[2][0], record[3]
        got = view(call(stepped, f"step() #{self.num_steps}", self.calls, self.source), fields)
        if want != got:
            self.fail(f"step {self.num_steps} is the first whose Batch differs from the correct "
                      f"schedule: {explain(want, got, self.mirror)}", expected=want, got=got)
        self.mirror.apply(want)
        self.unfinished_read = unfinished
        self.check_unfinished(after_call=True, want=ref_unfinished)

    def _sol_call(self, name: str, args: tuple, expected: type[BaseException], what: str) -> str | None:
        """error_of for a method of the candidate's scheduler; has_unfinished() is read in
        the same round trip and kept for check_unfinished(after_call=True)."""
        outcome, reads, _ = call_then_read(self.sol, name, args, [("has_unfinished", ())])
        self.unfinished_read = reads[0]
        return error_of(lambda: outcome_value(outcome), expected, what, self.calls, self.source)

    def check_unfinished(self, read: tuple[bool, Any] | None = None, *, after_call: bool = False,
                         want: bool | None = None) -> None:
        """has_unfinished() of both agree: `read` (an outcome already read), or with
        after_call the one read with the last add_request/abort/step, or read now; `want`:
        the reference's, read when it was in the same state (else read now)."""
        if after_call and read is None:
            read = self.unfinished_read
        if want is None:
            want = self.ref.has_unfinished()
        if read is None:
            got = call(self.sol.has_unfinished, "has_unfinished()", self.calls, self.source)
        else:
            got = call(lambda: outcome_value(read), "has_unfinished()", self.calls, self.source)
        if want != got:
            self.fail(RULE_UNFINISHED, expected=want, got=got)

    def drain(self, max_steps: int = 200) -> None:
        self.steps(max_steps, until_done=True)


def compare_script(solution: Any, reference: Any, cfg: dict, ops: list[tuple],
                   headline: str | None = None) -> Pair:
    """Run fixed calls on both and fail at the first difference. Calls:
    ("add", rid, prompt_len, max_new_tokens, priority[, arrival_time]) (arrival defaults to
    the number of steps so far), ("step", repeat), ("abort", rid), ("drain",); "add_rejected"
    and "abort_rejected" are the same calls meant to raise. A script whose reference does
    not behave as written is a bug of the suite (it would test nothing), not a verdict."""
    pair = Pair(solution, reference, cfg, headline)
    for op in ops:
        kind = op[0]
        if kind in ("add", "add_rejected"):
            accepted = pair.add(*op[1:])
        elif kind in ("abort", "abort_rejected"):
            accepted = pair.abort(op[1])
        elif kind == "drain":
            pair.drain()
            continue
        else:
            for _ in range(op[1]):
                pair.step()
            continue
        if accepted != (kind in ("add", "abort")):
            raise RuntimeError(f"suite script error: the reference {'accepted' if accepted else 'rejected'} {op}")
    return pair


# ------------------------------------------------------------------------ random lockstep


def run_lockstep(solution: Any, reference: Any, level: int, max_examples: int) -> None:
    """Random calls on both, compared after every call (configs of `level`)."""

    class Lockstep(RuleBasedStateMachine):
        @initialize(cfg=configs(level))
        def setup(self, cfg: dict) -> None:
            self.pair = Pair(solution, reference, cfg)
            self.ids: list[str] = []

        def _add(self, num: int, p: int, m: int, prio: int) -> None:
            p, m = fit(self.pair.cfg, p, m)
            self.pair.add(f"q{num}", p, m, prio)
            self.ids.append(f"q{num}")

        @rule(num=st.integers(0, 20), p=st.integers(1, 6), m=st.integers(1, 4),
              prio=st.integers(0, 3))
        def add(self, num: int, p: int, m: int, prio: int) -> None:
            self._add(num, p, m, prio)

        @rule(num=st.integers(0, 20), p=st.integers(8, 24), m=st.integers(1, 3),
              prio=st.integers(0, 3))
        def add_long_prompt(self, num: int, p: int, m: int, prio: int) -> None:
            self._add(num, p, m, prio)

        @rule(nums=st.lists(st.integers(0, 20), min_size=2, max_size=4), p=st.integers(1, 6),
              m=st.integers(1, 4), prios=st.lists(st.integers(0, 3), min_size=4, max_size=4))
        def burst(self, nums: list[int], p: int, m: int, prios: list[int]) -> None:
            for i, num in enumerate(nums):
                self._add(num, p + i, m, prios[i])

        @rule(repeat=st.integers(1, 3))
        def step(self, repeat: int) -> None:
            self.pair.steps(repeat)

        if level >= 3:
            @precondition(lambda self: bool(self.ids))
            @rule(pick=st.integers(0, 30))
            def abort(self, pick: int) -> None:
                self.pair.abort(self.ids[pick % len(self.ids)])

        @rule()
        def drain(self) -> None:
            """Step until the reference has nothing left (arrivals stop for a while)."""
            self.pair.drain(max_steps=40)

        @invariant()
        def same_unfinished(self) -> None:
            if hasattr(self, "pair"):
                self.pair.check_unfinished(after_call=True)

    run_state_machine_as_test(
        Lockstep, settings=settings(max_examples=max_examples, stateful_step_count=10,
                                  report_multiple_bugs=False))
