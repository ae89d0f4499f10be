"""Visible examples for the `scheduler` kata (`kata check` runs them on your file).

The first ones replay the worked trace of the statement step by step."""

from grader.protocol import expect, kata_test


def _batch(b):
    return {"prefill": dict(b.prefill), "decode": list(b.decode),
            "preempted": list(b.preempted), "finished": list(b.finished)}


def _empty(**fields):
    out = {"prefill": {}, "decode": [], "preempted": [], "finished": []}
    out.update(fields)
    return out


def _worked_trace(solution):
    s = solution.Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=4, block_size=2)
    s.add_request(solution.Request("a", 3, 2, priority=1, arrival_time=0.0))
    s.add_request(solution.Request("b", 5, 2, priority=0, arrival_time=1.0))
    return s


@kata_test(level=1, category="correctness",
           description="worked trace, steps 1-2: b (more urgent) is chunked 4 + 1 within the budget")
def test_worked_trace_chunked_prefill(solution):
    s = _worked_trace(solution)
    got = _batch(s.step())
    expect(got == _empty(prefill={"b": 4}), "step 1: b gets a 4-token chunk, a waits",
           expected=_empty(prefill={"b": 4}), got=got)
    got = _batch(s.step())
    expect(got == _empty(prefill={"b": 1}),
           "step 2: b gets its last prompt token; a's chunk of 3 needs 2 blocks, only 1 is free",
           expected=_empty(prefill={"b": 1}), got=got)


@kata_test(level=1, category="correctness",
           description="a single request: prompt in chunks, then max_new_tokens decodes, then finished")
def test_single_request_lifecycle(solution):
    s = solution.Scheduler(max_num_batched_tokens=2, max_num_seqs=1, num_blocks=100, block_size=4)
    s.add_request(solution.Request("r", 3, 2))
    want = [_empty(prefill={"r": 2}), _empty(prefill={"r": 1}), _empty(decode=["r"]),
            _empty(decode=["r"], finished=["r"])]
    for i, expected in enumerate(want, start=1):
        got = _batch(s.step())
        expect(got == expected, f"step {i}", expected=expected, got=got)
    expect(s.has_unfinished() is False, "nothing unfinished after r finished",
           expected=False, got=s.has_unfinished())


@kata_test(level=1, category="correctness",
           description="decodes first: a running decode is served before a new prompt's chunk")
def test_decodes_before_prefill(solution):
    s = solution.Scheduler(max_num_batched_tokens=3, max_num_seqs=4, num_blocks=100, block_size=4)
    s.add_request(solution.Request("old", 1, 3, priority=5))
    s.step()
    s.add_request(solution.Request("new", 10, 1, priority=0, arrival_time=1.0))
    got = _batch(s.step())
    expected = _empty(prefill={"new": 2}, decode=["old"])
    expect(got == expected, "old decodes (1 token), new gets the remaining 2 tokens",
           expected=expected, got=got)


@kata_test(level=2, category="correctness",
           description="worked trace, steps 3-5: c admitted, then preempted by b's decode; no admission that step")
def test_worked_trace_preemption(solution):
    s = _worked_trace(solution)
    s.step()
    s.step()
    s.add_request(solution.Request("c", 2, 1, priority=0, arrival_time=2.0))
    want = [_empty(prefill={"c": 2}, decode=["b"]),
            _empty(decode=["b"], preempted=["c"], finished=["b"]),
            _empty(prefill={"c": 2, "a": 2}),
            _empty(prefill={"a": 1}, decode=["c"], finished=["c"]),
            _empty(decode=["a"]),
            _empty(decode=["a"], finished=["a"])]
    for i, expected in enumerate(want, start=3):
        got = _batch(s.step())
        expect(got == expected, f"step {i} of the worked trace", expected=expected, got=got)


@kata_test(level=2, category="api contract",
           description="a request that could never fit is rejected with ValueError")
def test_never_fits_is_rejected(solution):
    s = solution.Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=4, block_size=2)
    try:
        s.add_request(solution.Request("big", 8, 1))  # ceil(9 / 2) = 5 > 4 blocks
    except ValueError:
        return
    expect(False, "add_request raises ValueError when ceil((prompt_len + max_new_tokens) / "
           "block_size) > num_blocks", expected="ValueError", got="accepted")


@kata_test(level=3, category="correctness",
           description="abort frees a running request's blocks; aborting it again is a KeyError")
def test_abort_frees_blocks(solution):
    s = solution.Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=2, block_size=2)
    s.add_request(solution.Request("x", 3, 1))
    s.step()
    s.add_request(solution.Request("y", 3, 1))
    s.abort("x")
    got = _batch(s.step())
    expect(got == _empty(prefill={"y": 3}), "after abort('x'), y fits in the freed blocks",
           expected=_empty(prefill={"y": 3}), got=got)
    try:
        s.abort("x")
    except KeyError:
        return
    expect(False, "a second abort('x') raises KeyError", expected="KeyError", got="no error")


@kata_test(level=3, category="correctness",
           description="aging: a low-priority request that waited overtakes a newer urgent one")
def test_aging_lifts_priority(solution):
    s = solution.Scheduler(max_num_batched_tokens=1, max_num_seqs=1, num_blocks=100,
                           block_size=4, aging_steps=1)
    s.add_request(solution.Request("busy", 1, 2, priority=0))
    s.add_request(solution.Request("low", 1, 1, priority=2))
    for _ in range(3):  # busy: prefill, decode, decode (finished); low waits 3 steps
        s.step()
    s.add_request(solution.Request("urgent", 1, 1, priority=0, arrival_time=3.0))
    got = _batch(s.step())
    expect(got == _empty(prefill={"low": 1}),
           "effective priority = priority - wait // aging_steps: low 2 - 3 = -1 beats urgent 0 - 0 = 0",
           expected=_empty(prefill={"low": 1}), got=got)
