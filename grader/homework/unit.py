"""The unit of review work: one bundle × one kata × one seed, graded into a JSON result.

``grade_unit`` is a pure function of its inputs (the homework file, the bundle's bytes, the
kata and the coach's seed; the engine is deterministic for a file and a seed), so a cohort
can be graded anywhere: in parallel threads by ``kata homework review --jobs N``, or one
unit per job of a cluster array with ``kata homework grade-one … --json`` and the results
put together by ``kata homework assemble``. Only ``timing`` differs between two runs.

What one unit does, and never twice:

1. grades the solution with the **coach's seed**: that is the score the coach sees;
2. compares the candidate's claim (score, passed, levels) with that grading; only when they
   differ does it replay the **candidate's seed**, to tell a seed that finds fewer bugs
   (the claim reproduces) from a forged claim (MISMATCH);
3. runs each private suite of the kata with the coach's seed;
4. measures the similarity of the source to the kata's reference (similarity.py), or
   says why it could not.

Identical gradings (the same kata, source, seed and suite) are shared through a
``GradingCache`` when several units run in one process.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from grader.catalog import Catalog, Kata
from grader.errors import KataError
from grader.homework.bundle import BundleError, OpenedBundle, open_bundle
from grader.homework.invites import invitation_problem
from grader.homework.manifest import Claim, KataEntry
from grader.homework.roster import MAX_FAILURES, clean_failure, clip, clip_source, for_coach
from grader.homework.normalise import api_of
from grader.homework.similarity import measure, measure_cpp
from grader.homework.spec import Homework, PrivateSuite

if TYPE_CHECKING:  # the engine is imported where a unit is graded: the CLI imports this module at start
    from grader.engine.report import Scorecard

UNIT_FORMAT = 1
# What a re-graded solution may use (the worker's limits; the sandbox adds its own).
REVIEW_CPU_SECONDS = 300
REVIEW_MEMORY_BYTES = 8 * 1024**3  # address space: torch alone maps ~2 GiB
REVIEW_TEST_TIMEOUT_S = 30.0
REVIEW_TOTAL_TIMEOUT_S = 300.0

GradeFn = Callable[[Kata, Path, int, "Path | None"], "Scorecard"]


def why_uncontained() -> str | None:
    """Why a candidate's code would run outside the sandbox here, or None."""
    from grader.engine import sandbox

    if sandbox.mode() == "none":
        return f"{sandbox.ENV_SANDBOX}=none is set"
    return sandbox.bwrap_available()


def check_bundle(path: Path, homework: Homework, catalog: Catalog, dest: Path) -> OpenedBundle:
    """Open the bundle and check it belongs to this homework; BundleError says why not."""
    bundle = open_bundle(path, dest)
    manifest = bundle.manifest
    if manifest.homework_id != homework.id:
        raise BundleError(f"this bundle is for homework {manifest.homework_id}, not {homework.id}")
    if homework.invite_secret is not None:
        problem = invitation_problem(homework.invite_secret, homework.id, homework.invited,
                                     manifest.candidate, manifest.token)
        if problem:
            raise BundleError(problem, hint="the name in a bundle is the one its invitation binds; ask the "
                                            "candidate to submit with the file you sent them")
    for entry in manifest.katas:
        hw_kata = homework.kata(entry.slug)
        if hw_kata is not None and catalog.get(entry.slug).module != entry.module:
            raise BundleError(f"kata {entry.slug} is listed with module {entry.module}, "
                              f"not {catalog.get(entry.slug).module}")
    return bundle


