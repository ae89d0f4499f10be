"""What a kata's suite can reach in a module: the part of it copy detection compares.

The roots are the kata's API (``Api``, read from its stub by ``api_of``: the stub's top-level
names and its classes' members). From them the module's own references are followed: a name
read anywhere in kept code keeps the top-level statements that bind it, an attribute name
keeps the class members of that name. A top-level statement that binds nothing (``Allocator.free = _free``) is kept
when it reads a kept name; ``if __name__ == "__main__":`` blocks never run under the suite.
Fields and dunder methods of a kept class are used without being named, and stay.

A worklist over names, so the cost is linear in the module's size; every step ticks the
caller's Budget.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

from grader import pyast
from grader.homework.budget import Budget

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def bound_names(stmt: ast.AST) -> set[str]:
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


@dataclass(frozen=True)
class Api:
    """What the suite calls: the stub's top-level names and its classes' members."""

    names: frozenset[str]
    members: frozenset[str]


@functools.lru_cache(maxsize=32)
def api_of(stub_source: str) -> Api:
    tree = pyast.parse(stub_source)
    names: set[str] = set()
    members: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        names |= bound_names(stmt)
        if isinstance(stmt, ast.ClassDef):
            for member in stmt.body:
                members |= bound_names(member)
    return Api(frozenset(n for n in names if not n.startswith("__")), frozenset(members))


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
        unit = _Unit(stmt, bound_names(stmt))
        if isinstance(stmt, ast.ClassDef):
            _reads([*stmt.decorator_list, *stmt.bases, *stmt.keywords], unit, budget)
            for member in stmt.body:
                inner = _Unit(member, bound_names(member), owner=unit)
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
