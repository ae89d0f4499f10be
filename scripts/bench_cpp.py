"""How fast the C++ track answers (issue 41): the wall time of `kata grade --file X.cpp`, as
a user runs it (a new process), for

  * a file with a compile error, never seen before (no cache entry): the bar is 5 s;
  * a file that compiles, never seen before (the compile, then the grading);
  * the same file again (the cached module: the grading alone);

each a median over --runs runs, with a fresh KATA_HOME (so the reference timings of the
first grade on a machine are measured once, before the figures). The source is the kata's C++
reference (or tests/cpp_fixtures/paged_kv.cpp where it has none), with a line that makes each
run's file new.

    python scripts/bench_cpp.py [--slug paged-kv] [--runs 5] [--level 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def grade(path: Path, slug: str, env: dict[str, str], level: int | None) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "grader.cli.app", "grade", slug, "--file", str(path), "--json"]
    if level:
        cmd += ["--level", str(level)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=path.parent)
    seconds = time.perf_counter() - t0
    try:
        return seconds, json.loads(done.stdout)
    except ValueError:
        raise SystemExit(f"kata grade printed no JSON (exit {done.returncode}):\n{done.stderr[-2000:]}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slug", default="paged-kv")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--level", type=int, default=1, help="grade this level only (0: all)")
    parser.add_argument("--warm", action="store_true", help="with the warm grader (default: cold, KATA_WARM=0)")
    args = parser.parse_args()
    from grader.catalog import load_catalog

    kata = load_catalog().get(args.slug)
    source = kata.cpp_reference_path if kata.cpp_reference_path.is_file() else ROOT / "tests" / "cpp_fixtures" / "paged_kv.cpp"
    text = source.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="kata-bench-cpp-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "KATA_HOME": str(work / "home"), "PYTHONPATH": str(ROOT),
               "KATA_WARM": "1" if args.warm else "0"}
        env.pop("KATA_CPP_CACHE", None)
        folder = work / "src"
        folder.mkdir()
        path = folder / f"{kata.module}.cpp"
        level = args.level or None
        path.write_text(text + "\n// warm-up\n")
        grade(path, args.slug, env, level)  # the reference's timings, measured once per machine
        broken, fresh, cached = [], [], []
        for run in range(args.runs):
            # A slip in the candidate's part (before the first class), the rest of the file intact.
            broken_text = re.sub(r"(?m)^(class|struct) ", "int slip = ;\n\\1 ", text, count=1)
            path.write_text(f"// run {run} {time.time()}\n" + broken_text)
            seconds, card = grade(path, args.slug, env, level)
            assert card["score"] == 0 and "does not compile" in card["tests"][0]["message"], card["tests"][0]
            broken.append(seconds)
            path.write_text(f"// run {run} {time.time()}\n" + text)
            seconds, card = grade(path, args.slug, env, level)
            fresh.append(seconds)
            seconds, card = grade(path, args.slug, env, level)
            cached.append(seconds)
        what = (f"level {level}" if level else "every level") + (", warm grader" if args.warm else ", cold")
        print(f"{args.slug} ({source.relative_to(ROOT)}), {what}, median of {args.runs} runs, wall seconds of "
              f"`kata grade --file X.cpp`:")
        for name, values in (("compile error (new file)", broken), ("compiles (new file)", fresh),
                             ("cached module", cached)):
            print(f"  {name:<26} {statistics.median(values):6.2f} s   (min {min(values):.2f}, max {max(values):.2f})")
        if args.warm:
            subprocess.run([sys.executable, "-m", "grader.cli.app", "warm", "--stop"], env=env, capture_output=True)


if __name__ == "__main__":
    main()
