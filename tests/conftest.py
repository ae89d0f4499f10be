"""Shared fixtures: every test runs with a temporary KATA_HOME and workspace."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    home = tmp_path / "kata-home"
    workspace = tmp_path / "solutions"
    monkeypatch.setenv("KATA_HOME", str(home))
    monkeypatch.setenv("KATA_WORKSPACE", str(workspace))
    return home
