"""The `ppo` kata's hidden suite rejects each realistic buggy solution with the property a
reader would expect, and gives full marks to correct solutions written differently."""

from __future__ import annotations

import pytest

from tests.kata_testing import assert_rejected_by, assert_scores_full

SLUG = "ppo"

BUGGY = [
    ("buggy_ratio_inverted.py", "test_policy_loss_matches_reference"),
    ("buggy_min_instead_of_max.py", "test_policy_gradient_zero_where_clipped"),
    ("buggy_clip_advantage.py", "test_policy_gradient_zero_where_clipped"),
    ("buggy_per_sequence_mean.py", "test_policy_loss_is_token_mean_over_batch"),
    ("buggy_clipfrac_counts_padding.py", "test_clipfrac_counts_valid_tokens_only"),
    ("buggy_mask_multiply.py", "test_policy_loss_padding_changes_nothing"),
    ("buggy_where_on_output_only.py", "test_policy_gradient_zero_on_padding"),
    ("buggy_gae_forwards.py", "test_gae_satisfies_backward_recursion"),
    ("buggy_gae_ignores_row_end.py", "test_gae_padding_changes_nothing"),
    ("buggy_gae_bootstraps_past_row_end.py", "test_gae_last_valid_token_does_not_bootstrap"),
    ("buggy_gae_loop_over_rows.py", "test_gae_vectorized_over_batch"),
    ("buggy_value_clip_min.py", "test_clipped_value_loss_at_least_unclipped"),
    ("buggy_value_clip_around_returns.py", "test_value_gradient_zero_where_clipped"),
    ("buggy_value_loss_no_half.py", "test_value_loss_is_half_mse_inside_clip_range"),
    ("buggy_score_every_token.py", "test_score_on_last_valid_token_only"),
    ("buggy_kl_with_grad.py", "test_kl_rewards_carry_no_gradient"),
    ("buggy_whiten_over_padding.py", "test_whiten_ignores_padding"),
    ("buggy_returns_from_whitened.py", "test_ppo_loss_value_targets_before_whitening"),
]

CORRECT = ["correct_gae_matrix.py", "correct_torch_where.py"]


@pytest.mark.parametrize(("name", "expected_test"), BUGGY, ids=[name for name, _ in BUGGY])
def test_buggy_solution_is_rejected_by_expected_property(name, expected_test):
    assert_rejected_by(SLUG, name, expected_test)


@pytest.mark.parametrize("name", CORRECT)
def test_correct_alternative_scores_full(name):
    assert_scores_full(SLUG, name)


# ---------------------------------------------------------------------------- regressions
# Shrunk failures found while building the suite, pinned by calling the suite's properties
# in-process on fixed inputs (`.hypothesis.inner_test` is the undecorated test body).


def _suite():
    from grader.suites import ppo as suite

    return suite


def _reference():
    from reference import ppo

    return ppo


def test_regression_whiten_variance_allows_for_eps():
    """x = [0, 0.125] has unbiased variance 1/128: the whitened variance is
    var / (var + eps) = 1 - 1.3e-6, which the property must accept for a correct solution."""
    import torch

    inp = {"x": torch.tensor([[0.0, 0.125]], dtype=torch.float64),
           "mask": torch.tensor([[True, True]]), "shift_mean": True}
    _suite().test_whitened_has_mean_0_and_variance_1.hypothesis.inner_test(_reference(), inp)


def test_regression_missing_shape_check_on_one_argument_is_caught():
    """A solution that checked every shape but the advantages' once scored 100: the suite drew
    one bad argument per example and never drew 'advantages'. Every argument is now tried."""
    import types

    import torch

    from grader.protocol import PropertyFailure

    ref = _reference()

    def no_adv_check(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
        if logprobs.shape != mask.shape or old_logprobs.shape != mask.shape or clip_eps <= 0:
            raise ValueError("shape")
        return ref.ppo_policy_loss(logprobs, old_logprobs, advantages[..., :mask.shape[1]], mask,
                                   clip_eps)

    mutant = types.SimpleNamespace(ppo_policy_loss=no_adv_check)
    b = {"mask": torch.tensor([[True]]), "logprobs": torch.zeros(1, 1),
         "old": torch.zeros(1, 1), "adv": torch.zeros(1, 1)}
    with pytest.raises(PropertyFailure, match="bad 'advantages'"):
        _suite().test_policy_loss_rejects_bad_input.hypothesis.inner_test(mutant, b)

