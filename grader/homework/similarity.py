"""How close a solution is to the kata's reference once everything cosmetic is normalised,
and every padding dropped.

A copy of the reference scores 100, and the review must still say so. Both sources are first
cut to the code the kata's suite can reach (reach.py), without dead code or large constant
tables (normalise.py). Renaming variables, rewording docstrings and comments, reformatting, adding
type hints or reordering methods changes nothing after that: docstrings, bare strings,
annotations and string contents are dropped, and every identifier is renamed to ``v0, v1,
…`` (attributes, keywords and methods to ``m0, m1, …``) in order of first appearance. Three
measures are taken on what is left; the similarity is the largest:

* the token-sequence ratio of the whole module (``difflib``: 1.0 is identical);
* the share of the reference's functions (weighted by size) that appear in the solution
  with an identical normalised body, in any order (catches reordered methods);
* the share of the reference's statements (weighted by size, every name of the module's
  own collapsed to one placeholder) that appear in the solution, counted only where the
  solution is at least ``PADDED_SIZE`` times the reference's size: the ratio cannot reach
  the threshold there, and a copy with live code added between its lines would pass.

An independent solution of the same API shares signatures and a few idioms, not the bodies:
the corpora's correct solutions measure 0.13-0.61 where written another way, 0.69-0.89 where
they edit the reference, 0.98 for the reference with two lines changed, a cosmetic copy 1.0
(tests/test_copy_detection.py).

When a file cannot be measured (it does not parse, builds its code at run time, is still
too large once normalised, or the comparison runs out of its CPU budget), the result says
why and holds no value: the review flags that row "similarity not measured", never "not a
copy".
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
from collections import Counter
from dataclasses import dataclass

from grader import pyast
from grader.homework.budget import Budget, OverBudget
from grader.homework.normalise import DeadCode, dynamic_code
from grader.homework.reach import Api, keep_reachable

COPY_THRESHOLD = 0.9        # "a copy of the reference": flagged
RESEMBLES_THRESHOLD = 0.75  # "resembles the reference": said in the summary, not flagged
PADDED_SIZE = 1.2           # solution / reference tokens from which statement containment counts
MAX_SOURCE_BYTES = 256_000  # a bundle's member may be 1 MB; no honest solution is a quarter of it
MAX_NODES = 40_000          # after normalising (the largest reference: ~7,000)
CPU_SECONDS = 10.0          # per file; an honest one takes well under 0.2 s
_MIN_LINE_TOKENS = 4        # `return v` and `v = v` say nothing about who wrote a file
_TOKEN = re.compile(r"\w+|[^\w\s]")
_COMMENT_LINES = re.compile(r"^[ \t]*(#[^\n]*)?\n", re.MULTILINE)


@dataclass(frozen=True)
class Similarity:
    """0.0 (unrelated) .. 1.0 (the reference, cosmetically changed), or None with the reason
    it could not be measured."""

    value: float | None
    not_measured: str = ""

    @property
    def copy(self) -> bool:
        return self.value is not None and self.value >= COPY_THRESHOLD


class _NotMeasured(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _Form:
    """A module's normalised form, as the three measures read it."""

    num_nodes: int
    tokens: tuple[str, ...]
    bodies: dict[str, int]      # normalised function text -> its number of tokens
    lines: Counter              # collapsed statement -> how many times


def measure(solution: str, reference: str, api: Api, *, cpu_seconds: float = CPU_SECONDS) -> Similarity:
    """The similarity of `solution` to `reference`, both cut to what `api` reaches."""
    size = _code_bytes(solution)
    if size > MAX_SOURCE_BYTES:
        return Similarity(None, f"the file holds {size:,} bytes of code (not counting comment lines); "
                                f"the comparison reads at most {MAX_SOURCE_BYTES:,}")
    budget = Budget(cpu_seconds)
    try:
        theirs = _reference_form(reference, api)
        ours = _form(solution, api, budget, trusted=False)
        if ours.num_nodes > MAX_NODES:
            raise _NotMeasured(f"without unreached code, dead code and large literals it still has "
                               f"{ours.num_nodes:,} syntax nodes (the comparison takes at most "
                               f"{MAX_NODES:,}; the reference has {theirs.num_nodes:,})")
        return Similarity(round(_compare(ours, theirs, budget), 3))
    except _NotMeasured as exc:
        return Similarity(None, exc.reason)
    except OverBudget:
        return Similarity(None, f"the comparison took more than its {cpu_seconds:g} CPU seconds")
    except (RecursionError, MemoryError):
        return Similarity(None, "the file is nested too deeply (or too large) to compare")


def reference_similarity(solution: str, reference: str, api: Api) -> float | None:
    """The value of `measure`, None when it could not be measured."""
    return measure(solution, reference, api).value


def _code_bytes(source: str) -> int:
    """The size parsing costs: comment-only and blank lines are skipped by the tokenizer
    almost for free (a copy padded with a megabyte of comments is still measured)."""
    return len(_COMMENT_LINES.sub("", source).encode("utf-8", "replace"))


