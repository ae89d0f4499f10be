"""Kata: a priority continuous-batching scheduler (chunked prefill, KV preemption).

Write the scheduler of an inference server. Each call to `Scheduler.step()` plans ONE model
iteration and applies it, returning a `Batch`: the requests that compute a chunk of their
prompt (`prefill`), those that generate one token (`decode`), those preempted, those finished.

Urgency: (priority, arrival_time, request_id), smallest first; a lower priority value is more
urgent. `decode` and `finished` list requests in urgency order, `preempted` in the order of
preemption.

Worked example: Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=100,
block_size=2); add a(prompt 3, new 2, priority 1, t=0) and b(prompt 5, new 2, priority 0, t=1):
  step 1 -> Batch(prefill={'b': 4}, decode=[], preempted=[], finished=[])
  step 2 -> Batch(prefill={'b': 1, 'a': 3}, decode=[], preempted=[], finished=[])
(`kata show scheduler` has the interviewer's words, and the answers to what you ask.)

Levels: 1 priorities, token budget and chunked prefill (memory never binds); 2 KV blocks and
preemption by recompute; 3 abort, aging and thread safety.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Request:
    """An inference request.

    request_id: unique for the scheduler's lifetime.
    prompt_len: prompt tokens, >= 1.
    max_new_tokens: tokens to generate, >= 1.
    priority: lower value = more urgent.
    arrival_time: ties in priority go to the earliest arrival, then the smallest id.
    """

    request_id: str
    prompt_len: int
    max_new_tokens: int
    priority: int = 0
    arrival_time: float = 0.0


@dataclass
class Batch:
    """What one step ran.

    prefill: request_id -> prompt tokens computed this step (a chunk, >= 1).
    decode: request_ids generating one token this step, in urgency order.
    preempted: request_ids evicted this step, in the order of preemption.
    finished: request_ids that completed with this step, in urgency order.
    """

    prefill: dict[str, int] = field(default_factory=dict)
    decode: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)


class Scheduler:
    """Plans model iterations over a KV cache of `num_blocks` blocks of `block_size` slots.

    Level 3: add_request and abort may be called from other threads while step() runs.
    """

    def __init__(self, max_num_batched_tokens: int, max_num_seqs: int, num_blocks: int,
                 block_size: int, aging_steps: int | None = None) -> None:
        """max_num_batched_tokens: the token budget of one step; max_num_seqs: the cap on
        running requests; num_blocks, block_size: the KV cache (level 2); aging_steps: None,
        or >= 1 (level 3).

        ValueError if any count is < 1, or aging_steps is neither None nor >= 1.
        """
        # TODO: validate, then set up the waiting queue, the running set and the free blocks
        raise NotImplementedError

    def add_request(self, request: Request) -> None:
        """Queue a request.

        ValueError: an id seen before (waiting, running, finished or aborted),
        prompt_len < 1 or max_new_tokens < 1, or a request that could never fit in the
        KV cache.
        """
        # TODO
        raise NotImplementedError

    def abort(self, request_id: str) -> None:
        """Drop a waiting or running request: it never runs again, and what it holds is freed.

        KeyError: the id is not waiting or running (unknown, finished or already aborted).
        """
        # TODO (level 3)
        raise NotImplementedError

    def step(self) -> Batch:
        """Plan one model iteration, apply it, and return what ran."""
        # TODO
        raise NotImplementedError

    def has_unfinished(self) -> bool:
        """True while any request is waiting or running."""
        # TODO
        raise NotImplementedError
