"""A judge the candidate's code cannot reach: each attack class of the security review of
`kata grade` / `kata homework review`, reproduced by a hostile solution in
tests/hostile/attacks/, and each blocked.

Forgery (re-exporting the reference, patching the results stream, pytest's reports,
`expect`, the reference module, appending forged result lines) cannot work because the
judge never imports the candidate's code: the suite and its results live in another
process. Snooping, writing outside, daemons and memory across processes are stopped by the
worker's sandbox (bubblewrap namespaces, read-only binds, seccomp: no new processes).
Cross-candidate sabotage needs a process that outlives its run: there is none.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from grader.engine import sandbox
from tests.kata_testing import REPO_ROOT, grade_file

ATTACKS = Path(__file__).parent / "hostile" / "attacks"
WHY_UNCONTAINED = sandbox.bwrap_available()
needs_sandbox = pytest.mark.skipif(WHY_UNCONTAINED is not None, reason=f"no sandbox here: {WHY_UNCONTAINED}")


def grade_attack(name: str, tmp_path: Path, **placeholders: str):
    source = (ATTACKS / f"{name}.py").read_text()
    for key, value in placeholders.items():
        source = source.replace(f"@{key}@", value)
    path = tmp_path / "solution" / "paged_kv.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return grade_file("paged-kv", path, levels=frozenset({1}))


def messages(card) -> str:
    return "\n".join(t.message + json.dumps(t.details) for t in card.tests)


@pytest.mark.parametrize("name", ["forge_reexport_reference", "forge_only_under_grader",
                                  "forge_stream_and_reports"])
def test_forgery_from_the_candidates_process_scores_nothing(name, tmp_path):
    card = grade_attack(name, tmp_path)
    assert card.tests and not any(t.passed for t in card.tests), [t.name for t in card.tests if t.passed]
    assert card.score == 0


@needs_sandbox
def test_the_reference_cannot_be_found_on_disk_from_the_sandbox(tmp_path):
    card = grade_attack("forge_obfuscated_reference", tmp_path)
    assert card.score == 0 and not any(t.passed for t in card.tests)


@needs_sandbox
def test_the_graders_environment_is_not_visible(tmp_path, monkeypatch):
    secret = f"hunter2-{os.getpid()}-{time.time_ns()}"
    monkeypatch.setenv("KATA_COACH_SECRET", secret)
    card = grade_attack("snoop_environment", tmp_path)
    text = messages(card)
    assert "ENV:" in text  # the attack ran and reported what it saw
    assert secret not in text and "KATA_COACH_SECRET" not in text


@needs_sandbox
def test_parent_processes_and_the_coachs_files_are_not_visible(tmp_path, monkeypatch):
    coach = tmp_path / "coach-folder-with-private-suites"
    coach.mkdir()
    (coach / "week1.toml").write_text("private suites here")
    monkeypatch.chdir(coach)
    card = grade_attack("snoop_parent", tmp_path)
    text = messages(card)
    assert "SEEN:" in text
    for leak in (str(coach), "week1.toml", str(REPO_ROOT), "kata-run-", "pytest"):
        assert leak not in text, leak


@needs_sandbox
def test_writes_land_only_in_the_private_temporary_folder(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    grader_dir = REPO_ROOT / "grader"
    card = grade_attack("writes_outside", tmp_path, TARGET_DIR=str(target))
    line = next(t.message for t in card.tests if "WRITES: " in t.message)
    results = dict(item.split(": ", 1) for item in line.split("WRITES: ", 1)[1].split("; "))
    assert results["/tmp/inside.txt"] == "written"  # the private, size-limited /tmp
    assert results["/tmp/pwned.txt"] == "written"    # HOME is that /tmp too
    for path in (str(target / "pwned.txt"), "/kata/kata_worker/pwned.py", "/pwned.txt"):
        assert results[path] != "written", path
    assert not any(target.iterdir())
    assert not (grader_dir / "pwned.txt").exists() and not (Path.home() / "pwned.txt").exists()


@pytest.mark.parametrize("mode", ["auto", "none"])
def test_no_process_outlives_the_run_setsid_or_setpgid(tmp_path, monkeypatch, mode):
    """The seccomp filter forbids new processes, sandboxed or not (Linux)."""
    if mode == "auto" and WHY_UNCONTAINED is not None:
        pytest.skip(f"no sandbox here: {WHY_UNCONTAINED}")
    monkeypatch.setenv(sandbox.ENV_SANDBOX, mode)
    target = tmp_path / "target"
    target.mkdir()
    card = grade_attack("daemon_setsid", tmp_path, TARGET_DIR=str(target))
    text = messages(card)
    assert "fork for setsid: PermissionError errno 1" in text
    assert "fork for setpgid: PermissionError errno 1" in text
    time.sleep(0.5)
    assert not any(target.iterdir()), "a heartbeat file was written after the run"


def test_memory_cannot_be_spread_over_several_processes(tmp_path):
    card = grade_attack("memory_many_processes", tmp_path)
    assert messages(card).count("fork: PermissionError errno 1") >= 3


def test_an_uncontained_run_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(sandbox.ENV_SANDBOX, "none")
    card = grade_file("paged-kv", REPO_ROOT / "reference" / "paged_kv.py", levels=frozenset({1}))
    assert card.score == 100 and card.contained is False
    assert any("uncontained" in note for note in card.notes)


# ---------------------------------------------------------------- efficiency verdicts
# No figure the worker reports decides an efficiency verdict unchecked (measure_check.py):
# the time is read from outside by the kernel's account, and counts made while another
# thread of the worker worked are refused.

SLOW_ALLOCATOR = REPO_ROOT / "tests" / "corpus" / "paged_kv" / "buggy_free_list_pop_front.py"
GROWTH_TEST = "test_allocate_and_free_take_constant_time"
needs_kernel_accounts = pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                                           reason="the worker's CPU is read from /proc (Linux)")


@needs_kernel_accounts
@pytest.mark.parametrize("attack", [None, "efficiency_on_a_helper_thread", "efficiency_forged_time_report"])
def test_slow_code_fails_the_growth_test_however_it_hides_its_time(attack, tmp_path):
    """paged-kv with an O(num_blocks) free list: plain, with every call run on a helper
    thread, and with the worker's time report rewritten to a microsecond a call."""
    source = SLOW_ALLOCATOR.read_text()
    if attack is not None:
        source += "\n\n" + (ATTACKS / f"{attack}.py").read_text()
    path = tmp_path / "paged_kv.py"
    path.write_text(source)
    card = grade_file("paged-kv", path, tests=frozenset({GROWTH_TEST}))
    [test] = card.tests
    assert not test.passed and "grows with num_blocks" in test.message, (test.message, test.details)


