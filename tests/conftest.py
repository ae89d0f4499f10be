"""Shared fixtures: every test runs with a temporary KATA_HOME, workspace and working directory."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
# One judge per grading: the tests already grade two files at once (pytest -n 2), and a second
# judge's start would only add CPU. The split itself is tested with an explicit `jobs`
# (tests/test_engine.py), and CI's wheel check grades paged-kv as a user does, split.
os.environ.setdefault("KATA_GRADE_JOBS", "1")
# No warm grader (grader/engine/warm.py) unless a test asks: each test's KATA_HOME would
# start its own, each holding torch for 15 idle minutes. tests/test_warm.py turns it on.
os.environ.setdefault("KATA_WARM", "0")


@pytest.fixture(autouse=True)
def judge_zygote(request, monkeypatch):
    """The corpus checks (tests/test_kata_*.py, test_katas.py) grade hundreds of files: their
    judges are forked from a zygote that has imported torch, hypothesis and pytest once
    (grader/engine/zygote.py), about 1.5 s of CPU less per grading. Every other test, and a
    user's `kata grade`, starts its judges as usual."""
    from grader.engine.zygote import ENV_ZYGOTE

    if request.node.path.name.startswith("test_kata"):
        monkeypatch.setenv(ENV_ZYGOTE, "1")
    else:
        monkeypatch.delenv(ENV_ZYGOTE, raising=False)


@pytest.fixture(autouse=True, scope="session")
def cpp_build_cache(tmp_path_factory):
    """One cache of compiled C++ solutions for the whole run (both xdist workers): each
    corpus file compiles once, not once per seed (grader/cpp/build.py; KATA_HOME, and with it
    the default cache, is a new folder for every test)."""
    if "KATA_RESULTS" not in os.environ and "KATA_CPP_CACHE" not in os.environ:
        os.environ["KATA_CPP_CACHE"] = str(tmp_path_factory.getbasetemp().parent / "cpp-cache")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    home = tmp_path / "kata-home"
    workspace = tmp_path / "solutions"
    monkeypatch.setenv("KATA_HOME", str(home))
    monkeypatch.setenv("KATA_WORKSPACE", str(workspace))
    # A kata-workspace.toml in or above the checkout (`kata init .`) would win over
    # KATA_WORKSPACE: run every test from its own empty folder. Not inside a grading child
    # (which loads this file for the suites under tests/): its working directory is the run's.
    if "KATA_RESULTS" not in os.environ:
        monkeypatch.chdir(tmp_path)
    return home


@pytest.fixture(autouse=True)
def warm_path(isolated_home, monkeypatch):
    """KATA_TEST_WARM=1: every grading of the test goes through a warm grader of its own
    KATA_HOME (judges and workers forked from zygotes, grader/engine/warm.py), to check a
    module's verdicts on the warm path too, e.g.
    `KATA_TEST_WARM=1 pytest tests/test_containment.py`. Off by default (tests/test_warm.py
    covers the warm path in CI)."""
    if os.environ.get("KATA_TEST_WARM") != "1" or "KATA_RESULTS" in os.environ:
        yield
        return
    from grader.engine import runner, warm

    monkeypatch.setenv(warm.ENV_WARM, "1")
    monkeypatch.setenv(warm.ENV_IDLE, "60")
    warm.enable()
    env = runner._judge_env()
    warm.start(env, warm.code_key(env))
    assert warm.wait_ready() is not None, "the warm grader did not come up"
    try:
        yield
    finally:
        warm.stop()
        warm._enabled = False
