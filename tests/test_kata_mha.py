"""The mha hidden suite rejects each realistic buggy solution of tests/corpus/mha at the level
its corpus.toml declares, by the test it names, under two seeds; passes the correct
alternatives; and keeps its pinned regressions."""

from __future__ import annotations

import pytest

from tests.kata_testing import (assert_rejected_at_level, assert_scores_full, buggy_params,
                                correct_params)

SLUG = "mha"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


# ---------------------------------------------------------------- pinned shrunk failures


def _load(name):
    import importlib.util

    from tests.kata_testing import corpus_file

    spec = importlib.util.spec_from_file_location(f"mha_{name[:-3]}", corpus_file(SLUG, name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_regression_decode_token_after_one_token_prompt_sees_both_keys():
    """Shrunk failure of buggy_decode_sdpa_top_left: d_model=2, n_heads=2, n_kv_heads=1, two
    tokens fed one at a time. The second token must see key 0 and key 1."""
    import torch

    from reference import mha as ref

    x = torch.tensor([[[1.5, -0.3], [0.7, 0.3]]], dtype=torch.float64)
    torch.manual_seed(0)
    good = ref.MultiHeadAttention(2, 2, 1).double()
    buggy = _load("buggy_decode_sdpa_top_left.py").MultiHeadAttention(2, 2, 1).double()
    buggy.load_state_dict(good.state_dict())
    full = good(x, is_causal=True)
    for module, should_match in ((good, True), (buggy, False)):
        cache = ref.KVCache()
        steps = [module(x[:, t:t + 1], is_causal=True, kv_cache=cache) for t in range(2)]
        assert torch.allclose(torch.cat(steps, dim=1), full) is should_match


def test_regression_single_masked_key_gives_zero_not_its_value():
    """Shrunk failure of buggy_multiply_mask: one query, one key, mask [[False]]. Multiplying
    the score by 0 still gives that key weight 1; the output must be 0."""
    import torch

    from reference import mha as ref

    q, k, v = (torch.tensor([[[[x]]]]) for x in (1.5, 0.7, 0.4))
    mask = torch.tensor([[False]])
    assert ref.attention(q, k, v, attn_mask=mask).item() == 0.0
    assert torch.isclose(_load("buggy_multiply_mask.py").attention(q, k, v, attn_mask=mask),
                         torch.tensor(0.4)).all()
