"""Kata: a priority continuous-batching scheduler (chunked prefill, KV preemption).

Write the scheduler of an inference server. Each call to `Scheduler.step()` plans ONE model
iteration and applies it, returning a `Batch`:

  phase 1a  decodes:  every running request whose prompt is complete gets one token,
                      most urgent first, while budget remains
  phase 1b  prefills: running requests with an incomplete prompt, most urgent first, get a
                      chunk of min(remaining prompt, remaining budget) tokens
            (1a, 1b)  if the KV blocks for a request's new slots are not free, preempt the
                      least urgent running request (blocks freed, progress reset to zero, back
                      to waiting with its original arrival time; tokens it got this step are
                      removed from the batch and refunded) and retry; if the least urgent is
                      the request itself, preempt it and move on
  phase 2   admit:    only if nothing was preempted this step: waiting requests, most urgent
                      first, while running < max_num_seqs and budget > 0, get a first chunk of
                      min(prompt_len, budget) tokens if its blocks are free; the first one
                      that does not fit ends phase 2

Urgency: (effective priority, arrival_time, request_id), smallest first; lower priority value
is more urgent. A request holds ceil(slots / block_size) KV blocks, slots = prompt tokens
computed + decode steps done. It finishes with its max_new_tokens-th decode (after its whole
prompt), and its blocks are freed when that step is applied.

Worked example: Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=4,
block_size=2); add a(prompt 3, new 2, priority 1, t=0) and b(prompt 5, new 2, priority 0, t=1):
  step 1 -> Batch(prefill={'b': 4}, decode=[], preempted=[], finished=[])
  step 2 -> Batch(prefill={'b': 1}, ...)   # a's chunk of 3 needs 2 blocks, only 1 free
(the full trace is in README.md)

Levels: 1 priorities, budget, max_num_seqs, chunked prefill, decodes first (memory never
binding); 2 KV blocks and preemption by recompute; 3 abort, aging, thread safety.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Request:
    """An inference request.

    request_id: unique for the scheduler's lifetime.
    prompt_len: prompt tokens, >= 1.
    max_new_tokens: decode steps after the prompt, >= 1.
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
    """Plans model iterations over a pool of `num_blocks` KV blocks of `block_size` slots.

    aging_steps (level 3): None, or >= 1. A waiting request's wait count is 0 when it enters
    the waiting queue (added, or preempted) and grows by one at the end of every step that
    ends with it waiting; its effective priority is priority - wait // aging_steps. A running
    request uses its base priority.

    Level 3: add_request and abort may be called from other threads while step() runs.
    """

    def __init__(self, max_num_batched_tokens: int, max_num_seqs: int, num_blocks: int,
                 block_size: int, aging_steps: int | None = None) -> None:
        """ValueError if any count is < 1, or aging_steps is neither None nor >= 1."""
        # TODO: validate, then set up the waiting queue, the running set and the free blocks
        raise NotImplementedError

    def add_request(self, request: Request) -> None:
        """Queue a request.

        ValueError: an id seen before (waiting, running, finished or aborted),
        prompt_len < 1 or max_new_tokens < 1, or a request that could never fit:
        ceil((prompt_len + max_new_tokens) / block_size) > num_blocks. A rejected id
        counts as never seen.
        """
        # TODO
        raise NotImplementedError

    def abort(self, request_id: str) -> None:
        """Drop a waiting or running request and free its blocks.

        KeyError: the id is unknown, finished or already aborted.
        """
        # TODO (level 3)
        raise NotImplementedError

    def step(self) -> Batch:
        """Plan one model iteration (phases 1a, 1b, 2 above) and apply it: advance progress,
        free the blocks of finished requests, age the waiting queue."""
        # TODO
        raise NotImplementedError

    def has_unfinished(self) -> bool:
        """True while any request is waiting or running."""
        # TODO
        raise NotImplementedError
