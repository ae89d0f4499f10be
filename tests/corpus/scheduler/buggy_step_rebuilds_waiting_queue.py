"""Buggy scheduler (add without lock, step rebuilds the queue): a copy of the reference with one mistake.

add_request takes no lock, and step() admits from a snapshot of the waiting queue and then
replaces the queue with what is left of the snapshot: a request added while step() runs is lost.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Request:
    """An inference request. Lower `priority` is more urgent."""

    request_id: str
    prompt_len: int  # >= 1
    max_new_tokens: int  # >= 1
    priority: int = 0
    arrival_time: float = 0.0


@dataclass
class Batch:
    """What one step ran: prefill chunks, decodes, and what changed state."""

    prefill: dict[str, int] = field(default_factory=dict)  # request_id -> prompt tokens
    decode: list[str] = field(default_factory=list)  # urgency order
    preempted: list[str] = field(default_factory=list)  # order of preemption
    finished: list[str] = field(default_factory=list)  # urgency order


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class _Seq:
    """The scheduler's state of one request."""

    request: Request
    num_computed_tokens: int = 0  # prompt tokens computed
    num_decoded_tokens: int = 0  # decode steps done
    num_blocks: int = 0  # KV blocks held
    num_wait_steps: int = 0  # steps ended in the waiting queue since it (re)entered it

    @property
    def num_slots(self) -> int:
        return self.num_computed_tokens + self.num_decoded_tokens

    @property
    def prompt_done(self) -> bool:
        return self.num_computed_tokens == self.request.prompt_len

    @property
    def num_remaining_prompt(self) -> int:
        return self.request.prompt_len - self.num_computed_tokens


@dataclass
class _Plan:
    """The step being planned: tokens granted so far and the budget left."""

    budget_left: int
    prefill: dict[str, int] = field(default_factory=dict)
    decode: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)

    def refund(self, request_id: str) -> None:
        if request_id in self.prefill:
            self.budget_left += self.prefill.pop(request_id)
        elif request_id in self.decode:
            self.decode.remove(request_id)
            self.budget_left += 1


