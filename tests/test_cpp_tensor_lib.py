"""The `tensor-lib` kata in C++: the C++ reference (reference/cpp/tensor_lib.cpp) passes the same
hidden suite as a Python solution, the C++ stub (katas/tensor_lib/stub.cpp) scores 0, the suite
rejects each realistic buggy C++ tensor library of tests/corpus/tensor_lib/cpp/corpus.toml at its
level, and gives full marks to the correct C++ alternatives (under SEED here; under 5 seeds with
scripts/corpus_sweep.py tensor-lib --lang cpp)."""

from __future__ import annotations

import pytest

from grader.cpp import toolchain
from tests.kata_testing import (REPO_ROOT, SEED, assert_rejected_at_level, assert_scores_full, buggy_params,
                                correct_params, failed_tests, grade_file)

SLUG = "tensor-lib"
NO_TOOLCHAIN = toolchain.missing()
pytestmark = pytest.mark.skipif(NO_TOOLCHAIN is not None, reason=f"C++: {NO_TOOLCHAIN}")


def test_cpp_reference_scores_full():
    card = grade_file(SLUG, REPO_ROOT / "reference" / "cpp" / "tensor_lib.cpp", seed=SEED)
    assert card.passed and card.score == 100, failed_tests(card)


def test_cpp_stub_scores_zero():
    card = grade_file(SLUG, REPO_ROOT / "katas" / "tensor_lib" / "stub.cpp", seed=SEED)
    assert card.score == 0 and card.tests and not any(t.passed for t in card.tests)
    assert all("NotImplementedError" in t.message or "not implemented" in t.message.lower()
               for t in card.tests if t.name != "test_no_numpy_or_torch"), failed_tests(card)


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG, lang="cpp"))
def test_buggy_cpp_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG, lang="cpp"))
def test_correct_cpp_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)
