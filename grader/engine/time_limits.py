"""Per-test time limits from the reference's own time on each test.

An infinite loop should be cut in seconds, not after a flat 30 s per test: each test's limit
is a generous multiple of what the reference needs on it (with a floor), measured once per
kata, suite version and machine, and cached in the user's cache folder (shared by every
workspace and by the project's own tests).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Callable

FLOOR_S = 3.0       # no test gets less: a worker start and hypothesis's own work fit in it
FACTOR = 15.0       # a correct but plain-Python solution may be this much slower
SLACK_S = 1.0
ENV_CACHE = "KATA_CACHE"


def cache_dir() -> Path:
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("kata", appauthor=False))


def suite_digest(suite: Path) -> str:
    """A hash of the suite's files (a new suite version is timed again)."""
    h = hashlib.sha256()
    files = sorted(suite.rglob("*.py")) if suite.is_dir() else [suite]
    for path in files:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def machine_key() -> str:
    return f"{platform.node()}-{os.cpu_count()}-{platform.machine()}-py{sys.version_info[0]}.{sys.version_info[1]}"


def limits_for(durations: dict[str, float], ceiling_s: float) -> dict[str, float]:
    """Each test's limit: FACTOR x the reference's time + slack, at least FLOOR_S, at most
    `ceiling_s` (the configured flat limit)."""
    return {name: round(min(max(FLOOR_S, FACTOR * seconds + SLACK_S), ceiling_s), 1)
            for name, seconds in durations.items()}


def cached_durations(slug: str, suite: Path,
                     measure: Callable[[], dict[str, float]]) -> dict[str, float] | None:
    """The reference's seconds per test for this kata, suite version and machine; measured
    with `measure()` (grading the reference) the first time. None when it cannot be had."""
    key = f"{slug}:{suite_digest(suite)}:{machine_key()}"
    path = cache_dir() / "reference-timings.json"
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        data = {}
    if isinstance(data.get(key), dict):
        return {str(k): float(v) for k, v in data[key].items()}
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
