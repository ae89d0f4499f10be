"""How long grading takes: the median wall time (and CPU time of every process involved) of
grading each kata's reference, and of a coach's review of one bundle with three katas.

    python scripts/bench_grading.py                 # every kata, 5 runs each
    python scripts/bench_grading.py paged-kv -n 5
    python scripts/bench_grading.py --review        # review of a 3-kata bundle, 5 runs
    python scripts/bench_grading.py --failing       # also a buggy file per level, graded fully
    python scripts/bench_grading.py --against fdaedb2 paged-kv -n 5   # old and new, interleaved

With --against REV, each grading runs in a fresh process, alternately from this checkout and
from a worktree of REV (both warmed up first): the ratio of their medians is fair even when
the machine's speed drifts, as a shared virtual machine's does by 20 % within the hour.
Every grading runs with Python's bytecode cache on, as on a user's machine (the script unsets
PYTHONDONTWRITEBYTECODE).

With --failing, each kata's corpus gives its first buggy file of each level (tests/corpus/<m>/
corpus.toml), graded with the whole suite like a candidate's file: the median of those against
the reference's median (a failing grade should cost at most 2x a passing one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.catalog import load_catalog
from grader.grading import grade


def bench_katas(slugs: list[str], repeats: int, failing: bool = False) -> None:
    catalog = load_catalog()
    for slug in slugs or sorted(catalog.katas):
        kata = catalog.get(slug)
        times, cpus, score = [], [], None
        for seed in range(repeats):
            t0, c0 = time.perf_counter(), cpu_s()
            score = grade(kata, kata.reference_path, seed=seed).score
            times.append(time.perf_counter() - t0)
            cpus.append(cpu_s() - c0)
        print(f"{slug:10s} reference score {score:3d}  median {statistics.median(times):6.2f} s  "
              f"(min {min(times):.2f}, max {max(times):.2f}, n={repeats})  "
              f"CPU median {statistics.median(cpus):6.2f} s", flush=True)
        if failing:
            bench_failing(kata, statistics.median(times), statistics.median(cpus))


def bench_failing(kata, passing_s: float, passing_cpu_s: float) -> None:
    """The first buggy corpus file of each level, graded fully (seed 0)."""
    from tests.kata_testing import corpus_file, corpus_manifest, manifest_path

    if not manifest_path(kata.slug).is_file():
        return
    firsts: dict[int, str] = {}
    for entry in corpus_manifest(kata.slug).buggy:
        firsts.setdefault(entry.level, entry.file)
    rows = []
    for level, name in sorted(firsts.items()):
        t0, c0 = time.perf_counter(), cpu_s()
        score = grade(kata, corpus_file(kata.slug, name), seed=0).score
        rows.append((time.perf_counter() - t0, level, name, score, cpu_s() - c0))
    median = statistics.median(r[0] for r in rows)
    cpu = statistics.median(r[4] for r in rows)
    print(f"{'':10s} failing (a bug per level) median {median:6.2f} s = "
          f"{median / passing_s:.2f}x the reference's, CPU {cpu:.2f} s = {cpu / passing_cpu_s:.2f}x; "
          + ", ".join(f"L{lv} {t:.1f} s ({sc})" for t, lv, _, sc, _ in rows), flush=True)


_ONE_GRADING = """
import sys, time
sys.path.insert(0, sys.argv[1])
from grader.catalog import load_catalog
from grader.grading import grade
kata = load_catalog().get(sys.argv[2])
t0 = time.perf_counter()
score = grade(kata, kata.reference_path, seed=int(sys.argv[3])).score
print(time.perf_counter() - t0, score)
"""


def bench_against(rev: str, slugs: list[str], repeats: int) -> None:
    """Median wall time of grading each reference, this checkout against `rev`, interleaved."""
    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="kata-bench-") as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(here), "worktree", "add", "--detach", "-q", str(old), rev], check=True)
        try:
            trees = {"old": old, "new": here}

            def one(tree: Path, slug: str, seed: int) -> tuple[float, int]:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run([sys.executable, "-c", _ONE_GRADING, str(tree), slug, str(seed)],
                                     env=env, cwd=tmp, capture_output=True, text=True, check=True)
                took, score = out.stdout.split()[-2:]
                return float(took), int(score)

            catalog = load_catalog()
            for slug in slugs or sorted(catalog.katas):
                if not (old / "katas" / catalog.get(slug).module).is_dir():
                    print(f"{slug:10s} not in {rev[:10]}: skipped", flush=True)
                    continue
                for tree in trees.values():
                    one(tree, slug, 10_000)  # the reference's timings, measured once per machine
                times: dict[str, list[float]] = {"old": [], "new": []}
                scores = {}
                for seed in range(repeats):
                    for name, tree in trees.items():
                        took, scores[name] = one(tree, slug, seed)
                        times[name].append(took)
                o, n = statistics.median(times["old"]), statistics.median(times["new"])
                # Each seed's two gradings ran back to back: the median of their ratios
                # follows the machine's drift more closely than the ratio of the medians.
                paired = statistics.median(b / a for a, b in zip(times["old"], times["new"]))
                print(f"{slug:10s} {rev[:10]} {o:6.2f} s  now {n:6.2f} s  ratio {n / o:4.2f}  "
                      f"paired {paired:4.2f}  (scores {scores['old']}, {scores['new']}; n={repeats})",
                      flush=True)
        finally:
            subprocess.run(["git", "-C", str(here), "worktree", "remove", "--force", str(old)], check=False)


def cpu_s() -> float:
    """CPU seconds of this process and every process it has waited for (the judge, the
    worker, the sandbox): less sensitive to other load on the machine than wall time."""
    import resource

    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def bench_review(repeats: int) -> None:
    from grader.homework.review import review
    from grader.homework.spec import new_homework

    catalog = load_catalog()
    wanted: tuple[str, ...] = ("paged-kv", "rope", "ppo")
    slugs = [s for s in wanted if s in catalog.katas]
    hw = new_homework(catalog, slugs, minutes=None, due=None, title="bench", suites=[])
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "bench.kata.zip"
        entries = []
        with zipfile.ZipFile(bundle, "w") as zf:
            for slug in slugs:
                kata = catalog.get(slug)
                source = kata.reference_path.read_bytes()
                zf.writestr(f"solutions/{kata.module}.py", source)
                entries.append({"slug": slug, "module": kata.module, "file": f"solutions/{kata.module}.py",
                                "sha256": hashlib.sha256(source).hexdigest(), "claimed": None})
            zf.writestr("manifest.json", json.dumps({"format": 1, "homework_id": hw.id, "homework_sha256": hw.sha256,
                                                     "candidate": "bench", "katas": entries}))
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run = review([bundle], hw, catalog, seed=1)
            times.append(time.perf_counter() - t0)
        # a unit the review could not grade (a rejected bundle, say) shows its status instead
        scores = [r["regraded"]["score"] if "regraded" in r else r.get("status") for r in run.results]
        print(f"review of one bundle with {len(slugs)} katas ({', '.join(slugs)}): scores "
              f"{scores}  median {statistics.median(times):.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f}, n={repeats})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("katas", nargs="*")
    parser.add_argument("-n", "--repeats", type=int, default=5)
    parser.add_argument("--review", action="store_true")
    parser.add_argument("--failing", action="store_true",
                        help="also grade a buggy corpus file per level and compare")
    parser.add_argument("--against", metavar="REV",
                        help="compare with the grader of git revision REV, interleaved")
    args = parser.parse_args()
    # Time what a user's machine does: Python caches the grader's bytecode. Where the shell sets
    # PYTHONDONTWRITEBYTECODE (these VMs do), every judge and worker would compile from source.
    unset = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    print(f"{os.cpu_count()} CPUs" + ("; PYTHONDONTWRITEBYTECODE unset for the gradings" if unset else ""),
          flush=True)
    if args.against:
        bench_against(args.against, args.katas, args.repeats)
    elif args.review:
        bench_review(args.repeats)
    else:
        bench_katas(args.katas, args.repeats, args.failing)


if __name__ == "__main__":
    main()
