"""No two modules of grader/ import each other (issue 39): a two-way import means a concept
without a home of its own, and it makes the first of the two to load see the other half-made.

Every import counts, a function's own imports too (they are how a cycle hides), and so does
`from package import module`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
GRADER = REPO_ROOT / "grader"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """grader's own modules; the hidden suites are a kata's business, not the engine's."""
    return {_module_name(path): path for path in GRADER.rglob("*.py")
            if "suites" not in path.relative_to(GRADER).parts[:1]}


def _imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [source] + [f"{source}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            # `import grader.engine.plugin` names grader and grader.engine too, but a package's
            # __init__ importing its own module is how packages are made: only the leaf counts.
            if target in known and target != name:
                yield target


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: set(_imported(name, path, known)) for name, path in known.items()}


def two_way_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if a < b and a in graph.get(b, ()))


def test_the_walk_finds_a_two_way_import():
    graph = {"grader.a": {"grader.b"}, "grader.b": {"grader.a", "grader.c"}, "grader.c": set()}
    assert two_way_imports(graph) == [("grader.a", "grader.b")]


def test_the_walk_sees_function_level_and_relative_imports():
    graph = import_graph()
    # serve.py imports its siblings relatively, and the CLI imports commands inside functions.
    assert graph["grader.worker.serve"], "no import found in grader/worker/serve.py"
    assert any(target.startswith("grader.") for target in graph["grader.cli.app"])


def test_no_two_way_import_in_grader():
    pairs = two_way_imports(import_graph())
    assert not pairs, "modules that import each other (give the shared part its own module): " + \
        ", ".join(f"{a} <-> {b}" for a, b in pairs)
