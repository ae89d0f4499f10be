"""Correct scheduler written differently from the reference: physical block ids in a free
list and a block table per request, request state in plain dicts, a non-reentrant Lock,
the step planned as a list of (request_id, kind, tokens) grants and the Batch built at the end.
"""

from __future__ import annotations

import math
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


class Scheduler:
    def __init__(self, max_num_batched_tokens, max_num_seqs, num_blocks, block_size,
                 aging_steps=None):
        if min(max_num_batched_tokens, max_num_seqs, num_blocks, block_size) < 1:
            raise ValueError("all sizes must be >= 1")
        if aging_steps is not None and aging_steps < 1:
            raise ValueError("aging_steps must be None or >= 1")
        self.budget = max_num_batched_tokens
        self.max_seqs = max_num_seqs
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.aging = aging_steps
        self.free = list(range(num_blocks))
        self.table = {}  # request_id -> list of physical block ids (running only)
        self.req = {}  # request_id -> Request (live only)
        self.done_prompt = {}  # request_id -> prompt tokens computed
        self.done_decode = {}  # request_id -> decode steps done
        self.waited = {}  # request_id -> wait count (waiting only)
        self.seen = set()
        self.mutex = threading.Lock()

    def add_request(self, request):
        with self.mutex:
            rid = request.request_id
            if rid in self.seen:
                raise ValueError("duplicate id")
            if request.prompt_len < 1 or request.max_new_tokens < 1:
                raise ValueError("bad request")
            if math.ceil((request.prompt_len + request.max_new_tokens) / self.block_size) > self.num_blocks:
                raise ValueError("never fits")
            self.seen.add(rid)
            self.req[rid] = request
            self._to_waiting(rid)

    def abort(self, request_id):
        with self.mutex:
            if request_id not in self.req:
                raise KeyError(request_id)
            self.free.extend(self.table.pop(request_id, []))
            self.waited.pop(request_id, None)
            del self.req[request_id]

    def has_unfinished(self):
        with self.mutex:
            return bool(self.req)

    def _to_waiting(self, rid):
        self.done_prompt[rid] = 0
        self.done_decode[rid] = 0
        self.waited[rid] = 0

    def _key(self, rid):
        r = self.req[rid]
        prio = r.priority
        if rid in self.waited and self.aging:
            prio -= self.waited[rid] // self.aging
        return (prio, r.arrival_time, rid)

    def _grow(self, rid, slots):
        need = -(-slots // self.block_size) - len(self.table[rid])
        if need > len(self.free):
            return False
        for _ in range(max(need, 0)):
            self.table[rid].append(self.free.pop())
        return True

    def step(self):
        with self.mutex:
            grants = []  # (rid, "p" | "d", tokens)
            preempted = []
            left = self.budget
            order = sorted(self.table, key=self._key)
            for kind in ("d", "p"):
                for rid in order:
                    if left <= 0:
                        break
                    if rid not in self.table:
                        continue
                    complete = self.done_prompt[rid] == self.req[rid].prompt_len
                    if complete != (kind == "d"):
                        continue
                    while True:
                        n = 1 if kind == "d" else min(self.req[rid].prompt_len - self.done_prompt[rid], left)
                        slots = self.done_prompt[rid] + self.done_decode[rid] + n
                        if self._grow(rid, slots):
                            grants.append((rid, kind, n))
                            left -= n
                            break
                        victim = max(self.table, key=self._key)
                        for g in [g for g in grants if g[0] == victim]:
                            grants.remove(g)
                            left += g[2]
                        self.free.extend(self.table.pop(victim))
                        self._to_waiting(victim)
                        preempted.append(victim)
                        if victim == rid:
                            break
            if not preempted:
                queue = sorted(self.waited, key=self._key)
                for rid in queue:
                    if len(self.table) >= self.max_seqs or left <= 0:
                        break
                    n = min(self.req[rid].prompt_len, left)
                    if -(-n // self.block_size) > len(self.free):
                        break
                    del self.waited[rid]
                    self.table[rid] = []
                    self._grow(rid, n)
                    grants.append((rid, "p", n))
                    left -= n
            batch = Batch(preempted=preempted)
            for rid, kind, n in grants:
                if kind == "p":
                    self.done_prompt[rid] += n
                    batch.prefill[rid] = n
                else:
                    self.done_decode[rid] += 1
                    batch.decode.append(rid)
            for rid in list(batch.decode):
                if self.done_decode[rid] == self.req[rid].max_new_tokens:
                    batch.finished.append(rid)
                    self.free.extend(self.table.pop(rid))
                    del self.req[rid]
            for rid in self.waited:
                self.waited[rid] += 1
            return batch
