"""Core rules and details (issue 38, item 6): a test is a detail of its level when the level's
RULES map names it only under rules of DETAILS. A level passes when its core tests pass; a
failed detail lowers the score, is listed, and the interview signal says so. The same rule
decides a session's level clocks, a mock's reveals, the debrief and the corpus checks."""

from __future__ import annotations

import json
import textwrap

import pytest

from grader import clock
from grader.catalog import load_catalog
from grader.debrief import first_failure
from grader.engine.report import LevelScore, Scorecard, interview_signal, level_passed
from grader.engine.runner import TestResult
from grader.engine.suite_listing import detail_tests, list_tests
from grader.sessions import plan_grade, session_details_missed, session_signal
from grader.store import Store
from tests.kata_testing import BuggyEntry, assert_rejected_at_level, corpus_file, grade_file, rejection_problem
from tests.test_load_errors import _collected

KV_BUDGET_DETAILS = {"test_fractional_bytes_per_param_are_not_rounded", "test_zero_reserve_means_no_reserve",
                     "test_no_room_gives_zero_not_an_error"}


def _test(name: str, level: int, passed: bool, detail: bool = False, weight: float = 1.0) -> TestResult:
    return TestResult(nodeid=f"k/test_level{level}.py::{name}", name=name, level=level, category="correctness",
                      weight=weight, description=name.replace("_", " "), passed=passed, detail=detail)


def _card(tests: list[TestResult], **extra) -> Scorecard:
    return Scorecard(kata="k", title="K", seed=1, solution="k.py", solution_sha256="0" * 64, tests=tests,
                     duration_s=0.1, **extra)


# ---------------------------------------------------------------------------- the pass rule


def test_a_level_passes_when_its_core_tests_pass_and_a_missed_detail_lowers_the_score():
    card = _card([_test("core_a", 1, True, weight=3), _test("dtypes", 1, False, detail=True),
                  _test("core_b", 2, True), _test("empty", 2, True, detail=True),
                  _test("core_c", 3, False), _test("edge", 3, False, detail=True)])
    one, two, three = card.levels
    assert one.passed and one.score == 75 and one.details_missed == ["dtypes"]
    assert two.passed and two.score == 100 and two.details_missed == []
    assert not three.passed and three.details_missed == ["edge"]  # listed, but the level failed anyway
    assert not card.passed and card.score < 100  # "passed" stays: every test, details too
    assert card.signal == "Hire, 1 detail missed (untimed)"  # level 3's detail: not a counted level
    data = card.to_dict()
    assert data["levels"][0]["details_missed"] == ["dtypes"] and data["tests"][1]["detail"] is True
    assert json.loads(json.dumps(data))["levels"][0]["passed"] is True


def test_a_failed_core_test_fails_its_level_whatever_its_details_do():
    assert not level_passed([_test("core", 1, False), _test("detail", 1, True, detail=True)])
    assert level_passed([_test("core", 1, True), _test("detail", 1, False, detail=True)])
    assert level_passed([_test("core", 1, True)]) and not level_passed([])
    # a grading of a level's detail tests alone (a corpus check's rejecting tests): no core test failed
    assert level_passed([_test("detail", 1, False, detail=True)])


def _levels(*passed_with_missed: tuple[bool, int]) -> list[LevelScore]:
    return [LevelScore(n, "", passed, 0, 0, 0, details_missed=[f"d{i}" for i in range(missed)])
            for n, (passed, missed) in enumerate(passed_with_missed, start=1)]


@pytest.mark.parametrize("levels,overtime,timed,signal", [
    (((True, 0), (True, 0), (True, 0)), False, True, "Strong hire"),
    (((True, 0), (True, 0), (True, 1)), False, True, "Strong hire, 1 detail missed"),
    (((True, 1), (True, 0), (True, 2)), False, False, "Strong hire, 3 details missed (untimed)"),
    (((True, 0), (True, 2), (False, 1)), False, True, "Hire, 2 details missed"),
    (((True, 1), (False, 0), (True, 4)), False, True, "Lean hire, 1 detail missed"),  # levels count in order
    (((False, 1), (True, 0), (True, 0)), False, True, "No hire"),
    (((True, 1), (True, 0), (True, 0)), True, True, "No hire (overtime: graded after the time ran out)"),
])
def test_the_signal_counts_a_level_passed_with_missed_details_and_says_so(levels, overtime, timed, signal):
    assert interview_signal(_levels(*levels), overtime, timed=timed) == signal


