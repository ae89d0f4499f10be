import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        return x * self.weight


class Box:
    def __init__(self):
        self.items = []

    def total(self):
        return sum(self.items)


def double_weight(module):
    """Through .data, as PEFT's merge does: no version counter moves."""
    module.weight.data *= 2


def _kind(i):
    return type(f"Kind{i}", (), {"value": lambda self, i=i: i})


# Many classes, each first seen by the judge from whichever thread makes one first.
KINDS = [_kind(i) for i in range(200)]


def make(i):
    return KINDS[i]()


class Tally:
    """For call_then_read: a call that may raise, and state to read after it."""

    def __init__(self):
        self.total = 0

    def add(self, k):
        if k < 0:
            raise ValueError("k must be >= 0")
        self.total += k
        return [self.total]

    def doubled(self):
        return 2 * self.total

    def summary(self):
        """Plain data (a dict, a list, a tuple): a read of it crosses verbatim, as a copy."""
        return {"total": self.total, "parts": [self.total, (1, "a"), None, 0.0]}

    def kinds(self):
        """Not plain (a set): a read of it crosses item by item, as a shared object."""
        return {"int"}


class Entry:
    """For new_then_call: a constructor that may reject its fields."""

    def __init__(self, name, size=1):
        if size < 0:
            raise ValueError("size must be >= 0")
        self.name, self.size = name, size


class Ledger:
    """For new_then_call: a method that takes an Entry, and may refuse it."""

    def __init__(self):
        self.entries = []

    def add_entry(self, entry):
        if any(e.name == entry.name for e in self.entries):
            raise KeyError(entry.name)
        self.entries.append(entry)
        return len(self.entries)

    def names(self):
        return [e.name for e in self.entries]

    def drop(self, name):
        """For a script's allowed exception: KeyError for an unknown name."""
        for i, e in enumerate(self.entries):
            if e.name == name:
                del self.entries[i]
                return name
        raise KeyError(name)

    def pop(self):
        """For a script's repeat: the first entry's name, taken out."""
        return self.entries.pop(0).name

    def busy(self):
        return bool(self.entries)


def numbers(n):
    return list(range(n))


def double_in_place(x):
    x.add_(1.0)
    return x


def cube(x):
    return x ** 3


def loaded(name):
    import sys

    return name in sys.modules


def gc_state():
    import gc

    return gc.isenabled(), gc.get_freeze_count()


def transposed(x):
    """A view with other strides than its base's (dense, not contiguous)."""
    return x.t()


def every_other_column(x):
    """A view that is not dense: it crosses as a contiguous copy."""
    return x[:, ::2]


def same(x):
    return x


def add_tensors(a, b):
    return a + b


def draw_after(row, weights, *, generator=None, offset=0):
    """Changes its row in place, draws from the generator, and says what it was given."""
    before = row.tolist()
    row.mul_(-1)
    drawn = int(torch.multinomial(weights, 1, generator=generator))
    return [before, list(row.shape), list(row.stride()), row.dtype == torch.float64, drawn + offset]
