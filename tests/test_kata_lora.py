"""The `lora` kata's hidden suite rejects each realistic buggy solution with the property a
reader would expect, and accepts correct solutions written differently from the reference."""

from __future__ import annotations

import pytest

from tests.kata_testing import assert_rejected_by, assert_scores_full

SLUG = "lora"

BUGGY = {
    # Level 1: LoRALinear
    "buggy_B_random_init.py": "test_init_output_equals_base",
    "buggy_scaling_r_over_alpha.py": "test_lora_update_scaled_by_alpha_over_r",
    "buggy_scaling_alpha_only.py": "test_lora_update_scaled_by_alpha_over_r",
    "buggy_dropout_on_output.py": "test_train_mode_drops_lora_input_only",
    "buggy_dropout_on_base_path.py": "test_train_mode_drops_lora_input_only",
    "buggy_base_trainable.py": "test_only_lora_params_receive_gradients",
    # Level 2: merge, unmerge, rsLoRA
    "buggy_rslora_alpha_over_r.py": "test_rslora_scaling",
    "buggy_delta_A_at_B.py": "test_delta_weight_is_scaled_B_times_A",
    "buggy_delta_without_scaling.py": "test_delta_weight_linear_in_alpha",
    "buggy_merge_twice.py": "test_merge_twice_is_noop",
    "buggy_lora_added_while_merged.py": "test_merge_then_forward_matches_unmerged",
    "buggy_unmerge_not_undoing.py": "test_merge_then_unmerge_restores_weight",
    "buggy_merge_with_autograd.py": "test_merged_flag_and_base_stays_frozen",
    # Level 3: MultiLoRALinear
    "buggy_scatter_wrong_rows.py": "test_mixed_batch_matches_per_row_lora_linear",
    "buggy_negative_index_last_adapter.py": "test_base_only_rows_equal_base_exactly",
    "buggy_padding_garbage.py": "test_slot_reused_by_lower_rank_adapter",
    "buggy_multi_scaling_alpha.py": "test_mixed_batch_matches_per_row_lora_linear",
    "buggy_slots_never_reused.py": "test_freed_slots_are_reused",
    "buggy_freed_slot_accepted.py": "test_forward_rejects_unknown_slots_and_wrong_length",
    "buggy_loop_over_rows.py": "test_mixed_batch_op_count_does_not_grow",
}

CORRECT = ["correct_addmm.py", "correct_einsum.py"]


@pytest.mark.parametrize("name, expected_test", sorted(BUGGY.items()))
def test_buggy_solution_rejected_by_expected_property(name, expected_test):
    assert_rejected_by(SLUG, name, expected_test)


@pytest.mark.parametrize("name", CORRECT)
def test_correct_alternative_scores_full(name):
    assert_scores_full(SLUG, name)


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
