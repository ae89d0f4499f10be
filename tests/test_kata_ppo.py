"""The `ppo` kata's hidden suite rejects each realistic buggy solution at its level with the
property a reader would expect, and gives full marks to correct solutions written differently."""

from __future__ import annotations

import pytest

from tests.kata_testing import (assert_rejected_at_level, assert_scores_full, buggy_params,
                                correct_params)

SLUG = "ppo"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


# ---------------------------------------------------------------------------- regressions
# Shrunk failures found while building the suite, pinned by calling the suite's properties
# in-process on fixed inputs (`.hypothesis.inner_test` is the undecorated test body).


def _reference():
    from reference import ppo

    return ppo


def test_regression_whiten_variance_allows_for_eps():
    """x = [0, 0.125] has unbiased variance 1/128: the whitened variance is
    var / (var + eps) = 1 - 1.3e-6, which the property must accept for a correct solution."""
    import torch

    from grader.suites.ppo import test_level3

    inp = {"x": torch.tensor([[0.0, 0.125]], dtype=torch.float64),
           "mask": torch.tensor([[True, True]]), "shift_mean": True}
    test_level3.test_whitened_has_mean_0_and_variance_1.hypothesis.inner_test(_reference(), inp)


def test_regression_missing_shape_check_on_one_argument_is_caught():
    """A solution that checked every shape but the advantages' once scored 100: the suite drew
    one bad argument per example and never drew 'advantages'. Every argument is now tried."""
    import types

    from grader.protocol import PropertyFailure
    from grader.suites.ppo import test_level1

    ref = _reference()

    def no_adv_check(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
        if logprobs.shape != mask.shape or old_logprobs.shape != mask.shape or clip_eps <= 0:
            raise ValueError("shape")
        return ref.ppo_policy_loss(logprobs, old_logprobs, advantages[..., :mask.shape[1]], mask,
                                   clip_eps)

    mutant = types.SimpleNamespace(ppo_policy_loss=no_adv_check)
    with pytest.raises(PropertyFailure, match="bad 'advantages'"):
        test_level1.test_policy_loss_rejects_bad_input(mutant)


def test_regression_half_precision_results_are_checked_within_their_precision():
    """The dtype tests compare a float16/bfloat16 result with the same solution's float64
    result on the same values; a solution that computes in float32 and rounds at the end must
    pass, so the tolerance is a few units of the low precision, not float32's."""
    from grader.suites.ppo import test_level1, test_level2, test_level3

    ref = _reference()

    class UpcastingSolution:
        """The reference, computing in float32 and rounding to the input dtype at the end."""

        @staticmethod
        def ppo_policy_loss(logprobs, old_logprobs, advantages, mask, clip_eps=0.2):
            loss, stats = ref.ppo_policy_loss(logprobs.float(), old_logprobs.float(), advantages.float(),
                                              mask, clip_eps)
            return loss.to(logprobs.dtype), stats

        @staticmethod
        def compute_gae(rewards, values, mask, gamma, lam):
            adv, ret = ref.compute_gae(rewards.float(), values.float(), mask, gamma, lam)
            return adv.to(rewards.dtype), ret.to(rewards.dtype)

        @staticmethod
        def ppo_value_loss(values, old_values, returns, mask, clip_eps_value=0.2):
            return ref.ppo_value_loss(values.float(), old_values.float(), returns.float(), mask,
                                      clip_eps_value).to(values.dtype)

        @staticmethod
        def kl_shaped_rewards(scores, logprobs, ref_logprobs, mask, kl_coef):
            return ref.kl_shaped_rewards(scores.float(), logprobs.float(), ref_logprobs.float(), mask,
                                         kl_coef).to(logprobs.dtype)

        @staticmethod
        def masked_whiten(x, mask, shift_mean=True, eps=1e-8):
            return ref.masked_whiten(x.float(), mask, shift_mean, eps).to(x.dtype)

    up = UpcastingSolution()
    test_level1.test_policy_loss_keeps_every_float_dtype(up)
    test_level2.test_gae_keeps_rewards_dtype(up)
    test_level2.test_value_loss_keeps_every_float_dtype(up)
    test_level3.test_kl_rewards_keep_every_float_dtype(up)
    test_level3.test_whiten_keeps_every_float_dtype(up)
