"""Mutation testing of a reference: which small, plausible mistakes does the hidden suite miss?

Each mutant is the reference with one change (a comparison flipped or made strict, + for -,
a small integer constant off by one, `and` for `or`); every mutant is graded with the kata's
hidden suite and a fixed seed. A mutant that still scores 100 is a *survivor*: either the
suite misses that mistake, or the change does not alter behaviour (an equivalent mutant),
which a reader must decide.

    python scripts/mutate.py paged-kv               # every mutant, 2 at a time
    python scripts/mutate.py scheduler --limit 40 --seed 3
"""

from __future__ import annotations

import argparse
import ast
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.catalog import load_catalog
from grader.engine import zygote
from grader.grading import grade

_COMPARE_SWAPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
                  ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}
_BINOP_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.FloorDiv: ast.Div, ast.Mult: ast.Div}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def mutation_sites(tree: ast.AST) -> list[tuple[int, str]]:
    """(index of the node in ast.walk order, description) for every mutable place."""
    skip = _docstring_nodes(tree)
    sites = []
    for i, node in enumerate(ast.walk(tree)):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _COMPARE_SWAPS:
            sites.append((i, f"line {line}: {type(node.ops[0]).__name__} -> {_COMPARE_SWAPS[type(node.ops[0])].__name__}"))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
            sites.append((i, f"line {line}: {type(node.op).__name__} -> {_BINOP_SWAPS[type(node.op)].__name__}"))
        elif isinstance(node, ast.BoolOp):
            sites.append((i, f"line {line}: {type(node.op).__name__} -> {'Or' if isinstance(node.op, ast.And) else 'And'}"))
        elif (isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value <= 4
              and id(node) not in skip):
            sites.append((i, f"line {line}: constant {node.value} -> {node.value + 1}"))
    return sites


def mutant_source(source: str, index: int) -> str:
    tree = ast.parse(source)
    node = list(ast.walk(tree))[index]
    if isinstance(node, ast.Compare):
        node.ops[0] = _COMPARE_SWAPS[type(node.ops[0])]()
    elif isinstance(node, ast.BinOp):
        node.op = _BINOP_SWAPS[type(node.op)]()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.Constant):
        node.value = cast(int, node.value) + 1  # mutation_sites offers int constants only
    return ast.unparse(tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kata")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None, help="grade at most this many mutants")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    kata = load_catalog().get(args.kata)
    source = kata.reference_path.read_text()
    sites = mutation_sites(ast.parse(source))[: args.limit]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        def run(site: tuple[int, str]) -> tuple[str, int]:
            index, what = site
            folder = Path(tmp) / str(index)
            folder.mkdir()
            path = folder / f"{kata.module}.py"
            path.write_text(mutant_source(source, index))
            return what, grade(kata, path, seed=args.seed, test_timeout_s=20).score

        with zygote.many_gradings(), ThreadPoolExecutor(args.jobs) as pool:  # judges forked
            results = list(pool.map(run, sites))
    survivors = [what for what, score in results if score == 100]
    print(f"{kata.slug}: {len(results)} mutants, {len(results) - len(survivors)} killed, "
          f"{len(survivors)} survived ({time.perf_counter() - t0:.0f} s)")
    for what in survivors:
        print(f"  survived: {what}")


if __name__ == "__main__":
    main()
