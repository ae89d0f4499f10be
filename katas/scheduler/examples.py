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


# The worked trace's calls, as a failing example shows them.
WORKED_TRACE = ("s = Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=4, block_size=2); "
                "s.add_request(Request('a', 3, 2, priority=1, arrival_time=0.0)); "
                "s.add_request(Request('b', 5, 2, priority=0, arrival_time=1.0))")


def _worked_trace(solution):
    s = solution.Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=4, block_size=2)
    s.add_request(solution.Request("a", 3, 2, priority=1, arrival_time=0.0))
    s.add_request(solution.Request("b", 5, 2, priority=0, arrival_time=1.0))
    return s


@kata_test(level=1, category="correctness",
           description="worked trace, steps 1-2: a and b wait, b is more urgent")
def test_worked_trace_chunked_prefill(solution):
    s = _worked_trace(solution)
    got = _batch(s.step())
    expect(got == _empty(prefill={"b": 4}), "the Batch s.step() returns at step 1",
           input=WORKED_TRACE + "; s.step()", expected=_empty(prefill={"b": 4}), got=got)
    got = _batch(s.step())
    expect(got == _empty(prefill={"b": 1}), "the Batch s.step() returns at step 2",
           input=WORKED_TRACE + "; s.step(); s.step()", expected=_empty(prefill={"b": 1}), got=got)


@kata_test(level=1, category="correctness",
           description="a single request: prompt in chunks, then max_new_tokens decodes, then finished")
def test_single_request_lifecycle(solution):
    s = solution.Scheduler(max_num_batched_tokens=2, max_num_seqs=1, num_blocks=100, block_size=4)
    s.add_request(solution.Request("r", 3, 2))
    want = [_empty(prefill={"r": 2}), _empty(prefill={"r": 1}), _empty(decode=["r"]),
            _empty(decode=["r"], finished=["r"])]
    calls = ("s = Scheduler(max_num_batched_tokens=2, max_num_seqs=1, num_blocks=100, block_size=4); "
             "s.add_request(Request('r', 3, 2))")
    for i, expected in enumerate(want, start=1):
        got = _batch(s.step())
        expect(got == expected, f"the Batch s.step() returns at step {i}",
               input=calls + f"; s.step() x {i}", expected=expected, got=got)
    expect(s.has_unfinished() is False, "s.has_unfinished() after step 4",
           input=calls + "; s.step() x 4; s.has_unfinished()", expected=False, got=s.has_unfinished())


@kata_test(level=1, category="correctness",
           description="a step with a running decode and a new long prompt")
def test_decodes_before_prefill(solution):
    s = solution.Scheduler(max_num_batched_tokens=3, max_num_seqs=4, num_blocks=100, block_size=4)
    s.add_request(solution.Request("old", 1, 3, priority=5))
    s.step()
    s.add_request(solution.Request("new", 10, 1, priority=0, arrival_time=1.0))
    got = _batch(s.step())
    expected = _empty(prefill={"new": 2}, decode=["old"])
    expect(got == expected, "the Batch s.step() returns at step 2",
           input="s = Scheduler(max_num_batched_tokens=3, max_num_seqs=4, num_blocks=100, block_size=4); "
                 "s.add_request(Request('old', 1, 3, priority=5)); s.step(); "
                 "s.add_request(Request('new', 10, 1, priority=0, arrival_time=1.0)); s.step()",
           expected=expected, got=got)


@kata_test(level=2, category="correctness",
           description="worked trace from step 3: c arrives while b decodes")
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
    calls = (WORKED_TRACE + "; s.step(); s.step(); "
             "s.add_request(Request('c', 2, 1, priority=0, arrival_time=2.0))")
    for i, expected in enumerate(want, start=3):
        got = _batch(s.step())
        expect(got == expected, f"the Batch s.step() returns at step {i} of the worked trace",
               input=calls + f"; s.step() x {i - 2}", expected=expected, got=got)


@kata_test(level=2, category="api contract",
           description="a request that could never fit is rejected with ValueError")
def test_never_fits_is_rejected(solution):
    s = solution.Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=4, block_size=2)
    try:
        s.add_request(solution.Request("big", 8, 1))
    except ValueError:
        return
    expect(False, "add_request(Request('big', 8, 1)) raises ValueError",
           input="s = Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=4, block_size=2); "
                 "s.add_request(Request('big', 8, 1))", expected="ValueError", got="accepted")


@kata_test(level=3, category="correctness",
           description="abort frees a running request's blocks; aborting it again is a KeyError")
def test_abort_frees_blocks(solution):
    s = solution.Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=2, block_size=2)
    s.add_request(solution.Request("x", 3, 1))
    s.step()
    s.add_request(solution.Request("y", 3, 1))
    s.abort("x")
    got = _batch(s.step())
    calls = ("s = Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=2, block_size=2); "
             "s.add_request(Request('x', 3, 1)); s.step(); s.add_request(Request('y', 3, 1)); "
             "s.abort('x'); s.step()")
    expect(got == _empty(prefill={"y": 3}), "the Batch s.step() returns after abort('x')",
           input=calls, expected=_empty(prefill={"y": 3}), got=got)
    try:
        s.abort("x")
    except KeyError:
        return
    expect(False, "a second abort('x') raises KeyError", input=calls + "; s.abort('x')",
           expected="KeyError", got="no error")


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
    expect(got == _empty(prefill={"low": 1}), "the Batch s.step() returns at step 4",
           input="s = Scheduler(max_num_batched_tokens=1, max_num_seqs=1, num_blocks=100, block_size=4, "
                 "aging_steps=1); s.add_request(Request('busy', 1, 2, priority=0)); "
                 "s.add_request(Request('low', 1, 1, priority=2)); s.step() x 3; "
                 "s.add_request(Request('urgent', 1, 1, priority=0, arrival_time=3.0)); s.step()",
           expected=_empty(prefill={"low": 1}), got=got)
