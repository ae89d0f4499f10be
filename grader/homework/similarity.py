"""How close a solution is to the kata's reference once everything cosmetic is normalised.

A copy of the reference scores 100, and the review must still say so. Renaming variables,
rewording docstrings and comments, reformatting, adding type hints or reordering methods
changes nothing here: both sources are parsed with ``ast``, docstrings, bare strings,
annotations and string contents are dropped, and every identifier is renamed to ``v0, v1,
…`` (attributes, keywords and methods to ``m0, m1, …``) in order of first appearance. Two measures are taken on what is left:

* the token-sequence ratio of the whole module (``difflib``: 1.0 is identical), and
* the share of the reference's functions (weighted by size) that appear in the solution
  with an identical normalised body, in any order (catches reordered methods).

The similarity is the larger of the two. An independent solution of the same API shares
signatures and a few idioms, not the bodies: the corpora's solutions written another way
measure 0.2-0.46, their small edits of the reference 0.74-0.98, a cosmetic copy 1.0.
"""

from __future__ import annotations

import ast
import difflib
import re

COPY_THRESHOLD = 0.9        # "a copy of the reference": flagged
RESEMBLES_THRESHOLD = 0.75  # "resembles the reference": said in the summary, not flagged
_TOKEN = re.compile(r"\w+|[^\w\s]")
_MAX_TOKENS = 40_000  # beyond this a "solution" is not worth a quadratic comparison


class _Normaliser(ast.NodeTransformer):
    """Drops what a copier changes for free and renames every identifier canonically."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.members: dict[str, str] = {}

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def _member(self, name: str) -> str:
        # Attributes, keywords and methods have their own namespace: `self.size = size`
        # must read the same after the parameter alone is renamed.
        return self.members.setdefault(name, f"m{len(self.members)}")

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list):
                kept = [s for s in body if not _is_bare_string(s)]
                setattr(node, field, kept or [ast.Pass()])
        return super().generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._name(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg, node.annotation = self._name(node.arg), None
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        node.attr = self._member(node.attr)
        return self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        if node.arg is not None:
            node.arg = self._member(node.arg)
        return self.generic_visit(node)

    def visit_alias(self, node: ast.alias) -> ast.AST:
        node.name = ".".join(self._name(part) for part in node.name.split("."))
        node.asname = self._name(node.asname) if node.asname else None
        return node

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.name, node.returns = self._member(node.name), None
        return self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._name(node.name)
        return self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is None:
            return ast.Pass()
        return self.visit(ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno))

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, (str, bytes)):
            node.value = "S"
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return ast.Constant(value="S")


def _is_bare_string(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def _tokens(tree: ast.AST) -> list[str]:
    normalised = _Normaliser().visit(tree)
    return _TOKEN.findall(ast.unparse(ast.fix_missing_locations(normalised)))


def _function_bodies(tree: ast.Module) -> dict[str, int]:
    """Normalised text of every function and method (each renamed on its own) -> token count."""
    bodies: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            tokens = _tokens(ast.Module(body=[_copy(node)], type_ignores=[]))
            bodies[" ".join(tokens)] = len(tokens)
    return bodies


def _copy(node: ast.AST) -> ast.AST:
    return ast.parse(ast.unparse(node)).body[0]


def reference_similarity(solution: str, reference: str) -> float | None:
    """0.0 (unrelated) .. 1.0 (the reference, cosmetically changed); None when the solution
    does not parse or is too large to compare."""
    try:
        ours, theirs = ast.parse(solution), ast.parse(reference)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        a, b = _tokens(ours), _tokens(theirs)
        if not a or not b or len(a) > _MAX_TOKENS:
            return None
        ratio = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
        ref_bodies = _function_bodies(ast.parse(reference))
        ref_total = sum(ref_bodies.values())
        if ref_total:
            found = _function_bodies(ast.parse(solution))
            shared = sum(size for body, size in ref_bodies.items() if body in found)
            ratio = max(ratio, shared / ref_total)
    except RecursionError:
        return None
    return round(ratio, 3)
