"""`kata mock` end to end with Typer's CliRunner and an injected clock: levels revealed one
at a time, never shown before, follow-ups answered from a file or typed, the debrief recorded;
sessions that survive a grade and the signal from the levels' pass times."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader import clock
from grader.catalog import load_catalog
from grader.cli.app import app
from grader.cli.commands import grade as grade_module
from grader.cli.commands import mock as mock_module
from grader.engine.report import Scorecard
from grader.engine.runner import TestResult as EngineTest
from grader.statement import load_statement
from grader.store import Store
from tests.kata_testing import REPO_ROOT
from tests.test_katas import _declared_api

runner = CliRunner()
REFERENCE = REPO_ROOT / "reference" / "paged_kv.py"
PAGED_KV = load_catalog().get("paged-kv")


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False, input=input)


def workspace_file() -> Path:
    return Path(os.environ["KATA_WORKSPACE"]) / "paged_kv.py"


@pytest.fixture
def fake_clock():
    fake = clock.FakeClock()
    with clock.use(fake):
        yield fake


def hidden_terms(level: int) -> dict[str, int]:
    """What would give away a level above `level`: the level's name and the functions,
    classes and defaulted parameters its API introduces (term -> the level it belongs to)."""
    statement = load_statement(PAGED_KV)
    terms, seen = {}, set()
    for section in statement.levels:
        introduced = _declared_api(section.body) - seen
        seen |= _declared_api(section.body, with_every_parameter=True)
        if section.number > level:
            terms[section.name] = section.number
            terms.update({name: section.number for name in introduced})
    return terms


def assert_hides_levels_above(level: int, text: str, what: str) -> None:
    for term, number in hidden_terms(level).items():
        pattern = re.escape(term) if " " in term else rf"(?<![.\w]){re.escape(term)}\b"
        assert not re.search(pattern, text, re.IGNORECASE), (
            f"{what} shows {term!r} of level {number} while only levels 1..{level} are revealed")


def test_the_hidden_terms_are_found_where_they_are(fake_clock):
    """The leak check can fail: the full statement names every later level."""
    with pytest.raises(AssertionError, match="of level 2"):
        assert_hides_levels_above(1, PAGED_KV.statement_path.read_text(), "the statement")
    assert {"fork", "pop_copies", "allocate_prompt", "Prefix caching"} <= set(hidden_terms(1))


def test_a_full_mock_of_paged_kv_end_to_end(fake_clock, tmp_path):
    outputs: list[tuple[int, str, str]] = []  # (levels revealed once it ran, command, output)

    def run(*args: str, input: str | None = None):
        result = invoke(*args, input=input)
        with Store() as store:
            [session] = store.mock_sessions("paged-kv")
            revealed = sum(lv.revealed_at is not None for lv in store.session_levels(session.id))
        outputs.append((revealed, " ".join(map(str, args)), result.output))
        return result

    started = run("mock", "paged-kv")
    assert started.exit_code == 0, started.output
    assert "Level 1 — Allocate and free (~30 min)" in started.output and "PagedAttention" in started.output
    assert "Level 2" not in started.output and "level 1 ~30 min" in started.output
    assert "Level 1: write it here" in workspace_file().read_text()  # not the stub: it holds every level
    assert "def fork" not in workspace_file().read_text()

    # Level 1: the empty start fails; a hint; 12 minutes later the reference passes level 1.
    fake_clock.advance(minutes=5)
    failed = run("grade", "--json", "--seed", "1")
    assert failed.exit_code == 1
    card = json.loads(failed.output)
    assert [lv["level"] for lv in card["levels"]] == [1]  # only the revealed level was graded
    assert card["session"]["revealed_level"] is None and card["signal"] == "No hire"
    run("hint")
    run("show")
    run("status", "--json")
    run("check", "--json")
    workspace_file().write_text(REFERENCE.read_text())
    fake_clock.advance(minutes=7)
    passed1 = run("grade", "--seed", "2")
    assert passed1.exit_code == 0, passed1.output
    assert "The interviewer adds level 2" in passed1.output
    assert "Level 2 — Fork and copy-on-write (~25 min)" in passed1.output and "fork(" in passed1.output
    assert "Level 3" not in passed1.output

    # Level 2: revealed at minute 12; `kata show` includes it; passed 30 minutes later (over its 25).
    shown = run("show")
    assert "Level 2 — Fork and copy-on-write" in shown.output and "Level 1 — Allocate" in shown.output
    status = json.loads(run("status", "--json").output)["sessions"][0]
    assert status["mode"] == "mock" and [lv["revealed"] for lv in status["levels"]] == [True, True, False]
    assert status["levels"][0]["used_s"] == 12 * 60 and status["levels"][1]["used_s"] == 0
    assert run("hint", "--level", "3").exit_code == 2  # never a hint of a level not revealed
    run("hint", "--level", "2")
    run("check")
    fake_clock.advance(minutes=30)
    passed2 = json.loads(run("grade", "--json", "--seed", "3").output)
    assert [lv["level"] for lv in passed2["levels"]] == [1, 2] and passed2["passed"]
    assert passed2["session"]["revealed_level"]["level"] == 3
    assert "Prefix caching" in passed2["session"]["revealed_level"]["statement"]
    assert passed2["signal"] == "Hire"  # levels 1 and 2 passed in time so far

    # Level 3: passed 10 minutes later; the coding part ends and two follow-ups are asked.
    fake_clock.advance(minutes=10)
    passed3 = run("grade", "--seed", "4")
    assert passed3.exit_code == 0, passed3.output
    assert "The coding part is over (every level passed)" in passed3.output
    with Store() as store:
        [session] = store.mock_sessions("paged-kv")
        asked = store.mock(session.id).followups
    assert len(asked) == 2 and all(q["question"] in " ".join(passed3.output.split()) for q in asked)
    assert session.status == "ended" and session.end_reason == "passed"

    answers = tmp_path / "answers.toml"
    answers.write_text('[[answers]]\nanswer = "An OrderedDict keyed by block id."\ncovered = [1, 2]\n\n'
                       '[[answers]]\nanswer = """\nTwo lines\nof answer.\n"""\ncovered = []\n')
    debriefed = run("mock", "--answers", answers)
    assert debriefed.exit_code == 0, debriefed.output
    text = " ".join(debriefed.output.split())
    assert "what an interviewer listens for" in text and asked[0]["points"][0] in text
    assert "Debrief: mock of paged-kv" in text and "interview signal: Strong hire" in text
    assert f"follow-ups: you covered 2 of {sum(len(q['points']) for q in asked)} points" in text
    assert "practise next: pace on level 2 (Fork and copy-on-write)" in text  # 30 min against ~25

    history = json.loads(run("history", "--mock", "--json").output)
    [row] = history["mocks"]
    debrief = row["debrief"]
    assert row["kata"] == "paged-kv" and row["state"] == "done" and row["signal"] == "Strong hire"
    assert [lv["used_s"] for lv in debrief["levels"]] == [12 * 60, 30 * 60, 10 * 60]
    assert [lv["grade_attempts"] for lv in debrief["levels"]] == [2, 1, 1]
    assert [lv["hints"] for lv in debrief["levels"]] == [1, 1, 0]
    [failure] = debrief["levels"][0]["failed_attempts"]
    # The mock's file starts with the imports alone: it cannot load (nothing of the API).
    assert failure["first_failure"].startswith("your file could not be loaded: your file defines none")
    assert "fork" not in failure["first_failure"] and failure["score"] == 0  # nothing of level 2
    assert [q["covered"] for q in debrief["followups"]] == [[1, 2], []]
    assert debrief["followups"][0]["answer"] == "An OrderedDict keyed by block id."
    assert debrief["coverage"]["covered"] == 2 and debrief["end_reason"] == "passed"
    assert debrief["summary"] == ("asked no clarifying question before coding; no nudges; level 1 passed at "
                                  "12 min, level 2 at 42 min, level 3 at 52 min; follow-ups 2 of "
                                  f"{debrief['coverage']['points']} points")  # no file loaded: no rule met
    assert json.loads(run("history", "--json").output)["attempts"][0]["kind"] == "mock"

    assert [level for level, _, _ in outputs][:8] == [1] * 6 + [2, 2]
    for level, command, out in outputs:
        assert_hides_levels_above(level, out, f"`kata {command}`")


def _stub_grade(passing: set[int]):
    """A fake grade: one test per graded level, passing when the level is in `passing`."""
    calls = []

    def fake(kata, path, *, seed, levels=None, on_event=None, **extra):
        calls.append(levels)
        graded = sorted(levels) if levels else [lv.level for lv in kata.levels]
        tests = [EngineTest(f"t{n}", f"t{n}", n, "correctness", 1.0, f"level {n} works", n in passing,
                            "" if n in passing else "wrong") for n in graded]
        return Scorecard(kata=kata.slug, title=kata.title, seed=seed, solution=str(path),
                         solution_sha256="0" * 64, tests=tests, duration_s=0.1, **extra)

    return fake, calls


def test_time_running_out_ends_the_mock_and_a_late_grade_is_overtime(fake_clock, monkeypatch):
    fake, calls = _stub_grade({1})
    monkeypatch.setattr(grade_module, "grade_file", fake)
    assert invoke("mock", "paged-kv", "--minutes", "20").exit_code == 0
    fake_clock.advance(minutes=25)
    late = json.loads(invoke("grade", "--json").output)
    assert calls == [{1}] and late["overtime"] and late["session"]["ended"] == "time"
    assert late["session"]["revealed_level"] is None  # nothing is revealed after the deadline
    assert late["signal"] == "No hire (overtime: level 1 passed after the time ran out)"
    assert len(late["mock"]["followups"]) >= 1
    waiting = invoke("mock", "--json")
    assert json.loads(waiting.output)["waiting_for"] == "answers"


def test_status_warns_at_the_deadline_and_the_mock_ends_at_the_next_command(fake_clock):
    assert invoke("mock", "paged-kv", "--minutes", "30").exit_code == 0
    fake_clock.advance(minutes=27)
    near = invoke("status")
    assert "warning:" in near.output and "3 min left" in near.output
    fake_clock.advance(minutes=4)
    over = invoke("mock")
    assert "The coding part is over (the time ran out)" in over.output
    with Store() as store:
        [session] = store.mock_sessions("paged-kv")
    assert session.end_reason == "time" and session.ended_at == session.deadline


def test_a_stopped_mock_asks_the_follow_ups_in_the_terminal(fake_clock, monkeypatch):
    assert invoke("mock", "paged-kv").exit_code == 0
    fake_clock.advance(minutes=20)
    listed = invoke("mock", "--stop")  # not a terminal: the questions, and how to answer
    assert "The coding part is over (you stopped it)" in listed.output and "--answers" in listed.output
    with Store() as store:
        [session] = store.mock_sessions("paged-kv")
        num = len(store.mock(session.id).followups)
    assert num >= 1
    monkeypatch.setattr(mock_module, "interactive", lambda: True)
    answers = ["a deque and a dict\nsecond line", "no idea"][:num]
    typed = "".join(a + "\n\n" for a in answers) + "seven\n1, 2\n" + "\n" * (num - 1)
    asked = invoke("mock", input=typed)  # a terminal now: the same questions are asked
    assert asked.exit_code == 0, asked.output
    assert "'seven' is not a list of point numbers" in " ".join(asked.output.split())  # asked again
    with Store() as store:
        record = store.mock(session.id)
    assert record.answers == answers
    assert record.marks == [[1, 2], None][:num] and record.debrief["end_reason"] == "stopped"
    assert record.debrief["signal"] == "No hire"
    assert record.debrief["practise_next"].startswith("level 1 of paged-kv (Allocate and free)")
    # Stopped at level 1: no question may give away the later levels.
    for question in record.followups:
        assert_hides_levels_above(1, " ".join([question["question"], *question["points"]]), "a follow-up")
    assert [lv.get("revealed") for lv in record.debrief["levels"]] == [True, False, False]


def test_answers_are_kept_as_first_recorded_and_marks_can_follow(fake_clock, tmp_path):
    assert invoke("mock", "paged-kv").exit_code == 0
    stopped = invoke("mock", "--stop")
    assert "kata mock --answers FILE" in " ".join(stopped.output.split())
    answers = tmp_path / "answers.json"
    with Store() as store:
        num = len(store.mock(store.mock_sessions("paged-kv")[0].id).followups)
    answers.write_text(json.dumps({"answers": [{"answer": f"answer {i}"} for i in range(num)]}))
    first = invoke("mock", "--answers", answers)
    assert first.exit_code == 0 and "(scored by the answer keys)" in first.output
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps({"answers": [{"answer": "better", "covered": []} for _ in range(num)]}))
    refused = invoke("mock", "--answers", changed)
    assert refused.exit_code == 2 and "recorded already" in refused.output
    answers.write_text(json.dumps({"answers": [{"answer": f"answer {i}", "covered": [1]} for i in range(num)]}))
    marked = json.loads(invoke("mock", "--answers", answers, "--json").output)
    assert marked["debrief"]["coverage"]["covered"] == num
    assert invoke("mock", "--answers", answers).exit_code == 2  # nothing waits any more


@pytest.mark.parametrize("text,message", [
    ("[[answers]]\nanswer = 'one'\n", "expected 2 [[answers]] tables"),
    ("[[answers]]\nanswer = ''\n[[answers]]\nanswer = 'x'\n", "field 'answer' must be non-empty"),
    ("[[answers]]\nanswer = 'a'\ncovered = [9]\n[[answers]]\nanswer = 'b'\ncovered = []\n", "[9] not among"),
    ("answers = [", "is not valid TOML"),
])
def test_a_bad_answers_file_names_the_problem(tmp_path, text, message):
    from grader.errors import KataError
    from grader.mock import read_answers

    path = tmp_path / "answers.toml"
    path.write_text(text)
    questions = [{"question": "q1", "points": ["a", "b"]}, {"question": "q2", "points": ["c"]}]
    with pytest.raises(KataError, match=re.escape(message)):
        read_answers(path, questions)


def test_mock_without_a_slug_picks_the_kata_most_needed_and_says_why(fake_clock, tmp_path):
    from grader.progress import most_needed

    cat = load_catalog()
    with Store() as store:
        for kata in cat.katas.values():  # every kata attempted, timed, at every level
            session = store.start_session(kata.slug, tmp_path / "x.py", 75)
            score = {"rope": 30, "mha": 30, "ppo": 90}.get(kata.slug, 100)
            store.record_attempt(_card(kata, score), source="x", session_id=session.id)
            store.end_session(session.id, "stopped")
            fake_clock.advance(minutes=1)
        kata, why = most_needed(cat, store)
    assert kata.slug == "mha" and "lowest best score (30/100" in why and "longest ago" in why
    result = invoke("mock", "--json")
    assert json.loads(result.output)["kata"] == "mha"


def test_a_kata_never_attempted_comes_first(fake_clock, tmp_path):
    cat = load_catalog()
    with Store() as store:
        for kata in cat.katas.values():
            if kata.slug != "scheduler":
                session = store.start_session(kata.slug, tmp_path / "x.py", 75)
                store.record_attempt(_card(kata, 10), source="x", session_id=session.id)
        store.record_attempt(_card(cat.get("scheduler"), 100), source="x", session_id=None)  # untimed
    started = invoke("mock")
    assert "mock interview: scheduler (you have never attempted it" in " ".join(started.output.split())


def _card(kata, score: int) -> dict:
    return {"kata": kata.slug, "seed": 1, "score": score, "passed": score == 100, "solution": "x.py",
            "solution_sha256": "0" * 64, "hints_used": 0,
            "levels": [{"level": lv.level, "passed": score == 100} for lv in kata.levels]}


def test_what_would_show_later_levels_is_refused_during_a_mock(fake_clock):
    assert invoke("mock", "paged-kv").exit_code == 0
    for command in (["reveal", "paged-kv", "--force"], ["notebook", "paged-kv"], ["bench", "paged-kv"]):
        refused = invoke(*command)
        assert refused.exit_code == 2 and "later levels" in " ".join(refused.output.split()), command
        assert_hides_levels_above(1, refused.output, " ".join(command))
    again = invoke("start", "paged-kv", "-q")
    assert "a mock of paged-kv is running" in again.output
    assert invoke("stop", "--json").exit_code == 0  # `kata stop` ends a mock as `kata mock --stop` does
    assert invoke("notebook", "paged-kv").exit_code == 0


def test_reset_during_a_mock_restores_the_mocks_file_not_the_full_stub(fake_clock):
    """The kata's stub declares every level's API; a reset in a mock must not hand it over,
    and the candidate's file is backed up first. After the mock, reset gives the stub again."""
    assert invoke("mock", "paged-kv").exit_code == 0
    started = workspace_file().read_text()
    workspace_file().write_text(started + "\nmine = 1\n")
    reset = invoke("reset", "paged-kv")
    assert reset.exit_code == 0 and "backed up" in reset.output
    assert workspace_file().read_text() == started
    assert_hides_levels_above(1, workspace_file().read_text(), "the file kata reset wrote")
    backups = [p for p in workspace_file().parent.rglob("*") if p.is_file() and "mine = 1" in p.read_text()]
    assert backups, "the candidate's file was not backed up"
    assert invoke("stop", "--json").exit_code == 0
    assert invoke("reset", "paged-kv").exit_code == 0
    assert workspace_file().read_text() == PAGED_KV.stub_path.read_text()


