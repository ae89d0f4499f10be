"""The judge reads each test's level maps (RULES, DETAILS, SETTLED_BY of test_level<N>.py) from
the module pytest imported (grader/engine/collection.py). It finds that module by name, the
test's own or its package's test_level<N>: a judge forked from the warm grader that looked
at each of the 2,400 modules torch brings copied a page for each (10-15 ms of every check)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from types import SimpleNamespace

import pytest

from grader.engine import collection

LEVEL1 = '''
RULES = {"a rule": "test_core", "an edge": "test_edge"}
DETAILS = {"an edge"}
SETTLED_BY = {"a rule": "ask", "an edge": "edges"}
'''


class _Trap(types.ModuleType):
    """A module that counts the lookups of its __file__ (a scan of sys.modules reads it)."""

    reads = 0

    def __getattribute__(self, name: str):
        if name == "__file__":
            type(self).reads += 1
        return super().__getattribute__(name)


@pytest.fixture
def suite(tmp_path, monkeypatch):
    package = tmp_path / "mapsuite_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "test_level1.py").write_text(LEVEL1)
    (package / "test_level1_more.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    trap = _Trap("kata_trap")
    trap.__file__ = "/nowhere/trap.py"
    _Trap.reads = 0
    monkeypatch.setitem(sys.modules, "kata_trap", trap)
    collection._maps_at.cache_clear()
    yield package
    collection._maps_at.cache_clear()
    for name in [n for n in sys.modules if n.startswith("mapsuite_pkg")]:
        del sys.modules[name]


def _item(module, name: str) -> SimpleNamespace:
    return SimpleNamespace(module=module, name=name, originalname=name)


def test_the_maps_come_from_the_tests_module_or_its_level_sibling_by_name(suite):
    own = importlib.import_module("mapsuite_pkg.test_level1")
    more = importlib.import_module("mapsuite_pkg.test_level1_more")
    for module in (own, more):
        assert collection._is_detail(_item(module, "test_edge"), 1)
        assert not collection._is_detail(_item(module, "test_core"), 1)
        assert collection._maps_of(_item(module, "test_edge"), 1)[1]["test_edge"] == ("edges",)
    assert _Trap.reads == 0, "sys.modules was scanned"


def _load(name: str, path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def test_a_level_module_under_another_name_is_still_found_by_its_file(suite):
    _load("renamed_level1", suite / "test_level1.py")
    more = _load("renamed_more", suite / "test_level1_more.py")
    try:
        assert collection._is_detail(_item(more, "test_edge"), 1)
        assert _Trap.reads >= 1  # (the last resort: a scan)
    finally:
        del sys.modules["renamed_level1"], sys.modules["renamed_more"]
