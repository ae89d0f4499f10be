"""Grade a file against a kata's hidden suite (or its visible examples): the one entry point
the CLI, the homework review and the project's tests share."""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Collection

from grader.catalog import Kata
from grader.cpp.toolchain import is_cpp
from grader.engine import precheck, suite_listing, time_limits
from grader.engine.limits import Limits
from grader.engine.report import Scorecard, build_scorecard
from grader.engine.runner import RunOutcome, TestResult, judges_forked, run_suite
from grader.errors import CatalogError, KataError
from grader.statement import later_names, load_statement

ENV_TEST_TIMEOUT = "KATA_TEST_TIMEOUT_S"
ENV_JOBS = "KATA_GRADE_JOBS"  # judges one grading may use: 1, or 2 (default: 2 given 2 CPUs)
DEFAULT_TEST_TIMEOUT_S = 30.0
DEFAULT_TOTAL_TIMEOUT_S = 600.0
MAX_SOLUTION_BYTES = 1_000_000


def new_seed() -> int:
    return secrets.randbelow(2**31)


def read_solution(path: Path) -> str:
    """The solution's source; KataError when it cannot be graded at all."""
    if not path.exists():
        raise KataError(f"{path} does not exist",
                        hint="pass the file you wrote, or `kata start <slug>` to create one")
    if path.is_dir():
        raise KataError(f"{path} is a folder; a solution is one .py file", hint=_file_in(path))
    if not path.is_file():
        raise KataError(f"{path} is not a file", hint="pass the .py file you wrote")
    if path.stat().st_size > MAX_SOLUTION_BYTES:
        raise KataError(f"{path} is larger than {MAX_SOLUTION_BYTES // 1000} kB; is it the right file?",
                        hint="pass the .py file you wrote (the stub is a few kB)")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise KataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                        hint="save it as UTF-8") from exc


def _file_in(folder: Path) -> str:
    """What to pass instead of a folder: one of its .py files."""
    found = sorted(p for p in folder.glob("*.py") if not p.name.startswith(("repro_", "_")))
    if found:
        return f"name the file, e.g. `--file {found[0]}`" + (f" ({len(found)} .py files there)" if len(found) > 1 else "")
    return f"{folder} holds no .py file; pass the file you wrote, e.g. `--file {folder / 'paged_kv.py'}`"


