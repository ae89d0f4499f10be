"""Correct scheduler written differently from the reference: the running set is a list kept
in urgency order with bisect (the victim is always its last element), the wait count is
derived from the step at which a request entered the waiting queue, and a step's grants are
kept in a token ledger that makes refunds a dict pop.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Request:
    request_id: str
    prompt_len: int
    max_new_tokens: int
    priority: int = 0
    arrival_time: float = 0.0


@dataclass
class Batch:
    prefill: dict = field(default_factory=dict)
    decode: list = field(default_factory=list)
    preempted: list = field(default_factory=list)
    finished: list = field(default_factory=list)


def _base(r):
    return (r.priority, r.arrival_time, r.request_id)


class Scheduler:
    def __init__(self, max_num_batched_tokens, max_num_seqs, num_blocks, block_size,
                 aging_steps=None):
        for v in (max_num_batched_tokens, max_num_seqs, num_blocks, block_size):
            if v < 1:
                raise ValueError(f"{v} < 1")
        if aging_steps is not None and aging_steps < 1:
            raise ValueError("aging_steps")
        self.cap, self.seats, self.blocks, self.bs = max_num_batched_tokens, max_num_seqs, num_blocks, block_size
        self.aging = aging_steps
        self.steps_done = 0
        self.free_blocks = num_blocks
        self.running = []  # [(base key, request)] in urgency order
        self.waiting = {}  # request_id -> (request, steps_done when it entered)
        self.progress = {}  # request_id -> [prompt tokens, decodes, blocks]
        self.ids = set()
        self.lock = threading.Lock()

    def add_request(self, request):
        with self.lock:
            if request.request_id in self.ids:
                raise ValueError("seen")
            if request.prompt_len < 1 or request.max_new_tokens < 1:
                raise ValueError("bad")
            if (request.prompt_len + request.max_new_tokens + self.bs - 1) // self.bs > self.blocks:
                raise ValueError("too big")
            self.ids.add(request.request_id)
            self.waiting[request.request_id] = (request, self.steps_done)

    def abort(self, request_id):
        with self.lock:
            if request_id in self.waiting:
                del self.waiting[request_id]
                return
            for i, (_, r) in enumerate(self.running):
                if r.request_id == request_id:
                    del self.running[i]
                    self.free_blocks += self.progress.pop(request_id)[2]
                    return
            raise KeyError(request_id)

    def has_unfinished(self):
        with self.lock:
            return bool(self.running or self.waiting)

    def _fits(self, rid, slots):
        prog = self.progress[rid]
        extra = -(-slots // self.bs) - prog[2]
        if extra > self.free_blocks:
            return False
        if extra > 0:
            self.free_blocks -= extra
            prog[2] += extra
        return True

    def _evict_last(self, ledger, preempted):
        _, victim = self.running.pop()
        self.free_blocks += self.progress.pop(victim.request_id)[2]
        ledger.pop(victim.request_id, None)
        self.waiting[victim.request_id] = (victim, self.steps_done)
        preempted.append(victim.request_id)
        return victim

    def _serve(self, req, ledger, preempted, decode):
        rid = req.request_id
        while True:
            used = sum(n for n, _ in ledger.values())
            prog = self.progress[rid]
            n = 1 if decode else min(req.prompt_len - prog[0], self.cap - used)
            if self._fits(rid, prog[0] + prog[1] + n):
                ledger[rid] = (n, decode)
                return
            if self._evict_last(ledger, preempted) is req:
                return

    def step(self):
        with self.lock:
            ledger = {}  # request_id -> (tokens, is_decode), insertion = urgency order
            preempted = []
            for decode in (True, False):
                for _, req in list(self.running):
                    if sum(n for n, _ in ledger.values()) >= self.cap:
                        break
                    prog = self.progress.get(req.request_id)
                    if prog is None or (prog[0] == req.prompt_len) != decode:
                        continue
                    self._serve(req, ledger, preempted, decode)
            if not preempted:
                self._admit(ledger)
            return self._finish(ledger, preempted)

    def _effective(self, rid):
        req, entered = self.waiting[rid]
        boost = (self.steps_done - entered) // self.aging if self.aging else 0
        return (req.priority - boost, req.arrival_time, rid)

    def _admit(self, ledger):
        for rid in sorted(self.waiting, key=self._effective):
            left = self.cap - sum(n for n, _ in ledger.values())
            if len(self.running) >= self.seats or left <= 0:
                return
            req = self.waiting[rid][0]
            n = min(req.prompt_len, left)
            if -(-n // self.bs) > self.free_blocks:
                return
            del self.waiting[rid]
            self.progress[rid] = [0, 0, 0]
            self._fits(rid, n)
            bisect.insort(self.running, (_base(req), req))
            ledger[rid] = (n, False)

    def _finish(self, ledger, preempted):
        batch = Batch(preempted=preempted)
        done = []
        for key, req in self.running:
            rid = req.request_id
            if rid not in ledger:
                continue
            n, is_decode = ledger[rid]
            prog = self.progress[rid]
            if is_decode:
                prog[1] += 1
                batch.decode.append(rid)
                if prog[1] == req.max_new_tokens:
                    done.append((key, req))
            else:
                prog[0] += n
                batch.prefill[rid] = n
        for key, req in done:
            self.running.remove((key, req))
            self.free_blocks += self.progress.pop(req.request_id)[2]
            batch.finished.append(req.request_id)
        self.steps_done += 1
        return batch
