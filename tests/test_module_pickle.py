"""A module the judge passes to the worker crosses pickled, its CPU storages as raw bytes beside
the pickle (grader/worker/modules.py, pickle_module): the copy must be the module, storages
shared where they were shared, and a plain pickle (an older judge's) still loads."""

from __future__ import annotations

import pickle

import torch

from grader.worker.modules import pickle_module, unpickle_trusted


class _Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(5, 3, dtype=torch.float64)
        self.head = torch.nn.Linear(3, 5, bias=False, dtype=torch.float64)
        self.head.weight = self.embed.weight  # tied: one parameter, two owners
        self.norm = torch.nn.LayerNorm(3)
        self.norm.weight.requires_grad_(False)
        self.register_buffer("halves", torch.arange(6, dtype=torch.bfloat16).reshape(2, 3).t())  # not contiguous
        self.register_buffer("empty", torch.zeros(0, 4))
        self.register_buffer("window", torch.arange(10.0)[2:7])  # a view at an offset
        self.register_buffer("whole", self.window._base)  # ... and the tensor it views
        self.steps = 7


def test_a_module_crosses_whole_with_its_storages_beside_the_pickle():
    torch.manual_seed(0)
    module = _Tied()
    data = pickle_module(module)
    copy = unpickle_trusted(data)
    assert type(copy) is _Tied and copy.steps == 7
    for (name, want), (_, got) in zip(module.state_dict(keep_vars=True).items(),
                                      copy.state_dict(keep_vars=True).items()):
        assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride(), name
        assert torch.equal(got.detach(), want.detach()), name
        assert got.requires_grad == want.requires_grad and type(got) is type(want), name
    assert copy.head.weight is copy.embed.weight  # still one parameter
    assert copy.window.storage_offset() == 2 and copy.window.untyped_storage().nbytes() == 40
    assert copy.window.untyped_storage().data_ptr() == copy.whole.untyped_storage().data_ptr()
    with torch.no_grad():
        copy.embed.weight.add_(1.0)  # the copy owns its memory: the original is untouched
    assert not torch.equal(copy.embed.weight, module.embed.weight)
    loss = copy.head(copy.embed(torch.tensor([1, 2]))).sum()
    loss.backward()  # and trains
    assert copy.embed.weight.grad is not None


def test_storages_cross_once_and_a_plain_pickle_still_loads():
    module = _Tied()
    data = pickle_module(module)
    # The tied weight's 120 bytes once, not the 75 kB torch.save makes of a model's storages.
    assert len(data) < len(pickle.dumps(module, protocol=5))
    old = unpickle_trusted(pickle.dumps(module, protocol=5))
    assert torch.equal(old.embed.weight, module.embed.weight) and old.head.weight is old.embed.weight
