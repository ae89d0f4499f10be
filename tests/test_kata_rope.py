"""The `rope` suite rejects each realistic buggy solution of tests/corpus/rope at the level its
corpus.toml declares, by the test it names, under two seeds; passes correct solutions
written differently; and keeps its pinned regressions."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch

from tests.kata_testing import (assert_rejected_at_level, assert_scores_full, buggy_params,
                                corpus_file, correct_params)

SLUG = "rope"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"rope_corpus_{name[:-3]}",
                                                  corpus_file(SLUG, name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------- regressions
# Shrunk counterexamples found by the suite, pinned so that the semantics they rely on stay.


def test_regression_rotation_direction_at_position_1():
    """Shrunk by test_matches_reference against the flipped rotate_half sign: D = 2,
    x = [0, 1] at position 1 turns counterclockwise to [-sin 1, cos 1]."""
    from reference.rope import apply_rope

    got = apply_rope(torch.tensor([[0.0, 1.0]]), torch.tensor([1]))
    expected = torch.tensor([[-math.sin(1.0), math.cos(1.0)]])
    torch.testing.assert_close(got, expected)
    flipped = _load("buggy_rotate_half_sign.py")
    assert not torch.allclose(flipped.apply_rope(torch.tensor([[0.0, 1.0]]),
                                                 torch.tensor([1])), expected, atol=0.1)


def test_regression_bf16_angles_at_position_247():
    """Shrunk by test_bf16_close_to_float32: a bf16 angle table is already off by more than
    the bf16 tolerance at position 247 (dim 6, feature 4), while float32 angles are not."""
    from reference.rope import apply_rope

    x = torch.zeros(3, 6, dtype=torch.bfloat16)
    x[1, 4] = 1.0
    positions = torch.tensor([0, 247, 0])
    float32_result = apply_rope(x.float(), positions)
    assert (apply_rope(x, positions).float() - float32_result).abs().max() < 2e-2
    buggy = _load("buggy_cos_sin_in_bf16.py")
    assert (buggy.apply_rope(x, positions).float() - float32_result).abs().max() > 2e-2


def test_regression_partial_rotary_uses_rotary_dim_in_exponent():
    """Shrunk by test_partial_rotary_matches_reference: D = 6, rotary_dim = 4; feature pair
    (1, 3) has w = 10000 ** (-2/4) = 0.01, not 10000 ** (-2/6)."""
    from reference.rope import apply_rope

    x = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0]])
    got = apply_rope(x, torch.tensor([1]), rotary_dim=4)
    expected = torch.tensor([[0.0, -math.sin(0.01), 0.0, math.cos(0.01), 0.0, 0.0]])
    torch.testing.assert_close(got, expected)


def test_regression_llama3_matches_hugging_face_example():
    """The statement's llama3 example (dim 8, factor 8, low 1, high 4, L = 2048): two kept,
    one blended, one divided."""
    from reference.rope import rope_inv_freq

    scaling = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 2048}
    got = rope_inv_freq(8, scaling=scaling)
    smooth = (2048 / (2 * math.pi / 0.01) - 1.0) / 3.0
    expected = torch.tensor([1.0, 0.1, 0.01 * ((1 - smooth) / 8 + smooth), 0.001 / 8])
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=0.0)
