"""The C++ scheduler: the hidden suite scores reference/cpp/scheduler.cpp 100 and
katas/scheduler/stub.cpp 0, rejects each realistic C++ bug of tests/corpus/scheduler/cpp at
its level under two seeds (a missing lock: in a ThreadSanitizer build), and accepts a correct
alternative; the C++ reference agrees with reference/scheduler.py call for call, and its
Request and Batch look to Python as the stub's dataclasses do."""

from __future__ import annotations

import importlib.util
import random
import sys

import pytest

import reference.scheduler as py_reference
from grader.cpp import build, sanitizer, toolchain
from grader.grading import grade
from grader.mock import cpp_stub_for_levels
from tests.kata_testing import (CPP_SEEDS, REPO_ROOT, assert_rejected_at_level, assert_scores_full,
                                buggy_params, corpus_file, correct_params, failed_tests, grade_file,
                                kata, manifest_path)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SLUG = "scheduler"
REFERENCE = REPO_ROOT / "reference" / "cpp" / "scheduler.cpp"
STUB = REPO_ROOT / "katas" / "scheduler" / "stub.cpp"
BINDINGS_MARK = "// ---- bindings: you do not need to change anything below ----"

pytestmark = pytest.mark.skipif(toolchain.missing() is not None,
                                reason=f"no C++ toolchain: {toolchain.missing()}")


def test_reference_scores_100():
    card = grade_file(SLUG, REFERENCE)
    assert card.passed and card.score == 100, failed_tests(card)


def test_stub_scores_0():
    card = grade_file(SLUG, STUB)
    assert card.score == 0, f"the stub passed {[t.name for t in card.tests if t.passed]}"


def test_stub_and_reference_share_the_bindings():
    """The part below the mark is what neither the candidate nor the reference writes."""
    stub, ref = STUB.read_text(), REFERENCE.read_text()
    assert BINDINGS_MARK in stub
    assert stub[stub.index(BINDINGS_MARK):] == ref[ref.index(BINDINGS_MARK):]


def test_a_level_1_mock_compiles_without_the_level_3_api(tmp_path):
    """`kata mock --lang cpp` starts from the stub without its [level 3] blocks (abort)."""
    source = cpp_stub_for_levels(STUB.read_text(), {1})
    assert "abort" not in source.split(BINDINGS_MARK)[1]
    (tmp_path / "scheduler.cpp").write_text(source)
    built = build.build(tmp_path / "scheduler.cpp", "scheduler")
    assert built.ok and not built.warnings, built.error or built.warnings


@pytest.mark.parametrize("entry,seed", buggy_params(SLUG, lang="cpp"))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize("name,seed", correct_params(SLUG, lang="cpp"))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


# ----------------------------------------------------------------------------- missing locks


def _sanitized_entries() -> list:
    data = tomllib.loads(manifest_path(SLUG, lang="cpp").read_text(encoding="utf-8"))
    return [pytest.param(raw, seed, id=f"{raw['file'].replace('/', '-')}-seed{seed}")
            for raw in data.get("sanitized", []) for seed in CPP_SEEDS]


def _sanitizer_missing(kind: str) -> str | None:
    found = toolchain.find()
    if isinstance(found, str):
        return found
    return None if sanitizer.runtime(kind, found.compiler) else f"{found.compiler} has no {kind} sanitizer runtime"


@pytest.mark.parametrize("raw,seed", _sanitized_entries())
def test_missing_lock_is_rejected_under_thread_sanitizer(raw, seed):
    """A missing lock is a race the plain thread trial catches only when it corrupts
    something (corpus.toml says how often); built with ThreadSanitizer, the first racy pair
    of accesses fails the thread test (its crowded trials make the overlap the sanitizer
    needs the rule: corpus.toml has the figures). Every single-threaded test still passes:
    the bug is the lock, nothing else."""
    why_not = _sanitizer_missing(raw["sanitize"])
    if why_not:
        pytest.skip(why_not)
    card = grade(kata(SLUG), corpus_file(SLUG, raw["file"]), seed=seed, sanitize=raw["sanitize"])
    failed = failed_tests(card)
    assert set(failed) == set(raw["rejected_by"]), failed
    assert all("ThreadSanitizer: data race" in failed[name] for name in raw["rejected_by"]), failed


# ----------------------------------------------------------------------------- in this process


