"""The warm grader (grader/engine/warm.py): a judge zygote per KATA_HOME on a 0600 Unix socket.
Its verdicts are the cold path's (a sample of the corpus graded both ways), the containment
tests pass through it, a service started from other code is replaced, `kata warm --status`
and `--stop` show and end it, it ends when idle, and the library's gradings never use it."""

from __future__ import annotations

import os
import stat
import time

import pytest
from typer.testing import CliRunner

from grader.cli.app import app
from grader.engine import runner, warm
from tests import test_containment
from tests.kata_testing import REPO_ROOT, corpus_file, corpus_manifest, grade_file

runner_cli = CliRunner()


@pytest.fixture(autouse=True)
def short_idle(monkeypatch):
    """Any service a test leaves behind (one replaced mid-start) ends within a minute."""
    monkeypatch.setenv(warm.ENV_IDLE, "45")


def start_service() -> dict:
    env = runner._judge_env()
    assert warm.start(env, warm.code_key(env)) is not None
    found = warm.wait_ready()
    assert found is not None, "the warm grader did not come up"
    return found


@pytest.fixture
def service(monkeypatch):
    """A warm grader for this test's KATA_HOME, used by this process's gradings."""
    monkeypatch.setenv(warm.ENV_WARM, "1")
    warm.enable()
    try:
        yield start_service()
    finally:
        warm.stop()
        warm._enabled = False


def gradings() -> int:
    found = warm.status()
    return int(found["gradings"]) if found else -1


def verdicts(card) -> dict[str, bool]:
    return {t.name: t.passed for t in card.tests}


def test_the_workers_come_from_the_zygote_in_the_sandbox(service, tmp_path):
    """A forked worker imports the candidate's file from its own folder under the sandbox's
    /tmp; a cold one from /kata/solution (both contained)."""
    assert service["worker_zygote"]
    source = (REPO_ROOT / "reference" / "paged_kv.py").read_text()
    source += "\n\nclass PagedKVCacheAllocator(PagedKVCacheAllocator):\n" \
              "    def __init__(self, *a, **k):\n        raise ValueError('from ' + __file__)\n"
    path = tmp_path / "paged_kv.py"
    path.write_text(source)
    card = grade_file("paged-kv", path, seed=1, levels=frozenset({1}))
    message = next(t.message for t in card.tests if not t.passed and "from " in t.message)
    assert "from /tmp/w-" in message and card.contained, message
    warm._enabled = False
    card = grade_file("paged-kv", path, seed=1, levels=frozenset({1}))
    message = next(t.message for t in card.tests if not t.passed and "from " in t.message)
    assert "from /kata/solution/paged_kv.py" in message, message


def test_the_socket_is_the_users_alone(service):
    path = warm.socket_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert service["pid"] != os.getpid() and service["ready"]


def test_warm_and_cold_verdicts_are_the_same_on_a_corpus_sample(service):
    sample = [REPO_ROOT / "reference" / "paged_kv.py"]
    sample += [corpus_file("paged-kv", e.file) for e in corpus_manifest("paged-kv").buggy[:3]]
    warm_cards = []
    before = gradings()
    for path in sample:
        warm_cards.append(grade_file("paged-kv", path, seed=11, levels=frozenset({1})))
    assert gradings() >= before + len(sample), "the gradings did not go through the warm grader"
    warm._enabled = False  # the same files, cold
    for path, hot in zip(sample, warm_cards):
        cold = grade_file("paged-kv", path, seed=11, levels=frozenset({1}))
        assert verdicts(cold) == verdicts(hot), path.name
        assert cold.score == hot.score and cold.contained == hot.contained
    assert warm_cards[0].score == 100 and any(c.score < 100 for c in warm_cards[1:])


