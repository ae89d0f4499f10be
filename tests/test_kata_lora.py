"""The `lora` kata's hidden suite rejects each realistic buggy solution with the property a
reader would expect, and accepts correct solutions written differently from the reference."""

from __future__ import annotations

import pytest

from tests.kata_testing import (assert_rejected_at_level, assert_scores_full, buggy_params,
                                correct_params)

SLUG = "lora"


@pytest.mark.parametrize("entry, seed", buggy_params(SLUG))
def test_buggy_solution_rejected_at_its_level(entry, seed):
    """Each buggy file (tests/corpus/lora/corpus.toml) fails at the level it declares, by one
    of the targeted tests it names, graded with levels 1..level only."""
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize("name, seed", correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


# ------------------------------------------------------------------ pinned counterexamples


def _load(name: str):
    """A corpus file (or the reference) as a module, without grading it."""
    import importlib.util

    from tests.kata_testing import REPO_ROOT, corpus_file

    path = REPO_ROOT / "reference" / "lora.py" if name == "reference" else corpus_file(SLUG, name)
    spec = importlib.util.spec_from_file_location(f"lora_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reused_slot_output(module):
    """The shrunk counterexample of test_slot_reused_by_lower_rank_adapter: a rank-2 adapter
    of all 2s is removed and a rank-1 adapter of zeros takes its slot."""
    import torch
    from torch import nn

    base = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        base.weight.zero_()
    layer = module.MultiLoRALinear(base, 2)
    layer.add_adapter("big", torch.full((2, 1), 2.0), torch.full((1, 2), 2.0), 8.0)
    layer.remove_adapter("big")
    slot = layer.add_adapter("small", torch.zeros(1, 1), torch.zeros(1, 1), 1.0)
    with torch.no_grad():
        return layer(torch.tensor([[1.0], [0.0]]), torch.tensor([slot, -1]))


def test_regression_reused_slot_padding_is_zero():
    import torch

    assert torch.equal(_reused_slot_output(_load("reference")), torch.zeros(2, 1))
    # Padding row 1 of the slot still holds the old adapter: 1 * 2 * 2 * (1 / 1) = 4.
    assert torch.equal(_reused_slot_output(_load("buggy_padding_garbage.py")),
                       torch.tensor([[4.0], [0.0]]))


def test_regression_minus_one_is_base_not_last_slot():
    import torch
    from torch import nn

    outputs = {}
    for name in ("reference", "buggy_negative_index_last_adapter.py"):
        base = nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            base.weight.fill_(1.0)
        layer = _load(name).MultiLoRALinear(base, 1)
        layer.add_adapter("only", torch.ones(1, 1), torch.ones(1, 1), 1.0)
        with torch.no_grad():
            outputs[name] = layer(torch.tensor([[3.0]]), torch.tensor([-1]))
    assert torch.equal(outputs["reference"], torch.tensor([[3.0]]))
    assert torch.equal(outputs["buggy_negative_index_last_adapter.py"], torch.tensor([[6.0]]))


def test_regression_merge_leaves_base_frozen():
    import torch
    from torch import nn

    for name, frozen in (("reference", True), ("buggy_merge_with_autograd.py", False)):
        layer = _load(name).LoRALinear(nn.Linear(2, 2), 1, 2.0)
        with torch.no_grad():
            layer.lora_B.fill_(1.0)
        layer.merge()
        assert (not layer.base.weight.requires_grad) is frozen, name


def test_regression_dropout_on_lora_output_splits_the_outputs_of_a_row():
    """The audit's escape: dropout on the adapter's output passed while only eval mode was
    checked. On the dropout probe, the two outputs of a row see different masks."""
    from grader.suites.lora.strategies import build, dropout_probe, forward, probe_codes

    probe = dropout_probe(0.25)
    for name, splits in (("reference", False), ("buggy_dropout_on_lora_output.py", True)):
        layer = build(_load(name), probe.case, dropout=probe.p)
        layer.train()
        codes = probe_codes(probe, forward(layer, probe.case.x)).round()
        assert bool((codes[:, 0] != codes[:, 1]).any()) is splits, name


def test_regression_minus_one_rows_ignore_an_overflowing_adapter():
    """The audit's side finding: the reference gathered slot 0 for -1 rows and scaled its
    update by 0, so a float16 update that overflows to inf gave NaN rows instead of base(x)
    (rulings.md: select, do not multiply by zero). The reference now selects;
    buggy_minus_one_rows_masked_by_zero.py is the old way, which the suite rejects with
    test_base_only_rows_exact_when_an_update_would_overflow."""
    import torch
    from torch import nn

    outputs = {}
    for name in ("reference", "buggy_minus_one_rows_masked_by_zero.py"):
        base = nn.Linear(4, 2, bias=False, dtype=torch.float16)
        with torch.no_grad():
            base.weight.fill_(1.0)
        layer = _load(name).MultiLoRALinear(base, 1)
        layer.add_adapter("a", torch.full((1, 4), 100.0, dtype=torch.float16),
                          torch.full((2, 1), 100.0, dtype=torch.float16), 1.0)
        with torch.no_grad():
            outputs[name] = layer(torch.full((2, 4), 100.0, dtype=torch.float16),
                                  torch.tensor([-1, 0]))
    reference, buggy = outputs["reference"], outputs["buggy_minus_one_rows_masked_by_zero.py"]
    assert torch.equal(reference[0], torch.full((2,), 400.0, dtype=torch.float16))
    assert bool(torch.isinf(reference[1]).all())  # the adapter's own row does overflow
    assert bool(torch.isnan(buggy[0]).all())  # inf * 0
