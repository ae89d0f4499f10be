"""Configs, random workloads and their readable text, shared by the levels.

A workload is a list of calls: ("add", prompt_len, max_new_tokens, priority[, arrival_time])
(arrival_time defaults to the number of steps so far), ("step", repeat) and, from level 3,
("abort", pick). The targeted tests write their calls out by hand instead (see
lockstep.compare_script), so that the rule they test decides the outcome on every seed.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

BIG_POOL = 10_000  # level 1: memory is never binding


def config(budget: int, seqs: int, num_blocks: int = BIG_POOL, block_size: int = 4,
           aging: int | None = None) -> dict:
    """Scheduler keyword arguments, in the statement's order."""
    return {"max_num_batched_tokens": budget, "max_num_seqs": seqs, "num_blocks": num_blocks,
            "block_size": block_size, "aging_steps": aging}


@st.composite
def configs(draw: Any, level: int) -> dict:
    """Level 1: a pool that never binds; level 2: a few blocks, so that preemption and
    misfits are common; level 3: aging too (None included)."""
    cfg = config(draw(st.integers(1, 8)), draw(st.integers(1, 4)), BIG_POOL,
                 draw(st.integers(1, 4)))
    if level >= 2:
        cfg["num_blocks"] = draw(st.integers(2, 6))
        cfg["block_size"] = draw(st.integers(1, 3))
    if level >= 3:
        cfg["aging_steps"] = draw(st.sampled_from([None, 1, 2, 3]))
    return cfg


def capacity(cfg: dict) -> int:
    return cfg["num_blocks"] * cfg["block_size"]


def fit(cfg: dict, prompt_len: int, max_new_tokens: int) -> tuple[int, int]:
    """Shrink a drawn request so that it fits the pool (always >= 1 and 1)."""
    cap = min(capacity(cfg), 10**6)
    prompt_len = max(1, min(prompt_len, cap - 1))
    return prompt_len, max(1, min(max_new_tokens, cap - prompt_len))


@st.composite
def scenarios(draw: Any, level: int) -> tuple[dict, list[tuple]]:
    """A config of `level` and a list of calls (short and long prompts, mixed priorities)."""
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


# ------------------------------------------------------------------------- readable text


def config_text(cfg: dict) -> str:
    return "Scheduler(" + ", ".join(f"{k}={v}" for k, v in cfg.items()) + ")"


def request_text(rid: str, p: int, m: int, prio: int, t: float) -> str:
    return (f"add_request(Request({rid!r}, prompt_len={p}, max_new_tokens={m}, "
            f"priority={prio}, arrival_time={t:g}))")


def urgency(priority: int, arrival_time: float, rid: str) -> tuple:
    """The statement's urgency key: smallest first."""
    return (priority, arrival_time, rid)


# ------------------------------------------------------------------------- constructed cases


def multi_victim_case(block_size: int, num_victims: int, finisher_least_urgent: bool,
                      budget: int, urgent_prompt_len: int) -> tuple[dict, list[tuple]]:
    """A step in which one chunk needs two or more victims while a request finishes.

    Step 1 admits a finisher f (2 decodes) and decoders v1..vk; step 2 decodes them and
    admits u (a long prompt) into the last free blocks: the pool is then exactly full. In
    step 3, f does its last decode (it still holds its blocks until the step is applied) and
    u's next chunk needs more blocks than one victim frees: the least urgent decoders are
    preempted one after another (their decodes refunded, the chunk recomputed). With
    `finisher_least_urgent`, f is the first victim and leaves `finished`.
    """
    b, k = block_size, num_victims
    ops: list[tuple] = [("add", "f", b, 2, k + 2 if finisher_least_urgent else 0, 0.0)]
    ops += [("add", f"v{i}", b, 9, 1 + i, 0.0) for i in range(1, k + 1)]
    ops += [("step", 1), ("add", "u", urgent_prompt_len, 1, 0 if finisher_least_urgent else 1),
            ("step", 3)]
    num_blocks = 2 * (k + 1) + -(-(budget - k - 1) // b)
    return config(budget, k + 2, num_blocks, b), ops


# (block_size, victims, finisher least urgent, budget, urgent prompt): each checked to need
# two or more victims for one chunk in step 3 with the reference.
MULTI_VICTIM_CASES = [(2, 2, False, 8, 11), (2, 3, False, 8, 10), (3, 2, False, 9, 13),
                      (3, 3, False, 12, 16), (1, 2, True, 7, 8), (2, 2, True, 7, 9),
                      (3, 3, True, 12, 17)]
