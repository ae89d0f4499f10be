import torch


def total(x):
    out = torch.zeros(())
    for v in x:  # a Python loop over elements: one op each
        out = out + v
    return out


class _Box:
    def __init__(self, n):
        self.items = list(range(n))

    def touch(self):
        self.items.append(self.items.pop(0))  # O(n): shifts every element


def make(n):
    return _Box(n)


def size(rows):
    return len(rows)
