"""Harnesses run in the candidate's process (grader.protocol.run_in_one_process): what their
file imports, the operators on their tensors, and no_grad blocks, none of which a proxy in
the judge can do (a proxy has no operators and no `with`). Each returns plain data; the
verdict is the judge's. The standard library only.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

FORBIDDEN = ("numpy", "torch")


def forbidden_imports(mod: Any) -> list[str]:
    """The forbidden modules the candidate's file imports (any import statement, at any
    depth, or __import__ / importlib.import_module of a literal name) or holds at module level."""
    found: set[str] = set()
    source = None
    path = getattr(mod, "__file__", None)
    # A C++ solution's file is the built extension module, not source to parse: its
    # module-level names are still scanned below.
    if path and str(path).endswith(".py"):
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except (OSError, UnicodeDecodeError):
            source = None
    if source is not None:
        for node in ast.walk(ast.parse(source)):  # noqa: TID251 - the standard library only: this runs in the candidate's process, one thread
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in ("__import__", "import_module"):
                    names = [node.args[0].value]
            found.update(n for n in names if n.split(".")[0] in FORBIDDEN)
    for value in vars(mod).values():
        origin = getattr(value, "__name__", None) if isinstance(value, type(sys)) else getattr(value, "__module__", None)
        if isinstance(origin, str) and origin.split(".")[0] in FORBIDDEN:
            found.add(origin.split(".")[0])
    return sorted(found)


def _outcome(fn: Any) -> tuple:
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - reported to the judge
        return ("error", f"{type(exc).__name__}: {exc}"[:300])
    try:
        return ("ok", tuple(value.shape), value.tolist())
    except Exception as exc:  # noqa: BLE001 - reported to the judge
        return ("error", f"the result has no shape/tolist: {type(exc).__name__}: {exc}"[:300])


def operators(mod: Any, a_data: Any, b_data: Any, number: float) -> dict:
    """Each operator on Tensor(a_data) and Tensor(b_data) (or the number): ("ok", shape,
    values) or ("error", text)."""
    T = mod.Tensor
    a, b = T(a_data), T(b_data)
    return {
        "a + b": _outcome(lambda: a + b), "a - b": _outcome(lambda: a - b),
        "a * b": _outcome(lambda: a * b), "a / b": _outcome(lambda: a / b),
        "-a": _outcome(lambda: -a), "a @ b.T": _outcome(lambda: a @ b.transpose(0, 1)),
        "a + n": _outcome(lambda: a + number), "n + a": _outcome(lambda: number + a),
        "a - n": _outcome(lambda: a - number), "n - a": _outcome(lambda: number - a),
        "a * n": _outcome(lambda: a * number), "n * a": _outcome(lambda: number * a),
        "a / n": _outcome(lambda: a / number), "n / a": _outcome(lambda: number / a),
    }


def no_grad_trials(mod: Any) -> dict:
    """requires_grad of results made inside and after no_grad blocks (a plain one, a nested
    one, one left by an exception), and the gradient of a graph that used a tensor made
    inside a block."""
    T = mod.Tensor
    x = T([1.0, 2.0, 3.0], requires_grad=True)
    report: dict = {}
    with mod.no_grad():
        report["inside"] = bool(x.mul(2.0).requires_grad)
        with mod.no_grad():
            pass
        report["inside, after a nested block"] = bool(x.mul(2.0).requires_grad)
    report["after the block"] = bool(x.mul(2.0).requires_grad)
    try:
        with mod.no_grad():
            raise KeyError("raised inside no_grad")
    except KeyError:
        pass
    report["after a block left by an exception"] = bool(x.mul(2.0).requires_grad)
    with mod.no_grad():
        c = x.mul(3.0)  # a constant for the graph below
    y = x.mul(x).add(c).sum()
    y.backward()
    report["grad of sum(x * x + no_grad(3x))"] = x.grad.tolist() if x.grad is not None else None
    return report
