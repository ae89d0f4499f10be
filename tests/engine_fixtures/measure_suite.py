"""A suite whose efficiency tests must see work done in the worker: op counts that grow
with a Python loop over elements, and time that grows with an O(n) call."""

import time

import torch

from grader.protocol import expect, kata_test
from grader.suites._measure import best_time_s, count_ops, exec_time_s, growth_exponent


@kata_test(level=1, category="efficiency", description="total(x) uses a constant number of torch ops")
def test_ops_do_not_grow(solution):
    small = count_ops(lambda: solution.total(torch.ones(2)))
    large = count_ops(lambda: solution.total(torch.ones(32)))
    expect(small == large and small > 0, "the op count does not grow with len(x)",
           expected=f"{small} ops at both sizes (and more than 0)", got=f"{small} then {large}")


@kata_test(level=1, category="efficiency", description="touch(n) takes constant time")
def test_time_does_not_grow(solution):
    handles = {n: solution.make(n) for n in (1_000, 1_000_000)}
    slope = growth_exponent(lambda n: (lambda: handles[n].touch()), [1_000, 1_000_000],
                            timer=best_time_s)
    expect(slope < 0.3, "touch() does not scan its data", expected="growth exponent about 0",
           got=f"growth exponent {slope:.2f}")


@kata_test(level=1, category="efficiency", description="what crossing to the worker costs is not timed")
def test_transport_is_not_timed(solution):
    big = tuple(range(200_000))  # 200,000 ints to copy, encode and decode at every call
    solution.size(big)  # warm-up
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        solution.size(big)
        walls.append(time.perf_counter() - t0)
    wall = min(walls)
    timed = min(exec_time_s(lambda: solution.size(big)) for _ in range(3))
    expect(timed < 0.02 * wall, "a call's measured time leaves out its arguments' transport",
           expected=f"under 2 % of the {wall * 1e3:.1f} ms the call takes end to end",
           got=f"{timed * 1e3:.2f} ms")
