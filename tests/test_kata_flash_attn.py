"""The `flash-attn` kata's hidden suite rejects each realistic buggy solution of the corpus at
the level its rules break, with the property a reader would expect (tests/corpus/flash_attn/
corpus.toml), gives full marks to correct solutions written differently, and keeps the
measurement facts the suite relies on as named regressions."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from grader.suites.flash_attn.strategies import dense_attention, expected_flops, visible_tile_pairs
from grader.worker.measure import measure
from tests.kata_testing import CORPUS_DIR, assert_rejected_at_level, assert_scores_full, buggy_params, correct_params

SLUG = "flash-attn"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


# ---------------------------------------------------------------- pinned facts


def _load(name):
    path = CORPUS_DIR / "flash_attn" / name
    spec = importlib.util.spec_from_file_location(f"flash_attn_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_visible_tile_pairs_follow_bottom_right_causality():
    """Tq = 4 > Tk = 2, tiles of 2 queries and 1 key: the first query tile (rows 0, 1) sees no
    key; the second sees keys 0 and 1, one tile each."""
    assert visible_tile_pairs(4, 2, 2, 1, causal=True) == [(2, 1), (2, 1)]
    assert visible_tile_pairs(4, 4, 2, 2, causal=True) == [(2, 2), (2, 2), (2, 2)]
    assert expected_flops(1, 1, 4, 4, 2, 2, 2, causal=False) == 4 * 4 * 4 * 2


def test_einsum_over_a_size_one_dimension_has_no_counted_flops():
    """Why the FLOP tests keep D and every key tile >= 2: einsum contracts a dimension of size 1
    with a broadcast multiply, which FlopCounterMode does not count (matmul it does)."""
    p, v = torch.randn(1, 1, 4, 1), torch.randn(1, 1, 1, 2)
    assert measure(lambda: torch.einsum("bhqk,bhkd->bhqd", p, v), "flops").flops == 0
    assert measure(lambda: p @ v, "flops").flops == 2 * 4 * 1 * 2


def test_reference_flops_equal_the_visible_pairs():
    from reference.flash_attn import flash_attention

    q, k = torch.randn(2, 4, 9, 3), torch.randn(2, 2, 7, 3)
    got = measure(lambda: flash_attention(q, k, k, causal=True, block_q=4, block_k=3), "flops").flops
    assert got == expected_flops(2, 4, 9, 7, 3, 4, 3, causal=True)


def test_gqa_copy_tests_see_expand_and_reshape_but_not_broadcast_matmul():
    """Expanding a K tile over the query heads and reshaping it copies (the GQA test sees it);
    torch's batched matmul over a stride-0 broadcast operand does not copy (nothing to see)."""
    bug = _load("buggy_gqa_expand_reshape_tiles.py")
    q, k = torch.randn(1, 4, 6, 8), torch.randn(1, 2, 9, 8)  # with H_kv = 1 the reshape is a view
    storages = measure(lambda: bug.flash_attention(q, k, k, block_q=2, block_k=3), "storages").storages
    assert any(numel >= 4 * 3 * 8 and shape != (1, 4, 6, 8) for numel, shape, _ in storages)
    q5, k_tile = torch.randn(1, 1, 4, 2, 8), torch.randn(1, 1, 8, 3)
    storages = measure(lambda: torch.matmul(q5, k_tile[:, :, None]), "storages").storages
    assert all(numel < 4 * 8 * 3 for numel, _, _ in storages)


def test_dense_oracle_gives_zero_and_minus_inf_for_empty_rows():
    q, k = torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 1, 2)
    out, lse = dense_attention(q, k, k + 1, causal=True)
    assert out[0, 0, :2].abs().sum() == 0 and torch.isneginf(lse[0, 0, :2]).all()
    assert lse[0, 0, 2] == 0 and out[0, 0, 2].tolist() == [1.0, 1.0]
