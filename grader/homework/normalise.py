"""The part of a module that copy detection compares (similarity.py), with the padding gone.

A copy of the reference can be hidden by adding to it rather than changing it: a table of
20,001 zeros, a hundred functions nobody calls, code after a ``return``. So before two
modules are compared, each is cut to what the kata's suite can reach, and what cannot run:

* **unreached code**: the roots are the kata's API, the names its stub defines at top level
  and the members of the stub's classes. From them the module's own references are followed:
  a name read anywhere in kept code keeps the top-level statements that bind it, an attribute
  name keeps the class members of that name. Unused top-level functions, classes and
  assignments, unused private methods and ``if __name__ == "__main__":`` blocks are dropped;
  a top-level statement that binds nothing (``Allocator.free = _free``) is kept when it
  mentions a kept name.
* **dead code**: statements after ``return``/``raise``/``break``/``continue``, the branch an
  ``if``/``while`` on a constant never takes, ``pass`` and bare names or constants.
* **large literals**: a list, tuple, set or dict of more than ``MAX_LITERAL_ITEMS`` constants
  becomes one placeholder.

Reachability over-approximates (a local variable named like a top-level helper keeps the
helper), which only keeps more code. Code built at run time (``exec``, ``eval``, star imports,
``globals()``...) cannot be followed at all: ``dynamic_code`` names the first such use, and
the review then says "similarity not measured" rather than guess.

Every walk here is iterative or bounded by the parser's own nesting limit, and ticks a
``Budget`` so that a hostile file costs a bounded amount of CPU.
"""

from __future__ import annotations

import ast
import functools
import time
from dataclasses import dataclass, field

MAX_LITERAL_ITEMS = 16
# Names whose use means the module's code is not all in its text.
_DYNAMIC_NAMES = {"exec", "eval", "compile", "__import__", "globals", "__builtins__"}
_DYNAMIC_MODULES = {"importlib", "marshal", "pickle", "builtins", "ctypes", "runpy", "zipimport",
                    "codeop", "dill", "cloudpickle"}
_DYNAMIC_ATTRS = {"FunctionType", "CodeType", "import_module", "modules"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


class OverBudget(Exception):
    """The comparison ran out of the CPU time it may spend on one file."""


class Budget:
    """CPU seconds of this thread (a loaded machine does not make an honest file run out)."""

    def __init__(self, cpu_seconds: float) -> None:
        self.cpu_seconds = cpu_seconds
        self._until = time.thread_time() + cpu_seconds
        self._ticks = 0

    def tick(self) -> None:
        self._ticks += 1
        if self._ticks % 512 == 0 and time.thread_time() > self._until:
            raise OverBudget


@dataclass(frozen=True)
class Api:
    """What the suite calls: the stub's top-level names and its classes' members."""

    names: frozenset[str]
    members: frozenset[str]


@functools.lru_cache(maxsize=32)
def api_of(stub_source: str) -> Api:
    tree = ast.parse(stub_source)
    names: set[str] = set()
    members: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        names |= _bound(stmt)
        if isinstance(stmt, ast.ClassDef):
            for member in stmt.body:
                members |= _bound(member)
    return Api(frozenset(n for n in names if not n.startswith("__")), frozenset(members))


def dynamic_code(tree: ast.Module) -> str | None:
    """The first use of run-time code building in `tree` ("exec at line 12"), or None."""
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Name) and node.id in _DYNAMIC_NAMES:
            what = f"{node.id}"
        elif isinstance(node, ast.Attribute) and node.attr in _DYNAMIC_ATTRS:
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


# ---------------------------------------------------------------------------- reachability


def _bound(stmt: ast.AST) -> set[str]:
    """Names `stmt` binds in its own scope (not inside the functions or classes it defines)."""
    names: set[str] = set()
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, _SCOPES) or isinstance(node, ast.comprehension):
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return names


@dataclass(eq=False)
class _Unit:
    """A top-level statement or a class member, with what it binds and what it reads."""

    stmt: ast.stmt
    names: set[str]
    reads: set[str] = field(default_factory=set)      # names read
    attrs: set[str] = field(default_factory=set)      # attribute names used
    members: list["_Unit"] = field(default_factory=list)
    owner: "_Unit | None" = None
    kept: bool = False


