"""How long a candidate waits for feedback: per kata, the cold wall time of `kata check`, of
a passing grade (the reference) and of a failing grade (the corpus's first level-1 bug), each
a fresh `kata` process as a user runs it, next to a bare `import torch` and to the same suite
run in one process without isolation (pytest with the reference imported directly: no
judge, no worker, no sandbox; scripts/bench_inprocess.py). Medians of N runs.

    python scripts/bench_feedback.py                  # every kata, 5 runs each
    python scripts/bench_feedback.py paged-kv mha -n 3

Columns: check, pass and fail are `kata check`, `kata grade` of the reference and of a buggy
file; 1-proc is the suite in one process; the ratios are the passing grade's against
`import torch` and against 1-proc (what containment costs). The cold figures run with
KATA_WARM=0; w.check and w.pass with the warm grader of the run's KATA_HOME (grader/engine/
warm.py: judges and sandboxed workers forked from processes that imported torch already),
started by `kata warm` before them; wp/1proc is the warm passing grade against 1-proc. The
two figures of each ratio are measured turn about (torch and pass, w.pass and 1-proc), so
that a change of the machine's load between them does not skew it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.catalog import Kata, load_catalog  # noqa: E402 - after the checkout is on sys.path

KATA = [sys.executable, "-c", "from grader.cli.app import run; run()"]  # what `kata` runs


@dataclass
class Row:
    """One kata's medians, in seconds (None: could not be measured, e.g. no corpus bug)."""

    kata: str
    seconds: dict[str, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def timed(cmd: list[str], env: dict[str, str], cwd: Path, expect: tuple[int, ...],
          seen: list[str] | None = None) -> float:
    """Wall seconds of one run of `cmd`; RuntimeError when it exits with another code. Its
    last line of output is appended to `seen`."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.perf_counter() - t0
    if done.returncode not in expect:
        raise RuntimeError(f"{' '.join(cmd[3:])} exited {done.returncode}:\n{done.stdout[-2000:]}")
    if seen is not None:
        seen.append((done.stdout.strip().splitlines() or [""])[-1])
    return took


def median_of(runs: int, once: Callable[[int], float]) -> float:
    return statistics.median(once(i) for i in range(runs))


def paired_medians(runs: int, first: Callable[[int], float], second: Callable[[int], float]) -> tuple[float, float]:
    """Medians of two figures measured turn about (first, second, first, ...): a ratio of
    the two is not skewed by the machine's load changing between two blocks of runs."""
    pairs = [(first(i), second(i)) for i in range(runs)]
    return statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs)


def first_level1_bug(kata: Kata) -> Path | None:
    from tests.kata_testing import corpus_file, corpus_manifest, manifest_path

    if not manifest_path(kata.slug).is_file():
        return None
    return next((corpus_file(kata.slug, e.file) for e in corpus_manifest(kata.slug).buggy if e.level == 1), None)


def bench_kata(kata: Kata, runs: int, env: dict[str, str], work: Path) -> Row:
    row = Row(kata.slug)
    # The candidate's file is named as the kata's module, as `kata start` writes it.
    passing = work / "pass" / f"{kata.module}.py"
    passing.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(kata.reference_path, passing)
    bug = first_level1_bug(kata)
    failing = work / "fail" / f"{kata.module}.py"
    if bug is not None:
        failing.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(bug, failing)
    # Warm the reference's timings (cached per machine), as after a candidate's first grade.
    timed([*KATA, "grade", kata.slug, "--file", str(passing), "--seed", "0", "--json"], env, work, (0,))
    # Each ratio's two figures are measured turn about (paired_medians).
    row.seconds["torch"], row.seconds["pass"] = paired_medians(
        runs, lambda i: timed([sys.executable, "-c", "import torch"], env, work, (0,)),
        lambda i: timed([*KATA, "grade", kata.slug, "--file", str(passing), "--seed", str(i), "--json"],
                        env, work, (0,)))
    row.seconds["check"] = median_of(runs, lambda i: timed(
        [*KATA, "check", kata.slug, "--file", str(passing), "--json"], env, work, (0,)))
    hot = {**env, "KATA_WARM": "1"}
    timed([*KATA, "warm"], hot, work, (0,))
    timed([*KATA, "check", kata.slug, "--file", str(passing), "--json"], hot, work, (0,))  # the first: its
    row.seconds["w.check"] = median_of(runs, lambda i: timed(  # connection, and the worker zygote's start
        [*KATA, "check", kata.slug, "--file", str(passing), "--json"], hot, work, (0,)))
    if bug is not None:
        row.seconds["fail"] = median_of(runs, lambda i: timed(
            [*KATA, "grade", kata.slug, "--file", str(failing), "--seed", str(i), "--json"], env, work, (1,)))
    else:
        row.seconds["fail"] = None
        row.notes.append("no corpus bug of level 1: no failing grade")
    # A test that counts what crosses between judge and worker (a call, a sync) may fail here,
    # where nothing crosses: it is still timed, and the table's note says so.
    summaries: list[str] = []
    one = {**env, "KATA_BENCH_MODULE": kata.module,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "scripts"), str(ROOT), *map(str, {p.parent for p in kata.support_paths})])}
    row.seconds["w.pass"], row.seconds["1-proc"] = paired_medians(
        runs, lambda i: timed([*KATA, "grade", kata.slug, "--file", str(passing), "--seed", str(i), "--json"],
                              hot, work, (0,)),
        lambda i: timed(one_process_command(kata, i), one, work, (0, 1), summaries))
    failed = sorted({s for s in summaries if "failed" in s})
    if failed:
        row.notes.append(f"in one process: {failed[0]} (tests that count what crosses to the worker)")
    return row


