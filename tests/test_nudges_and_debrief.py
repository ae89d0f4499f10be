"""Interviewer nudges and the debrief's transcript (issue 38, items 5 and 8).

In a mock, a failing hidden test's box leads with the interviewer's question: the question of
the first clarification settling its rules at a revealed level, or its description where the
Ask states the rule. Nothing of a level not revealed is quoted. Each rule is recorded once per
mock as a "nudge" event; the debrief counts the rules met first through a failing grade and
those settled by a clarification asked before the level's first grade, writes the
interviewer's notes in one line, and `kata mock --debrief [ID]` reprints it with the mock's
timeline. The grades here are fake scorecards built from the suite's real test listing (its
metadata, settled_by included): no suite runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader import clock
from grader.catalog import load_catalog
from grader.cli.app import app
from grader.cli.commands import grade as grade_module
from grader.engine.report import Scorecard
from grader.engine.runner import TestResult
from grader.engine.suite_listing import level_rules, list_tests, settling_ids
from grader.nudges import HOLD_TO_THIS, interviewer_question, nudge_for, rules_path
from grader.statement import load_statement
from grader.store import Store

runner = CliRunner()
CATALOG = load_catalog()
KV = CATALOG.get("kv-budget")
KV_TESTS = list_tests(KV.suite_path)


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


@pytest.fixture
def fake_clock():
    fake = clock.FakeClock()
    with clock.use(fake):
        yield fake


def card_of(kata, levels, failing: set[str], path) -> Scorecard:
    """A scorecard of the suite's listed tests of `levels`; those in `failing` fail."""
    tests = []
    for meta in list_tests(kata.suite_path):
        if levels and meta["level"] not in levels:
            continue
        failed = meta["name"] in failing
        tests.append(TestResult(**meta, passed=not failed, message=f"wrong value in {meta['name']}" if failed else "",
                                details={"input": "tp=3", "expected": "ValueError", "got": "12"} if failed else {}))
    return Scorecard(kata=kata.slug, title=kata.title, seed=1, solution=str(path), solution_sha256="0" * 64,
                     tests=tests, duration_s=0.1,
                     level_names={lv.level: lv.name for lv in kata.levels})


@pytest.fixture
def fake_grades(monkeypatch):
    """`kata grade` grades nothing: the tests named in `failing` fail, the others pass."""
    failing: set[str] = set()

    def fake(kata, path, *, seed, levels=None, on_event=None, **extra):
        card = card_of(kata, levels, failing, path)
        for key, value in extra.items():
            setattr(card, key, value)
        return card

    monkeypatch.setattr(grade_module, "grade_file", fake)
    return failing


# ---------------------------------------------------------------------------- the metadata


def test_settled_ids_are_the_union_over_the_rules_naming_a_test_and_the_ask_gives_none():
    rules = {"r1": "test_a", "r2": ("test_a", "test_b"), "r3": "test_c", "r4": ["test_a"]}
    settled = {"r1": "x", "r2": ("y", "x"), "r3": "ask", "r4": ("ask", "z")}
    assert settling_ids(rules, settled) == {"test_a": ("x", "y", "z"), "test_b": ("y", "x"), "test_c": ()}
    assert settling_ids(rules, None) == {} and settling_ids(None, settled) == {}


def test_each_listed_test_carries_the_clarifications_settling_its_rules():
    by_name = {t["name"]: t["settled_by"] for t in KV_TESTS}
    assert by_name["test_ledger_rejects_bad_tp"] == ["tp-invalid"]
    assert by_name["test_param_count_parts"] == ["tied", "head-dim"]
    assert by_name["test_tp_defaults_to_one"] == []  # the Ask says it
    rules = level_rules(rules_path(KV, 1))
    assert len(rules) == 10 and sum(r.detail for r in rules) == 1


# ---------------------------------------------------------------------------- the nudge


def test_a_clarification_is_put_as_the_interviewer_asks_it():
    assert interviewer_question("When is a tp degree invalid?") == "when is a tp degree invalid?"
    assert interviewer_question("GQA: which head?") == "GQA: which head?"
    assert interviewer_question("Can I fork a request that holds no tokens yet?") == \
        'did you ask "Can I fork a request that holds no tokens yet?"'


