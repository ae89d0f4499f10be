"""A pytest plugin for scripts/bench_feedback.py: a kata's hidden suite in one process, with
no judge, no worker and no sandbox. `solution` is the reference module imported directly
(the suites reach it through grader.protocol, whose helpers run in place on a plain object),
hypothesis runs with the grader's profile (derandomized from --hypothesis-seed, no database),
and the judge's two savings that have nothing to do with isolation apply here too (what the
imports made is frozen out of the garbage collector; hypothesis parses no local constants).
What containment costs is a grade's time minus this one's.

    KATA_BENCH_MODULE=paged_kv python -m pytest grader/suites/paged_kv -p bench_inprocess ...
"""

from __future__ import annotations

import gc
import importlib
import os
from typing import Any

import pytest

MODULE = os.environ.get("KATA_BENCH_MODULE", "")


def pytest_configure(config: pytest.Config) -> None:
    from hypothesis import HealthCheck, Phase, settings

    config.addinivalue_line("markers", "kata(level, category, description, weight): grading metadata")
    settings.register_profile("kata-bench", database=None, deadline=None, max_examples=100, print_blob=False,
                              phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink],
                              suppress_health_check=list(HealthCheck))
    settings.load_profile("kata-bench")
    from grader.engine.plugin import _no_local_constants

    _no_local_constants()
    gc.disable()  # as the judge: no collection until the suite is in, then frozen


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()
    gc.enable()


@pytest.fixture
def solution() -> Any:
    """The reference, standing in for the candidate's module (no proxy, no worker)."""
    return importlib.import_module(f"reference.{MODULE}")


@pytest.fixture(scope="session")
def reference() -> Any:
    return importlib.import_module(f"reference.{MODULE}")
