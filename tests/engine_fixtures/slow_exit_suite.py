"""A judge whose interpreter takes long to shut down (as one with torch loaded does, a
little): the run is over once every result is in and the worker is gone."""

import atexit
import time

from grader.protocol import expect, kata_test

atexit.register(time.sleep, 30)


@kata_test(level=1, category="correctness", description="add works")
def test_add(solution):
    expect(solution.add(2, 3) == 5, "add returns the sum", expected=5, got=solution.add(2, 3))
