"""The engine turns anything a candidate's code does into a verdict, never a grader crash."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from grader.engine import cpus
from grader.engine.cpus import CpuPlan
from grader.engine.report import build_scorecard
from grader.engine.runner import RunOutcome, run_suite
from grader.grading import read_solution
from grader.errors import KataError

FIXTURES = Path(__file__).parent / "engine_fixtures"
SUITE = FIXTURES / "toy_suite.py"


def run(name: str, seed: int = 1, test_timeout_s: float = 3.0, total_timeout_s: float = 120.0) -> RunOutcome:
    return run_suite(SUITE, FIXTURES / f"{name}.py", "toy", seed,
                     test_timeout_s=test_timeout_s, total_timeout_s=total_timeout_s)


def by_name(outcome: RunOutcome) -> dict:
    return {t.name: t for t in outcome.tests}


def test_good_solution_passes_every_test_with_metadata():
    outcome = run("good")
    tests = by_name(outcome)
    assert set(tests) == {"test_add", "test_scale", "test_zero"}
    assert all(t.passed for t in tests.values())
    assert tests["test_scale"].level == 2 and tests["test_scale"].category == "api contract"
    assert "new list" in tests["test_scale"].description


def test_failure_shows_property_shrunk_input_expected_and_got():
    t = by_name(run("wrong_sum"))["test_add"]
    assert not t.passed and t.message == "add returns the sum"
    # Hypothesis shrinks to the smallest failing input: a = 2 (the first a that breaks it).
    assert t.details["input"] == "{'a': 2, 'b': 1}"
    assert t.details["expected"] == "3" and t.details["got"] == "1"
    assert "test_add" in t.details["example"] and "def " not in t.details["example"]


def test_same_seed_gives_same_results():
    first = [(t.name, t.passed, t.details.get("input")) for t in run("wrong_sum", seed=7).tests]
    second = [(t.name, t.passed, t.details.get("input")) for t in run("wrong_sum", seed=7).tests]
    assert first == second


def test_syntax_error_is_a_verdict_naming_the_line():
    outcome = run("syntax_error")
    assert "syntax error at line 1" in outcome.import_error
    assert all(not t.passed and "syntax error" in t.message for t in outcome.tests)


def test_import_error_is_a_verdict():
    outcome = run("import_error")
    assert "ModuleNotFoundError" in outcome.import_error and "numpyy_does_not_exist" in outcome.import_error
    assert all(not t.passed for t in outcome.tests)


def test_missing_name_says_which_name():
    t = by_name(run("missing_name"))["test_scale"]
    assert not t.passed and "does not define `scale`" in t.message
    assert by_name(run("missing_name"))["test_add"].passed


def test_wrong_return_type_is_reported():
    t = by_name(run("wrong_type"))["test_add"]
    assert not t.passed and t.message == "add returns an int" and t.details["got"] == "'str'"


def test_exception_names_the_candidates_line():
    t = by_name(run("raises"))["test_scale"]
    assert not t.passed and t.message.startswith("your code raised IndexError")
    assert "line 6, in scale" in t.details["where"]


def test_infinite_loop_times_out_and_grading_continues():
    tests = by_name(run("infinite_loop"))
    assert not tests["test_scale"].passed and "timed out after 3 s" in tests["test_scale"].message
    assert tests["test_add"].passed and tests["test_zero"].passed


def test_timeout_names_the_line_the_code_was_stuck_on():
    """The worker's stack at the moment of the timeout, filtered to the candidate's file."""
    scale = by_name(run("infinite_loop"))["test_scale"]
    source = (FIXTURES / "infinite_loop.py").read_text().splitlines()
    stuck = next(i for i, line in enumerate(source, 1) if "while True" in line or "pass" in line)
    assert "where your code was" in scale.details["where"]
    assert any(f"line {n}," in scale.details["where"] for n in (stuck, stuck + 1))
    assert "output" not in scale.details  # the stack dump is not what the code printed


def test_a_call_stuck_inside_c_code_still_names_its_line():
    """The worker's own dump runs between two bytecodes, never inside one C call: there the
    judge asks faulthandler's (SIGUSR2, armed once the import is done)."""
    scale = by_name(run("stuck_in_c"))["test_scale"]
    assert not scale.passed and "timed out after 3 s" in scale.message
    assert "line 9, in scale: hashlib.pbkdf2_hmac(" in scale.details["where"]
    assert "output" not in scale.details


