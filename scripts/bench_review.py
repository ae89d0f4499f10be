"""Time a cohort review: N bundles x 2 katas, graded by `kata homework review --jobs J`.

Each bundle holds, for each kata, one of the kata's reference, stub, buggy or correct corpus
files with a line naming the candidate appended (so no two units share a grading), and an
honest claim: the score that file gets with seed CLAIM_SEED (graded once per distinct file
before the clock starts). The review uses another seed, so a claim is replayed only where
the two seeds disagree, as in a real cohort.

    python scripts/bench_review.py --bundles 40 --jobs 2 --out /tmp/bench-review

Prints wall-clock seconds, CPU seconds of the review and all its processes, gradings run,
and the roster's statuses. CPU time is sampled from /proc every 0.1 s over every descendant
of the review (the sandboxed workers are killed, not reaped into the review's rusage);
RUSAGE_CHILDREN, which misses them, is printed beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader.catalog import load_catalog  # noqa: E402 - after the checkout is put on sys.path
from grader.grading import grade  # noqa: E402 - after the checkout is put on sys.path
from grader.homework.spec import load_homework  # noqa: E402 - after the checkout is put on sys.path
from tests.hostile.bundles.builders import write_bundle  # noqa: E402 - after the checkout is put on sys.path

KATAS = ("paged-kv", "rope")
CLAIM_SEED, REVIEW_SEED = 11, 12
NUM_BUGGY = 3


def pool(kata) -> list[Path]:
    corpus = REPO / "tests" / "corpus" / kata.module
    return ([kata.reference_path, kata.stub_path] + sorted(corpus.glob("buggy_*.py"))[:NUM_BUGGY]
            + sorted(corpus.glob("correct_*.py"))[:1])


def claims(kata, files: list[Path]) -> dict[Path, dict]:
    out = {}
    for path in files:
        card = grade(kata, path, seed=CLAIM_SEED)
        out[path] = {"score": card.score, "passed": card.passed, "seed": CLAIM_SEED,
                     "levels": [{"level": lv.level, "passed": lv.passed} for lv in card.levels]}
    return out


class CpuSampler(threading.Thread):
    """Sums user+system time of every process below `root_pid`, sampled from /proc."""

    def __init__(self, root_pid: int) -> None:
        super().__init__(daemon=True)
        self.root_pid, self.stopped = root_pid, threading.Event()
        self.seen: dict[tuple[int, str], int] = {}  # (pid, its start time) -> CPU ticks
        self.tick = os.sysconf("SC_CLK_TCK")

    def run(self) -> None:
        while not self.stopped.wait(0.1):
            self.sample()

    def sample(self) -> None:
        stats = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/stat") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                # after the command: state ppid ... utime(12) stime(13) ... starttime(20)
                stats[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), fields[19])
        below = {self.root_pid}
        changed = True
        while changed:
            changed = False
            for pid, (ppid, _, _) in stats.items():
                if ppid in below and pid not in below:
                    below.add(pid)
                    changed = True
        for pid in below:
            if pid in stats:
                _, ticks, start = stats[pid]
                self.seen[(pid, start)] = max(self.seen.get((pid, start), 0), ticks)

    def cpu_s(self) -> float:
        return sum(self.seen.values()) / self.tick


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundles", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-review"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    kata_bin = [sys.executable, "-m", "grader.cli.app"]
    hw_path = args.out / "hw.toml"
    if not hw_path.exists():
        subprocess.run(kata_bin + ["homework", "new", "-o", str(hw_path), "--minutes", "75"]
                       + [a for k in KATAS for a in ("--kata", k)], check=True, cwd=REPO)
    catalog = load_catalog()
    hw = load_homework(hw_path, catalog)
    katas = [catalog.get(k) for k in KATAS]
    pools = {k.slug: pool(k) for k in katas}
    t0 = time.time()
    cache = args.out / "claims.json"  # the claims depend on the files and CLAIM_SEED only
    known = json.loads(cache.read_text()) if cache.exists() else {}
    claimed = {k.slug: {p: known[str(p)] for p in pools[k.slug]} if all(str(p) in known for p in pools[k.slug])
               else claims(k, pools[k.slug]) for k in katas}
    cache.write_text(json.dumps({str(p): c for per in claimed.values() for p, c in per.items()}))
    print(f"claims for {sum(len(p) for p in pools.values())} distinct files in {time.time() - t0:.0f} s")
    folder = args.out / "bundles"
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.kata.zip"):
        old.unlink()
    now = time.time()
    for i in range(args.bundles):
        entries: list[dict[str, Any]] = []
        files: dict[str, bytes] = {}
        for kata in katas:
            base = pools[kata.slug][i % len(pools[kata.slug])]
            source = base.read_bytes() + f"\n# candidate {i:03d}\n".encode()
            entries.append({"slug": kata.slug, "module": kata.module, "missing": False,
                            "file": f"solutions/{kata.module}.py", "sha256": hashlib.sha256(source).hexdigest(),
                            "session_started_at": now - 4000, "graded_at": now - 100, "time_used_s": 3900.0,
                            "time_limit_s": 4500.0, "hints_used": i % 3, "reveals": [],
                            "claimed": claimed[kata.slug][base]})
            files[f"solutions/{kata.module}.py"] = source
        manifest = {"format": 1, "homework_id": hw.id, "homework_sha256": hw.sha256, "homework_title": hw.title,
                    "candidate": f"Candidate {i:03d}", "created_at": now - 50, "katas": entries}
        write_bundle(folder / f"c{i:03d}.kata.zip", manifest, files)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    proc = subprocess.Popen(kata_bin + ["homework", "review", str(folder), "--homework", str(hw_path),
                                        "--jobs", str(args.jobs), "--seed", str(REVIEW_SEED), "--json",
                                        "--html", str(args.out / "report.html")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    sampler = CpuSampler(proc.pid)
    sampler.start()
    stdout, _ = proc.communicate()
    wall = time.time() - t0
    sampler.stopped.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rusage_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    data = json.loads(stdout)
    statuses: dict[str, int] = {}
    for row in data["rows"]:
        key = f"{row['status']} {row['score']}" + (" mismatch" if row["mismatch"] else "")
        statuses[key] = statuses.get(key, 0) + 1
    print(json.dumps({"bundles": args.bundles, "katas": len(KATAS), "jobs": args.jobs, "wall_s": round(wall, 1),
                      "cpu_s": round(sampler.cpu_s(), 1), "cpu_s_rusage_children": round(rusage_cpu, 1),
                      "gradings": data["num_gradings"], "rows": len(data["rows"]),
                      "statuses": statuses, "exit": proc.returncode,
                      "load_avg": [round(x, 1) for x in os.getloadavg()]}, indent=1))


if __name__ == "__main__":
    main()
