"""Where solutions go: `kata init`, the order workspaces are found in, and a clear error outside
any; the grading child never imports from a working directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import grader.catalog as catalog_module
from grader.cli.app import app
from grader.engine.runner import run_suite
from grader.workspace import MARKER, find_workspace
from tests.kata_testing import REPO_ROOT, kata

runner = CliRunner()
FIXTURES = Path(__file__).parent / "workspace_fixtures"


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def outside(tmp_path, monkeypatch):
    """A folder outside any workspace, as if kata were installed from a wheel: no marker
    above, no KATA_WORKSPACE, no checkout."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.delenv("KATA_WORKSPACE")
    monkeypatch.setattr(catalog_module, "checkout_root", lambda: None)
    return folder


# ---------------------------------------------------------------------------- kata init


def test_init_makes_a_workspace_and_says_what_to_do_next(outside):
    result = invoke("init")
    assert result.exit_code == 0, result.output
    root = outside / "kata-practice"
    assert (root / MARKER).is_file() and (root / "solutions").is_dir()
    assert not (root / "notebooks").exists()
    assert "next:" in result.output and "cd kata-practice && kata start paged-kv" in result.output


def test_init_with_notebooks_copies_every_walkthrough(outside):
    result = invoke("init", "practice", "--notebooks")
    assert result.exit_code == 0, result.output
    copied = sorted(p.name for p in (outside / "practice" / "notebooks").glob("*.py"))
    assert copied == sorted(f"{k.module}.py" for k in catalog_module.load_catalog().katas.values())
    assert len(copied) >= 9  # every kata has a walkthrough


def test_init_again_changes_nothing_of_yours(outside):
    invoke("init", "practice", "--notebooks")
    root = outside / "practice"
    (root / MARKER).write_text("# mine\n")
    (root / "notebooks" / "rope.py").write_text("# my notes\n")
    (root / "solutions" / "rope.py").write_text("# my solution\n")
    result = invoke("init", "practice", "--notebooks")
    assert result.exit_code == 0 and "is a kata workspace already" in result.output
    walkthroughs = len(catalog_module.load_catalog().katas)
    assert f"kept {walkthroughs} walkthroughs already there" in result.output and "rope.py" in result.output
    assert (root / MARKER).read_text() == "# mine\n"
    assert (root / "notebooks" / "rope.py").read_text() == "# my notes\n"
    assert (root / "solutions" / "rope.py").read_text() == "# my solution\n"


def test_init_here_suggests_no_cd(outside):
    result = invoke("init", ".")
    assert result.exit_code == 0 and (outside / MARKER).is_file()
    assert "next: kata start paged-kv" in " ".join(result.output.split())


def test_init_on_a_file_is_a_usage_error(outside):
    (outside / "taken").write_text("x")
    result = invoke("init", "taken")
    assert result.exit_code == 2 and "is a file, not a folder" in result.output


# ---------------------------------------------------------------------------- discovery order


def test_the_nearest_marker_wins_over_kata_workspace(outside, monkeypatch):
    invoke("init", "outer")
    invoke("init", "outer/inner")
    deep = outside / "outer" / "inner" / "solutions" / "deeper"
    deep.mkdir(parents=True)
    monkeypatch.setenv("KATA_WORKSPACE", str(outside / "env-folder"))
    found = find_workspace(deep)
    assert found.found_by == "marker" and found.root == outside / "outer" / "inner"
    assert found.solutions_dir == outside / "outer" / "inner" / "solutions"
    assert find_workspace(outside / "outer").root == outside / "outer"


def test_kata_workspace_comes_next_then_the_checkout(outside, monkeypatch):
    monkeypatch.setenv("KATA_WORKSPACE", str(outside / "plain"))
    found = find_workspace()
    assert found.found_by == "env" and found.solutions_dir == outside / "plain"
    invoke("init", str(outside / "made"))
    monkeypatch.setenv("KATA_WORKSPACE", str(outside / "made"))
    found = find_workspace()
    assert found.found_by == "env" and found.solutions_dir == outside / "made" / "solutions"
    monkeypatch.delenv("KATA_WORKSPACE")
    assert find_workspace() is None
    monkeypatch.setattr(catalog_module, "checkout_root", lambda: REPO_ROOT)
    found = find_workspace()
    assert found.found_by == "checkout" and found.solutions_dir == REPO_ROOT / "solutions"


def test_this_checkout_is_recognised_as_one():
    assert catalog_module.checkout_root() == REPO_ROOT


def test_start_anywhere_inside_a_workspace_writes_there(outside, monkeypatch):
    invoke("init", "practice")
    inside = outside / "practice" / "solutions"
    monkeypatch.chdir(inside)
    monkeypatch.setenv("KATA_WORKSPACE", str(outside / "not-here"))
    result = invoke("start", "paged-kv", "-q")
    assert result.exit_code == 0, result.output
    written = outside / "practice" / "solutions" / "paged_kv.py"
    assert written.read_text() == kata("paged-kv").stub_path.read_text()
    assert not (outside / "not-here").exists()


# ---------------------------------------------------------------------------- outside any workspace


def test_start_outside_any_workspace_says_how_to_make_one(outside):
    result = invoke("start", "paged-kv", "-q")
    assert result.exit_code == 2
    assert "no kata workspace here" in result.output and "next:" in result.output
    assert "kata init" in result.output
    assert json.loads(invoke("status", "--json").output)["sessions"] == []  # no clock started
    assert list(outside.iterdir()) == []


def test_what_needs_no_workspace_still_works_outside_one(outside):
    assert invoke("list").exit_code == 0
    assert invoke("show", "paged-kv").exit_code == 0
    copy = outside / "mine.py"
    copy.write_text((REPO_ROOT / "reference" / "paged_kv.py").read_text())
    result = invoke("grade", "paged-kv", "--file", str(copy), "--json", "--seed", "1")
    assert result.exit_code == 0 and json.loads(result.output)["score"] == 100


def test_notebook_outside_any_workspace_says_how_to_make_one(outside):
    result = invoke("notebook", "paged-kv")
    assert result.exit_code == 2 and "kata init" in result.output


def test_start_says_how_to_restart_the_clock():
    result = invoke("start", "paged-kv", "-q")
    assert result.exit_code == 0
    assert "started by accident?" in result.output and "kata start paged-kv --force" in result.output


# ---------------------------------------------------------------------------- the grading child


@pytest.mark.parametrize("pythonpath", ["", ":", ".", "relative/dir"])
def test_the_child_never_imports_from_its_working_directory(tmp_path, monkeypatch, pythonpath):
    inherited = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", pythonpath + (os.pathsep + inherited if inherited else ""))
    (tmp_path / "kata_cwd_probe_module.py").write_text("IMPORTED = True\n")
    outcome = run_suite(FIXTURES / "cwd_suite.py", FIXTURES / "writes_module.py", "writes_module", seed=1,
                        workdir=tmp_path)
    (test,) = outcome.tests
    assert test.passed, (test.message, test.details)
