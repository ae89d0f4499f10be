"""`ast.parse` and the compiling of a tree, one thread at a time.

CPython 3.11 counts the depth of the AST it is building in state shared by the whole
interpreter (gh-95185; gh-106905 is the bug). Two threads building trees at once, one of them
paused in the middle by a garbage collection that runs Python code, leave the count wrong
and `ast.parse` raises `SystemError: AST constructor recursion depth mismatch` for a file
that is fine. A coach's review grades bundles in threads (homework/review.py) and the warm
grader serves requests from threads, so every parse in the grader goes through here, under
one lock (ruff's TID251 bans `ast.parse` elsewhere). A parse takes a millisecond or two; the
lock costs nothing a user can see.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_lock = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **kwargs: Any) -> Any:
    """ast.parse(source, filename, mode, **kwargs), never beside another thread's."""
    with _lock:
        return ast.parse(source, filename, mode, **kwargs)  # noqa: TID251 - the one place it is called, under the lock


def compile_tree(tree: ast.Module, filename: str, mode: str, *, dont_inherit: bool = False) -> Any:
    """compile() of an AST (which converts the Python tree back to C the same way), under the
    same lock."""
    with _lock:
        return compile(tree, filename, mode, dont_inherit=dont_inherit)
