"""Helpers for the project's tests: grade a file with a kata's hidden suite and ask which
properties rejected it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from grader.catalog import REPO_ROOT, Kata, load_catalog
from grader.engine.report import Scorecard
from grader.grading import grade

TESTS_DIR = Path(__file__).resolve().parent
CORPUS_DIR = TESTS_DIR / "corpus"
SEED = 20261129


@lru_cache(maxsize=None)
def kata(slug: str) -> Kata:
    return load_catalog().get(slug)


def grade_file(slug: str, path: Path | str, seed: int = SEED) -> Scorecard:
    return grade(kata(slug), Path(path), seed=seed)


def corpus_file(slug: str, name: str) -> Path:
    return CORPUS_DIR / kata(slug).module / name


def failed_tests(card: Scorecard) -> dict[str, str]:
    """name -> message of every failed test."""
    return {t.name: t.message for t in card.tests if not t.passed}


def assert_rejected_by(slug: str, name: str, expected_test: str, seed: int = SEED) -> Scorecard:
    """Grade tests/corpus/<module>/<name> and assert the property `expected_test` rejects it."""
    card = grade_file(slug, corpus_file(slug, name), seed=seed)
    failed = failed_tests(card)
    assert expected_test in failed, (
        f"{name} should be rejected by {expected_test}; failed tests were: "
        f"{failed or 'none (it scored 100)'}")
    return card


def assert_scores_full(slug: str, name: str, seed: int = SEED) -> Scorecard:
    card = grade_file(slug, corpus_file(slug, name), seed=seed)
    assert card.passed and card.score == 100, f"{name} should score 100: {failed_tests(card)}"
    return card


__all__ = ["REPO_ROOT", "SEED", "assert_rejected_by", "assert_scores_full", "corpus_file",
           "failed_tests", "grade_file", "kata"]
