"""Visible examples for the `train-memory` kata: the worked examples of the statement, and the
first measurement of levels 1 and 2. `kata check` runs them against your file; the hidden
suite checks much more."""

from __future__ import annotations

import functools

import torch

from grader.protocol import expect, kata_test
from grader.suites._measure import peak_bytes
from train_memory_model import TinyLM, finetune_leaky

INPUT_IDS = [[1, 5, 9, 2, 7, 0], [3, 3, 8, 1, 0, 0], [4, 6, 0, 0, 0, 0]]
LABELS = [[5, 9, 2, 7, -100, -100], [3, 8, 1, -100, -100, -100], [6, -100, -100, -100, -100, -100]]
CALL = "finetune(TinyLM(seed=0), [(input_ids, labels)], lr=0.01, steps=3{})"


def _batches(copies: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.tensor(INPUT_IDS), torch.tensor(LABELS)) for _ in range(copies)]


@functools.cache
def _leaky() -> tuple[list[float], dict[str, torch.Tensor]]:
    """finetune_leaky's losses and weights on the worked example (worked out once a check)."""
    model = TinyLM(seed=0)
    losses = finetune_leaky(model, _batches(), lr=1e-2, steps=3)
    return losses, {name: p.detach().clone() for name, p in model.named_parameters()}


_leaky()  # at import: while the worker imports your file, which the first test waits for


@kata_test(level=1, category="correctness", description="the 16-bytes-a-parameter rule: 7 B in bf16 with AdamW")
def test_worked_example_ledger(solution):
    got = solution.training_state_bytes(7_000_000_000, 7_000_000_000)
    expect(got == 112_000_000_000, "training_state_bytes of a full fine-tune in mixed precision",
           input="training_state_bytes(7_000_000_000, 7_000_000_000)", expected=112_000_000_000, got=got)


@kata_test(level=1, category="correctness", description="the worked example: finetune_leaky's losses and weights")
def test_worked_example_losses(solution):
    want, want_weights = _leaky()
    model = TinyLM(seed=0)
    got = solution.finetune(model, _batches(), lr=1e-2, steps=3)
    expect(isinstance(got, list) and all(type(x) is float for x in got)
           and all(abs(g - w) <= 1e-9 for g, w in zip(got, want)) and len(got) == 3,
           "finetune returns finetune_leaky's losses as Python floats", input=CALL.format(""),
           expected=want, got=got)
    same = all(torch.allclose(p, want_weights[name], atol=1e-9, rtol=1e-7) for name, p in model.named_parameters())
    expect(same, "the weights after finetune are finetune_leaky's", input=CALL.format(""),
           expected="finetune_leaky's weights", got="different weights")


@kata_test(level=1, category="efficiency", description="peak memory with 6 steps is the peak with 2")
def test_peak_same_for_2_and_6_steps(solution):
    peaks = []
    for steps in (2, 6):
        model, batches = TinyLM(seed=0), _batches(2)
        peaks.append(peak_bytes(lambda m=model, b=batches, n=steps: solution.finetune(m, b, lr=1e-2, steps=n)))
    expect(peaks[1] <= peaks[0], "peak live tensor bytes do not grow with steps",
           input=CALL.format("") + " with two copies of the batch, steps=2, then steps=6",
           expected=f"<= {peaks[0]} bytes", got=f"{peaks[1]} bytes")


@kata_test(level=2, category="correctness", description="micro-batches of 2: the whole batch's losses")
def test_worked_example_micro_batches(solution):
    want = _leaky()[0]
    got = solution.finetune(TinyLM(seed=0), _batches(), lr=1e-2, steps=3, micro_batch_size=2)
    expect(isinstance(got, list) and len(got) == 3 and all(abs(g - w) <= 1e-9 for g, w in zip(got, want)),
           "with micro_batch_size=2 the losses are the whole batch's (7 + 1 valid tokens)",
           input=CALL.format(", micro_batch_size=2"), expected=want, got=got)


@kata_test(level=3, category="correctness", description="checkpoint=True: the same losses")
def test_worked_example_checkpoint(solution):
    want = _leaky()[0]
    got = solution.finetune(TinyLM(seed=0), _batches(), lr=1e-2, steps=3, checkpoint=True)
    expect(isinstance(got, list) and len(got) == 3 and all(abs(g - w) <= 1e-9 for g, w in zip(got, want)),
           "with checkpoint=True the losses are unchanged", input=CALL.format(", checkpoint=True"),
           expected=want, got=got)