@functools.lru_cache(maxsize=32)
def _reference_form(reference: str, api: Api) -> _Form:
    # The same for every candidate of a kata: normalised once per review.
    return _form(reference, api, Budget(60.0), trusted=True)


def _form(source: str, api: Api, budget: Budget, *, trusted: bool) -> _Form:
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError) as exc:
        line = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise _NotMeasured(f"the file does not parse ({line}{getattr(exc, 'msg', exc)})") from exc
    dynamic = None if trusted else dynamic_code(tree)
    if dynamic:
        raise _NotMeasured(f"the file builds code at run time ({dynamic}), so the code the suite "
                           "calls cannot be read from it")
    keep_reachable(tree, api, budget)
    cleaner = DeadCode(budget)
    cleaner.visit(tree)
    num_nodes = sum(1 for _ in ast.walk(tree))
    if num_nodes > MAX_NODES:
        return _Form(num_nodes, (), {}, Counter())
    clean = ast.unparse(tree)
    return _Form(num_nodes, tuple(_tokens(pyast.parse(clean))), _function_bodies(pyast.parse(clean)),
                 _statement_lines(pyast.parse(clean)))


def _compare(ours: _Form, theirs: _Form, budget: Budget) -> float:
    a, b = ours.tokens, theirs.tokens
    if not a or not b:
        return 0.0  # none of the API is defined in the file: nothing of the reference either
    ratio = 0.0
    if 2 * min(len(a), len(b)) / (len(a) + len(b)) >= RESEMBLES_THRESHOLD:
        # Past that size difference the ratio cannot reach a threshold: spare the quadratic work.
        ratio = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    budget.tick()
    ref_total = sum(theirs.bodies.values())
    shared = sum(size for body, size in theirs.bodies.items() if body in ours.bodies)
    bodies = shared / ref_total if ref_total else 0.0
    contained = 0.0
    if len(a) >= PADDED_SIZE * len(b):
        weight = {line: len(_TOKEN.findall(line)) for line in theirs.lines}
        found = sum(weight[line] * min(n, ours.lines[line]) for line, n in theirs.lines.items())
        total = sum(weight[line] * n for line, n in theirs.lines.items())
        contained = found / total if total else 0.0
    return max(ratio, bodies, contained)


# ---------------------------------------------------------------------------- canonical names


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


class _Collapser(_Normaliser):
    """Every name the module binds itself is one placeholder (a statement reads the same
    wherever it stands, whatever was added before it); imported and builtin names, and the
    attributes of library objects (``torch.where``, ``x.view``), are kept: a copier cannot
    rename those."""

    def __init__(self, tree: ast.Module) -> None:
        super().__init__()
        self.own_names: set[str] = set()
        self.own_members: set[str] = set()
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self.own_names.add(node.id)
            elif isinstance(node, ast.arg):
                self.own_names.add(node.arg)
                self.own_members.add(node.arg)  # passed as a keyword
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.own_names.add(node.name)
                self.own_members.add(node.name)
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                self.own_members.add(node.attr)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                imported.update((a.asname or a.name).split(".")[0] for a in node.names)
        self.own_names -= imported

    def _name(self, name: str) -> str:
        return "v" if name in self.own_names else name

    def _member(self, name: str) -> str:
        return "m" if name in self.own_members else name

    def visit_alias(self, node: ast.alias) -> ast.AST:
        return node


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


def _statement_lines(tree: ast.Module) -> Counter:
    """Each statement (a compound one by its header line), collapsed, with its count."""
    text = ast.unparse(ast.fix_missing_locations(_Collapser(tree).visit(tree)))
    lines = (line.strip() for line in text.splitlines())
    return Counter(line for line in lines if len(_TOKEN.findall(line)) >= _MIN_LINE_TOKENS)


def _copy(node: ast.AST) -> ast.stmt:
    return pyast.parse(ast.unparse(node)).body[0]


# --------------------------------------------------------------------------- C++ solutions

CPP_BINDINGS_MARK = "// ---- bindings:"  # the stubs' line above the binding the candidate does not write
_CPP_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def measure_cpp(solution: str, reference: str, *, max_tokens: int = 20_000) -> Similarity:
    """A C++ solution's similarity to the C++ reference: their own parts (the binding both
    share is left out), comments dropped, as token sequences; the share of tokens in common
    (difflib), or, for a solution padded beyond 1.2x the reference, the share of the
    reference's tokens it contains in order."""
    import difflib

    def tokens(text: str) -> list[str]:
        own = text.split(CPP_BINDINGS_MARK, 1)[0]
        return _TOKEN.findall(_CPP_COMMENTS.sub(" ", own))

    ours, theirs = tokens(solution), tokens(reference)
    if len(ours) > max_tokens:
        return Similarity(None, f"the file holds {len(ours):,} tokens before its binding; the comparison "
                                f"reads at most {max_tokens:,}")
    if not ours or not theirs:
        return Similarity(0.0)
    matcher = difflib.SequenceMatcher(None, ours, theirs, autojunk=False)
    value = matcher.ratio()
    if len(ours) > PADDED_SIZE * len(theirs):
        value = max(value, sum(b.size for b in matcher.get_matching_blocks()) / len(theirs))
    return Similarity(round(value, 3))