@pytest.mark.parametrize("slug", sorted(CATALOG.katas))
def test_no_nudge_quotes_a_level_not_revealed(slug):
    """Every test of levels 1..k failing with levels 1..k revealed: no nudge names a later
    level's clarification (its question or its id), even where a test's metadata lists a
    later level's clarification first (it is skipped)."""
    kata = CATALOG.get(slug)
    statement = load_statement(kata)
    clarifications = {c.id: c for c in statement.clarifications()}
    tests = list_tests(kata.suite_path)
    for reached in range(1, len(kata.levels) + 1):
        revealed = set(range(1, reached + 1))
        shown = {c.question for c in statement.clarifications(revealed)}
        later = [c for c in statement.clarifications() if c.level > reached and c.question not in shown]
        for test in (t for t in tests if t["level"] <= reached):
            planted = {**test, "settled_by": [c.id for c in later[:1]] + list(test["settled_by"])}
            for candidate in (test, planted):
                nudge = nudge_for(candidate, clarifications, revealed)
                assert nudge.clarification is None or clarifications[nudge.clarification].level <= reached
                for c in later:
                    assert c.question not in nudge.line and c.question != nudge.question, (
                        f"{slug}: {test['name']} with levels 1..{reached} revealed quotes level {c.level}")


def test_a_nudge_leads_the_box_in_a_mock(fake_clock, fake_grades):
    assert invoke("mock", "kv-budget").exit_code == 0
    fake_grades |= {"test_kv_bytes_per_token", "test_tp_defaults_to_one"}
    graded = invoke("grade", "--seed", "1")
    assert graded.exit_code == 1
    text = flat(graded.output)
    assert "Interviewer: do K and V both count in the cache? In every layer? kv_bytes_per_token" in text
    assert f"Interviewer: {HOLD_TO_THIS} tp defaults to 1" in text  # the Ask states it
    as_json = json.loads(invoke("grade", "--json", "--seed", "1").output)
    nudged = {t["name"]: t["nudge"] for t in as_json["tests"] if t.get("nudge")}
    assert nudged == {"test_kv_bytes_per_token": "do K and V both count in the cache? In every layer?",
                      "test_tp_defaults_to_one": HOLD_TO_THIS}


def test_no_nudge_outside_a_mock(fake_clock, fake_grades, tmp_path):
    fake_grades.add("test_kv_bytes_per_token")
    assert invoke("start", "kv-budget", "-q").exit_code == 0
    timed = invoke("grade", "--seed", "1")
    (tmp_path / "other.py").write_text("def param_count(spec):\n    return 0\n")
    untimed = invoke("grade", "kv-budget", "--file", tmp_path / "other.py", "--seed", "1")
    for result in (timed, untimed):
        assert result.exit_code == 1 and "Interviewer:" not in result.output
        assert "kv_bytes_per_token" in result.output  # the box is there, without a nudge
    with Store() as store:
        assert store.events("kv-budget", kind="nudge") == []


def test_a_nudge_is_recorded_once_per_rule(fake_clock, fake_grades):
    assert invoke("mock", "kv-budget").exit_code == 0
    fake_grades |= {"test_kv_bytes_per_token", "test_gqa_divides_kv_bytes"}  # one rule each, one clarification
    for _ in range(3):
        fake_clock.advance(minutes=2)
        assert invoke("grade", "--seed", "1").exit_code == 1
    with Store() as store:
        events = store.events("kv-budget", kind="nudge")
    assert sorted(e.data["test"] for e in events) == ["test_gqa_divides_kv_bytes", "test_kv_bytes_per_token"]
    assert {e.data["clarification"] for e in events} == {"kv-count"} and all(e.level == 1 for e in events)
    assert all(e.data["rule"] and not e.data["asked_before"] for e in events)
    from grader.timeline import build_timeline

    with Store() as store:
        [session] = store.mock_sessions("kv-budget")
        timeline = build_timeline(store, session, KV)
    # two rules one clarification settles: one line of the timeline
    assert [e["text"] for e in timeline if e["kind"] == "nudge"] == [
        "nudge on level 1: do K and V both count in the cache? In every layer? (2 rules)"]


def test_no_nudge_for_a_file_that_cannot_load_or_code_not_written_yet():
    from grader.nudges import meets_a_rule

    failing = {"passed": False, "message": "wrong value", "details": {}}
    assert meets_a_rule(failing, None)
    assert not meets_a_rule({**failing, "message": "your file has a syntax error"}, "your file has a syntax error")
    assert not meets_a_rule({**failing, "message": "not implemented yet (NotImplementedError)"}, None)
    assert not meets_a_rule({**failing, "passed": True}, None)


# ---------------------------------------------------------------------------- the debrief