@pytest.mark.parametrize("slug", sorted(load_catalog().katas))
def test_follow_ups_never_give_away_a_level_not_reached(slug, tmp_path):
    from grader.mock import choose_followups

    kata = load_catalog().get(slug)
    statement = load_statement(kata)
    with Store() as store:
        session = store.start_session(slug, tmp_path / "x.py", 75, mode="mock")
        for reached in range(1, len(kata.levels) + 1):
            asked = choose_followups(kata, store, session, set(range(1, reached + 1)))
            assert len(asked) == min(2, len(asked)) and (asked or reached < len(kata.levels))
            seen = set()
            for section in statement.levels:
                # Functions and classes (a parameter such as `eps` is also plain notation).
                declared = set(re.findall(r"\b(?:def|class)\s+(\w+)", section.body))
                introduced = {n for n in _declared_api(section.body) - seen if n in declared}
                seen |= _declared_api(section.body, with_every_parameter=True)
                if section.number <= reached:
                    continue
                for q in asked:
                    text = " ".join([q["question"], *q["points"]])
                    assert section.name.lower() not in text.lower()
                    leaked = sorted(n for n in introduced if re.search(rf"(?<![.\w]){n}\b", text))
                    assert not leaked, f"{slug}, level {reached} reached: {q['question']!r} names {leaked}"
        assert len(choose_followups(kata, store, session, set(range(1, len(kata.levels) + 1)))) == 2


def test_a_question_about_a_level_not_reached_is_not_asked():
    from grader.mock import gives_away, hidden_terms as terms_of

    rope = load_catalog().get("rope")
    terms = terms_of(load_statement(rope), {1})
    interleaved = next(f for f in rope.followups if "interleaved layout" in f.question)
    assert gives_away(interleaved.question, terms)  # level 2 is "GPT-J interleaving ..."
    assert not gives_away(interleaved.question, terms_of(load_statement(rope), {1, 2}))