def grade(kata: Kata, path: Path, *, seed: int | None = None, suite: Path | None = None,
          on_event: Callable[[str, dict[str, Any]], None] | None = None,
          limits: Limits | None = None, test_timeout_s: float | None = None,
          total_timeout_s: float = DEFAULT_TOTAL_TIMEOUT_S, workdir: Path | None = None,
          levels: set[int] | None = None, per_test_limits: bool = True, jobs: int | None = None,
          tests: Collection[str] | None = None, stop_at_first_failure: bool = False,
          sanitize: str | None = None, **extra: Any) -> Scorecard:
    """Grade `path` with the kata's hidden suite (or `suite`): a Scorecard, never an
    exception for anything the candidate's code does. `levels` runs only those levels'
    tests (a mock interview's revealed levels; a corpus check up to a bug's level); `tests`
    (names) runs only those, within `levels` (a corpus check needs only the tests below a
    bug's level and those meant to reject it: see test_levels). `stop_at_first_failure`: the
    tests after the first that fails are not run, nor on the card (a note counts them).

    With `jobs` 2 (by default: where the kata's `judges` allows it and this process may use
    two CPUs, see grading_jobs), the tests are split over two judges, each with its worker
    and a CPU of its own, balanced by the reference's times: the same verdicts (each test
    starts from its own seed), paged-kv's in about 65 % of the time.

    A file that cannot load (a syntax error, nothing in it, none of the stub's names) fails
    every test at once from a compile check, no judge started (see precheck.py); a file
    missing some of the names is graded, with a note naming them.

    A C++ file (.cpp) is compiled first (grader/cpp/build.py: in the sandbox, cached): a
    compile error fails every test with the compiler's message; otherwise the suite drives
    the built module. `sanitize` ("address" or "thread", C++ only) builds it with those
    sanitizers and runs the worker under them; the efficiency tests are left out."""
    t0 = time.monotonic()
    source = read_solution(path)
    seed = new_seed() if seed is None else seed
    suite = suite or kata.suite_path
    card_fields = dict(kata=kata.slug, title=kata.title, seed=seed, solution=str(path),
                       solution_sha256=hashlib.sha256(source.encode()).hexdigest(),
                       level_names={lv.level: lv.name for lv in kata.levels},
                       level_minutes={lv.level: lv.minutes for lv in kata.levels}, **extra)
    notes: list[str] = []
    graded_path, worker_env = path, None
    if is_cpp(path):
        built = _build_cpp(kata, path, sanitize)
        loading = precheck.LoadCheck(error=built.error)
        if built.module_path is not None:
            graded_path = built.module_path
        note = built.note()
        if note:
            notes.append(note)
        if not built.contained:
            notes.append("compiled outside a sandbox (bubblewrap is not available here)")
        if sanitize and built.ok:
            worker_env = _sanitizer_env(sanitize)
            limits = replace(limits or Limits(), memory_bytes=None)  # the sanitizers reserve terabytes
            tests = _without_efficiency(suite, tests)
            notes.append(f"built with --sanitize {sanitize}: the efficiency tests were not run "
                         "(the sanitizers slow code several times over)")
        elif built.ok:
            notes.append("C++: an out-of-bounds access or a data race may pass unseen here; "
                         "`kata grade --sanitize` (memory) and `--sanitize-threads` (races) look for them")
    elif sanitize:
        raise KataError("--sanitize is for C++ solutions (a .cpp file)",
                        hint="grade the .py file without --sanitize")
    else:
        loading = precheck.check_source(source, slug=kata.slug, stub=kata.stub_path, path=path,
                                        unshown=_unshown_names(kata, levels))
    if loading.error is not None:
        outcome = _unloadable(suite, path, kata, seed, loading.error, t0, on_event=on_event,
                              levels=levels, tests=tests, workdir=workdir)
        outcome.notes[:0] = notes
        return build_scorecard(outcome, **card_fields)
    fixed = test_timeout_s is not None or ENV_TEST_TIMEOUT in os.environ
    timeout = test_timeout_s or float(os.environ.get(ENV_TEST_TIMEOUT, DEFAULT_TEST_TIMEOUT_S))
    test_limits = call_limits = durations = None
    if per_test_limits and not fixed:
        test_limits, call_limits, durations = _reference_limits(kata, suite, timeout, on_event) or (None, None, None)
    # An explicit `jobs` is taken as it is (see judges_for otherwise).
    jobs = grading_jobs(jobs) if jobs is not None else min(grading_jobs(), judges_for(kata, suite))
    shards = time_limits.shards_for(durations, jobs, levels, tests)
    outcome = run_suite(suite, graded_path, kata.module, seed,
                        test_timeout_s=timeout, total_timeout_s=total_timeout_s,
                        on_event=on_event, limits=limits, workdir=workdir, levels=levels,
                        test_limits=test_limits, call_limits=call_limits, support=kata.support_paths,
                        shards=shards, tests=tests, stop_at_first_failure=stop_at_first_failure,
                        sanitizer=sanitize if worker_env else None, worker_env=worker_env)
    if loading.note is not None:
        outcome.notes.insert(0, loading.note)
    outcome.notes[:0] = notes
    return build_scorecard(outcome, **card_fields)


def _build_cpp(kata: Kata, path: Path, sanitize: str | None) -> Any:
    from grader.cpp import build, sanitizer

    if sanitize is not None and sanitize not in sanitizer.KINDS:
        raise KataError(f"--sanitize {sanitize!r} is not a sanitizer kata knows",
                        hint=f"use one of: {', '.join(sanitizer.KINDS)}")
    return build.build(path, kata.module, sanitize=sanitize)


def _sanitizer_env(kind: str) -> dict[str, str]:
    from grader.cpp import sanitizer, toolchain

    found = toolchain.find()
    env = sanitizer.worker_env(kind, found.compiler) if not isinstance(found, str) else found
    if isinstance(env, str):
        raise KataError(f"--sanitize {kind} cannot run here: {env}", hint="grade without --sanitize")
    return env


def _without_efficiency(suite: Path, tests: Collection[str] | None) -> Collection[str] | None:
    listed = suite_listing.list_tests(suite)
    if listed is None:
        return tests
    return [t["name"] for t in listed if t.get("category") != "efficiency"
            and (tests is None or t["name"] in tests)]


def _unshown_names(kata: Kata, levels: set[int] | None) -> frozenset[str]:
    """The API names of the levels a grading leaves out (a mock's unrevealed ones): its
    messages about missing names must not name them."""
    if not levels:
        return frozenset()
    try:
        return later_names(load_statement(kata), levels)
    except (CatalogError, OSError):
        return frozenset()  # (a statement that does not parse is reported where it is shown)


