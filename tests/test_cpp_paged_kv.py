"""The `paged-kv` kata in C++: the C++ reference (reference/cpp/paged_kv.cpp) scores 100 on the
same hidden suite as a Python solution, the C++ stub (katas/paged_kv/stub.cpp) scores 0, the
suite rejects each realistic buggy C++ allocator of tests/corpus/paged_kv/cpp/corpus.toml at
its level, and gives full marks to the correct C++ alternatives."""

from __future__ import annotations

import pytest

from grader.cpp import toolchain
from tests.kata_testing import (REPO_ROOT, SEED, assert_rejected_at_level, assert_scores_full,
                                buggy_params, correct_params, failed_tests, grade_file)

SLUG = "paged-kv"
NO_TOOLCHAIN = toolchain.missing()
pytestmark = pytest.mark.skipif(NO_TOOLCHAIN is not None, reason=f"C++: {NO_TOOLCHAIN}")


def test_cpp_reference_scores_full():
    card = grade_file(SLUG, REPO_ROOT / "reference" / "cpp" / "paged_kv.cpp", seed=SEED)
    assert card.passed and card.score == 100, failed_tests(card)


def test_cpp_stub_scores_zero():
    card = grade_file(SLUG, REPO_ROOT / "katas" / "paged_kv" / "stub.cpp", seed=SEED)
    assert card.score == 0 and card.tests and not any(t.passed for t in card.tests)
    assert all("NotImplementedError" in t.message or "not implemented" in t.message.lower()
               for t in card.tests), failed_tests(card)


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG, lang="cpp"))
def test_buggy_cpp_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG, lang="cpp"))
def test_correct_cpp_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)
