"""Helpers for the project's tests: grade a file with a kata's hidden suite and ask which
properties rejected it, and read each kata's corpus manifest.

The corpus of a kata lives in ``tests/corpus/<module>/`` with a manifest ``corpus.toml``::

    [[buggy]]
    file = "buggy_block_count_floor_plus_one.py"
    level = 1                                   # the lowest level whose rules the bug breaks
    rejected_by = ["test_block_count_is_ceil_of_tokens"]   # tests of that level; any may fail
    why = "ceil(n / block_size) written as n // block_size + 1"

    [[correct]]
    file = "correct_lifo_free_stack.py"
    why = "hands out the most recently freed block first"

A buggy file is *rejected at its level* when, graded with the tests of levels 1..level only,
the lowest failing level is `level` and one of `rejected_by` fails. What that does to the level
follows the pass rule (a level passes when its core tests pass, grader/engine/report.py):

- a core bug (some test of `rejected_by` is a core test) fails its level: one of its failing
  tests there is core;
- a detail bug (every test of `rejected_by` is a detail test: its level's RULES map names it
  under DETAILS only) is rejected by them, so the score is below 100, but its level passes:
  no core test of the level fails. An entry may say so, ``detail = true`` (or ``false``);
  the suite decides either way, and a manifest that says otherwise is wrong.

A correct file scores 100 on the whole suite. The project's tests check both under two seeds;
``scripts/corpus_sweep.py --seeds N`` checks them under N.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from grader.catalog import REPO_ROOT, Kata, load_catalog
from grader.engine.report import Scorecard
from grader.engine.suite_listing import list_tests
from grader.grading import grade, test_levels

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TESTS_DIR = Path(__file__).resolve().parent
CORPUS_DIR = TESTS_DIR / "corpus"
SEED = 20261129
SEEDS = (SEED, 7)  # every corpus verdict must hold under both
# The C++ corpora run under SEED alone here (a C++ grading costs more, and CI must stay under
# 30 minutes); scripts/corpus_sweep.py --lang cpp checks them under 5 seeds before a resolve.
CPP_SEEDS = (SEED,)


@lru_cache(maxsize=None)
def kata(slug: str) -> Kata:
    return load_catalog().get(slug)


def grade_file(slug: str, path: Path | str, seed: int = SEED,
               levels: frozenset[int] | None = None, tests: frozenset[str] | None = None) -> Scorecard:
    return grade(kata(slug), Path(path), seed=seed, levels=set(levels) if levels else None, tests=tests)


def corpus_file(slug: str, name: str) -> Path:
    return CORPUS_DIR / kata(slug).module / name


def failed_tests(card: Scorecard) -> dict[str, str]:
    """name -> message of every failed test."""
    return {t.name: t.message for t in card.tests if not t.passed}


# ------------------------------------------------------------------------ corpus manifest


@dataclass(frozen=True)
class BuggyEntry:
    file: str
    level: int
    rejected_by: tuple[str, ...]
    why: str = ""
    detail: bool | None = None  # what corpus.toml declares (None: not declared; the suite decides)


@dataclass(frozen=True)
class CorpusManifest:
    buggy: tuple[BuggyEntry, ...]
    correct: tuple[str, ...]


def manifest_path(slug: str, lang: str = "py") -> Path:
    """tests/corpus/<module>/corpus.toml; the C++ corpus's is cpp/corpus.toml there, whose
    `file` entries name files under cpp/ ("cpp/buggy_x.cpp": corpus_file finds them)."""
    folder = CORPUS_DIR / kata(slug).module
    return (folder / "cpp" if lang == "cpp" else folder) / "corpus.toml"


@lru_cache(maxsize=None)
def corpus_manifest(slug: str, lang: str = "py") -> CorpusManifest:
    """The kata's corpus.toml, checked for shape (not for what the suite does)."""
    path = manifest_path(slug, lang)
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    buggy = []
    for i, raw in enumerate(data.get("buggy", [])):
        rejected = raw.get("rejected_by")
        if isinstance(rejected, str):
            rejected = [rejected]
        if not (isinstance(raw.get("file"), str) and isinstance(raw.get("level"), int)
                and isinstance(rejected, list) and rejected):
            raise ValueError(f"{path}: buggy[{i}] needs file, level and rejected_by")
        if not isinstance(raw.get("detail", False), bool):
            raise ValueError(f"{path}: buggy[{i}].detail must be true or false")
        buggy.append(BuggyEntry(file=raw["file"], level=raw["level"], rejected_by=tuple(rejected),
                                why=raw.get("why", ""), detail=raw.get("detail")))
    correct = tuple(raw["file"] for raw in data.get("correct", []))
    return CorpusManifest(buggy=tuple(buggy), correct=correct)


def _param_id(file: str) -> str:
    return Path(file).stem if file.endswith(".py") else file.replace("/", "-")


def buggy_params(slug: str, lang: str = "py") -> list:
    """pytest params (entry, seed) for every buggy file under every seed in SEEDS."""
    import pytest

    return [pytest.param(entry, seed, id=f"{_param_id(entry.file)}-seed{seed}")
            for entry in corpus_manifest(slug, lang).buggy for seed in (CPP_SEEDS if lang == "cpp" else SEEDS)]