# ---------------------------------------------------------------------------- which tests are details


def test_a_test_is_a_detail_when_only_detail_rules_name_it():
    rules = {"core rule": "test_core", "detail rule": ("test_detail", "test_both"),
             "another core rule": ["test_both", "test_core"], "second detail": "test_detail"}
    assert detail_tests(rules, {"detail rule", "second detail"}) == {"test_detail"}
    assert detail_tests(rules, set()) == frozenset() and detail_tests(rules, None) == frozenset()
    assert detail_tests(None, {"detail rule"}) == frozenset() and detail_tests("x", 3) == frozenset()


SUITE_LEVEL1 = '''
from grader.protocol import kata_test

RULES = {"the core rule": "test_core", "an edge": ("test_edge", "test_in_another_file"),
         "shared": ("test_core", "test_shared"), "shared edge": "test_shared"}
DETAILS = {"an edge", "shared edge"}


@kata_test(level=1, category="correctness", description="core")
def test_core(solution):
    pass


@kata_test(level=1, category="edge cases", description="an edge")
def test_edge(solution):
    pass


@kata_test(level=1, category="correctness", description="named by a core rule too")
def test_shared(solution):
    pass


@kata_test(level=1, category="correctness", description="no rule names it")
def test_unnamed(solution):
    pass
'''
SUITE_LEVEL1_MORE = '''
from grader.protocol import kata_test


@kata_test(level=1, category="edge cases", description="in test_level1_more.py, a detail of test_level1.py")
def test_in_another_file(solution):
    pass
'''
SUITE_LEVEL2 = '''
from grader.protocol import kata_test

RULES = {"level two": "test_two"}


@kata_test(level=2, category="correctness", description="a level without DETAILS")
def test_two(solution):
    pass
'''


def test_the_judge_and_the_source_listing_tag_the_same_tests_as_details(tmp_path):
    """The judge reads a level's RULES/DETAILS from its test_level<N>.py at collection, the
    listing (for files that cannot load) from the source: the same tags, for a test in another
    file of its level too."""
    suite = tmp_path / "toy_suite"
    suite.mkdir()
    (suite / "__init__.py").write_text("")
    for name, text in (("test_level1.py", SUITE_LEVEL1), ("test_level1_more.py", SUITE_LEVEL1_MORE),
                       ("test_level2.py", SUITE_LEVEL2)):
        (suite / name).write_text(textwrap.dedent(text))
    listed = list_tests(suite)
    assert {t["name"]: t["detail"] for t in listed} == {
        "test_core": False, "test_edge": True, "test_shared": False, "test_unnamed": False,
        "test_in_another_file": True, "test_two": False}
    assert _collected([suite], tmp_path) == listed


def test_a_details_map_the_source_cannot_evaluate_leaves_listing_to_the_judge(tmp_path):
    suite = tmp_path / "suite.py"
    suite.write_text(SUITE_LEVEL1.replace('DETAILS = {"an edge", "shared edge"}', 'DETAILS = set(RULES)'))
    assert list_tests(suite) is None


def test_every_level_of_every_suite_has_core_tests_and_kv_budget_has_its_details():
    for kata in load_catalog().katas.values():
        listed = list_tests(kata.suite_path)
        assert listed is not None, kata.slug
        for level in kata.levels:
            core = [t["name"] for t in listed if t["level"] == level.level and not t["detail"]]
            assert core, f"{kata.slug} level {level.level} has no core test: DETAILS names every rule"
    kv_budget = list_tests(load_catalog().get("kv-budget").suite_path)
    assert {t["name"] for t in kv_budget if t["detail"]} == KV_BUDGET_DETAILS


# ---------------------------------------------------------------------------- end to end


def test_rounding_fractional_bytes_passes_kv_budget_level_1_with_one_detail_missed():
    """buggy_weight_bytes_rounded.py rounds 16.5 bytes of 4-bit weights to 16: only the detail
    test of fractional bytes_per_param fails."""
    card = grade_file("kv-budget", corpus_file("kv-budget", "buggy_weight_bytes_rounded.py"))
    one = card.levels[0]
    assert [t.name for t in card.tests if not t.passed] == ["test_fractional_bytes_per_param_are_not_rounded"]
    assert one.passed and one.details_missed == [
        "fractional bytes_per_param: an odd parameter count's bytes are not rounded"]
    assert all(lv.passed for lv in card.levels) and card.score < 100 and not card.passed
    assert card.signal == "Strong hire, 1 detail missed (untimed)"