def scripted_mock(fake_clock, fake_grades, tmp_path: Path) -> int:
    """kv-budget: three questions (two answered, one the candidate's call) before the first
    grade, which fails three level-1 rules (one of them asked about); a second failing grade;
    level 1 passes at minute 12; a question and a failing grade on level 2 (one nudge); then
    stopped at minute 20 and answered. Returns the mock's id."""
    assert invoke("mock", "kv-budget").exit_code == 0
    fake_clock.advance(minutes=2)
    assert invoke("ask", "When is a tp degree invalid?").exit_code == 0
    assert invoke("ask", "Are the input embedding and the LM head the same matrix?").exit_code == 0
    assert invoke("ask", "Can I use numpy?").exit_code == 0
    assert invoke("hint").exit_code == 0
    fake_clock.advance(minutes=4)
    fake_grades |= {"test_ledger_rejects_bad_tp", "test_kv_bytes_per_token", "test_tp_defaults_to_one"}
    assert invoke("grade", "--seed", "1").exit_code == 1  # minute 6
    fake_clock.advance(minutes=3)
    fake_grades.discard("test_ledger_rejects_bad_tp")
    assert invoke("grade", "--seed", "2").exit_code == 1  # minute 9: nothing new met
    fake_clock.advance(minutes=3)
    fake_grades.clear()
    fake_grades.add("test_fractional_bytes_per_param_are_not_rounded")  # a detail: level 1 still passes
    revealed = invoke("grade", "--seed", "3")  # minute 12
    assert "The interviewer adds level 2" in revealed.output
    fake_clock.advance(minutes=2)
    assert invoke("show", "--spec", "--level", "1").exit_code in (0, 2)
    assert invoke("ask", "And with block_size=None?").exit_code == 0
    fake_clock.advance(minutes=4)
    fake_grades.add("test_max_kv_tokens_in_whole_blocks")
    assert invoke("grade", "--seed", "4").exit_code == 1  # minute 18
    fake_clock.advance(minutes=2)
    stopped = invoke("mock", "--stop")
    assert "The coding part is over (you stopped it)" in stopped.output
    with Store() as store:
        [session] = store.mock_sessions("kv-budget")
        num = len(store.mock(session.id).followups)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"answers": [{"answer": "I would cache the keys."} for _ in range(num)]}))
    answered = invoke("mock", "--answers", answers)
    assert answered.exit_code == 0, answered.output
    return session.id


def test_the_debrief_counts_questions_before_coding_and_nudges(fake_clock, fake_grades, tmp_path):
    session_id = scripted_mock(fake_clock, fake_grades, tmp_path)
    with Store() as store:
        debrief = store.mock(session_id).debrief
        nudges = store.events("kv-budget", session_id=session_id, kind="nudge")
    one, two, three = debrief["levels"]
    # Level 1: three questions before its first grade; tp-invalid and tied settle 2 of its 10
    # rules. Of the three rules its first grade failed, the tp one had been asked about; the
    # grade that passed it failed a detail: 3 nudges.
    assert (one["questions_before_grade"], one["rules_settled_by_questions"], one["num_rules"]) == (3, 2, 10)
    assert one["nudges"] == 3 and one["passed_at_min"] == 12.0
    assert one["details_missed"] == ["fractional bytes_per_param: an odd parameter count's bytes are not rounded"]
    # Level 2: one question (unpaged) before its first grade, which failed whole-blocks: a nudge.
    assert (two["questions_before_grade"], two["rules_settled_by_questions"], two["nudges"]) == (1, 1, 1)
    assert not two["passed"] and three == {"level": 3, "revealed": False}
    assert len(nudges) == 5 and sum(e.data["asked_before"] for e in nudges) == 1
    assert debrief["summary"].startswith(
        "asked 3 clarifying questions before coding (settling 2 of level 1's 10 rules); "
        "1 more before grading level 2 (settling 1 of its ")
    assert "; 3 nudges on level 1, 1 on level 2; level 1 passed at 12 min (1 detail missed), " \
           "level 2 not passed; follow-ups " in debrief["summary"]


