"""For tests/test_example_calls.py: add is wrong from a = 2 on; Counter.reset is the stub's."""


def add(a, b):
    return a + b if a < 2 else a + b + 1


class Counter:
    def __init__(self):
        self.total = 0

    def add(self, k):
        self.total += k

    def reset(self):
        raise NotImplementedError("TODO: level 2")