class GradingCache:
    """Shares gradings between units of one review: two candidates who hand in the same
    file, or a claim replayed with the coach's seed, are graded once. Thread-safe; the
    second caller of a key waits for the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[tuple, Future] = {}
        self.num_gradings = 0

    def grade(self, key: tuple, run: Callable[[], Scorecard]) -> Scorecard:
        with self._lock:
            future = self._futures.get(key)
            owner = future is None
            if future is None:
                future = self._futures[key] = Future()
                self.num_gradings += 1
        if owner:
            try:
                future.set_result(run())
            except BaseException as exc:  # noqa: BLE001 - every waiter on this grading gets it
                future.set_exception(exc)
        return future.result()


def grade_unit(homework: Homework, catalog: Catalog, bundle_path: Path, slug: str, seed: int, *,
               allow_uncontained: bool = False, cache: GradingCache | None = None) -> dict[str, Any]:
    """Grade one kata of one bundle with the coach's `seed`; a JSON-able dict, never an
    exception for anything in the bundle."""
    kata = catalog.get(slug)
    if homework.kata(kata.slug) is None:
        raise KataError(f"'{slug}' is not part of homework {homework.id}",
                        hint="its katas: " + ", ".join(k.slug for k in homework.katas))
    with tempfile.TemporaryDirectory(prefix="kata-review-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            bundle = check_bundle(bundle_path, homework, catalog, tmp / "solutions")
        except BundleError as exc:
            return rejected_result(homework, bundle_path, kata.slug, seed, exc.message)
        result = _base(homework, bundle, kata.slug, seed)
        entry = bundle.manifest.entry(kata.slug)
        if entry is None or entry.missing or kata.slug not in bundle.files:
            return {**result, "status": "missing"}
        result["self_reported"] = _self_reported(entry)
        result["claimed"] = _claim_dict(entry.claimed)
        grader = _Grader(kata, bundle.files[kata.slug], tmp, cache)
        try:
            _grade_into(result, grader, kata, homework, entry, seed, allow_uncontained)
        except KataError as exc:  # the grader could not grade (a broken private suite, ...)
            result.update(status="error", problem=exc.message)
        return result


def rejected_result(homework: Homework, bundle_path: Path, slug: str, seed: int, reason: str) -> dict[str, Any]:
    try:
        digest = hashlib.sha256(bundle_path.read_bytes()).hexdigest()
    except OSError:
        digest = None
    return {"format": UNIT_FORMAT, "homework_id": homework.id, "bundle": bundle_path.name,
            "bundle_sha256": digest, "kata": slug, "seed": seed, "status": "rejected",
            "candidate": None, "problem": clip(reason, 300)}


def _base(homework: Homework, bundle: OpenedBundle, slug: str, seed: int) -> dict[str, Any]:
    stale = bundle.manifest.homework_sha256 != homework.sha256
    return {"format": UNIT_FORMAT, "homework_id": homework.id, "bundle": bundle.path.name,
            "bundle_sha256": bundle.sha256, "kata": slug, "seed": seed, "status": "graded",
            "candidate": bundle.candidate,
            "problem": "the bundle was made from a different version of the homework file" if stale else ""}


def _grade_into(result: dict[str, Any], grader: "_Grader", kata: Kata, homework: Homework,
                entry: KataEntry, seed: int, allow_uncontained: bool) -> None:
    source = grader.source
    result["solution_sha256"] = grader.sha256
    card = grader.grade(seed)
    if card.contained is False and not allow_uncontained:
        result.update(status="uncontained", problem="the solution ran outside the sandbox, so its "
                      "score is not shown; review with --allow-uncontained to accept that")
        return
    result["regraded"] = _card_dict(card)
    claim = entry.claimed
    replay = None
    if claim is not None and not _agrees(claim, card):
        replay = card if claim.seed == seed else grader.grade(claim.seed)
        result["replay"] = {"seed": claim.seed, "score": replay.score, "passed": replay.passed,
                            "reproduces": _agrees(claim, replay)}
    result["mismatch"] = replay is not None and claim is not None and not _agrees(claim, replay)
    result["private"] = [_private(grader, suite, seed) for suite in homework.suites_for(kata.slug)]
    _similarity_into(result, kata, source, cpp=grader.solution.suffix == ".cpp")
    shown, num_lines, cut = clip_source(source)
    result.update(source=shown, source_lines=num_lines, source_truncated=cut)
    result["timing"] = {"graded_in_s": round(card.duration_s, 2)}


def _similarity_into(result: dict[str, Any], kata: Kata, source: str, cpp: bool = False) -> None:
    """The copy check: the value, or why there is none (a flag of its own, never "not a copy").
    A C++ solution is compared with the C++ reference (similarity.measure_cpp)."""
    if cpp:
        similarity = measure_cpp(source, kata.cpp_reference_path.read_text(encoding="utf-8"))
    else:
        api = api_of(kata.stub_path.read_text(encoding="utf-8"))
        similarity = measure(source, kata.reference_path.read_text(encoding="utf-8"), api)
    result["reference_similarity"] = similarity.value
    result["similarity_not_measured"] = similarity.not_measured
    result["copy_of_reference"] = similarity.copy


def _private(grader: "_Grader", suite: PrivateSuite, seed: int) -> dict[str, Any]:
    try:
        card = grader.grade(seed, suite)
    except KataError as exc:
        raise KataError(f"the private suite {suite.name} is broken: {exc.message}", exc.hint) from exc
    failed = [t for t in card.tests if not t.passed]
    return {"name": suite.name, "total": len(card.tests), "passed": len(card.tests) - len(failed),
            "failures": [clean_failure(_test_dict(t)) for t in failed[:MAX_FAILURES]]}


def _agrees(claim: Claim, card: Scorecard) -> bool:
    """The claim says what this grading says (levels too, when the claim names them)."""
    levels_agree = not claim.levels or dict(claim.levels) == {lv.level: lv.passed for lv in card.levels}
    return claim.score == card.score and claim.passed == card.passed and levels_agree


def _card_dict(card: Scorecard) -> dict[str, Any]:
    failed = [t for t in card.tests if not t.passed]
    failures = [clean_failure(_test_dict(t)) for t in failed[:MAX_FAILURES]]
    if card.import_error:
        failures.insert(0, clean_failure({"test": "import", "level": 0, "description": "loading the file",
                                          "message": card.import_error}))
    return {"score": card.score, "passed": card.passed, "num_tests": len(card.tests),
            "levels": [{"level": lv.level, "name": lv.name, "passed": lv.passed,
                        "num_passed": lv.num_passed, "num_tests": lv.num_tests,
                        "details_missed": lv.details_missed} for lv in card.levels],
            "failures": failures, "num_failures": len(failed),
            "contained": card.contained, "notes": [for_coach(clip(n, 200)) for n in card.notes[:5]]}


def _test_dict(test: Any) -> dict[str, Any]:
    return {"test": test.name, "level": test.level, "category": test.category,
            "description": test.description, "message": test.message, "details": test.details}


def _self_reported(entry: KataEntry) -> dict[str, Any]:
    return {"time_used_s": entry.time_used_s, "time_limit_s": entry.time_limit_s,
            "hints_used": entry.hints_used, "session_started_at": entry.session_started_at,
            "graded_at": entry.graded_at, "reveal_count": entry.reveal_count,
            "reveals": [{"at": r.at, "during_session": r.during_session} for r in entry.reveals],
            "session_ended_at": entry.session_ended_at, "end_reason": entry.end_reason,
            "num_grades": entry.num_grades,
            "levels": None if entry.levels is None else [
                {"level": lv.level, "passed_at": lv.passed_at, "used_s": lv.used_s} for lv in entry.levels]}


def _claim_dict(claim: Claim | None) -> dict[str, Any] | None:
    if claim is None:
        return None
    return {"score": claim.score, "passed": claim.passed, "seed": claim.seed,
            "levels": [{"level": level, "passed": passed} for level, passed in claim.levels]}


class _Grader:
    """Grades one extracted solution under the review's limits, each run in a fresh folder."""

    def __init__(self, kata: Kata, solution: Path, tmp: Path, cache: GradingCache | None) -> None:
        self.kata, self.solution, self.tmp, self.cache = kata, solution, tmp, cache
        self.source = solution.read_text(encoding="utf-8", errors="replace")
        self.sha256 = hashlib.sha256(solution.read_bytes()).hexdigest()
        self._runs = 0

    def grade(self, seed: int, suite: PrivateSuite | None = None) -> Scorecard:
        suite_key = hashlib.sha256(suite.source.encode()).hexdigest() if suite else "hidden"
        key = (self.kata.slug, self.sha256, seed, suite_key)
        run = lambda: self._run(seed, suite)  # noqa: E731 - called here or by the cache, once
        return self.cache.grade(key, run) if self.cache else run()

    def _run(self, seed: int, suite: PrivateSuite | None) -> Scorecard:
        self._runs += 1
        work = self.tmp / f"run{self._runs}"
        shutil.rmtree(work, ignore_errors=True)
        (work / "cwd").mkdir(parents=True)
        suite_path = None
        if suite is not None:
            suite_path = work / (Path(suite.name).stem.replace("-", "_") + ".py")
            suite_path.write_text(suite.source, encoding="utf-8")
        from grader.engine.limits import Limits
        from grader.grading import grade

        limits = Limits(cpu_seconds=REVIEW_CPU_SECONDS, memory_bytes=REVIEW_MEMORY_BYTES)
        return grade(self.kata, self.solution, seed=seed, suite=suite_path, limits=limits,
                     test_timeout_s=REVIEW_TEST_TIMEOUT_S, total_timeout_s=REVIEW_TOTAL_TIMEOUT_S,
                     workdir=work / "cwd")