def _unloadable(suite: Path, path: Path, kata: Kata, seed: int, error: str, t0: float, *,
                on_event: Callable[[str, dict[str, Any]], None] | None, levels: set[int] | None,
                tests: Collection[str] | None, workdir: Path | None) -> RunOutcome:
    """Every test failed with `error`: listed from the suite's source, or, where that cannot
    be read without importing it, by a judge that starts no worker (a second or so)."""
    listed = suite_listing.list_tests(suite)
    if listed is None:
        return run_suite(suite, path, kata.module, seed, on_event=on_event, workdir=workdir,
                         levels=levels, tests=tests, support=kata.support_paths, load_error=error)
    wanted = [t for t in listed if (not levels or t["level"] in levels) and (tests is None or t["name"] in tests)]
    if on_event is not None:
        on_event("collected", {"tests": wanted})
    results = [TestResult(**t, message=error) for t in wanted]
    for result in results:
        if on_event is not None:
            on_event("result", result.to_dict())
    return RunOutcome(tests=results, duration_s=time.monotonic() - t0, import_error=error)


def judges_for(kata: Kata, suite: Path, forked: Callable[[], bool] | None = None) -> int:
    """How many judges a grading of `suite` may split over: the kata's own suite as its
    kata.toml allows, a private suite or the examples in one. Where the judges start cold
    (no warm grader), a kata that uses torch runs in one: a second judge and its worker
    would each import torch again (lora on 2 CPUs: 4.1 s with two judges, 3.7 s with one;
    forked, 1.75 s with two, 2.55 s with one)."""
    if suite != kata.suite_path:
        return 1
    if kata.judges > 1 and kata.uses_torch and not (forked or judges_forked)():
        return 1
    return kata.judges


def grading_jobs(jobs: int | None = None) -> int:
    """How many judges one grading may use: `jobs`, else $KATA_GRADE_JOBS, else 2 when this
    process may run on two CPUs or more (1 otherwise). More than 2 buys little: each judge
    starts its own worker."""
    if jobs is None:
        raw = os.environ.get(ENV_JOBS, "").strip()
        if raw:
            try:
                jobs = int(raw)
            except ValueError:
                raise KataError(f"{ENV_JOBS}={raw!r} is not a whole number",
                                hint=f"set {ENV_JOBS} to 1 (one judge) or 2, or unset it") from None
        else:
            try:
                cpus = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                cpus = os.cpu_count() or 1
            jobs = 2 if cpus >= 2 else 1
    return max(1, min(int(jobs), 8))


def test_levels(kata: Kata) -> dict[str, int] | None:
    """Each test of the kata's hidden suite and its level, from the reference's times on
    this machine (measured, by grading the reference, the first time); None when they
    cannot be had."""
    timed = _reference_limits(kata, kata.suite_path, DEFAULT_TEST_TIMEOUT_S)
    return {name: int(t[2]) for name, t in timed[2].items()} if timed else None


def _reference_limits(kata: Kata, suite: Path, ceiling_s: float,
                      on_event: Callable[[str, dict[str, Any]], None] | None = None
                      ) -> tuple[dict[str, float], dict[str, float], dict[str, list[float]]] | None:
    """Per-test and per-call limits from the reference's times on this suite (measured once
    per machine, with one judge), and those times."""
    def measure() -> dict[str, list[float]]:
        if on_event is not None:  # the first grade on a machine waits for this: say why
            on_event("note", {"text": "timing the reference once on this machine, for the time limits"})
        outcome = run_suite(suite, kata.reference_path, kata.module, 0, test_timeout_s=ceiling_s,
                            support=kata.support_paths)
        if not all(t.passed for t in outcome.tests):
            raise RuntimeError("the reference does not pass this suite")
        return {t.name: [t.duration_s, t.longest_call_s, t.level] for t in outcome.tests}

    durations = time_limits.cached_durations(kata.slug, suite, measure,
                                             timed=(kata.reference_path, *kata.support_paths))
    return (*time_limits.limits_for(durations, ceiling_s), durations) if durations else None


def check(kata: Kata, path: Path, **kwargs: Any) -> Scorecard:
    """Run the kata's visible examples against `path`."""
    return grade(kata, path, seed=0, suite=kata.examples_path, **kwargs)
