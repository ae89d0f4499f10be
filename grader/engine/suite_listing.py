"""A suite's tests and their grading metadata, read from its source without importing it.

A file that cannot load is failed before any judge starts (see precheck.py): the scorecard
still lists every test, with its level, category, weight and description, as the judge's
collection would. Collecting imports the suite (torch, the reference: seconds); reading the
source takes milliseconds. Whether a test is a *detail* of its level comes from the level's
RULES and DETAILS maps (``detail_tests``: the one rule the judge's plugin applies too), and
the clarifications that settle its rules from RULES and SETTLED_BY (``settling_ids``, the
same). The reading is deliberately narrow: top-level ``def test*``
functions decorated with literal ``@kata_test(...)`` (or ``@pytest.mark.kata(...)``) and
hypothesis decorators. Anything else pytest might collect or multiply (classes, parametrize,
a ``test*`` name bound another way, a sub-package of tests) makes the answer None, and the
caller asks a judge instead. tests/test_load_errors.py checks that every kata's suite and
examples list here exactly as pytest collects them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import pyast

ASK = "ask"  # SETTLED_BY's word for a rule the level's Ask states

# Decorators that neither add nor drop a test (hypothesis's, the grading marker, markers).
_HARMLESS = frozenset({"given", "settings", "example", "seed", "reproduce_failure", "kata_test"})
_MARKERS_THAT_MULTIPLY = frozenset({"parametrize"})


def list_tests(suite: Path) -> list[dict[str, Any]] | None:
    """The suite's tests in pytest's order, each {nodeid, name, level, category, weight,
    description, detail, settled_by} as the judge's plugin reports them; None when the source
    alone cannot say."""
    root = suite.parent  # the judge runs with --rootdir suite.parent
    if suite.is_file():
        files = [suite]
    elif suite.is_dir():
        if any(p.is_dir() and any(p.rglob("test*.py")) for p in suite.iterdir() if p.name != "__pycache__"):
            return None
        files = sorted(p for p in suite.iterdir() if p.is_file() and _is_test_file(p.name))
    else:
        return None
    tests: list[dict[str, Any]] = []
    maps_by_file: dict[Path, tuple[frozenset[str], dict[str, tuple[str, ...]]] | None] = {}
    for path in files:
        found = _tests_in(path, path.relative_to(root).as_posix())
        if found is None:
            return None
        for test in found:
            where = rules_file(path, test["level"])
            if where not in maps_by_file:
                maps_by_file[where] = _maps_in(where)
            maps = maps_by_file[where]
            if maps is None:
                return None
            details, settled = maps
            test["detail"] = test["name"] in details
            test["settled_by"] = list(settled.get(test["name"], ()))
        tests += found
    return tests


def detail_tests(rules: Any, details: Any) -> frozenset[str]:
    """The detail tests of a level: those its RULES map (rule -> test name, or a tuple or list
    of names) names only under rules of DETAILS. A test that some rule outside DETAILS names,
    or that no rule names, is core; so is every test of a level without DETAILS."""
    if not isinstance(rules, dict) or not isinstance(details, (set, frozenset, dict, list, tuple)):
        return frozenset()
    detail: set[str] = set()
    core: set[str] = set()
    for rule, names in rules.items():
        names = [names] if isinstance(names, str) else names
        if isinstance(names, (list, tuple, set, frozenset)):
            (detail if rule in details else core).update(n for n in names if isinstance(n, str))
    return frozenset(detail - core)


def settling_ids(rules: Any, settled_by: Any) -> dict[str, tuple[str, ...]]:
    """test name -> the ids of the clarifications that settle its rules: over the RULES
    entries that name the test, in RULES order, the ids SETTLED_BY gives each (a string or a
    tuple or list of them), each once; "ask" (the Ask states the rule) gives none. A test no
    rule names, or a level without SETTLED_BY, has none."""
    if not isinstance(rules, dict) or not isinstance(settled_by, dict):
        return {}
    out: dict[str, list[str]] = {}
    for rule, names in rules.items():
        ids = [i for i in _strings(settled_by.get(rule)) if i != ASK]
        for name in _strings(names):
            mine = out.setdefault(name, [])
            mine += [i for i in ids if i not in mine]
    return {name: tuple(ids) for name, ids in out.items()}


@dataclass(frozen=True)
class Rule:
    """One entry of a level's RULES map, with where the statement settles it."""

    text: str
    tests: tuple[str, ...]       # the tests that decide it
    settled_by: tuple[str, ...]  # the clarifications that answer it (none: the Ask states it)
    detail: bool                 # named in DETAILS


def level_rules(rules_path: Path) -> list[Rule] | None:
    """The rules of a level's test_level<N>.py, in RULES order (None when its RULES map
    cannot be read from the source)."""
    values = _literals(rules_path, ("RULES", "SETTLED_BY", "DETAILS")) or {}
    rules, settled, details = values.get("RULES"), values.get("SETTLED_BY"), values.get("DETAILS")
    if not isinstance(rules, dict):
        return None
    settled = settled if isinstance(settled, dict) else {}
    details = details if isinstance(details, (set, frozenset, dict, list, tuple)) else ()
    return [Rule(str(text), tuple(_strings(names)), tuple(i for i in _strings(settled.get(text)) if i != ASK),
                 text in details) for text, names in rules.items()]