def grade_reference(kata: Kata, suite: PrivateSuite, seed: int) -> Scorecard:
    """The kata's reference graded with a private suite, through the same engine and limits
    as a candidate: a suite the reference fails would fail every honest candidate too."""
    with tempfile.TemporaryDirectory(prefix="kata-suite-check-") as tmp:
        return _Grader(kata, kata.reference_path, Path(tmp), None).grade(seed, suite)


def read_unit_results(paths: list[Path], homework: Homework) -> list[dict[str, Any]]:
    """The unit results in `paths` (files, or folders of *.json), one per bundle × kata, in
    bundle then homework order. KataError names a file that is not a result of this homework."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    order = {k.slug: i for i, k in enumerate(homework.katas)}
    seen: dict[tuple, dict[str, Any]] = {}
    for file in files:
        try:
            result = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise KataError(f"{file} is not a unit result: {str(exc)[:200]}",
                            hint="pass the files that `kata homework grade-one -o` wrote") from exc
        if not isinstance(result, dict) or result.get("format") != UNIT_FORMAT:
            raise KataError(f"{file} is not a unit result (format {UNIT_FORMAT})",
                            hint="pass the files that `kata homework grade-one -o` wrote")
        if result.get("homework_id") != homework.id:
            raise KataError(f"{file} is a result for homework {str(result.get('homework_id'))[:70]}, not {homework.id}",
                            hint="pass --homework the file this result was graded with, or leave this result out")
        seen[(str(result.get("bundle")), str(result.get("bundle_sha256")), str(result.get("kata")))] = result
    if not seen:
        raise KataError("no unit results found", hint="pass the .json files (or their folder) from grade-one")
    return sorted(seen.values(), key=lambda r: (str(r.get("bundle")), order.get(str(r.get("kata")), -1)))