def _reads(nodes: list[ast.AST], unit: _Unit, budget: Budget) -> None:
    todo = list(nodes)
    while todo:
        node = todo.pop()
        budget.tick()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            unit.reads.add(node.id)
        elif isinstance(node, ast.Attribute):
            unit.attrs.add(node.attr)
        todo.extend(ast.iter_child_nodes(node))


def _is_main_guard(stmt: ast.stmt) -> bool:
    test = getattr(stmt, "test", None)
    return (isinstance(stmt, ast.If) and isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name) and test.left.id == "__name__")


def _units(tree: ast.Module, budget: Budget) -> list[_Unit]:
    units = []
    for stmt in tree.body:
        if _is_main_guard(stmt):
            continue
        unit = _Unit(stmt, _bound(stmt))
        if isinstance(stmt, ast.ClassDef):
            _reads([*stmt.decorator_list, *stmt.bases, *stmt.keywords], unit, budget)
            for member in stmt.body:
                inner = _Unit(member, _bound(member), owner=unit)
                _reads([member], inner, budget)
                unit.members.append(inner)
        else:
            _reads([stmt], unit, budget)
        units.append(unit)
    return units


def _always_kept(member: _Unit) -> bool:
    """Fields (``x: int``, a dataclass's) and dunder methods are used without being named."""
    stmt = member.stmt
    if isinstance(stmt, ast.AnnAssign):
        return True
    return isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("__")


class _Reach:
    """A worklist over names and attribute names: linear in the module's size."""

    def __init__(self, units: list[_Unit]) -> None:
        self.by_name: dict[str, list[_Unit]] = {}
        self.effects_by_read: dict[str, list[_Unit]] = {}
        self.members_by_name: dict[str, list[_Unit]] = {}
        for unit in units:
            index = self.by_name if unit.names else self.effects_by_read
            for name in unit.names or unit.reads:
                index.setdefault(name, []).append(unit)
            for member in unit.members:
                for name in member.names:
                    self.members_by_name.setdefault(name, []).append(member)
        self.names: set[str] = set()
        self.attrs: set[str] = set()
        self.todo: list[tuple[bool, str]] = []

    def run(self, api: Api) -> None:
        for name in api.names:
            self._want(name, is_attr=False)
        for name in api.members:
            self._want(name, is_attr=True)
        while self.todo:
            is_attr, name = self.todo.pop()
            if is_attr:
                for member in self.members_by_name.get(name, []):
                    if member.owner is not None and member.owner.kept:
                        self._keep(member)
            else:
                for unit in self.by_name.get(name, []) + self.effects_by_read.get(name, []):
                    self._keep(unit)

    def _want(self, name: str, is_attr: bool) -> None:
        seen = self.attrs if is_attr else self.names
        if name not in seen:
            seen.add(name)
            self.todo.append((is_attr, name))

    def _keep(self, unit: _Unit) -> None:
        if unit.kept:
            return
        unit.kept = True
        for name in unit.reads:
            self._want(name, is_attr=False)
        for name in unit.attrs:
            self._want(name, is_attr=True)
        for member in unit.members:
            if _always_kept(member) or member.names & self.attrs:
                self._keep(member)


def keep_reachable(tree: ast.Module, api: Api, budget: Budget) -> ast.Module:
    """`tree` cut to the statements the API reaches (in place, and returned)."""
    units = _units(tree, budget)
    _Reach(units).run(api)
    for unit in units:
        if isinstance(unit.stmt, ast.ClassDef):
            unit.stmt.body = [m.stmt for m in unit.members if m.kept] or [ast.Pass()]
    tree.body = [unit.stmt for unit in units if unit.kept]
    return tree


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
            if truth is not None and (isinstance(stmt, ast.If) or not truth):
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

    def visit_List(self, node: ast.List) -> ast.AST:
        return self._table(node) if isinstance(node.ctx, ast.Load) else self.generic_visit(node)

    visit_Tuple = visit_List

    def visit_Set(self, node: ast.Set) -> ast.AST:
        return self._table(node)

    visit_Dict = visit_Set


def _constant(node: ast.expr | None) -> bool:
    """A constant, a signed one (``-1``), or a table already folded into a placeholder."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)
