"""Can the candidate's file load at all? A compile of its source and a look at the names it
defines, in the parent, before any judge starts.

Nothing here imports the candidate's file (only the sandboxed worker does that), nor
anything heavy (torch, pytest, the engine): a syntax error, an empty file or a file that
defines none of the kata's names is a verdict in milliseconds, where a judge takes seconds
to start. What only an import can tell (an exception at import, a loop at module level) is
the worker's to find (see import_watch.py).
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from pathlib import Path

from grader import pyast

# Calls through which a module can bind names its source does not show (and sys.modules).
_DYNAMIC_NAMES = frozenset({"globals", "locals", "vars", "exec", "eval", "__import__"})
_MAX_NAMES_SHOWN = 8
MISSING_NOTE_START = "your file does not define"
# grader/cpp/build.py's note about warnings, and grader/grading.py's about --sanitize.
SHOWN_NOTE_STARTS = (MISSING_NOTE_START, "the C++ compiler", "built with --sanitize", "C++: ")


@dataclass(frozen=True)
class LoadCheck:
    """What the compile check found. `error`: the file cannot load, every test fails with
    this message. `missing`: names the stub defines that the file does not (the file is
    still graded: the tests that need other names can pass)."""

    error: str | None = None
    missing: tuple[str, ...] = ()

    @property
    def note(self) -> str | None:
        """The scorecard's note about missing names, or None."""
        if not self.missing:
            return None
        return (f"{MISSING_NOTE_START} {_names(self.missing)} (the stub declares "
                f"{'it' if len(self.missing) == 1 else 'them'}): the tests that use "
                f"{'it' if len(self.missing) == 1 else 'them'} fail; the others ran")


def missing_names_notes(notes: list[str]) -> list[str]:
    """The notes of a scorecard the CLI shows: names missing, the C++ compiler's warnings,
    a --sanitize build's (a card's other notes, about the sandbox, are for the coach)."""
    return [n for n in notes if n.startswith(SHOWN_NOTE_STARTS)]


def check_source(source: str, *, slug: str, stub: Path | None = None, path: Path | None = None,
                 unshown: frozenset[str] = frozenset()) -> LoadCheck:
    """Compile `source` (the candidate's file) and compare its top-level names with the
    stub's, less `unshown` (the names of levels this grading leaves out, which a mock has
    not revealed). Never raises for anything in the source."""
    if "\x00" in source:  # compile's own message names no line
        line = source.count("\n", 0, source.index("\x00")) + 1
        return LoadCheck(error=f"your file contains a NUL byte at line {line}: it is not Python source "
                               "(saved as UTF-16, or a binary file?)\nnothing was run: save it as "
                               "UTF-8 text and grade again")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning (an invalid escape) is not an error
            tree = pyast.parse(source, "<your file>", "exec")
            # Parsing alone misses what only the compiler sees: `return` outside a function,
            # a repeated argument, `global` after an assignment.
            pyast.compile_tree(tree, "<your file>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        if not exc.text and exc.lineno and 0 < exc.lineno <= source.count("\n") + 1:
            exc.text = source.splitlines()[exc.lineno - 1] if source.splitlines() else ""
        return LoadCheck(error=syntax_error_text(exc, path))
    except (ValueError, RecursionError, MemoryError):
        return LoadCheck()  # too deep to parse here; the worker's import will say
    api = tuple(name for name in stub_names(stub) if name not in unshown)
    if _is_empty(tree):
        return LoadCheck(error=_empty_text(slug, api))
    defined = defined_names(tree)
    if defined is None or not api:
        return LoadCheck()
    missing = tuple(name for name in api if name not in defined)
    if missing and len(missing) == len(api):
        return LoadCheck(error=_none_defined_text(slug, api))
    return LoadCheck(missing=missing)


def syntax_error_text(exc: SyntaxError, path: Path | None = None) -> str:
    """What, where (line and column, the line itself with a caret) and what next."""
    where = f"at line {exc.lineno}" if exc.lineno else "(no line given)"
    if exc.lineno and exc.offset:
        where += f", column {exc.offset}"
    kind = "an indentation error" if isinstance(exc, IndentationError) else "a syntax error"
    text = f"your file has {kind} {where}: {exc.msg}"
    line = (exc.text or "").rstrip("\n")
    if line.strip():
        shown = line.expandtabs(4)
        text += f"\n    {shown.strip()}"
        if exc.offset and 0 < exc.offset <= len(line) + 1:
            indent = len(shown) - len(shown.lstrip())
            caret_at = len(line[: exc.offset - 1].expandtabs(4)) - indent
            text += "\n    " + " " * max(caret_at, 0) + "^"
    shown_path = path.name if path is not None else "<file>"
    return text + (f"\nnothing was run: fix that line and grade again (`python -m py_compile {shown_path}` "
                   "shows the same error)")


def stub_names(stub: Path | None) -> tuple[str, ...]:
    """The public names the stub defines at top level (functions, classes, constants), in
    its order: the kata's API. () when there is no readable stub."""
    if stub is None:
        return ()
    try:
        tree = pyast.parse(stub.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return ()
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return tuple(dict.fromkeys(n for n in names if not n.startswith("_")))


def defined_names(tree: ast.Module) -> set[str] | None:
    """Every name the module may bind at top level (an over-estimate: both branches of an
    `if`, names made by `global` inside functions); None when it may bind names its source
    does not show (a star import, globals(), exec, sys.modules, a module __getattr__)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _DYNAMIC_NAMES:
            return None
        if isinstance(node, ast.Attribute) and node.attr == "modules" and isinstance(node.value, ast.Name) \
                and node.value.id == "sys":  # sys.modules[__name__].x = ... (not a model's .modules())
            return None
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Global):
            names.update(node.names)
    for statement in tree.body:
        names.update(_bound_by(statement))
    return None if "__getattr__" in names else names


def _bound_by(statement: ast.stmt) -> set[str]:
    """Names a module-level statement binds: walked without entering function or class
    bodies (their names count, what they bind inside does not)."""
    out: set[str] = set()
    todo: list[ast.AST] = [statement]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            todo += node.decorator_list  # (a walrus in a decorator binds at module level)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.add(node.rest)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _is_empty(tree: ast.Module) -> bool:
    """Nothing but comments, blank lines and a docstring (or a bare `...`)."""
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
               and (isinstance(node.value.value, str) or node.value.value is Ellipsis)
               for node in tree.body)


def _empty_text(slug: str, api: tuple[str, ...]) -> str:
    wanted = f": {_names(api)}" if api else ""
    return ("your file is empty (nothing but comments, blank lines or a docstring): there is "
            "no code to grade, nothing was run\n"
            f"next: write {slug}'s API as the stub declares it{wanted}; `kata reset {slug}` "
            "puts the stub back (your file is backed up first)")


def _none_defined_text(slug: str, api: tuple[str, ...]) -> str:
    return (f"your file defines none of {slug}'s API: {_names(api)} (what the stub declares): "
            "there is nothing to grade, nothing was run\n"
            f"next: is it the right file? Grade the file you wrote with `--file`, or write "
            f"the API as the stub declares it (`kata show {slug}`)")


def _names(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:_MAX_NAMES_SHOWN])
    return shown + (f" and {len(names) - _MAX_NAMES_SHOWN} more" if len(names) > _MAX_NAMES_SHOWN else "")
