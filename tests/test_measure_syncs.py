"""What the ``syncs`` measurement counts (grader.worker.measure): every call that makes the
host wait for a device value — a scalar or list read back, a copy to the host, a Python bool
out of tensors, an op whose output size depends on the values — and nothing else."""

from __future__ import annotations

import pytest
import torch

from grader.worker.measure import measure

X = torch.tensor([1.0, 2.0, 2.0, 3.0])
MASK = X > 1.5

SYNCS = {
    "item": lambda: X[0].item(),
    "tolist": lambda: X.tolist(),
    "cpu": lambda: X.cpu(),
    "to('cpu')": lambda: X.to("cpu"),
    "to(device=cpu)": lambda: X.to(device=torch.device("cpu")),
    "numpy": lambda: X.numpy(),
    "bool": lambda: bool(X[0] > 0),
    "int": lambda: int(X[0]),
    "float": lambda: float(X[0]),
    "index": lambda: [0, 1][X[0].long()],
    "nonzero": lambda: MASK.nonzero(),
    "argwhere": lambda: torch.argwhere(MASK),
    "where(cond)": lambda: torch.where(MASK),
    "masked_select": lambda: X.masked_select(MASK),
    "unique": lambda: X.unique(),
    "unique_consecutive": lambda: torch.unique_consecutive(X),
    "boolean indexing": lambda: X[MASK],
    "boolean indexing in a tuple": lambda: X[None][:, MASK],
    "equal": lambda: torch.equal(X, X),
    "allclose": lambda: torch.allclose(X, X),
}

NOT_SYNCS = {
    "arithmetic": lambda: (X * 2 + 1).sum(),
    "argmax": lambda: X.argmax(),
    "where(cond, a, b)": lambda: torch.where(MASK, X, 0.0),
    "integer indexing": lambda: X[torch.tensor([0, 2])],
    "masked_fill": lambda: X.masked_fill(MASK, 0.0),
    "boolean assignment": lambda: X.clone().__setitem__(MASK, 0.0),
    "to(dtype)": lambda: X.to(torch.float64),
    "index_select": lambda: X.index_select(0, torch.tensor([1, 3])),
}


@pytest.mark.parametrize("name", sorted(SYNCS))
def test_each_host_read_counts_one_sync(name):
    assert measure(SYNCS[name], "syncs").syncs == 1


@pytest.mark.parametrize("name", sorted(NOT_SYNCS))
def test_device_side_work_counts_no_sync(name):
    assert measure(NOT_SYNCS[name], "syncs").syncs == 0
