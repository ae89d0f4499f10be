"""Grade every corpus file under several seeds and report any verdict that changes.

    python scripts/corpus_sweep.py                      # every kata, 5 seeds
    python scripts/corpus_sweep.py paged-kv --seeds 3
    python scripts/corpus_sweep.py --jobs 2 --json sweep.json
    python scripts/corpus_sweep.py --seeds 5 --skip 2     # the 3 seeds the tests do not run
    python scripts/corpus_sweep.py --lang cpp             # the C++ corpora (tests/corpus/<m>/cpp)

A buggy file passes the sweep when, under every seed, it is rejected at the level its
corpus.toml declares by one of the tests it names (graded with levels 1..level only); a
correct file when it scores 100 under every seed. Exit 1 when anything does not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.catalog import load_catalog
from grader.engine import zygote
from tests.kata_testing import (corpus_file, corpus_manifest, failed_tests, grade_file,
                                manifest_path, rejection_problem)

BASE_SEED = 20261129


def seeds_for(n: int) -> list[int]:
    # The test suite's two seeds first, then more spread-out ones.
    return [BASE_SEED, 7, 1, 424242, 99991, 31337, 2**31 - 1, 12345][:n] if n <= 8 else \
        [BASE_SEED + 7919 * i for i in range(n)]


def sweep_kata(slug: str, seeds: list[int], jobs: int, lang: str = "py") -> list[dict]:
    manifest = corpus_manifest(slug, lang)
    work: list[tuple[str, Any, int]] = [("buggy", entry, seed) for entry in manifest.buggy for seed in seeds]
    work += [("correct", name, seed) for name in manifest.correct for seed in seeds]

    def run(item: tuple) -> dict:
        kind, what, seed = item
        t0 = time.perf_counter()
        if kind == "buggy":
            card = grade_file(slug, corpus_file(slug, what.file), seed=seed,
                              levels=frozenset(range(1, what.level + 1)))
            problem = rejection_problem(slug, what, card)
            name, level = what.file, what.level
        else:
            card = grade_file(slug, corpus_file(slug, what), seed=seed)
            problem = None if card.passed else f"scored {card.score}: {sorted(failed_tests(card))}"
            name, level = what, None
        return {"kata": slug, "kind": kind, "file": name, "level": level, "seed": seed,
                "ok": problem is None, "problem": problem, "score": card.score,
                "failed": sorted(failed_tests(card)), "seconds": round(time.perf_counter() - t0, 2)}

    with zygote.many_gradings(), ThreadPoolExecutor(max_workers=jobs) as pool:  # judges forked
        return list(pool.map(run, work))


def report(rows: list[dict], seeds: list[int]) -> int:
    bad = 0
    by_file: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        by_file.setdefault((row["kata"], row["file"]), []).append(row)
    print(f"{'kata':10s} {'file':52s} {'lvl':>3s}  verdicts over {len(seeds)} seeds")
    for (kata, name), runs in sorted(by_file.items()):
        ok = sum(r["ok"] for r in runs)
        marks = "".join("." if r["ok"] else "X" for r in sorted(runs, key=lambda r: seeds.index(r["seed"])))
        level = runs[0]["level"]
        print(f"{kata:10s} {name:52s} {level if level else '-':>3}  {marks}  {ok}/{len(runs)}")
        for r in runs:
            if not r["ok"]:
                bad += 1
                print(f"    seed {r['seed']}: {r['problem']}")
    total = len(rows)
    print(f"\n{total - bad}/{total} verdicts as declared")
    return 0 if bad == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("slugs", nargs="*", help="katas to sweep (default: every kata with a corpus.toml)")
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (default 5)")
    parser.add_argument("--skip", type=int, default=0,
                        help="leave out the first K seeds (--seeds 5 --skip 2: the three the test "
                             "suite does not run)")
    parser.add_argument("--jobs", type=int, default=1, help="gradings run at once (default 1)")
    parser.add_argument("--json", type=Path, help="also write every verdict to this file")
    parser.add_argument("--lang", choices=("py", "cpp"), default="py", help="which corpora (default py)")
    args = parser.parse_args()
    catalog = load_catalog()
    slugs = args.slugs or [s for s in sorted(catalog.katas) if manifest_path(s, args.lang).is_file()]
    seeds = seeds_for(args.seeds)[args.skip:]
    rows: list[dict] = []
    for slug in slugs:
        t0 = time.perf_counter()
        rows += sweep_kata(slug, seeds, args.jobs, args.lang)
        print(f"[{slug}: {time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return report(rows, seeds)


if __name__ == "__main__":
    sys.exit(main())
