"""Per-test and per-call time limits from the reference's own times on each test.

An infinite loop should be cut in seconds, not after a flat 30 s per test: each test's limit
is a generous multiple of what the reference needs on it (with a floor), and each single call
into the candidate's code may run a generous multiple of the reference's longest call in that
test (with a floor of CALL_FLOOR_S): a test that makes thousands of quick calls over several
seconds still cuts a call stuck in a loop after about two seconds. Measured once per kata,
suite version and machine, and cached in the user's cache folder (shared by every workspace
and by the project's own tests).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Callable, Collection

from grader.store import ENV_CACHE, cache_dir  # noqa: F401 - ENV_CACHE: where the timings are kept

FLOOR_S = 3.0       # no test gets less: a worker start and hypothesis's own work fit in it
FACTOR = 15.0       # a correct but plain-Python solution may be this much slower
SLACK_S = 1.0
CALL_FLOOR_S = 2.0  # no single call is cut sooner: a worker's start is not in it, a slow machine is
CALL_FACTOR = 20.0  # a call may take this many times the reference's longest call in the test
FORMAT = "v3"       # cache entries: {test name: [test seconds, longest call seconds, level]}
# A grading is split over two judges only when the reference's tests that run take this long
# in all: below it, a second judge's and worker's start costs more than it saves.
MIN_SHARDED_S = 2.0


def suite_digest(suite: Path, *timed: Path) -> str:
    """A hash of the suite's files and of the `timed` files (the reference and what it
    imports): a new suite or reference version is timed again."""
    h = hashlib.sha256()
    files = sorted(suite.rglob("*.py")) if suite.is_dir() else [suite]
    for path in [*files, *timed]:
        h.update(path.name.encode())
        h.update(path.read_bytes() if path.is_file() else b"")
    return h.hexdigest()[:16]


def machine_key() -> str:
    return f"{platform.node()}-{os.cpu_count()}-{platform.machine()}-py{sys.version_info[0]}.{sys.version_info[1]}"


def limits_for(timings: dict[str, list[float]], ceiling_s: float
               ) -> tuple[dict[str, float], dict[str, float]]:
    """(test limits, call limits). A test's limit: FACTOR x the reference's time + slack, at
    least FLOOR_S, at most `ceiling_s` (the configured flat limit). A call's: CALL_FACTOR x
    the reference's longest call in that test + slack, at least CALL_FLOOR_S, and only where
    that is below the test's limit."""
    tests, calls = {}, {}
    for name, timing in timings.items():
        seconds, longest_call = timing[0], timing[1]
        tests[name] = round(min(max(FLOOR_S, FACTOR * seconds + SLACK_S), ceiling_s), 1)
        call = round(max(CALL_FLOOR_S, CALL_FACTOR * longest_call + SLACK_S), 1)
        if longest_call > 0 and call < tests[name]:
            calls[name] = call
    return tests, calls


def shards_for(durations: dict[str, list[float]] | None, jobs: int,
               levels: set[int] | None = None, tests: Collection[str] | None = None) -> list[list[str]] | None:
    """The tests (names) each of `jobs` judges runs, from the reference's times: within each
    level, longest first, to the judge with the least work so far (a level filter then still
    splits evenly; so does a `tests` filter, of names). None when one judge is better: one
    job, or too little work to split.

    Which judge runs a test does not change what it sees: each test starts from its own seed
    (session.seed_test), whatever ran before it."""
    if jobs < 2 or not durations:
        return None
    chosen = {name: t for name, t in durations.items()
              if (not levels or int(t[2]) in levels) and (tests is None or name in tests)}
    if len(chosen) < 2 or sum(t[0] for t in chosen.values()) < MIN_SHARDED_S:
        return None
    shards: list[list[str]] = [[] for _ in range(jobs)]
    load = [0.0] * jobs
    for level in sorted({int(t[2]) for t in chosen.values()}):
        for name, t in sorted(((n, t) for n, t in chosen.items() if int(t[2]) == level),
                              key=lambda nt: (-nt[1][0], nt[0])):
            i = load.index(min(load))
            shards[i].append(name)
            load[i] += t[0]
    shards = [s for s in shards if s]
    return shards if len(shards) > 1 else None


def cached_durations(slug: str, suite: Path, measure: Callable[[], dict[str, list[float]]],
                     timed: tuple[Path, ...] = ()) -> dict[str, list[float]] | None:
    """The reference's [seconds, longest call's seconds, level] per test for this kata, suite
    version, reference version (the `timed` files) and machine; measured with `measure()`
    (grading the reference) the first time. None when it cannot be had."""
    key = f"{FORMAT}:{slug}:{suite_digest(suite, *timed)}:{machine_key()}"
    path = cache_dir() / "reference-timings.json"
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        data = {}
    if isinstance(data.get(key), dict):
        try:
            return {str(k): [float(v[0]), float(v[1]), float(v[2])] for k, v in data[key].items()}
        except (TypeError, ValueError, IndexError):
            pass  # a damaged entry is measured again
    try:
        durations = measure()
    except Exception:  # noqa: BLE001 - without timings, the flat limit applies
        return None
    data[key] = durations
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as fh:
            json.dump(data, fh)
        os.replace(fh.name, path)
    except OSError:
        pass
    return durations
