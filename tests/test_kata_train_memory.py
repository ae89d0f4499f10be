"""The `train-memory` kata's hidden suite rejects each realistic buggy solution of the corpus at
the level its rules break (tests/corpus/train_memory/corpus.toml) and gives full marks to
correct solutions written differently.

The statement's figures are checked here against what they stand for: the ledger's worked
example, finetune_leaky's leak and the reference's flat peak (the `peak_bytes` measurement),
and the reference's updates against finetune_leaky with micro-batches and checkpointing."""

from __future__ import annotations

import pytest
import torch

from grader.worker.measure import measuring
from tests.kata_testing import assert_rejected_at_level, assert_scores_full, buggy_params, correct_params

import reference.train_memory as reference  # registers train_memory_model  # isort: skip
from train_memory_model import TinyLM, finetune_leaky  # isort: skip

SLUG = "train-memory"
INPUT_IDS = [[1, 5, 9, 2, 7, 0], [3, 3, 8, 1, 0, 0], [4, 6, 0, 0, 0, 0]]
LABELS = [[5, 9, 2, 7, -100, -100], [3, 8, 1, -100, -100, -100], [6, -100, -100, -100, -100, -100]]


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


def _batches(copies=1):
    return [(torch.tensor(INPUT_IDS), torch.tensor(LABELS)) for _ in range(copies)]


def _peak(fn, *args, **kwargs):
    with measuring("peak_bytes") as m:
        fn(*args, **kwargs)
    return m.peak_bytes


def test_worked_example_numbers_of_the_statement():
    assert reference.training_state_bytes(7 * 10**9, 7 * 10**9) == 112 * 10**9
    assert reference.training_state_bytes(7 * 10**9, 7 * 10**9, zero_stage=1, dp=8) == 38_500_000_000
    assert reference.training_state_bytes(7 * 10**9, 7 * 10**9, zero_stage=3, dp=8) == 14 * 10**9
    assert reference.training_state_bytes(7 * 10**9, 4_000_000) == 14_056_000_000
    want = [3.797800576390644, 3.035650195367404, 2.6092402645137005]
    # Not ==: a float64 training step's sums can differ in the last bit from one process to
    # the next (CI once read 3.0356501953674035 for ...404); the statement says within 1e-9.
    assert finetune_leaky(TinyLM(seed=0), _batches(), lr=1e-2, steps=3) == pytest.approx(want, abs=1e-12)
    assert reference.finetune(TinyLM(seed=0), _batches(), lr=1e-2, steps=3) == pytest.approx(want, abs=1e-12)
    leaky = [_peak(finetune_leaky, TinyLM(seed=0), _batches(2), lr=1e-2, steps=s) for s in (2, 6)]
    fixed = [_peak(reference.finetune, TinyLM(seed=0), _batches(2), lr=1e-2, steps=s) for s in (2, 6)]
    assert leaky == [292_518, 330_126] and fixed == [228_624, 228_624]


@pytest.mark.parametrize("options", [{"micro_batch_size": 1}, {"micro_batch_size": 2, "checkpoint": True},
                                     {"checkpoint": True}])
def test_reference_updates_are_finetune_leakys(options):
    model, want_model = TinyLM(seed=1), TinyLM(seed=1)
    want = finetune_leaky(want_model, _batches(), lr=1e-2, steps=3)
    got = reference.finetune(model, _batches(), lr=1e-2, steps=3, **options)
    assert got == pytest.approx(want, abs=1e-12)
    for p, q in zip(model.parameters(), want_model.parameters()):
        torch.testing.assert_close(p, q, atol=1e-10, rtol=0)