def test_a_swallowed_alarm_cannot_stop_the_timeout():
    """The alarm is the judge's: a candidate's catch-all in the worker never sees it."""
    tests = by_name(run("swallows_timeout", test_timeout_s=1.0))
    assert not tests["test_scale"].passed and "timed out after 1 s" in tests["test_scale"].message
    assert tests["test_add"].passed and tests["test_zero"].passed


@pytest.mark.parametrize("name,reason", [("segfault", "SIGSEGV"), ("os_exit", "exit code 7")])
def test_crash_of_the_child_is_a_verdict_and_grading_resumes(name, reason):
    tests = by_name(run(name))
    assert not tests["test_scale"].passed
    assert "crashed the process it runs in" in tests["test_scale"].message and reason in tests["test_scale"].message
    assert tests["test_add"].passed and tests["test_zero"].passed


def test_output_spam_is_counted_not_shown():
    outcome = run("spam")
    tests = by_name(outcome)
    assert all(t.passed for t in tests.values())
    assert tests["test_add"].stdout_bytes > 100_000
    card = build_scorecard(outcome, kata="toy", title="Toy", seed=1, solution="spam.py", solution_sha256="")
    assert card.to_dict()["output_bytes"] < 50_000  # pytest captured it per test; none leaked


def test_mutation_of_inputs_is_reported():
    t = by_name(run("mutates_input"))["test_scale"]
    assert not t.passed and t.message == "scale must not modify its input"


def test_hang_at_import_fails_every_test_cleanly():
    outcome = run("hangs_on_import", test_timeout_s=1.0)
    assert outcome.import_error and "did not finish in time" in outcome.import_error
    assert all(not t.passed for t in outcome.tests)


def test_crash_at_import_fails_every_test_without_retrying_forever():
    outcome = run("crashes_on_import")
    assert all(not t.passed and "importing your file crashed" in t.message for t in outcome.tests)
    assert outcome.duration_s < 30


def test_overall_time_limit_ends_the_run_cleanly():
    outcome = run("infinite_loop", test_timeout_s=30.0, total_timeout_s=4.0)
    tests = by_name(outcome)
    assert not tests["test_scale"].passed
    assert any("whole run passed its 4 s limit" in t.message for t in tests.values() if not t.passed)
    assert outcome.duration_s < 15
    # The judge was killed at the limit; its worker, still in the loop, went with it (a plain
    # worker, without bwrap, once kept a CPU busy for good).
    deadline = time.monotonic() + 5
    while _workers_running("infinite_loop.py") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _workers_running("infinite_loop.py")