class Scheduler:
    """Plans model iterations over a fixed pool of KV blocks.

    Invariants (between calls):
      * every request id ever accepted is in exactly one of: waiting, running, done;
      * num_free_blocks + sum(blocks held by running requests) == num_blocks, and a waiting
        request holds no blocks and has no progress;
      * len(running) <= max_num_seqs;
      * a running request holds exactly ceil(slots / block_size) blocks.
    add_request, abort and step take one lock, so they may be called from any thread.
    """

    def __init__(self, max_num_batched_tokens: int, max_num_seqs: int, num_blocks: int,
                 block_size: int, aging_steps: int | None = None) -> None:
        for name, value in (("max_num_batched_tokens", max_num_batched_tokens),
                            ("max_num_seqs", max_num_seqs), ("num_blocks", num_blocks),
                            ("block_size", block_size)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if aging_steps is not None and aging_steps < 1:
            raise ValueError(f"aging_steps must be None or >= 1, got {aging_steps}")
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.aging_steps = aging_steps
        self._num_free_blocks = num_blocks
        self._waiting: dict[str, _Seq] = {}
        self._running: dict[str, _Seq] = {}
        self._seen_ids: set[str] = set()
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ public API

    def add_request(self, request: Request) -> None:
        """Queue a request. ValueError for a seen id, bad fields, or one that never fits."""
        if True:  # BUG: no lock (step() holds its own)
            if request.request_id in self._seen_ids:
                raise ValueError(f"request id {request.request_id!r} was already used")
            if request.prompt_len < 1 or request.max_new_tokens < 1:
                raise ValueError("prompt_len and max_new_tokens must be >= 1")
            num_slots = request.prompt_len + request.max_new_tokens
            if _ceil_div(num_slots, self.block_size) > self.num_blocks:
                raise ValueError(f"request {request.request_id!r} needs more than "
                                 f"{self.num_blocks} blocks and could never run")
            self._seen_ids.add(request.request_id)
            self._waiting[request.request_id] = _Seq(request)

    def abort(self, request_id: str) -> None:
        """Drop a waiting or running request and free its blocks; KeyError if not live."""
        with self._lock:
            if request_id in self._running:
                seq = self._running.pop(request_id)
                self._num_free_blocks += seq.num_blocks
            elif request_id in self._waiting:
                del self._waiting[request_id]
            else:
                raise KeyError(request_id)

    def has_unfinished(self) -> bool:
        with self._lock:
            return bool(self._waiting or self._running)

    def step(self) -> Batch:
        """Plan one model iteration and apply it."""
        with self._lock:
            plan = _Plan(budget_left=self.max_num_batched_tokens)
            self._schedule_decodes(plan)
            self._schedule_prefill_chunks(plan)
            if not plan.preempted:
                self._admit_waiting(plan)
            return self._apply(plan)

    # ------------------------------------------------------------------ urgency

    def _running_key(self, seq: _Seq) -> tuple:
        r = seq.request
        return (r.priority, r.arrival_time, r.request_id)

    def _waiting_key(self, seq: _Seq) -> tuple:
        r = seq.request
        boost = seq.num_wait_steps // self.aging_steps if self.aging_steps else 0
        return (r.priority - boost, r.arrival_time, r.request_id)

    # ------------------------------------------------------------------ phases

    def _schedule_decodes(self, plan: _Plan) -> None:
        """Phase 1a: one token for each running request whose prompt is complete."""
        for seq in sorted(self._running.values(), key=self._running_key):
            if plan.budget_left == 0:
                return
            if seq.request.request_id in self._running and seq.prompt_done:
                self._grant(plan, seq, is_decode=True)

    def _schedule_prefill_chunks(self, plan: _Plan) -> None:
        """Phase 1b: a chunk for each running request whose prompt is incomplete."""
        for seq in sorted(self._running.values(), key=self._running_key):
            if plan.budget_left == 0:
                return
            if seq.request.request_id in self._running and not seq.prompt_done:
                self._grant(plan, seq, is_decode=False)

    def _grant(self, plan: _Plan, seq: _Seq, is_decode: bool) -> None:
        """Give `seq` its tokens, preempting the least urgent running request while its
        blocks are not free; stops when `seq` itself is the one preempted."""
        while True:
            # Recomputed on every try: a refunded victim can enlarge the chunk.
            num_tokens = 1 if is_decode else min(seq.num_remaining_prompt, plan.budget_left)
            if self._try_allocate(seq, seq.num_slots + num_tokens):
                if is_decode:
                    plan.decode.append(seq.request.request_id)
                else:
                    plan.prefill[seq.request.request_id] = num_tokens
                plan.budget_left -= num_tokens
                return
            victim = max(self._running.values(), key=self._running_key)
            self._preempt(plan, victim)
            if victim is seq:
                return

    def _admit_waiting(self, plan: _Plan) -> None:
        """Phase 2: admit waiting requests in urgency order; the first misfit ends it."""
        snapshot = dict(self._waiting)
        admitted = set()
        for seq in sorted(snapshot.values(), key=self._waiting_key):
            if len(self._running) >= self.max_num_seqs or plan.budget_left == 0:
                break
            num_tokens = min(seq.request.prompt_len, plan.budget_left)
            if not self._try_allocate(seq, num_tokens):
                break  # no less urgent request jumps ahead
            rid = seq.request.request_id
            admitted.add(rid)
            self._running[rid] = seq
            plan.prefill[rid] = num_tokens
            plan.budget_left -= num_tokens
        # BUG: the queue is rebuilt from the snapshot: an add since then is lost
        self._waiting = {rid: seq for rid, seq in snapshot.items() if rid not in admitted}

    # ------------------------------------------------------------------ memory

    def _try_allocate(self, seq: _Seq, num_slots: int) -> bool:
        """Grow `seq` to hold `num_slots` slots if the blocks are free."""
        num_new_blocks = _ceil_div(num_slots, self.block_size) - seq.num_blocks
        if num_new_blocks > self._num_free_blocks:
            return False
        self._num_free_blocks -= max(num_new_blocks, 0)
        seq.num_blocks += max(num_new_blocks, 0)
        return True

    def _preempt(self, plan: _Plan, seq: _Seq) -> None:
        """Recompute preemption: free the blocks, forget progress, back to waiting."""
        rid = seq.request.request_id
        del self._running[rid]
        plan.refund(rid)
        self._num_free_blocks += seq.num_blocks
        seq.num_blocks = seq.num_computed_tokens = seq.num_decoded_tokens = 0
        seq.num_wait_steps = 0
        self._waiting[rid] = seq
        plan.preempted.append(rid)

    # ------------------------------------------------------------------ apply

    def _apply(self, plan: _Plan) -> Batch:
        """Advance progress, free finished requests, age the waiting queue."""
        for rid, num_tokens in plan.prefill.items():
            self._running[rid].num_computed_tokens += num_tokens
        finished = []
        for rid in plan.decode:
            seq = self._running[rid]
            seq.num_decoded_tokens += 1
            if seq.num_decoded_tokens == seq.request.max_new_tokens:
                finished.append(seq)
        for seq in finished:
            del self._running[seq.request.request_id]
            self._num_free_blocks += seq.num_blocks
            seq.num_blocks = 0
        for seq in self._waiting.values():
            seq.num_wait_steps += 1
        return Batch(prefill=dict(plan.prefill), decode=list(plan.decode),
                     preempted=list(plan.preempted),
                     finished=[s.request.request_id for s in finished])