@pytest.fixture(scope="module")
def cpp_reference():
    """The C++ reference's module, built as a grading builds it and imported here (one C++
    scheduler module per process: pybind11 registers Request and Batch once)."""
    built = build.build(REFERENCE, "scheduler")
    assert built.ok, built.error
    assert not built.warnings, built.warnings
    spec = importlib.util.spec_from_file_location("scheduler", built.module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_request_and_batch_look_like_the_stubs_dataclasses(cpp_reference):
    R, B = cpp_reference.Request, cpp_reference.Batch
    req = R(request_id="x", prompt_len=3, max_new_tokens=2)
    assert (req.request_id, req.prompt_len, req.max_new_tokens, req.priority, req.arrival_time) == ("x", 3, 2, 0, 0.0)
    assert repr(R("x", 3, 2, 1, 2.5)) == repr(py_reference.Request("x", 3, 2, 1, 2.5))
    assert R("x", 3, 2, priority=1) == R("x", 3, 2, 1, 0.0) and R("x", 3, 2) != R("x", 3, 2, 1)
    assert hash(R("x", 3, 2)) == hash(R("x", 3, 2))
    with pytest.raises(AttributeError):  # frozen, as the dataclass
        req.priority = 5
    with pytest.raises(TypeError):
        R("x", 3)
    batch = B(prefill={"x": 1}, decode=["y"], finished=["y"])
    assert (batch.prefill, batch.decode, batch.preempted, batch.finished) == ({"x": 1}, ["y"], [], ["y"])
    assert repr(batch) == repr(py_reference.Batch(prefill={"x": 1}, decode=["y"], finished=["y"]))
    assert B() == B() and batch != B() and B() != py_reference.Batch()  # as two dataclasses
    batch.decode = ["z"]
    assert batch.decode == ["z"]


def test_errors_map_to_the_python_exceptions(cpp_reference):
    with pytest.raises(ValueError):
        cpp_reference.Scheduler(4, 2, 8, 2, aging_steps=0)
    sched = cpp_reference.Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=3, block_size=2)
    with pytest.raises(ValueError):
        sched.add_request(cpp_reference.Request("a", 5, 2))  # ceil(7 / 2) = 4 > 3 blocks
    with pytest.raises(KeyError):
        sched.abort("a")


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except (ValueError, KeyError) as exc:
        return type(exc).__name__, None


def _batch(b) -> tuple:
    return dict(b.prefill), list(b.decode), list(b.preempted), list(b.finished)


def _random_config(rng: random.Random) -> dict:
    return {"max_num_batched_tokens": rng.randint(1, 8), "max_num_seqs": rng.randint(1, 4),
            "num_blocks": rng.choice([10_000, rng.randint(1, 8)]), "block_size": rng.randint(1, 4),
            "aging_steps": rng.choice([None, None, 1, 2, 3])}


def test_cpp_reference_agrees_with_the_python_reference(cpp_reference):
    """300 random call sequences (adds good and bad, aborts, steps, then a drain), the same
    outcome and the same Batch from both at every call."""
    rng = random.Random(41)
    for _ in range(300):
        cfg = _random_config(rng)
        want, got = py_reference.Scheduler(**cfg), cpp_reference.Scheduler(**cfg)
        calls: list = [cfg]
        for _ in range(rng.randint(5, 50)):
            kind = rng.random()
            if kind < 0.35:
                args = (rng.choice("abcdefghij"), rng.randint(-1, 12), rng.randint(0, 5),
                        rng.randint(-1, 3), float(rng.choice([0, 1, 2.5, len(calls)])))
                calls.append(("add", *args))
                assert (_outcome(want.add_request, py_reference.Request(*args))
                        == _outcome(got.add_request, cpp_reference.Request(*args))), calls
            elif kind < 0.45:
                rid = rng.choice("abcdefghijz")
                calls.append(("abort", rid))
                assert _outcome(want.abort, rid) == _outcome(got.abort, rid), calls
            else:
                calls.append("step")
                assert _batch(want.step()) == _batch(got.step()), calls
            assert want.has_unfinished() == got.has_unfinished(), calls
        for _ in range(400):
            if not want.has_unfinished():
                break
            assert _batch(want.step()) == _batch(got.step()), calls + ["drain"]
        assert not got.has_unfinished(), calls