def _workers_running(fixture: str) -> list[int]:
    """Pids of live worker processes grading `fixture` (Linux: /proc)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "kata_worker" in cmdline and fixture in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def test_unreadable_files_are_input_errors():
    with pytest.raises(KataError, match="not UTF-8"):
        read_solution(FIXTURES / "not_utf8.py")
    with pytest.raises(KataError, match="does not exist"):
        read_solution(FIXTURES / "nope.py")


def test_a_second_test_stuck_in_the_same_place_is_stopped_early():
    """After one test hangs, another stuck in the same function is cut at the first probe,
    not after its whole limit."""
    tests = by_name(run("infinite_loop_everywhere", test_timeout_s=6.0))
    first, second = tests["test_add"], tests["test_scale"]
    assert "timed out after 6 s" in first.message
    assert "stuck where test_add was stuck" in second.message
    assert second.duration_s < 4.0


def test_a_later_call_into_a_function_that_hung_is_not_run_and_the_worker_is_kept():
    """Once a call into add was cut as a hang, a later test's call into add fails at once
    as "not run: add hangs at line N" (the hang is not waited out again), and a test that
    never calls add still passes, in the same worker."""
    tests = by_name(run("loops_in_add", test_timeout_s=2.0))
    first, again, other = tests["test_add"], tests["test_zero"], tests["test_scale"]
    stuck = next(n for n in (2, 3) if f"line {n}, in add" in first.details["where"])  # `while True:` or `pass`
    assert "timed out after 2 s" in first.message
    assert again.message.startswith(f"not run: add hangs at line {stuck} (stuck there in test_add"), again.message
    assert f"line {stuck}, in add" in again.details["where"]
    assert again.duration_s < 1.0
    assert other.passed


def test_code_too_slow_for_an_efficiency_test_still_answers_the_small_calls_of_others():
    """A call cut in an efficiency test (a big workload on purpose) marks nothing as hung:
    the same function, correct but slow, is still called by the next test and passes it."""
    outcome = run_suite(FIXTURES / "efficiency_cut_suite.py", FIXTURES / "counts_up_to_add.py", "toy", 1,
                        test_timeout_s=2.0, total_timeout_s=120.0)
    tests = by_name(outcome)
    assert not tests["test_add_big"].passed
    assert tests["test_add_small"].passed, tests["test_add_small"].message


def test_a_hang_in_level_1_ends_the_whole_grade_quickly(tmp_path):
    """Issue 42: paged-kv's allocate loops forever. Every later test that calls allocate is
    answered at once instead of being probed and costing a worker restart: the grade ends
    in seconds (it took about 28 s before), shows the stuck line, and fails every level, as
    waiting each hang out did."""
    import importlib.util

    from grader.catalog import load_catalog
    from grader.grading import grade

    spec = importlib.util.spec_from_file_location("bench_hang", FIXTURES.parents[1] / "scripts" / "bench_hang.py")
    assert spec is not None and spec.loader is not None
    bench_hang = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_hang)
    kata = load_catalog().get("paged-kv")
    source, hang_line = bench_hang.plant_hang(kata.reference_path.read_text(encoding="utf-8"),
                                              bench_hang.HANG_SITES["paged-kv"])
    path = tmp_path / "paged_kv.py"
    path.write_text(source, encoding="utf-8")
    t0 = time.monotonic()
    card = grade(kata, path, seed=1)
    took_s = time.monotonic() - t0
    assert took_s < 40.0, took_s  # a generous bound for a loaded machine: about 6 s here
    assert [lv.passed for lv in card.levels] == [False, False, False]
    not_run = [t for t in card.tests if t.message.startswith("not run: allocate hangs at line")]
    assert len(not_run) > 10, [t.message for t in card.tests]
    assert all(f"line {hang_line}, in allocate" in t.details["where"] for t in not_run)


def test_a_call_stuck_in_a_loop_is_cut_by_its_own_limit_long_before_the_tests():
    """With reference timings, one call may take a multiple of the reference's longest call
    (floor 2 s): a hang is cut in seconds although the test itself may run for 20 s."""
    outcome = run_suite(SUITE, FIXTURES / "infinite_loop.py", "toy", 1, test_timeout_s=30.0,
                        test_limits={"test_scale": 20.0}, call_limits={"test_scale": 1.0})
    scale = by_name(outcome)["test_scale"]
    assert not scale.passed
    assert scale.message.startswith("one call into your code ran past its 1 s limit"), scale.message
    assert "where your code was" in scale.details["where"]
    assert scale.duration_s < 5.0
    assert by_name(outcome)["test_add"].passed  # the other tests have no call limit


def test_shrinking_a_failure_stops_in_time_to_report_it():
    """A failure whose shrinking would outlast the test's limit is reported as the property
    it broke, with the smallest example found in time, not cut as a timeout (nor shown as
    hypothesis's "inconsistent data generation"); and the failing test ends well before its
    limit (the shrink budget: the test's time so far, at least SHRINK_FLOOR_S)."""
    from grader.engine.plugin import SHRINK_FLOOR_S

    outcome = run_suite(FIXTURES / "slow_shrink_suite.py", FIXTURES / "wrong_sum.py", "toy", 1,
                        test_timeout_s=30.0, test_limits={"test_sums": 4.0})
    sums = by_name(outcome)["test_sums"]
    assert not sums.passed
    assert sums.message == "add returns the sum of every pair", sums.message
    assert "pairs" in sums.details["input"]
    assert sums.duration_s < 4.0 - 0.5, sums.duration_s
    assert sums.duration_s > SHRINK_FLOOR_S  # it did shrink, for its budget


def test_hypothesis_draws_no_constants_from_the_graders_modules():
    """Hypothesis would parse every local module it finds loaded (the grader's engine, the
    reference) for constants to mix into its draws: a quarter second a grading, and the
    inputs a seed draws would move with the grader's source. The judge turns that off."""
    outcome = run_suite(FIXTURES / "local_constants_suite.py", FIXTURES / "wrong_sum.py", "toy", 1,
                        test_timeout_s=30.0)
    test = by_name(outcome)["test_no_local_constants"]
    assert test.passed, (test.message, test.details)


def test_the_shrink_budget_is_the_tests_time_so_far_within_its_limit():
    from grader.engine import plugin
    from grader.engine.session import TestClock

    clock = TestClock()
    clock.start(10.0, now=100.0)
    assert clock.shrink_budget_s(now=100.2) == plugin.SHRINK_FLOOR_S  # found at once
    assert clock.shrink_budget_s(now=103.0) == 3.0  # as long again as it has run
    assert clock.shrink_budget_s(now=107.0) == 3.0 - plugin.SHRINK_MARGIN_S  # the limit's
    assert clock.shrink_budget_s(now=109.9) == 0.0


def test_the_reference_timings_record_each_tests_longest_call_without_the_import():
    from grader.engine.time_limits import CALL_FLOOR_S, limits_for

    tests = by_name(run("good"))
    assert all(0 < t.longest_call_s <= t.duration_s for t in tests.values())
    first = by_name(run("hangs_briefly_on_import"))["test_add"]
    assert first.passed and first.duration_s < 1.0  # the 1.5 s import is not the test's time
    test_limits, call_limits = limits_for({"quick": [0.01, 0.001], "long": [2.0, 0.001],
                                           "one slow call": [2.0, 1.0]}, 30.0)
    assert test_limits == {"quick": 3.0, "long": 30.0, "one slow call": 30.0}
    # A call limit only where it is below the test's own: 20 x the longest call + 1 s, >= 2 s.
    assert call_limits == {"quick": CALL_FLOOR_S, "long": CALL_FLOOR_S, "one slow call": 21.0}


def test_the_reference_is_timed_again_when_it_or_its_suite_changes(tmp_path, monkeypatch):
    """The cached timings are per suite version and reference version: a faster or slower
    reference must not be graded against the times of the old one."""
    from grader.engine import time_limits

    monkeypatch.setenv(time_limits.ENV_CACHE, str(tmp_path / "cache"))
    suite, reference = tmp_path / "suite.py", tmp_path / "reference.py"
    suite.write_text("def test_a(): pass\n")
    reference.write_text("x = 1\n")
    measured = []

    def timings() -> dict:
        measured.append(1)
        return {"test_a": [0.1 * len(measured), 0.01, 1.0]}

    def cached() -> dict:
        return time_limits.cached_durations("toy", suite, timings, timed=(reference,))

    assert cached() == cached() == {"test_a": [0.1, 0.01, 1.0]} and len(measured) == 1
    reference.write_text("x = 2\n")
    assert cached()["test_a"][0] == 0.2 and len(measured) == 2
    suite.write_text("def test_a(): assert True\n")
    assert cached()["test_a"][0] == pytest.approx(0.3) and len(measured) == 3
    assert cached()["test_a"][0] == pytest.approx(0.3) and len(measured) == 3


def test_efficiency_is_measured_where_the_candidates_code_runs():
    """Op counts and times of the candidate's calls are taken in the worker and added to the
    judge's measurement: a loop over elements and an O(n) call are both caught, and the
    judge's encoding of a call's arguments is transport, not time the candidate spent."""
    suite = FIXTURES / "measure_suite.py"
    fast = {t.name: t for t in run_suite(suite, FIXTURES / "measure_fast.py", "toy", 1,
                                         test_timeout_s=60.0).tests}
    slow = {t.name: t for t in run_suite(suite, FIXTURES / "measure_slow.py", "toy", 1,
                                         test_timeout_s=60.0).tests}
    assert all(t.passed for t in fast.values()), {n: t.message for n, t in fast.items()}
    assert not slow["test_ops_do_not_grow"].passed
    assert not slow["test_time_does_not_grow"].passed
    assert "measured around your code's calls" in slow["test_ops_do_not_grow"].details["note"]
    assert fast["test_transport_is_not_timed"].passed and slow["test_transport_is_not_timed"].passed


def test_a_timing_sample_of_a_call_that_mostly_waits_is_bounded_by_the_wall_clock():
    """A sample loops until the call has executed min_time_s in all, or for 3x that of wall
    time: a cheap call into the worker executes a few microseconds of its round trip, and
    would otherwise loop hundreds of times per sample."""
    from grader.suites import _measure

    calls = []

    def waits() -> None:
        calls.append(1)
        time.sleep(0.0005)  # wall time, next to no execution time

    _measure.best_time_s(waits, repeats=3)
    assert _measure.MIN_LOOPS <= len(calls) <= 1 + 3 * (_measure.MIN_LOOPS + 5), len(calls)


def test_in_place_changes_through_dropped_temporaries_reach_the_candidates_objects():
    """`layer.weight.copy_(w)` and `box.items.append(x)` leave no reference in the judge:
    the change still crosses before the shared object is released. Writes through `.data`
    (PEFT's merge) move no version counter and still cross, both ways."""
    outcome = run_suite(FIXTURES / "shared_suite.py", FIXTURES / "shared_objects.py", "toy", 1,
                        test_timeout_s=60.0)
    assert {t.name: (t.passed, t.message) for t in outcome.tests} == {
        "test_parameter_written_through_a_temporary": (True, ""),
        "test_list_appended_through_a_temporary": (True, ""),
        "test_candidate_writes_through_data": (True, ""),
        "test_judge_writes_through_data": (True, ""),
        "test_new_types_met_on_several_threads_at_once": (True, ""),
        "test_call_then_read_is_a_call_then_its_reads": (True, ""),
        "test_new_then_call_builds_the_argument_in_the_same_request": (True, ""),
        "test_script_makes_fixed_calls_in_one_request": (True, ""),
        "test_plain_reads_cross_as_copies": (True, ""),
        "test_call_many_clones_tensor_arguments_and_copies_results": (True, ""),
        "test_call_many_rows_cross_stacked": (True, ""),
        "test_backward_through_the_candidates_graph": (True, ""),
        "test_tensors_behind_dropped_results_are_released": (True, ""),
        "test_imports_are_frozen_out_of_garbage_collection": (True, ""),
        "test_tensors_cross_with_their_layout": (True, ""),
        "test_backward_leaves_other_gradients_alone": (True, "")}


def test_a_slow_import_is_timed_on_its_own_clock_not_the_tests():
    """The worker imports the candidate's file inside the first test (and again in the test
    after a hang): an import slower than that test's limit, as importing torch is on a loaded
    machine, is not "a loop at module level" — the flat limit applies to it."""
    outcome = run_suite(SUITE, FIXTURES / "slow_import.py", "toy", 1, test_timeout_s=10.0,
                        test_limits={"test_add": 1.0, "test_scale": 1.0, "test_zero": 1.0})
    tests = by_name(outcome)
    assert tests["test_add"].passed and tests["test_scale"].passed, {
        n: t.message for n, t in tests.items()}


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two CPUs")
@pytest.mark.parametrize("mode", ["share", "spin"])
def test_judge_and_worker_share_one_cpu_or_spin_side_by_side(mode, monkeypatch):
    """Sharing: both pinned to the judge's CPU, nobody polls; side by side: both on every
    CPU, polling for the other's answer (grader/engine/cpus.py)."""
    monkeypatch.setenv("KATA_CPU_MODE", mode)
    outcome = run_suite(FIXTURES / "cpu_suite.py", FIXTURES / "cpu_report.py", "toy", 1, test_timeout_s=30.0)
    assert {t.name: (t.passed, t.message, t.details.get("got")) for t in outcome.tests} == {
        "test_judge_and_worker_cpus": (True, "", None)}


def test_the_mode_follows_what_other_processes_use():
    """Side by side only while other work leaves a CPU for each of judge and worker: our own
    polling does not count as load, another grading's CPU does."""
    plan = CpuPlan()
    plan.allowed, plan.usable = frozenset({0, 1}), True
    hz = cpus._TICKS
    # One second: judge and worker each busy the whole time (polling), nothing else runs.
    plan._last = (0.0, 0, 42, 0, 0)
    plan._sample = lambda pid: (1.0, hz, 42, hz, 2 * hz)
    assert plan._measured(42) == "spin"
    # Judge and worker busy half the time each, another grading one whole CPU.
    plan._last = (0.0, 0, 42, 0, 0)
    plan._sample = lambda pid: (1.0, hz // 2, 42, hz // 2, 2 * hz)
    assert plan._measured(42) == "share"
    # A new worker (another pid) started in the window: all its time is ours.
    plan._last = (0.0, 0, 41, 10 * hz, 0)
    plan._sample = lambda pid: (1.0, hz, 42, hz, 2 * hz)
    assert plan._measured(42) == "spin"
    # Too short a window says nothing (jiffies are 10 ms), and is not even sampled.
    plan._last = (time.monotonic(), 0, 42, 0, 0)
    plan._sample = lambda pid: pytest.fail("sampled a window shorter than MIN_INTERVAL_S")
    assert plan._measured(42) is None


def test_the_run_ends_when_the_results_are_in_not_when_the_judge_has_shut_down():
    """The judge says "done" once its worker is gone: its own interpreter shutdown (tenths
    of a second with torch loaded; 30 s in this suite's atexit) is not waited for."""
    outcome = run_suite(FIXTURES / "slow_exit_suite.py", FIXTURES / "good.py", "toy", 1,
                        test_timeout_s=30.0)
    assert [(t.name, t.passed) for t in outcome.tests] == [("test_add", True)]
    assert outcome.duration_s < 15, outcome.duration_s


def test_a_verbatim_tree_from_a_worker_is_checked_before_the_judge_uses_it():
    """Plain reads cross in one piece ("V"). The judge takes one only when it is what the
    item-by-item codec would have built: plain types, strings within the limit, bounded
    depth and size (one list repeated by reference must not make the check walk 2**60
    items). The worker takes the judge's trees as they come."""
    from grader.engine.judge_bridge import JudgeEndpoint
    from grader.worker import codec
    from grader.worker.bridge import Endpoint
    from grader.worker.serve import WorkerEndpoint
    from grader.worker.wire import WireError

    judge_side = Endpoint(None, sign=1)
    good = [(True, [1, 2, 3]), (True, {"total": 3, "parts": (1.0, None, "a", b"b")}), (False, 0)]
    assert judge_side.decode(("V", good)) == good
    deep: list = []
    node = deep
    for _ in range(codec.MAX_DEPTH + 5):
        node.append([])
        node = node[0]
    dag: list = [1]
    for _ in range(60):
        dag = [dag, dag]
    for bad in (deep, dag, ["x" * (codec.MAX_STR_CHARS + 1)], [(True, {1, 2})], [bytearray(b"a")],
                [object()], [1] * (codec.MAX_PLAIN_ITEMS + 1)):
        t0 = time.perf_counter()
        assert not codec.plain_tree(bad)
        with pytest.raises(WireError):
            judge_side.decode(("V", bad))
        assert time.perf_counter() - t0 < 1.0
    assert JudgeEndpoint.VERIFY_VERBATIM and not WorkerEndpoint.VERIFY_VERBATIM


# ---------------------------------------------------------------- a grading split over judges

SPLIT = FIXTURES / "split_suite.py"


def _split(shards=None, name="good", seed=5, **kwargs):
    return run_suite(SPLIT, FIXTURES / f"{name}.py", "toy", seed, test_timeout_s=10.0, shards=shards, **kwargs)


def test_a_split_run_gives_every_test_the_same_draws_in_the_suites_order():
    events = []
    one = _split()
    split = _split([["test_a", "test_c"], ["test_b", "test_d"]], on_event=lambda kind, data: events.append((kind, data)))
    assert [t.name for t in one.tests] == [t.name for t in split.tests] == ["test_a", "test_b", "test_c", "test_d"]
    assert all(not t.passed for t in split.tests)
    # Each test starts from its own seed: the same draw in either run, and not another test's.
    assert [t.message for t in split.tests] == [t.message for t in one.tests]
    assert len({t.message.split()[-1] for t in one.tests}) == 4
    judge = {t.name: t.details["got"] for t in split.tests}
    assert judge["test_a"] == judge["test_c"] != judge["test_b"] == judge["test_d"]
    assert len({t.details["got"] for t in one.tests}) == 1
    # One "collected" event with every test, and every result once.
    collected = [data for kind, data in events if kind == "collected"]
    assert len(collected) == 1 and [t["name"] for t in collected[0]["tests"]] == [t.name for t in one.tests]
    assert sorted(data["name"] for kind, data in events if kind == "result") == ["test_a", "test_b", "test_c", "test_d"]
    # Another seed, other draws.
    assert [t.message for t in _split(seed=6).tests] != [t.message for t in one.tests]


def test_a_test_no_share_names_runs_in_the_first_judge():
    split = _split([["test_a"], ["test_b"]])
    judge = {t.name: t.details["got"] for t in split.tests}
    assert judge["test_a"] == judge["test_c"] == judge["test_d"] != judge["test_b"]
    assert [t.message for t in split.tests] == [t.message for t in _split().tests]


def test_a_split_run_with_a_level_filter_or_a_broken_file():
    split = _split([["test_a", "test_c"], ["test_b", "test_d"]], levels={2})
    assert [t.name for t in split.tests] == ["test_c", "test_d"]
    assert [t.message for t in split.tests] == [t.message for t in _split().tests[2:]]
    broken = _split([["test_a", "test_c"], ["test_b", "test_d"]], name="syntax_error")
    assert "syntax error at line 1" in broken.import_error
    assert len(broken.tests) == 4 and all(not t.passed and "syntax error" in t.message for t in broken.tests)


def test_a_run_of_named_tests_alone_split_or_not():
    events = []
    alone = _split(tests={"test_b", "test_d", "test_unknown"}, levels={1, 2},
                   on_event=lambda kind, data: events.append((kind, data)))
    assert [t.name for t in alone.tests] == ["test_b", "test_d"]
    assert [t.message for t in alone.tests] == [t.message for t in _split().tests[1::2]]
    collected = [data for kind, data in events if kind == "collected"]
    assert [[t["name"] for t in c["tests"]] for c in collected] == [["test_b", "test_d"]]
    split = _split([["test_a"], ["test_c"]], tests={"test_a", "test_c", "test_d"}, levels={2})
    assert [t.name for t in split.tests] == ["test_c", "test_d"]


def test_shards_balance_each_level_by_the_references_times():
    from grader.engine.time_limits import shards_for

    durations = {"a": [3.0, 0.1, 1], "b": [1.0, 0.1, 1], "c": [1.0, 0.1, 1], "d": [0.5, 0.1, 2],
                 "e": [0.4, 0.1, 2], "f": [0.1, 0.1, 3]}
    assert shards_for(durations, 2) == [["a"], ["b", "c", "d", "e", "f"]]
    assert shards_for(durations, 2) == shards_for(dict(reversed(list(durations.items()))), 2)  # deterministic
    assert shards_for(durations, 1) is None and shards_for(None, 2) is None
    assert shards_for(durations, 2, levels={2}) is None  # 0.9 s of work: not worth a second judge
    assert shards_for({**durations, "g": [2.0, 0.1, 2]}, 2, levels={2}) == [["g"], ["d", "e"]]
    assert shards_for({"a": [3.0, 0.1, 1]}, 2) is None  # one test
    assert shards_for(durations, 2, tests={"a", "c", "x"}) == [["a"], ["c"]]
    assert shards_for(durations, 2, tests={"c", "d"}) is None  # 1.5 s: not worth it


def test_the_number_of_judges_comes_from_the_argument_the_environment_or_the_cpus(monkeypatch):
    from grader import grading

    monkeypatch.setenv(grading.ENV_JOBS, "1")
    assert grading.grading_jobs() == 1 and grading.grading_jobs(2) == 2
    monkeypatch.setenv(grading.ENV_JOBS, "two")
    with pytest.raises(KataError, match="KATA_GRADE_JOBS='two' is not a whole number"):
        grading.grading_jobs()
    monkeypatch.delenv(grading.ENV_JOBS)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert grading.grading_jobs() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert grading.grading_jobs() == 2


def test_a_kata_graded_by_two_judges_gets_the_same_scorecard():
    from grader.catalog import load_catalog
    from grader.grading import grade

    kata = load_catalog().get("paged-kv")
    assert kata.judges == 2 and load_catalog().get("mha").judges == 1
    buggy = Path(__file__).parent / "corpus" / "paged_kv" / "buggy_newest_cached_evicted_first.py"
    one, two = grade(kata, buggy, seed=11, jobs=1), grade(kata, buggy, seed=11, jobs=2)
    assert 0 < one.score < 100
    assert [(t.nodeid, t.passed, t.message, t.details.get("input")) for t in one.tests] == \
        [(t.nodeid, t.passed, t.message, t.details.get("input")) for t in two.tests]


def test_a_pytest_plugin_the_user_installed_never_loads_into_the_judge(tmp_path, monkeypatch):
    """An installed plugin (an entry point in group pytest11: anyio's, pytest-cov, ...) is not
    loaded by a judge: the judge's environment turns autoload off and names the one plugin a
    grading needs (hypothesis's). This one would fail every test it saw."""
    site = tmp_path / "site"
    (site / "evil_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "evil_plugin-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: evil-plugin\nVersion: 1.0\n")
    (site / "evil_plugin-1.0.dist-info" / "entry_points.txt").write_text("[pytest11]\nevil = evil_plugin\n")
    marker = tmp_path / "loaded"
    (site / "evil_plugin.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('loaded')\n"
        "def pytest_runtest_call(item):\n"
        "    raise AssertionError('the evil plugin ran')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    # (the plugin is found where the judge looks: with autoload on, pytest would import it)
    from importlib.metadata import entry_points

    monkeypatch.syspath_prepend(str(site))
    assert any(e.name == "evil" for e in entry_points(group="pytest11"))
    outcome = run("good", seed=3)
    assert all(t.passed for t in outcome.tests) and len(outcome.tests) == 3
    assert not marker.exists()


def test_a_cold_grading_of_a_kata_that_uses_torch_runs_in_one_judge():
    """Two judges started cold each import torch, and so do their workers: a kata that uses
    torch splits only where its judges are forked from a process that has (judges_for)."""
    from grader.catalog import load_catalog
    from grader.grading import judges_for

    catalog = load_catalog()
    lora, paged = catalog.get("lora"), catalog.get("paged-kv")
    assert lora.uses_torch and not paged.uses_torch and lora.judges == paged.judges == 2
    assert judges_for(lora, lora.suite_path, forked=lambda: False) == 1
    assert judges_for(lora, lora.suite_path, forked=lambda: True) == 2
    assert judges_for(paged, paged.suite_path, forked=lambda: False) == 2
    assert judges_for(lora, lora.examples_path, forked=lambda: True) == 1
    assert judges_for(catalog.get("mha"), catalog.get("mha").suite_path, forked=lambda: True) == 1
