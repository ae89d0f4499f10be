"""The part of a module that copy detection compares (similarity.py), with the padding gone.

A copy of the reference can be hidden by adding to it rather than changing it: a table of
20,001 zeros, a hundred functions nobody calls, code after a ``return``. So before two
modules are compared, each is cut to what the kata's suite can reach (reach.py, from the
kata's ``Api``), and what cannot run or only pads is dropped:

* **dead code**: statements after ``return``/``raise``/``break``/``continue``, the branch an
  ``if``/``while`` on a constant never takes, ``pass`` and bare names or constants;
* **large literals**: a list, tuple, set or dict of more than ``MAX_LITERAL_ITEMS`` constants
  becomes one placeholder.

Code built at run time (``exec``, ``eval``, star imports, ``globals()``...) cannot be followed
at all: ``dynamic_code`` names the first such use, and the review then says "similarity not
measured" rather than guess.

Every walk is iterative or bounded by the parser's own nesting limit, and ticks a ``Budget``
(budget.py) so that a hostile file costs a bounded amount of CPU.
"""

from __future__ import annotations

import ast

from grader.homework.budget import Budget
from grader.homework.reach import Api, api_of  # noqa: F401 - re-exported: tests import api_of from here

MAX_LITERAL_ITEMS = 16
# Names whose use means the module's code is not all in its text.
_DYNAMIC_NAMES = {"exec", "eval", "compile", "__import__", "globals", "__builtins__"}
_DYNAMIC_MODULES = {"importlib", "marshal", "pickle", "builtins", "ctypes", "runpy", "zipimport",
                    "codeop", "dill", "cloudpickle"}
_DYNAMIC_ATTRS = {"FunctionType", "CodeType", "import_module"}


def dynamic_code(tree: ast.Module) -> str | None:
    """The first use of run-time code building in `tree` ("exec at line 12"), or None."""
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Name) and node.id in _DYNAMIC_NAMES:
            what = f"{node.id}"
        elif isinstance(node, ast.Attribute) and (node.attr in _DYNAMIC_ATTRS or _is_sys_modules(node)):
            what = f".{node.attr}"
        elif isinstance(node, ast.Import):
            what = next((f"import {a.name}" for a in node.names
                         if a.name.split(".")[0] in _DYNAMIC_MODULES), None)
        elif isinstance(node, ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                what = f"from {node.module or '.'} import *"
            elif (node.module or "").split(".")[0] in _DYNAMIC_MODULES:
                what = f"from {node.module} import"
        if what:
            return f"{what} at line {getattr(node, 'lineno', '?')}"
    return None


def _is_sys_modules(node: ast.Attribute) -> bool:
    # `sys.modules[__name__]` rewrites the module from inside; `model.modules()` is torch.
    return node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id == "sys"


# ---------------------------------------------------------------------------- dead code, literals


def _truth(test: ast.expr) -> bool | None:
    """The truth of a constant test (``if False:``, ``while 0:``, ``if not 1:``), else None."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Constant):
        return not test.operand.value
    return None


def _does_nothing(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr)
                                          and isinstance(stmt.value, (ast.Constant, ast.Name)))


class DeadCode(ast.NodeTransformer):
    """Drops dead statements and replaces large constant tables by one placeholder."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def generic_visit(self, node: ast.AST) -> ast.AST:
        self.budget.tick()
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                kept = self._block(stmts)
                setattr(node, name, kept or ([ast.Pass()] if name == "body" else []))
        return super().generic_visit(node)

    def _block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        todo = list(reversed(stmts))
        while todo:
            stmt = todo.pop()
            self.budget.tick()
            truth = _truth(stmt.test) if isinstance(stmt, (ast.If, ast.While)) else None
            if truth is not None and isinstance(stmt, (ast.If, ast.While)) and (isinstance(stmt, ast.If) or not truth):
                taken = stmt.body if truth and isinstance(stmt, ast.If) else stmt.orelse
                todo.extend(reversed(taken))  # the branch taken, in place of the test
                continue
            if _does_nothing(stmt):
                continue
            out.append(stmt)
            if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                break  # what follows in this block never runs
        return out

    def _table(self, node: ast.AST) -> ast.AST:
        node = self.generic_visit(node)
        if isinstance(node, ast.Dict):
            items: list[ast.expr | None] = [*node.keys, *node.values]
        else:
            items = list(node.elts)  # type: ignore[attr-defined]
        if len(items) > MAX_LITERAL_ITEMS and all(_constant(i) for i in items):
            return ast.copy_location(ast.Constant(value=f"<{len(items)} constants>"), node)
        return node

    def visit_List(self, node: ast.List | ast.Tuple) -> ast.AST:
        return self._table(node) if isinstance(node.ctx, ast.Load) else self.generic_visit(node)

    visit_Tuple = visit_List

    def visit_Set(self, node: ast.Set | ast.Dict) -> ast.AST:
        return self._table(node)

    visit_Dict = visit_Set


def _constant(node: ast.expr | None) -> bool:
    """A constant, a signed one (``-1``), or a table already folded into a placeholder."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)
