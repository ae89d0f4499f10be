"""The FLOP meter (grader/worker/measure.py) counts what torch's FlopCounterMode counts.

It is torch's counter less what it repeats at every aten op (see _lean_flop_counter): these
tests run the same code under both and want the same total, for the operations the suites
measure (matmuls in every form, attention, convolutions, a training step, a decoding loop),
with grad on, off and in inference mode, and through torch.cond's higher-order path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402 - after the skip

from grader.worker import measure  # noqa: E402 - after the skip

REPO = Path(__file__).resolve().parents[1]


def _torch_total(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def _meter_total(fn) -> int:
    meter = measure._FlopMeter()
    with meter:
        fn()
    return meter.totals()["flops"]


def _workloads():
    gen = torch.Generator().manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(8, 64, generator=gen, requires_grad=True)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=gen, requires_grad=True) for _ in range(3))
    conv = torch.nn.Conv2d(3, 8, 3)
    image = torch.randn(2, 3, 16, 16, generator=gen)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    seq = torch.randn(2, 10, 32, generator=gen)
    opt = torch.optim.AdamW(lin.parameters())

    def train_step():
        lin(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    # name -> (the code, whether it needs grad mode: a backward pass)
    return {
        "linear": (lambda: lin(x), False),
        "linear forward and backward": (lambda: lin(x).sum().backward(), True),
        "matmul of 4-d tensors": (lambda: q @ k.transpose(-1, -2), False),
        "einsum": (lambda: torch.einsum("bhqd,bhkd->bhqk", q, k), False),
        "bmm and baddbmm": (lambda: torch.baddbmm(torch.ones(3, 4, 5), torch.ones(3, 4, 6), torch.ones(3, 6, 5)),
                            False),
        "attention by hand, softmax and all": (lambda: torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, -1) @ v,
                                               False),
        "scaled_dot_product_attention": (sdpa, False),
        "scaled_dot_product_attention and its backward pass": (lambda: sdpa().sum().backward(), True),
        "conv2d": (lambda: conv(image), False),
        "conv2d forward and backward": (lambda: conv(image).sum().backward(), True),
        "nn.MultiheadAttention": (lambda: mha(seq, seq, seq), False),
        "an AdamW training step": (train_step, True),
    }


@pytest.mark.parametrize("mode", ["grad", "no_grad", "inference_mode"])
def test_the_meter_counts_the_flops_torch_counts(mode):
    context = {"grad": torch.enable_grad, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode}[mode]
    compared = 0
    for name, (fn, needs_grad) in _workloads().items():
        if needs_grad and mode != "grad":
            continue
        with context():
            try:
                want = _torch_total(fn)
            except AttributeError:
                # torch's module tracker fails on a module called in inference mode with
                # inputs that require grad (the meter has no tracker): nothing to compare.
                assert mode == "inference_mode", name
                continue
            got = _meter_total(fn)
        compared += 1
        assert want > 0 or "scaled_dot_product_attention" in name, f"{name}: a workload with no FLOPs tests nothing"
        assert got == want, f"{name} ({mode}): the meter counted {got} FLOPs, torch's counter {want}"
    assert compared >= 5, f"only {compared} workloads compared"


def test_a_decoding_loop_counts_the_same(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "katas" / "slow_decode"))
    from slow_decode_model import TinyLM, generate_slow

    model = TinyLM(seed=0)

    def run():
        return generate_slow(model, [[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]], 4)

    assert _meter_total(run) == _torch_total(run) > 0


def test_two_measurements_in_a_row_count_alike():
    """The meter keeps what it learns of each op for one measurement: the second count of the
    same code, and a count of other code after it, are what torch's counter says."""
    a = torch.ones(16, 16)
    first = _meter_total(lambda: a @ a)
    assert _meter_total(lambda: a @ a) == first == _torch_total(lambda: a @ a)
    assert _meter_total(lambda: torch.mm(a, a) + a @ a) == _torch_total(lambda: torch.mm(a, a) + a @ a)


def test_torch_cond_is_counted_as_torch_counts_it():
    pytest.importorskip("torch._dynamo")
    assert "torch._dynamo" in sys.modules

    def branchy():
        return torch.cond(torch.tensor(True), lambda t: t @ t, lambda t: t + t, (torch.ones(4, 4),))

    assert _meter_total(branchy) == _torch_total(branchy) == 128
