"""The coach's review: re-grade every solution of every bundle from its source, under
resource limits, with the hidden suites plus the homework's private suites; never trust
the bundle's claimed results."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from grader.catalog import Catalog
from grader.engine.limits import ResourceLimits
from grader.engine.report import Scorecard
from grader.errors import KataError
from grader.grading import grade
from grader.homework.bundle import BundleError, open_bundle
from grader.homework.spec import Homework

# What a re-graded solution may use. CPU time is per child process; the wall-clock limits
# are the engine's (per test and per run).
REVIEW_CPU_SECONDS = 300
REVIEW_MEMORY_BYTES = 8 * 1024**3  # address space: torch alone maps ~2 GiB
REVIEW_FILE_BYTES = 50 * 1024**2
REVIEW_TEST_TIMEOUT_S = 30.0
REVIEW_TOTAL_TIMEOUT_S = 300.0


@dataclass
class RosterRow:
    candidate: str
    bundle: str
    kata: str
    status: str  # "graded" | "missing" | "rejected"
    score: int | None = None
    levels_passed: int = 0
    num_levels: int = 0
    required_levels: int = 0
    claimed_score: int | None = None
    mismatch: bool = False
    time_used_s: float | None = None
    time_limit_s: float | None = None
    hints_used: int = 0
    reveals: int = 0
    late: bool = False
    private_passed: int = 0
    private_total: int = 0
    problem: str = ""
    failures: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def review_limits(home: Path) -> ResourceLimits:
    return ResourceLimits(cpu_seconds=REVIEW_CPU_SECONDS, memory_bytes=REVIEW_MEMORY_BYTES,
                          max_file_bytes=REVIEW_FILE_BYTES, scrub_env=True, home=str(home))


def review(bundles: list[Path], homework: Homework, catalog: Catalog,
           on_progress: Callable[[str], None] | None = None) -> list[RosterRow]:
    progress = on_progress or (lambda text: None)
    rows: list[RosterRow] = []
    for path in bundles:
        with tempfile.TemporaryDirectory(prefix="kata-review-") as tmp:
            rows.extend(_review_bundle(path, Path(tmp), homework, catalog, progress))
    return rows


def _review_bundle(path: Path, tmp: Path, homework: Homework, catalog: Catalog,
                   progress: Callable[[str], None]) -> list[RosterRow]:
    try:
        bundle = open_bundle(path, tmp / "solutions")
    except BundleError as exc:
        return [RosterRow(candidate="?", bundle=path.name, kata="-", status="rejected", problem=exc.message)]
    manifest = bundle.manifest
    if manifest["homework_id"] != homework.id:
        return [RosterRow(candidate=bundle.candidate, bundle=path.name, kata="-", status="rejected",
                          problem=f"this bundle is for homework {manifest['homework_id']}, not {homework.id}")]
    stale = manifest["homework_sha256"] != homework.sha256
    entries = {e["slug"]: e for e in manifest["katas"]}
    rows = []
    for hw_kata in homework.katas:
        kata = catalog.get(hw_kata.slug)
        entry = entries.get(kata.slug)
        row = RosterRow(candidate=bundle.candidate, bundle=path.name, kata=kata.slug, status="missing",
                        num_levels=len(kata.levels), required_levels=hw_kata.required_levels,
                        time_limit_s=hw_kata.minutes * 60.0)
        if stale:
            row.problem = "the bundle was made from a different version of the homework file"
        if entry is None or entry.get("missing") or kata.slug not in bundle.files:
            row.late = homework.due is not None and homework.is_late(time.time())
            rows.append(row)
            continue
        progress(f"{bundle.candidate}: {kata.slug}")
        _fill(row, entry, homework)
        card = _regrade(kata, bundle.files[kata.slug], entry, tmp)
        row.status = "graded"
        row.score = card.score
        row.levels_passed = sum(1 for lv in card.levels if lv.passed)
        row.mismatch = _claims_differ(entry.get("claimed"), card)
        row.failures = [_failure(t) for t in card.tests if not t.passed]
        for suite in homework.suites_for(kata.slug):
            private = _regrade_private(kata, bundle.files[kata.slug], suite, entry, tmp)
            row.private_total += len(private.tests)
            row.private_passed += sum(t.passed for t in private.tests)
            row.failures += [_failure(t, private=suite.name) for t in private.tests if not t.passed]
        rows.append(row)
    return rows


def _fill(row: RosterRow, entry: dict[str, Any], homework: Homework) -> None:
    claimed = entry.get("claimed") or {}
    row.claimed_score = claimed.get("score")
    row.time_used_s = _number(entry.get("time_used_s"))
    row.hints_used = int(_number(entry.get("hints_used")) or 0)
    row.reveals = int(_number(entry.get("reveals")) or 0)
    graded_at = _number(entry.get("graded_at"))
    row.late = homework.is_late(graded_at if graded_at is not None else time.time())


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _seed(entry: dict[str, Any]) -> int:
    seed = (entry.get("claimed") or {}).get("seed")
    return seed if isinstance(seed, int) and 0 <= seed < 2**32 else 0


def _regrade(kata: Any, solution: Path, entry: dict[str, Any], tmp: Path,
             suite: Path | None = None) -> Scorecard:
    """Grade under the review limits, in a fresh working folder, with the claimed seed: the
    same file and seed give the same scorecard, so any difference from the claim is a
    tampered claim, not luck. `suite` is a private suite (default: the hidden one)."""
    workdir = _fresh_dir(tmp / "work")
    return grade(kata, solution, seed=_seed(entry), suite=suite, limits=review_limits(workdir),
                 test_timeout_s=REVIEW_TEST_TIMEOUT_S, total_timeout_s=REVIEW_TOTAL_TIMEOUT_S,
                 workdir=workdir)


def _regrade_private(kata: Any, solution: Path, suite: Any, entry: dict[str, Any], tmp: Path) -> Scorecard:
    suite_path = _fresh_dir(tmp / "private") / (Path(suite.name).stem.replace("-", "_") + ".py")
    suite_path.write_text(suite.source, encoding="utf-8")
    try:
        return _regrade(kata, solution, entry, tmp, suite=suite_path)
    except KataError as exc:
        raise KataError(f"the private suite {suite.name} is broken: {exc.message}", exc.hint) from exc


def _fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _claims_differ(claimed: dict[str, Any] | None, card: Scorecard) -> bool:
    if not claimed:
        return False
    claimed_levels = {lv.get("level"): lv.get("passed") for lv in claimed.get("levels", []) if isinstance(lv, dict)}
    actual_levels = {lv.level: lv.passed for lv in card.levels}
    return claimed.get("score") != card.score or claimed.get("passed") != card.passed or claimed_levels != actual_levels


def _failure(test: Any, private: str | None = None) -> dict[str, Any]:
    return {"test": test.name, "level": test.level, "description": test.description,
            "message": test.message, "details": test.details, "private_suite": private}