def one_process_command(kata: Kata, seed: int) -> list[str]:
    """pytest on the kata's hidden suite with the reference as the solution (see
    scripts/bench_inprocess.py), with the flags a judge runs pytest with."""
    suite = kata.suite_path
    return [sys.executable, "-m", "pytest", str(suite), "-p", "bench_inprocess", "-q", "--tb=no", "--no-header",
            "-p", "no:cacheprovider", "--assert=plain", "-p", "no:xdist", "--noconftest", "-c", os.devnull,
            "--rootdir", str(suite.parent), f"--hypothesis-seed={seed}", "-W", "ignore"]


# (header, width, cell): the table, 75 columns wide.
COLUMNS: list[tuple[str, int, Callable[[Row], str]]] = [
    ("kata", 12, lambda r: r.kata),
    ("torch", 5, lambda r: _s(r.seconds.get("torch"))),
    ("check", 5, lambda r: _s(r.seconds.get("check"))),
    ("pass", 5, lambda r: _s(r.seconds.get("pass"))),
    ("fail", 5, lambda r: _s(r.seconds.get("fail"))),
    ("1-proc", 6, lambda r: _s(r.seconds.get("1-proc"))),
    ("w.check", 7, lambda r: _s(r.seconds.get("w.check"))),
    ("w.pass", 6, lambda r: _s(r.seconds.get("w.pass"))),
    ("p/torch", 7, lambda r: _ratio(r.seconds.get("pass"), r.seconds.get("torch"))),
    ("wp/1proc", 8, lambda r: _ratio(r.seconds.get("w.pass"), r.seconds.get("1-proc"))),
]


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.1f}x"


def table_lines(rows: list[Row]) -> list[str]:
    def line(cells: list[str]) -> str:
        return " ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, ((_, w, _), c) in enumerate(zip(COLUMNS, cells)))

    return [line([h for h, _, _ in COLUMNS]), *(line([cell(r) for _, _, cell in COLUMNS]) for r in rows)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("katas", nargs="*", help="slugs (default: every kata)")
    parser.add_argument("-n", "--runs", type=int, default=5, help="runs per figure (the median is shown)")
    args = parser.parse_args()
    catalog = load_catalog()
    slugs = args.katas or sorted(catalog.katas)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kata-feedback-") as tmp:
        # A fresh history and the bytecode cache on, as on a user's machine.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(KATA_HOME=str(Path(tmp) / "home"), COLUMNS="80", KATA_WARM="0")
        load = os.getloadavg()[0]
        print(f"seconds, median of {args.runs}, each a fresh process; load {load:.1f} on {os.cpu_count()} CPUs",
              flush=True)
        for slug in slugs:
            work = Path(tmp) / slug
            work.mkdir()
            try:
                rows.append(bench_kata(catalog.get(slug), args.runs, env, work))
            except RuntimeError as exc:
                print(f"{slug}: not measured: {exc}", file=sys.stderr, flush=True)
                continue
            print(table_lines(rows[-1:])[1], flush=True)
    print()
    for text in table_lines(rows):
        print(text)
    for row in rows:
        for note in row.notes:
            print(f"{row.kata}: {note}")
        subprocess.run([*KATA, "warm", "--stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