# ---------------------------------------------------------------------------- corpus semantics


def test_the_corpus_check_wants_a_detail_bug_to_pass_its_level_and_a_core_bug_to_fail_it():
    detail_bug = BuggyEntry(file="buggy_d.py", level=1, rejected_by=("dtypes",))
    only_detail = _card([_test("core", 1, True), _test("dtypes", 1, False, detail=True)])
    assert rejection_problem("k", detail_bug, only_detail) is None
    core_too = _card([_test("core", 1, False), _test("dtypes", 1, False, detail=True)])
    assert "must pass, but core tests failed: ['core']" in rejection_problem("k", detail_bug, core_too)
    core_bug = BuggyEntry(file="buggy_c.py", level=1, rejected_by=("core", "dtypes"))
    assert rejection_problem("k", core_bug, core_too) is None
    assert "only details of the level failed" in rejection_problem("k", core_bug, only_detail)
    declared = BuggyEntry(file="buggy_d.py", level=1, rejected_by=("dtypes",), detail=False)
    assert "detail = false" in rejection_problem("k", declared, only_detail)


def test_a_detail_bug_is_checked_against_every_test_of_its_level():
    """Under the first seed a core bug is graded with the tests below its level and its
    rejecting tests; a detail bug with its whole level, whose core tests must all pass."""
    from tests.kata_testing import corpus_manifest, deciding_tests

    entries = {e.file: e for e in corpus_manifest("kv-budget").buggy}
    assert deciding_tests("kv-budget", entries["buggy_zero_seqs_raise.py"]) is None
    assert deciding_tests("kv-budget", entries["buggy_zero_reserve_means_default.py"]) is not None  # core too
    card = assert_rejected_at_level("kv-budget", entries["buggy_zero_seqs_raise.py"])
    two = card.levels[1]
    assert two.passed and two.num_tests > 1 and two.details_missed and card.score < 100


# ---------------------------------------------------------------------------- sessions and the debrief


def _graded(*levels: tuple[int, bool, list[str]]) -> dict:
    return {"kata": "kv-budget", "seed": 1, "score": 90, "passed": False, "solution": "x.py",
            "solution_sha256": "0" * 64, "hints_used": 0, "tests": [],
            "levels": [{"level": n, "passed": p, "details_missed": d} for n, p, d in levels]}


def test_a_mock_reveals_the_next_level_when_the_revealed_one_misses_only_a_detail(tmp_path):
    kata = load_catalog().get("kv-budget")
    fake = clock.FakeClock()
    with clock.use(fake), Store(tmp_path / "db.sqlite3") as store:
        session = store.start_session(kata.slug, "x.py", 75, mode="mock",
                                      levels=[(lv.level, lv.minutes) for lv in kata.levels])
        fake.advance(minutes=10)
        card = _graded((1, True, ["fractional bytes"]))
        effect = plan_grade(store, session, kata, card)
        assert effect.newly_passed == (1,) and effect.revealed == 2
        assert effect.signal == "Lean hire, 1 detail missed"
        store.record_attempt(card, source="a", session_id=session.id, passed_levels=(1,), reveal_level=2)
        fake.advance(minutes=10)  # the detail fixed in time: no longer missed
        fixed = _graded((1, True, []), (2, False, []))
        assert plan_grade(store, session, kata, fixed).signal == "Lean hire"
        store.record_attempt(fixed, source="b", session_id=session.id)
        fake.advance(minutes=60)  # after the deadline: a grade missing it again does not count
        assert session_details_missed(store, session, _graded((1, True, ["again"]))) == {1: []}


def test_the_session_signal_names_the_details_its_counted_levels_missed():
    from tests.test_sessions import DEADLINE, levels
    from grader.sessions import _clocks

    clocks = _clocks(levels(20, 50, None))
    assert session_signal(clocks, DEADLINE, {1: ["a"], 2: ["b", "c"], 3: ["d"]}) == "Hire, 3 details missed"
    assert session_signal(clocks, DEADLINE) == "Hire"


def test_the_debriefs_first_failure_is_the_core_test_that_failed_the_level():
    card = {"tests": [{"level": 1, "passed": False, "detail": True, "description": "an edge"},
                      {"level": 1, "passed": False, "detail": False, "description": "the core rule"},
                      {"level": 2, "passed": False, "description": "level two"}]}
    assert first_failure(card) == "L1 the core rule"