@pytest.mark.parametrize("check", [
    "test_the_graders_environment_is_not_visible",
    "test_writes_land_only_in_the_private_temporary_folder",
    "test_the_reference_cannot_be_found_on_disk_from_the_sandbox",
])
def test_containment_holds_on_the_warm_path(service, check, tmp_path, monkeypatch):
    before = gradings()
    fn = getattr(test_containment, check)
    kwargs = {"tmp_path": tmp_path}
    if "monkeypatch" in fn.__code__.co_varnames[:fn.__code__.co_argcount]:
        kwargs["monkeypatch"] = monkeypatch
    fn(**kwargs)
    assert gradings() > before, "the containment check did not run on the warm path"


def test_a_service_started_from_other_code_is_replaced(monkeypatch):
    monkeypatch.setenv(warm.ENV_WARM, "1")
    warm.enable()
    env = runner._judge_env()
    try:
        assert warm.start(env, "some-older-checkout") is not None
        old = warm.wait_ready()
        assert old is not None and old["key"] == "some-older-checkout"
        assert warm.remote_for(env) is None  # this grading goes cold, and a new one starts
        deadline = time.monotonic() + 60
        new = None
        while time.monotonic() < deadline:
            new = warm.status()
            if new is not None and new.get("ready") and new["pid"] != old["pid"]:
                break
            time.sleep(0.2)
        assert new is not None and new["pid"] != old["pid"] and new["key"] == warm.code_key(env)
    finally:
        warm.stop()
        warm._enabled = False


def test_kata_warm_status_and_stop(monkeypatch):
    monkeypatch.setenv(warm.ENV_WARM, "1")
    try:
        result = runner_cli.invoke(app, ["warm"], catch_exceptions=False)
        assert result.exit_code == 0 and "warm grader: pid" in result.output
        result = runner_cli.invoke(app, ["warm", "--status", "--json"], catch_exceptions=False)
        assert result.exit_code == 0 and '"running": true' in result.output
        result = runner_cli.invoke(app, ["warm", "--stop"], catch_exceptions=False)
        assert "stopped" in result.output
        time.sleep(0.3)
        result = runner_cli.invoke(app, ["warm", "--status"], catch_exceptions=False)
        assert "no warm grader runs" in result.output
    finally:
        warm.stop()
        warm._enabled = False


def test_it_ends_when_idle(monkeypatch):
    monkeypatch.setenv(warm.ENV_IDLE, "1")
    start_service()
    deadline = time.monotonic() + 30
    while warm.status() is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert warm.status() is None and not warm.socket_path().exists()


def test_the_library_and_a_review_never_use_it(service):
    warm._enabled = False  # as grading.grade is, when no CLI command turned it on
    before = gradings()
    card = grade_file("paged-kv", REPO_ROOT / "reference" / "paged_kv.py", seed=3, levels=frozenset({1}))
    assert card.score == 100 and gradings() == before
    monkeypatch_env = os.environ.get(warm.ENV_WARM)
    assert monkeypatch_env == "1"
    from grader.engine import zygote

    warm.enable()
    with zygote.many_gradings():  # a coach's review: its own zygote, never the candidate's service
        grade_file("paged-kv", REPO_ROOT / "reference" / "paged_kv.py", seed=3, levels=frozenset({1}))
    assert gradings() == before


def test_a_split_gradings_workers_run_on_their_judges_cpus(service):
    """Each judge of a split grading has a CPU of its own; its worker, forked by the service's
    zygote with the zygote's CPUs, is put there too (as a worker the judge starts inherits
    the judge's)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("a split grading's judges share one CPU here")
    before = gradings()
    fixtures = REPO_ROOT / "tests" / "engine_fixtures"
    outcome = runner.run_suite(fixtures / "same_cpus_suite.py", fixtures / "cpu_report.py", "toy", 1,
                               shards=[["test_worker_on_the_judges_cpus_a"], ["test_worker_on_the_judges_cpus_b"]])
    assert gradings() >= before + 2, "the judges did not come from the warm grader"
    assert len(outcome.tests) == 2 and all(t.passed for t in outcome.tests), [t.message for t in outcome.tests]