def test_mock_debrief_reprints_the_latest_with_its_timeline(fake_clock, fake_grades, tmp_path):
    session_id = scripted_mock(fake_clock, fake_grades, tmp_path)
    shown = invoke("mock", "--debrief")
    assert shown.exit_code == 0, shown.output
    text = flat(shown.output)
    assert "Debrief: mock of kv-budget" in text and "the interviewer's notes: asked 3 clarifying questions" in text
    assert "level 1 passed with 1 detail missed: fractional bytes_per_param" in text
    assert "timeline (minutes from the start):" in text
    for line in ("0 min the mock starts: level 1 (Count) revealed",
                 '2 min asked "When is a tp degree invalid?": answered (level 1)',
                 '2 min asked "Can I use numpy?": your call', "2 min hint 1 of level 1",
                 "6 min graded 76/100: level 1 failed",
                 "6 min nudge on level 1: do K and V both count in the cache? In every layer?",
                 f"6 min nudge on level 1: {HOLD_TO_THIS} tp defaults to 1",
                 "6 min nudge on level 1: when is a tp degree invalid? (asked about before)",
                 "12 min level 2 (Capacity) revealed", "20 min the coding part ends (stopped)"):
        assert line in text, line
    assert text.index("12 min graded") < text.index("12 min level 2 (Capacity) revealed")
    assert text.count("nudge on level 1") == 4  # the second grade met no new rule
    assert "12 min nudge on level 1: can bytes_per_param be fractional, and do you round?" in text
    assert flat(invoke("mock", "--debrief", str(session_id)).output) == text
    assert flat(invoke("mock", "--debrief", "kv-budget").output) == text
    data = json.loads(invoke("mock", "--debrief", "--json").output)
    assert data["session_id"] == session_id and data["debrief"]["levels"][0]["nudges"] == 3
    kinds = [e["kind"] for e in data["debrief"]["timeline"]]
    assert kinds[0] == "start" and kinds.count("grade") == 4 and kinds.count("nudge") == 5
    assert "followup" in kinds and kinds.index("end") < kinds.index("followup")
    minutes = [e["minute"] for e in data["debrief"]["timeline"]]
    assert minutes == sorted(minutes)


def test_history_lists_the_ids_the_debrief_takes(fake_clock, fake_grades, tmp_path):
    session_id = scripted_mock(fake_clock, fake_grades, tmp_path)
    listed = invoke("history", "--mock")
    assert f"{session_id} " in listed.output and "kata mock --debrief ID" in flat(listed.output)


@pytest.mark.parametrize("which,message", [("99", "no mock has the id 99"), (None, "no finished mock yet"),
                                           ("rope", "no finished mock of rope yet")])
def test_a_debrief_that_does_not_exist_says_what_to_do(which, message):
    result = invoke("mock", "--debrief", *([which] if which else []))
    assert result.exit_code == 2 and message in flat(result.output)
    assert "kata history --mock" in flat(result.output) or "starts one" in flat(result.output)


def test_a_running_or_unanswered_mock_has_no_debrief_yet(fake_clock, tmp_path):
    assert invoke("mock", "rope").exit_code == 0
    with Store() as store:
        [session] = store.mock_sessions("rope")
        timed = store.start_session("lora", tmp_path / "lora.py", 75)
    running = invoke("mock", "--debrief", str(session.id))
    assert running.exit_code == 2 and "still running" in running.output
    invoke("mock", "--stop")
    waiting = invoke("mock", "--debrief", str(session.id))
    assert waiting.exit_code == 2 and "waits for your follow-up answers" in flat(waiting.output)
    assert "not a mock" in invoke("mock", "--debrief", str(timed.id)).output
    assert invoke("mock", "--debrief", "--stop").exit_code == 2


def test_an_unfinished_mock_signal_names_its_details_missed(fake_clock, fake_grades):
    """`kata history --mock` and `kata progress` of a running mock: its signal from the pass
    times, with the details its passed levels missed, as a session's signal says it."""
    assert invoke("mock", "kv-budget").exit_code == 0
    fake_grades.add("test_fractional_bytes_per_param_are_not_rounded")
    fake_clock.advance(minutes=10)
    assert invoke("grade", "--seed", "1").exit_code == 1  # level 1 passes, a detail missed
    [row] = json.loads(invoke("history", "--mock", "--json").output)["mocks"]
    assert row["state"] == "running" and row["signal"] == "Lean hire, 1 detail missed"
    from grader.progress import kata_progress

    with Store() as store:
        assert kata_progress(store, KV).mocks[0]["signal"] == "Lean hire, 1 detail missed"


def test_the_kata_most_needed_is_never_an_excluded_one():
    """The debrief's "practise next" names another kata than the one just mocked (the exclude
    set was compared to a slug as a whole, so it excluded nothing)."""
    from grader.progress import most_needed

    with Store() as store:
        first, _ = most_needed(CATALOG, store)
        other, _ = most_needed(CATALOG, store, exclude=frozenset({first.slug}))
    assert other.slug != first.slug