@needs_kernel_accounts
def test_operations_counted_while_a_helper_thread_works_are_refused(tmp_path):
    """mha's attention as a loop over batch and heads on a helper thread: the calling
    thread's operation count sees nothing of it, so the count is refused."""
    path = tmp_path / "mha.py"
    path.write_text((ATTACKS / "counts_on_a_helper_thread.py").read_text())
    card = grade_file("mha", path, tests=frozenset({"test_attention_has_no_python_loop"}))
    [test] = card.tests
    assert not test.passed and "thread" in test.message, test.message
    assert "on other threads" in test.details["got"]


def test_the_worker_cannot_move_itself_off_the_judges_cpu(tmp_path):
    """While the judge measures, it keeps the worker on its own CPU so that its reading of
    the worker's CPU time is exact: sched_setaffinity is refused to the candidate's code."""
    path = tmp_path / "paged_kv.py"
    path.write_text("import os\n"
                    "class PagedKVCacheAllocator:\n"
                    "    def __init__(self, num_blocks, block_size):\n"
                    "        try:\n"
                    "            os.sched_setaffinity(0, {0})\n"
                    "            outcome = 'moved'\n"
                    "        except OSError as exc:\n"
                    "            outcome = f'{type(exc).__name__} errno {exc.errno}'\n"
                    "        raise ValueError('AFFINITY: ' + outcome)\n")
    card = grade_file("paged-kv", path, tests=frozenset({"test_constructor_rejects_bad_sizes"}))
    assert "AFFINITY: PermissionError errno 1" in messages(card)
