"""Time `kata grade` on files that cannot load, as a candidate runs it (issue 37, item 7).

For each kata, five files made from its stub: a syntax error, an empty file (a docstring
and a comment), a file missing some of the stub's names (the last one; not for a kata
with one name), an import error (a module that does not exist, imported after the stub's
own imports) and a loop at module level. Each is graded by the real CLI in a subprocess
(`kata grade <slug> --file F --seed 1 --json`), with a fresh KATA_HOME every time, and
the wall time of the whole command is printed with what the card said.

    python scripts/bench_load_errors.py                      # paged-kv and rope, 3 runs each
    python scripts/bench_load_errors.py --katas rope mha --runs 5

The goal (issue 37): a syntax error and an empty file in at most 1.5 s; a loop at import
cut within 5 s, its line shown. The machine's load is printed too: on 2 shared cores the
figures move with it.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader.catalog import load_catalog  # noqa: E402 - after the checkout is put on sys.path

GOAL_S = {"syntax error": 1.5, "empty file": 1.5, "loop at import": 5.0}
_CLI = "import sys; from grader.cli.app import main; sys.argv[0] = 'kata'; sys.exit(main())"


def files_for(stub: str, folder: Path) -> dict[str, tuple[Path, str | tuple[str, ...]]]:
    """kind -> (file, what its card must say, or a tuple of which it says one): each made from
    the stub's source."""
    stub = stub.rstrip("\n") + "\n"
    num_lines = stub.count("\n")
    made: dict[str, tuple[str, str | tuple[str, ...]]] = {
        "syntax error": (stub + "\ndef broken(:\n    pass\n", f"syntax error at line {num_lines + 2}"),
        "empty file": ('"""My solution (to do)."""\n# nothing yet\n', "your file is empty"),
        "import error": (stub + "\nimport kata_no_such_module\n", "No module named 'kata_no_such_module'"),
        "loop at import": (stub + "\n_steps = 0\nwhile True:\n    _steps += 1\n",
                           (f"line {num_lines + 3}", f"line {num_lines + 4}")),
    }
    last = _last_definition(stub)
    if last is not None:
        name, first, end = last
        lines = stub.splitlines(keepends=True)
        made["missing names"] = ("".join(lines[: first - 1] + lines[end:]), f"does not define {name}")
    out = {}
    for kind, (source, expect) in made.items():
        path = folder / f"{kind.replace(' ', '_')}.py"
        path.write_text(source)
        out[kind] = (path, expect)
    return out


def _last_definition(source: str) -> tuple[str, int, int] | None:
    """(name, first line, last line) of the stub's last top-level def or class, when the stub
    has more than one (a file without its only name defines none: a different verdict)."""
    defs = [n for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    if len(defs) < 2:
        return None
    node = defs[-1]
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return node.name, first, node.end_lineno or node.lineno


def grade_once(slug: str, path: Path) -> tuple[float, int, dict]:
    """Wall seconds, exit code and the --json card of one `kata grade` in a fresh home."""
    with tempfile.TemporaryDirectory(prefix="kata-bench-home-") as home:
        env = {**os.environ, "KATA_HOME": home, "PYTHONPATH": str(REPO)}
        env.pop("KATA_WORKSPACE", None)
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-c", _CLI, "grade", slug, "--file", str(path), "--seed", "1", "--json"],
                              env=env, cwd=home, capture_output=True, text=True)
        wall_s = time.monotonic() - t0
    try:
        card = json.loads(done.stdout)
    except ValueError:
        card = {"error": (done.stdout + done.stderr)[-500:]}
    return wall_s, done.returncode, card


def verdict(kind: str, card: dict, expect) -> str:
    """Whether the card says what it must: 'ok', or what is wrong."""
    if "error" in card:
        return "NO CARD: " + card["error"]
    said = (card.get("import_error") or "") + " ".join(card.get("notes") or [])
    expected = expect if isinstance(expect, tuple) else (expect,)
    if not any(e in said for e in expected):
        return f"WRONG: expected {expected[0]!r}, card says {said[:120]!r}"
    if kind != "missing names" and (card["score"] != 0 or not card["tests"]):
        return "WRONG: not every test failed"
    return "ok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--katas", nargs="+", default=["paged-kv", "rope"])
    parser.add_argument("--runs", type=int, default=3, help="runs of each fast kind (missing names: 1)")
    args = parser.parse_args()
    catalog = load_catalog()
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'kata':10} {'file':15} {'runs':>4} {'median s':>9} {'min s':>6} {'max s':>6} {'goal':>6}  card")
    failed = False
    with tempfile.TemporaryDirectory(prefix="kata-bench-files-") as tmp:
        for slug in args.katas:
            kata = catalog.get(slug)
            folder = Path(tmp) / kata.module
            folder.mkdir()
            for kind, (path, expect) in files_for(kata.stub_path.read_text(), folder).items():
                runs = 1 if kind == "missing names" else args.runs
                results = [grade_once(kata.slug, path) for _ in range(runs)]
                times = [r[0] for r in results]
                checks = {verdict(kind, card, expect) for _, _, card in results}
                goal = GOAL_S.get(kind)
                met = "" if goal is None else ("met" if statistics.median(times) <= goal else "MISSED")
                check = "ok" if checks == {"ok"} else "; ".join(sorted(checks - {"ok"}))
                failed |= check != "ok" or met == "MISSED"
                print(f"{slug:10} {kind:15} {runs:>4} {statistics.median(times):9.2f} {min(times):6.2f} "
                      f"{max(times):6.2f} {f'{goal:g} s' if goal else '':>6} {met:6} {check}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
