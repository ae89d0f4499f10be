"""How fast a hang in level 1 is reported, and whether the verdict says where it is stuck.

For each kata, takes the reference, puts `while True: pass` at the top of one level-1
function, grades that file with the hidden suite and prints: the seconds until the first
timeout verdict arrived, the whole grade's wall time, the number of hung tests and of
distinct stuck places, and the stuck line the verdict shows.

    python scripts/bench_hang.py                 # every kata
    python scripts/bench_hang.py paged-kv rope   # some
    python scripts/bench_hang.py --levels 1      # grade level 1's tests only

The reference's per-test timings (which set the time limits) are measured first, outside
the timed run, as a candidate's machine would have them cached after its first grade.
Exit 1 when a kata's verdict lacks the stuck line or a distinct place took over --budget-s.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.catalog import load_catalog
from grader.grading import grade

# The level-1 function of each kata the loop goes into: "Class.method" or "function".
HANG_SITES = {
    "paged-kv": "PagedKVCacheAllocator.allocate",
    "mha": "attention",
    "rope": "apply_rope",
    "sampling": "top_k_top_p_filter",
    "scheduler": "Scheduler.step",
    "lora": "LoRALinear.forward",
    "ppo": "ppo_policy_loss",
}
HANG_LINE = "while True: pass  # the planted hang"


def plant_hang(source: str, site: str) -> tuple[str, int]:
    """`source` with the hang as the first statement of `site` (after its docstring), and
    the hang's line number."""
    tree = ast.parse(source)
    *owner, name = site.split(".")
    scope = tree.body
    if owner:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner[0]).body
    func = next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)
    first = func.body[0]
    has_docstring = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant)
    anchor = func.body[1] if has_docstring and len(func.body) > 1 else first
    lines = source.splitlines(keepends=True)
    indent = " " * anchor.col_offset
    lines.insert(anchor.lineno - 1, f"{indent}{HANG_LINE}\n")
    return "".join(lines), anchor.lineno


def bench_kata(slug: str, seed: int, levels: set[int] | None, workdir: Path) -> dict:
    kata = load_catalog().get(slug)
    source, hang_lineno = plant_hang(kata.reference_path.read_text(encoding="utf-8"), HANG_SITES[slug])
    path = workdir / f"{kata.module}.py"
    path.write_text(source, encoding="utf-8")
    # Warm the reference timings (cached per machine): not part of the candidate's wait.
    warm_t0 = time.monotonic()
    grade(kata, kata.reference_path, seed=seed, levels=levels)
    warm_s = time.monotonic() - warm_t0

    first_hang_s: list[float] = []
    t0 = time.monotonic()

    def on_event(kind: str, data: dict) -> None:
        if kind == "result" and not data["passed"] and not first_hang_s and "where" in data["details"]:
            first_hang_s.append(time.monotonic() - t0)

    card = grade(kata, path, seed=seed, levels=levels, on_event=on_event)
    total_s = time.monotonic() - t0
    hung = [t for t in card.tests if not t.passed and ("timed out" in t.message or "stuck" in t.message)]
    places = {t.details.get("where", "") for t in hung}
    where = next((t.details["where"] for t in hung if t.details.get("where")), "")
    return {"kata": slug, "hang_line": hang_lineno, "warm_s": warm_s,
            "first_s": first_hang_s[0] if first_hang_s else None, "total_s": total_s,
            "tests": len(card.tests), "hung": len(hung), "places": len(places),
            "shows_line": f"line {hang_lineno}," in where and "while True" in where,
            "where": where}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("katas", nargs="*", default=list(HANG_SITES))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--levels", type=int, nargs="*", help="grade only these levels' tests")
    parser.add_argument("--budget-s", type=float, default=10.0, help="seconds allowed per stuck place")
    args = parser.parse_args()
    levels = set(args.levels) if args.levels else None
    ok = True
    print(f"{'kata':<10} {'first':>7} {'total':>7} {'hung':>9} {'places':>6} {'s/place':>7}  stuck line shown")
    with tempfile.TemporaryDirectory(prefix="kata-hang-") as tmp:
        for slug in args.katas:
            r = bench_kata(slug, args.seed, levels, Path(tmp))
            per_place = r["total_s"] / max(r["places"], 1)
            first = "-" if r["first_s"] is None else f"{r['first_s']:.1f}"
            print(f"{slug:<10} {first:>7} {r['total_s']:>7.1f} {r['hung']:>4}/{r['tests']:<4} "
                  f"{r['places']:>6} {per_place:>7.1f}  {'yes' if r['shows_line'] else 'NO'}")
            for line in r["where"].splitlines():
                print(f"{'':<10} | {line}")
            ok &= r["shows_line"] and per_place <= args.budget_s
    print("seconds: first = until the first hang verdict, total = the whole grade "
          "(reference timings warmed before)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
