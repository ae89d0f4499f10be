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
