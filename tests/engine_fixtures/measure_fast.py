import torch


def total(x):
    return x.sum()


class _Box:
    def __init__(self, n):
        self.items = list(range(n))

    def touch(self):
        self.items.append(self.items.pop())


def make(n):
    return _Box(n)


def size(rows):
    return len(rows)