def correct_params(slug: str, lang: str = "py") -> list:
    import pytest

    return [pytest.param(name, seed, id=f"{_param_id(name)}-seed{seed}")
            for name in corpus_manifest(slug, lang).correct for seed in (CPP_SEEDS if lang == "cpp" else SEEDS)]


def rejection_problem(slug: str, entry: BuggyEntry, card: Scorecard) -> str | None:
    """Why `card` (graded with levels 1..entry.level) does not reject the bug at its level;
    None when it does. A core bug fails its level; a detail bug fails one of its detail tests
    and its level still passes."""
    failed = [t for t in card.tests if not t.passed]
    if not failed:
        return f"{entry.file} scored 100 (levels 1-{entry.level}); expected {list(entry.rejected_by)} to fail"
    lowest = min(t.level for t in failed)
    names = {t.name: t.level for t in failed}
    if lowest != entry.level:
        return (f"{entry.file} is declared a level-{entry.level} bug but failed at level {lowest}: "
                f"{sorted(n for n, lv in names.items() if lv == lowest)}")
    if not set(entry.rejected_by) & set(names):
        return (f"{entry.file} should be rejected by one of {list(entry.rejected_by)}; "
                f"failed tests were {sorted(names)}")
    detail = is_detail_bug(entry, card)
    if entry.detail is not None and entry.detail != detail:
        return (f"corpus.toml says {entry.file} is {'a detail' if entry.detail else 'a core'} bug (detail = "
                f"{str(entry.detail).lower()}), but {list(entry.rejected_by)} "
                f"{'are all detail tests' if detail else 'name a core test'} of the suite")
    level = next(lv for lv in card.levels if lv.level == entry.level)
    core_failed = sorted(t.name for t in failed if t.level == entry.level and not t.detail)
    if detail and not level.passed:
        return (f"{entry.file} is a detail bug of level {entry.level} (its rejecting tests are details), "
                f"so the level must pass, but core tests failed: {core_failed}")
    if not detail and level.passed:
        return (f"{entry.file} is a core bug of level {entry.level}, but only details of the level failed "
                f"({sorted(n for n in names if n not in core_failed)}): the level passes")
    return None


def is_detail_bug(entry: BuggyEntry, card: Scorecard) -> bool:
    """Whether every test that rejects the bug is a detail test of its level (as the judge
    tagged the tests of `card`, which grades all of `rejected_by`)."""
    tagged = {t.name: t.detail for t in card.tests}
    return all(tagged.get(name, False) for name in entry.rejected_by)


def assert_rejected_at_level(slug: str, entry: BuggyEntry, seed: int = SEED) -> Scorecard:
    """Graded with the tests that decide the verdict: under SEED, every test below the bug's
    level (none may fail) and the tests meant to reject it (for a detail bug, every test of
    its level too: the level must still pass); under any other seed, the tests meant to
    reject it alone. (Each test starts from its own random state, so leaving other
    tests out changes nothing these see.) That a bug fails nothing earlier is checked under
    SEED here and under every seed by scripts/corpus_sweep.py, which grades whole levels (a
    level-3 lora bug: 9.4 s with levels 1 and 2, 3.3 s without)."""
    tests = deciding_tests(slug, entry) if seed == SEED else frozenset(entry.rejected_by)
    card = grade_file(slug, corpus_file(slug, entry.file), seed=seed,
                      levels=frozenset(range(1, entry.level + 1)), tests=tests)
    problem = rejection_problem(slug, entry, card)
    assert problem is None, problem
    return card


def deciding_tests(slug: str, entry: BuggyEntry) -> frozenset[str] | None:
    """The tests below the bug's level and its `rejected_by` (None: every test of its
    levels, for a detail bug, whose level's core tests must pass, and when the suite's tests
    and levels cannot be had)."""
    levels = _test_levels(slug)
    if levels is None or set(entry.rejected_by) <= _detail_tests(slug):
        return None
    return frozenset(name for name, level in levels.items() if level < entry.level) | set(entry.rejected_by)


@lru_cache(maxsize=None)
def _detail_tests(slug: str) -> frozenset[str]:
    """The suite's detail tests, from its source (none when the source alone cannot say)."""
    return frozenset(t["name"] for t in list_tests(kata(slug).suite_path) or () if t["detail"])


@lru_cache(maxsize=None)
def _test_levels(slug: str) -> dict[str, int] | None:
    return test_levels(kata(slug))


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
    assert card.passed and card.score == 100, f"{name} should score 100 (seed {seed}): {failed_tests(card)}"
    return card


__all__ = ["REPO_ROOT", "SEED", "SEEDS", "BuggyEntry", "CorpusManifest", "assert_rejected_at_level",
           "assert_rejected_by", "assert_scores_full", "buggy_params", "correct_params",
           "corpus_file", "corpus_manifest", "failed_tests", "grade_file", "is_detail_bug", "kata",
           "manifest_path", "rejection_problem"]
