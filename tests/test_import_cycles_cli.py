"""No two modules of the CLI, the homework package or grader's top-level modules import each
other (issue 39, item 4): every import counts, a function's own and one under TYPE_CHECKING
too, and `from package import module` names the module."""

from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[1] / "grader"
SCOPE = [*(GRADER / "cli").rglob("*.py"), *(GRADER / "homework").rglob("*.py"), *GRADER.glob("*.py")]


def _name(path: Path) -> str:
    parts = list(path.relative_to(GRADER.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The modules `path` imports, as written (relative imports made absolute)."""
    package = _name(path) if path.name == "__init__.py" else _name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


def test_no_two_way_import_in_the_cli_homework_and_top_level_modules():
    graph = {_name(path): imports_of(path) - {_name(path)} for path in SCOPE}
    pairs = sorted((a, b) for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, ()))
    assert not pairs, "modules that import each other: " + ", ".join(f"{a} <-> {b}" for a, b in pairs)


def test_the_walk_sees_imports_inside_functions_and_under_type_checking():
    common = imports_of(GRADER / "cli" / "common.py")
    assert "grader.cli.output" in common  # imported inside _command_name
    assert "grader.homework.row" in imports_of(GRADER / "homework" / "selfreport.py")
