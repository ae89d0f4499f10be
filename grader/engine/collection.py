"""What the judge collected: each test's grading metadata, and which of the tests this judge
runs (a level filter, a list of names, a split grading's share)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from grader.engine.config import JudgeConfig
from grader.engine.suite_listing import detail_tests, rules_file, settling_ids


def metadata(item: pytest.Item) -> dict[str, Any]:
    """The test as the runner and the scorecard know it (the ``collected`` event's entries)."""
    marker = item.get_closest_marker("kata")
    meta = dict(marker.kwargs) if marker else {}
    name = item.name
    level = int(meta.get("level", 1))
    return {
        "nodeid": item.nodeid,
        "name": name,
        "level": level,
        "category": meta.get("category", "correctness"),
        "weight": float(meta.get("weight", 1.0)),
        "description": meta.get("description", name.replace("_", " ")),
        "detail": _is_detail(item, level),
        "settled_by": list(_maps_of(item, level)[1].get(getattr(item, "originalname", name), ())),
    }


def _is_detail(item: pytest.Item, level: int) -> bool:
    """Whether the RULES map of the test's level names it under DETAILS only (a level's map is
    a global of its test_level<N>.py, which collection has imported)."""
    return getattr(item, "originalname", item.name) in _maps_of(item, level)[0]


def _maps_of(item: pytest.Item, level: int) -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """The detail tests of the test's level, and the clarifications settling each test."""
    module = getattr(item, "module", None)
    file = getattr(module, "__file__", None)
    if file is None:
        return frozenset(), {}
    path = rules_file(Path(file), level)
    # Its module is the test's own, or the sibling test_level<N> of the test's package.
    own = str(getattr(module, "__name__", ""))
    name = own if str(path) == file else ".".join(filter(None, (own.rpartition(".")[0], path.stem)))
    return _maps_at(str(path), name)


@functools.lru_cache(maxsize=None)
def _maps_at(path: str, name: str = "") -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    module = sys.modules.get(name) if name else None
    if getattr(module, "__file__", None) != path:
        # Found by its file (another import mode named it otherwise). A last resort: in a
        # judge forked from the warm grader, touching each of the 2,400 modules torch brings
        # copies a page of the zygote's memory for each, about 10 ms.
        module = next((m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == path), None)
    rules = getattr(module, "RULES", None)
    return (detail_tests(rules, getattr(module, "DETAILS", None)),
            settling_ids(rules, getattr(module, "SETTLED_BY", None)))


def select(judge: JudgeConfig, config: pytest.Config, items: list[pytest.Item]) -> dict[str, Any]:
    """Deselect, in place, the tests this judge does not run; the ``collected`` event's payload:
    the tests it runs, and for a split grading's judge every test (the parent merges the
    judges' results in the suite's order, and shows every test)."""
    if judge.levels:
        levels = set(judge.levels)
        keep_only(config, items, lambda item: metadata(item)["level"] in levels)
    if judge.tests is not None:
        names = frozenset(judge.tests)
        keep_only(config, items, lambda item: item.name in names)
    if judge.keep_tests is None and judge.drop_tests is None:
        return {"tests": [metadata(item) for item in items]}
    every = [metadata(item) for item in items]
    keep = judge.keep_tests is not None
    share = frozenset((judge.keep_tests if keep else judge.drop_tests) or ())
    keep_only(config, items, lambda item: (item.name in share) == keep)
    ours = {item.nodeid for item in items}
    return {"tests": [m for m in every if m["nodeid"] in ours], "every": every}


def keep_only(config: pytest.Config, items: list[pytest.Item], wanted: Callable[[pytest.Item], bool]) -> None:
    """Deselect, in place, the items for which wanted(item) is false."""
    dropped = [item for item in items if not wanted(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if wanted(item)]
