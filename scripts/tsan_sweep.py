"""How often ThreadSanitizer misses each missing lock of the scheduler's C++ corpus, per
trial of the level-3 thread test: plain (the two trials every grade runs) or crowded (the
ones `--sanitize thread` adds). Each trial runs in a fresh process, as a grading's worker.

    python scripts/tsan_sweep.py --runs 200 --kind crowded --cores 0   # pinned to one core
    python scripts/tsan_sweep.py --runs 100 --kind plain --busy        # a busy process beside it

A miss is a trial that ends without a report. Figures are in tests/corpus/scheduler/cpp/
corpus.toml."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.cpp import build, sanitizer, toolchain  # noqa: E402 - after the path above
from tests.kata_testing import manifest_path  # noqa: E402 - after the path above

TRIAL = """
import importlib.util, sys
sys.path.insert(0, {root!r})
spec = importlib.util.spec_from_file_location("scheduler", {module!r})
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
import grader.suites.scheduler.test_level3 as level3
level3._concurrent_trial(mod, {trial}, crowded={crowded})
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--kind", choices=("plain", "crowded"), default="crowded")
    parser.add_argument("--cores", default=None, help="taskset's CPU list, e.g. 0")
    parser.add_argument("--busy", action="store_true", help="a busy process on the same cores")
    parser.add_argument("--file", action="append", help="a corpus file (default: every [[sanitized]])")
    args = parser.parse_args()
    found = toolchain.find()
    if isinstance(found, str):
        print(found)
        return 1
    env = dict(os.environ)
    extra = sanitizer.worker_env("thread", found.compiler)
    if isinstance(extra, str):
        print(extra)
        return 1
    env.update(extra)
    env["TSAN_OPTIONS"] += ":symbolize=0"
    pin = ["taskset", "-c", args.cores] if args.cores else []
    files = args.file or [entry["file"] for entry in _sanitized()]
    busy = subprocess.Popen(pin + [sys.executable, "-c", "while True: pass"]) if args.busy else None
    try:
        for name in files:
            built = build.build(ROOT / "tests" / "corpus" / "scheduler" / name, "scheduler", sanitize="thread")
            if not built.ok:
                print(f"{name}: does not build: {built.error}")
                return 1
            missed, t0 = 0, time.monotonic()
            for run in range(args.runs):
                code = TRIAL.format(root=str(ROOT), module=str(built.module_path), trial=run % 2,
                                    crowded=args.kind == "crowded")
                out = subprocess.run(pin + [sys.executable, "-c", code], env=env, capture_output=True, text=True)
                missed += "ThreadSanitizer: data race" not in out.stdout + out.stderr
            print(f"{name}: {args.kind} trials missed {missed} of {args.runs} "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
    finally:
        if busy is not None:
            busy.kill()
    return 0


def _sanitized() -> list[dict]:
    import tomllib
    return tomllib.loads(manifest_path("scheduler", lang="cpp").read_text(encoding="utf-8")).get("sanitized", [])


if __name__ == "__main__":
    sys.exit(main())
