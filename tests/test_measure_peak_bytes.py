"""The `peak_bytes` measurement (grader/worker/measure.py): the most bytes of storages created
during the block that were alive at once; what existed before, views and in-place results do
not count; the judge accepts it as a count (grader/engine/measure_check.py)."""

from __future__ import annotations

import pytest
import torch

from grader.engine.measure_check import MeasurementRejected, add_share, decide
from grader.worker.measure import measuring


def _peak(fn) -> int:
    with measuring("peak_bytes") as m:
        fn()
    return m.peak_bytes


def test_peak_is_the_most_alive_at_once():
    def two_then_one():
        a = torch.zeros(100, dtype=torch.float64)     # 800 bytes
        b = torch.zeros(50, dtype=torch.float64)      # 400: 1200 alive
        del a, b
        c = torch.zeros(120, dtype=torch.float64)     # 960 alone
        return c

    assert _peak(two_then_one) == 1200


def test_views_in_place_results_and_existing_storages_do_not_count():
    x = torch.zeros(1000, dtype=torch.float64)

    def views():
        x.view(10, 100).transpose(0, 1)[3]
        x.add_(1.0)
        x.mul_(2.0)

    assert _peak(views) == 0
    assert _peak(lambda: x + 1) == 8000


def test_kept_tensors_grow_the_peak_and_freed_ones_do_not():
    def loop(keep: bool, steps: int):
        kept = []
        for _ in range(steps):
            y = torch.ones(64, dtype=torch.float64) * 2
            if keep:
                kept.append(y)

    assert _peak(lambda: loop(False, 2)) == _peak(lambda: loop(False, 6))
    assert _peak(lambda: loop(True, 6)) - _peak(lambda: loop(True, 2)) == 4 * 512


def test_backward_pass_is_measured():
    w = torch.randn(32, 32, dtype=torch.float64, requires_grad=True)

    def step():
        (w @ w).sum().backward()

    assert _peak(step) >= 32 * 32 * 8 * 2      # the product and the gradient


class _EagerPeak(torch.utils._python_dispatch.TorchDispatchMode):
    """The definition, by brute force: after every op, drop the dead and sum the living."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, tuple[object, int]] = {}
        self.peak = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.multiprocessing.reductions import StorageWeakRef
        from torch.utils._pytree import tree_flatten

        inputs = {t.untyped_storage()._cdata for t in tree_flatten((args, kwargs or {}))[0]
                  if isinstance(t, torch.Tensor)}
        out = func(*args, **(kwargs or {}))
        self.live = {k: v for k, v in self.live.items() if not v[0].expired()}
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                key = t.untyped_storage()._cdata
                if key not in inputs and key not in self.live:
                    self.live[key] = (StorageWeakRef(t.untyped_storage()), t.untyped_storage().nbytes())
        self.peak = max(self.peak, sum(n for _, n in self.live.values()))
        return out


def _eager_peak(fn) -> int:
    with _EagerPeak() as mode:
        fn()
    return mode.peak


def _training_steps():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 16, dtype=torch.float64)
    for _ in range(3):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item()


def _churn():
    # Freed storages whose addresses come back, sizes up and down, a tuple result.
    kept = []
    for i in range(40):
        t = torch.zeros(10 + (i * 37) % 90, dtype=torch.float64)
        values, indices = torch.randn(5, 7 + i % 3).max(dim=1)
        if i % 7 == 0:
            kept.append(t + values.sum())
        del t, values, indices
    return kept


def _reuse_below_the_peak():
    # A peak first; then, far below it (no sweep), each kept tensor may get the address of a
    # storage just freed: it must count, or the second, higher peak is missed.
    big = torch.zeros(1000, dtype=torch.float64)   # 8,000 bytes
    del big
    kept = []
    for _ in range(30):
        scratch = torch.zeros(10, dtype=torch.float64)
        del scratch
        kept.append(torch.zeros(50, dtype=torch.float64))   # 30 x 400 = 12,000 bytes
    return kept


@pytest.mark.parametrize("work", [_training_steps, _churn, _reuse_below_the_peak],
                         ids=["training", "churn", "reused-addresses"])
def test_the_lazy_sweep_finds_the_peak_a_sweep_after_every_op_finds(work):
    # measure.py drops dead storages only when the bytes it follows pass the peak: the same
    # peak as dropping them after every op, at a fraction of the cost.
    assert _peak(work) == _eager_peak(work) > 0


def test_judge_accepts_peak_as_a_count_and_refuses_impossible_ones():
    total: dict = {}
    add_share(total, {"peak_bytes": 1200})
    add_share(total, {"peak_bytes": 800})
    assert decide(total, ("peak_bytes",), None, None, 0.0)["peak_bytes"] == 2000
    for bad in (-1, 1.5, "12"):
        total = {}
        add_share(total, {"peak_bytes": bad})
        with pytest.raises(MeasurementRejected):
            decide(total, ("peak_bytes",), None, None, 0.0)
