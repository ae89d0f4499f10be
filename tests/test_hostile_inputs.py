"""A solution cannot make its wrong answer look right by editing what the suite shares with it.

Tensors, lists, dicts and modules the suite passes to the candidate are shared objects: an
in-place edit in the worker is copied back into the judge's object after the call, as in one
process. So is a tensor the candidate returned, when it edits it during a later call. A suite
that computed its expected value from such an object after the call (the oracle reading the
caller's loss_mask, the reference module whose state_dict() the candidate loaded, a first
result read after a second call) would grade the candidate's edit, not its answer (issue 37,
item 2). Each attack below is a reference (or a buggy corpus file, where the test needs a
wrong answer to hide) with one such edit appended (tests/hostile/attacks/); each passed the
test named before the suite took copies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kata_testing import REPO_ROOT, corpus_file, failed_tests, grade_file

ATTACKS = Path(__file__).parent / "hostile" / "attacks"

CASES = {
    # The oracle read loss_mask after the call: one scored position per row matched it.
    "edits_inputs_dpo_mask": ("dpo", "test_average_divides_by_scored_count",
                              "with average=True each row's sum is divided by"),
    # load_state_dict got the reference's own parameters and zeroed them: zeros matched.
    "edits_reference_weights_mha": ("mha", "test_mha_matches_reference",
                                    "MultiHeadAttention output equals the reference"),
    # The masked call's result was read after the unmasked call had overwritten it.
    "rewrites_earlier_result_mha": ("mha", "test_all_true_mask_equals_no_mask", "all-True mask == no mask"),
    # The -1 rows' NaN (masked by zero) hid behind a cleared x: base(x) and each row's
    # expected output were computed from x after the call, all of them the bias.
    "edits_inputs_lora_x": ("lora", "test_base_only_rows_exact_when_an_update_would_overflow",
                            "rows with adapter id -1 are base(x) exactly",
                            "buggy_minus_one_rows_masked_by_zero.py"),
    # delta_weight without alpha: the first delta, rescaled during the second call, was read
    # after it.
    "rewrites_earlier_result_lora": ("lora", "test_delta_weight_linear_in_alpha",
                                     "delta_weight() with alpha * "),
}


@pytest.mark.parametrize("attack", sorted(CASES))
def test_an_edit_of_shared_objects_does_not_pass(attack, tmp_path):
    slug, test, prop, *corpus_name = CASES[attack]
    module = slug.replace("-", "_")
    base = REPO_ROOT / "reference" / f"{module}.py"
    source = (corpus_file(slug, corpus_name[0]) if corpus_name else base).read_text()
    path = tmp_path / "solution" / f"{module}.py"
    path.parent.mkdir(parents=True)
    path.write_text(source + "\n\n" + (ATTACKS / f"{attack}.py").read_text())
    card = grade_file(slug, path, tests=frozenset({test}))
    assert [t.name for t in card.tests] == [test]
    failed = failed_tests(card)
    assert test in failed, f"{attack} passed {test}: the suite graded its edit, not its answer"
    assert prop in failed[test]