def _strings(value: Any) -> list[str]:
    """A map's value as a list of names: one string, or the strings of a tuple, list or set."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [v for v in value if isinstance(v, str)]
    return []


def rules_file(test_file: Path, level: int) -> Path:
    """Where the RULES map of a test's level lives: test_level<N>.py beside the test's file (a
    level's tests may sit in more files, e.g. test_level3_cache.py), else the test's own file."""
    beside = test_file.with_name(f"test_level{level}.py")
    return beside if beside.is_file() else test_file


def _maps_in(path: Path) -> tuple[frozenset[str], dict[str, tuple[str, ...]]] | None:
    """detail_tests and settling_ids of the RULES, DETAILS and SETTLED_BY literals of a file;
    None when one is bound to something the source alone cannot evaluate."""
    values = _literals(path, ("RULES", "DETAILS", "SETTLED_BY"))
    if values is None:
        return None
    return (detail_tests(values.get("RULES"), values.get("DETAILS")),
            settling_ids(values.get("RULES"), values.get("SETTLED_BY")))


def _literals(path: Path, names: tuple[str, ...]) -> dict[str, Any] | None:
    """The values of the top-level assignments to `names` in a file (those it binds); None
    when one is not a literal or the file cannot be read."""
    try:
        tree = pyast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    values: dict[str, Any] = {}
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id in names and node.value is not None:
            try:
                values[target.id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
    return values


def _is_test_file(name: str) -> bool:
    """pytest's default python_files: test_*.py and *_test.py."""
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _tests_in(path: Path, relative: str) -> list[dict[str, Any]] | None:
    try:
        tree = pyast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    aliases = _harmless_aliases(tree, path)
    # A later def of a name replaces the earlier one where that stood: the module's __dict__
    # keeps a name's first place, and pytest collects in that order.
    found: dict[str, dict[str, Any]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            meta = _metadata(node, aliases)
            if meta is None:
                return None
            found[node.name] = {"nodeid": f"{relative}::{node.name}", "name": node.name, **meta}
        elif _binds_collectable(node):
            return None
    return list(found.values())


def _binds_collectable(node: ast.stmt) -> bool:
    """Whether a top-level statement other than a def could give pytest something to collect
    (a class named Test*, a test* name bound by assignment or import, module-wide marks)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False  # a helper (a test* def is read by the caller)
    if isinstance(node, ast.ClassDef):
        return node.name.startswith("Test")
    names: list[str] = []
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [(a.asname or a.name).split(".")[0] for a in node.names]
    else:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.append(sub.id)
            elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(sub.name)  # defined inside an if/try at top level
    return any(n == "*" or n.startswith(("test", "Test")) or n == "pytestmark" for n in names)


def _harmless_aliases(tree: ast.Module, path: Path) -> frozenset[str]:
    """Names usable as bare decorators that add no test: `FAST = settings(max_examples=8)` in
    this file, or imported from a sibling module of the suite that binds it so."""
    names = set(_bound_to_harmless(tree))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            sibling = path.parent / (node.module.split(".")[-1] + ".py")
            try:
                bound = _bound_to_harmless(pyast.parse(sibling.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
                continue
            names.update(a.asname or a.name for a in node.names if a.name in bound)
    return frozenset(names)


def _bound_to_harmless(tree: ast.Module) -> set[str]:
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = _last_name(node.value.func)
            if name == "settings" or (name not in _MARKERS_THAT_MULTIPLY and _is_mark(node.value.func)):
                out.add(node.targets[0].id)
    return out


def _metadata(func: ast.FunctionDef | ast.AsyncFunctionDef, aliases: frozenset[str] = frozenset()
              ) -> dict[str, Any] | None:
    """{level, category, weight, description} from the decorators, with the plugin's defaults;
    None for a decorator this reading does not know."""
    meta: dict[str, Any] = {}
    if sum(_last_name(d.func if isinstance(d, ast.Call) else d) in ("kata_test", "kata")
           for d in func.decorator_list) > 1:
        return None  # which one pytest reads is its business
    for decorator in func.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call is not None else decorator
        name = _last_name(target)
        if name is None:
            return None
        if name in ("kata_test", "kata") and call is not None:
            if call.args:
                return None
            try:
                meta.update({kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg})
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
            if any(kw.arg is None for kw in call.keywords):
                return None  # **kwargs: not literal
        elif call is None and isinstance(target, ast.Name) and name in aliases:
            continue
        elif name in _MARKERS_THAT_MULTIPLY or (name not in _HARMLESS and not _is_mark(target)):
            return None
    try:
        return {"level": int(meta.get("level", 1)), "category": meta.get("category", "correctness"),
                "weight": float(meta.get("weight", 1.0)),
                "description": meta.get("description", func.name.replace("_", " "))}
    except (TypeError, ValueError):
        return None


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_mark(node: ast.expr) -> bool:
    """`pytest.mark.<something>` or `mark.<something>`: a marker, which adds no test."""
    return isinstance(node, ast.Attribute) and _last_name(node.value) == "mark"
