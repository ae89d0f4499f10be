"""Every kata in the catalog: the reference scores 100, the stub scores 0, the visible
examples agree, the stub is a fair starting point, and the walkthrough runs headless."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from grader.catalog import load_catalog
from grader.grading import check
from tests.kata_testing import REPO_ROOT, SEED, failed_tests, grade_file

KATAS = sorted(load_catalog().katas.values(), key=lambda k: k.slug)
IDS = [k.slug for k in KATAS]


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_reference_scores_100(kata):
    card = grade_file(kata.slug, kata.reference_path, seed=SEED)
    assert card.score == 100 and card.passed, failed_tests(card)
    assert {lv.level for lv in card.levels} == {lv.level for lv in kata.levels}


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_stub_scores_0_on_every_test(kata):
    card = grade_file(kata.slug, kata.stub_path, seed=SEED)
    passing = [t.name for t in card.tests if t.passed]
    assert card.score == 0 and not passing, f"the stub passes {passing}"


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_examples_pass_with_the_reference_and_fail_with_the_stub(kata):
    ref = check(kata, kata.reference_path)
    assert ref.passed and len(ref.tests) >= len(kata.levels), failed_tests(ref)
    stub = check(kata, kata.stub_path)
    assert not any(t.passed for t in stub.tests)


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_stub_is_a_fair_starting_point(kata):
    source = kata.stub_path.read_text()
    tree = ast.parse(source)
    assert "TODO" in source and "NotImplementedError" in source
    public = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")]
    assert public and all(ast.get_docstring(n) for n in public), "every public name needs its docstring"
    reference_names = {n.name for n in ast.parse(kata.reference_path.read_text()).body
                       if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}
    assert {n.name for n in public} <= reference_names


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_statement_covers_every_level(kata):
    statement = kata.statement_path.read_text()
    for level in kata.levels:
        assert level.name.lower() in statement.lower(), f"the statement never names level {level.level}: {level.name}"


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_walkthrough_runs_headless(kata, tmp_path):
    assert kata.notebook_path.is_file(), f"{kata.notebook_path} is missing"
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(REPO_ROOT))
    result = subprocess.run([sys.executable, str(kata.notebook_path)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "# %% [markdown]" in kata.notebook_path.read_text()


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_every_corpus_file_is_checked_by_the_katas_tests(kata):
    corpus = sorted((REPO_ROOT / "tests" / "corpus" / kata.module).glob("*.py"))
    assert len([p for p in corpus if p.name.startswith("buggy_")]) >= 10, "keep at least 10 realistic bugs"
    assert len([p for p in corpus if p.name.startswith("correct_")]) >= 2, "keep correct alternatives too"
    tests_source = (REPO_ROOT / "tests" / f"test_kata_{kata.module}.py").read_text()
    unchecked = [p.name for p in corpus if p.name not in tests_source]
    assert not unchecked, f"corpus files no test grades: {unchecked}"
    assert {p.name.split("_")[0] for p in corpus} <= {"buggy", "correct"}
