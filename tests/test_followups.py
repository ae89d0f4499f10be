"""Follow-up answers scored by their keys (grader/followups.py): every kata's own answer key
scores full points, nothing scores nothing, half scores about half; self-marks override and
say so; a mock asks only follow-ups of the levels it revealed, and one stopped after level 1
or 2 still has two to ask; kata.toml's keys and levels are checked where they are written."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from grader import clock
from grader.catalog import KATAS_DIR, load_catalog
from grader.cli.app import app
from grader.followups import coverage, points_found, score_answer, score_mock, score_words
from grader.mock import NUM_FOLLOWUPS, choose_followups
from grader.store import Store

CATALOG = load_catalog()
KATAS = sorted(CATALOG.katas)
OFF_TOPIC = [
    "",
    "I would use a hash map and a binary search tree, then write unit tests with pytest and deploy "
    "it in a Docker container behind nginx.",
    "Honestly I am not sure; I think it depends on the use case and I would look it up in the "
    "documentation and ask a colleague.",
    "The weather in London is rainy, so I bring an umbrella and drink tea with milk every afternoon.",
]


def _followups(slug: str):
    return list(enumerate(CATALOG.get(slug).followups))


@pytest.mark.parametrize("slug", KATAS)
def test_every_follow_up_has_a_level_and_one_to_three_key_groups_per_point(slug):
    kata = CATALOG.get(slug)
    assert len(kata.followups) >= 6
    for i, followup in _followups(slug):
        assert 1 <= followup.level <= len(kata.levels), f"{slug} followups[{i}]"
        assert len(followup.keys) == len(followup.points), f"{slug} followups[{i}]: a point without keys"
        for n, groups in enumerate(followup.keys, start=1):
            assert 1 <= len(groups) <= 3, f"{slug} followups[{i}] point {n}: {len(groups)} key groups"


@pytest.mark.parametrize("slug", KATAS)
def test_an_answer_that_is_the_answer_key_scores_full_points(slug):
    """Checks the keys: each point's own text names it, and so does the whole key."""
    for i, followup in _followups(slug):
        everything = list(range(1, len(followup.points) + 1))
        assert points_found(" ".join(followup.points), followup.keys) == everything, f"{slug} followups[{i}]"
        for n, text in enumerate(followup.points, start=1):
            assert n in points_found(text, followup.keys), f"{slug} followups[{i}] point {n}: {text!r}"


@pytest.mark.parametrize("slug", KATAS)
def test_an_empty_or_off_topic_answer_scores_nothing(slug):
    for i, followup in _followups(slug):
        for answer in OFF_TOPIC:
            assert points_found(answer, followup.keys) == [], f"{slug} followups[{i}] on {answer[:30]!r}"


@pytest.mark.parametrize("slug", KATAS)
def test_an_answer_naming_half_the_points_scores_about_half(slug):
    """Named points are found; a point named in another's words (their texts overlap) may be
    found too, at most one per answer."""
    for i, followup in _followups(slug):
        num_points = len(followup.points)
        for first in (1, 2):  # the odd-numbered points, then the even-numbered ones
            named = list(range(first, num_points + 1, 2))
            found = points_found(" ".join(followup.points[n - 1] for n in named), followup.keys)
            assert set(named) <= set(found) and len(found) <= len(named) + 1, (
                f"{slug} followups[{i}]: named {named}, found {found}")


QUESTION = {"index": 0, "level": 1, "question": "Why cache?",
            "points": ["a kv cache avoids recomputing the prefix", "quadratic without it",
                       "bounded by memory", "paging"],
            "keys": [[["kv cache", "cache the keys"], ["recompute", "prefix"]], [["quadratic", "O(t^2)"]],
                     [["memory"]], [["page", "block"]]]}


@pytest.mark.parametrize("answer", [
    "Caching keys and values: the KV-cache means we never recompute the prefix; otherwise it is O(t^2).",
    "kv caches, so no recomputation of the prefix, else QUADRATIC",
    "We keep a K V cache... (kv  cache) to avoid recomputing. Quadratically many ops otherwise.",
])
def test_inflections_case_and_spacing_do_not_count(answer):
    assert score_answer(QUESTION, answer, None)["found"] == [1, 2]


def test_a_point_counts_only_when_every_group_is_named():
    assert score_answer(QUESTION, "we have a kv cache", None)["found"] == []
    assert score_answer(QUESTION, "we have a kv cache and skip the prefix", None)["found"] == [1]


def test_a_self_mark_overrides_the_keys_and_both_stay_on_record():
    answer = "a kv cache avoids recomputing the prefix, else quadratic"
    keys_only = score_answer(QUESTION, answer, None)
    assert keys_only["covered"] == [1, 2] and keys_only["score"] == 0.5 and score_words(keys_only) == "2 of 4"
    marked = score_answer(QUESTION, answer, [1, 2, 3])
    assert marked["covered"] == [1, 2, 3] and marked["found"] == [1, 2] and marked["score"] == 0.75
    assert score_words(marked) == "self-marked: 3 of 4; keys found 2"
    scored = score_mock([QUESTION, QUESTION], [answer, "no idea"], [[1, 2, 3], None])
    assert coverage(scored) == {"covered": 3, "points": 8, "found": 2, "self_marked": 1}
    assert coverage(score_mock([QUESTION], None, None)) is None  # not answered yet


@pytest.mark.parametrize("slug", KATAS)
def test_a_mock_asks_only_follow_ups_of_the_levels_it_revealed(slug, tmp_path):
    kata = CATALOG.get(slug)
    with Store() as store:
        session = store.start_session(slug, tmp_path / "x.py", 75, mode="mock")
        for reached in range(1, len(kata.levels) + 1):
            asked = choose_followups(kata, store, session, set(range(1, reached + 1)))
            assert all(q["level"] <= reached for q in asked), (slug, reached, [q["level"] for q in asked])
            assert all(q["keys"] and len(q["keys"]) == len(q["points"]) for q in asked)
            if any(f.level <= reached for f in kata.followups) and reached == len(kata.levels):
                assert len(asked) == 2


@pytest.mark.parametrize("slug", KATAS)
@pytest.mark.parametrize("revealed", [{1}, {1, 2}], ids=["level 1", "levels 1-2"])
def test_a_mock_that_stops_early_still_has_a_full_set_of_follow_ups(slug, revealed, tmp_path):
    """A mock stopped after level 1 (or 2) asks as many follow-ups as one that reached the end:
    enough of them sit at those levels and name nothing of a level not revealed."""
    kata = CATALOG.get(slug)
    with Store() as store:
        session = store.start_session(slug, tmp_path / "x.py", 75, mode="mock")
        asked = choose_followups(kata, store, session, revealed)
    assert len(asked) == NUM_FOLLOWUPS, (
        f"{slug}: a mock that revealed levels {sorted(revealed)} can ask {len(asked)} follow-up(s); "
        f"write level-{max(revealed)} ones in kata.toml that name nothing of a later level")
    assert all(q["level"] <= max(revealed) for q in asked)


# ----------------------------------------------------------------------------- kata.toml


@pytest.fixture
def katas_copy(tmp_path):
    target = tmp_path / "katas"
    shutil.copytree(KATAS_DIR / "paged_kv", target / "paged_kv")
    return target


FIRST_KEYS = 'keys = [["doubly linked",'


@pytest.mark.parametrize("old,new,message", [
    ("level = 3\n", "level = 0\n", "followups[0]: field 'level' must be one of the kata's levels, 1..3, got 0"),
    ("level = 3\n", "level = 4\n", "followups[0]: field 'level' must be one of the kata's levels, 1..3, got 4"),
    ("level = 3\n", 'level = "3"\n', "followups[0]: field 'level' must be one of the kata's levels"),
    (FIRST_KEYS, 'keys = "doubly linked"\nkeyz = [["doubly linked",', "followups[0].points[0]: field 'keys' must be"),
    (FIRST_KEYS, 'keys = [[], ["doubly linked",', "followups[0].points[0]: field 'keys' must be a list of groups"),
    (FIRST_KEYS, 'keys = [["—", "doubly linked",', "followups[0].points[0]: field 'keys' holds the term '—'"),
    (FIRST_KEYS, 'keyz = [["doubly linked",', "followups[0].points[0]: field 'keys' is missing"),
    ('text = "A deque cannot', 'txt = "A deque cannot', "followups[0].points[0]: field 'text' must be"),
])
def test_malformed_keys_and_levels_name_the_file_and_the_field(katas_copy, old, new, message):
    path = katas_copy / "paged_kv" / "kata.toml"
    text = path.read_text(encoding="utf-8")
    start = text.index("[[followups]]")  # the first follow-up only
    assert old in text[start:]
    path.write_text(text[:start] + text[start:].replace(old, new, 1), encoding="utf-8")
    catalog = load_catalog(katas_copy)
    [problem] = catalog.problems
    assert "katas/paged_kv/kata.toml" in problem.message and message in problem.message, problem.message


def test_plain_text_points_still_load_and_are_scored_by_self_marks_only(katas_copy):
    path = katas_copy / "paged_kv" / "kata.toml"
    text = path.read_text(encoding="utf-8")
    start = text.index("[[followups]]")
    path.write_text(text[:start] + '[[followups]]\nquestion = "Why?"\npoints = ["one", "two"]\n',
                    encoding="utf-8")
    [followup] = load_catalog(katas_copy).get("paged-kv").followups
    assert followup.points == ("one", "two") and followup.keys == ((), ())
    assert followup.level == 3  # no level: asked only once every level is revealed
    scored = score_answer({"question": "Why?", "points": ["one", "two"], "keys": []}, "one two", [2])
    assert scored["found"] is None and scored["covered"] == [2]
    assert score_words(scored) == "self-marked: 1 of 2; no keys"


# ----------------------------------------------------------------------------- in a mock


def test_a_mock_scores_answers_from_a_file_records_them_and_a_later_self_mark_overrides(tmp_path):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    with clock.use(clock.FakeClock()):
        assert invoke("mock", "paged-kv").exit_code == 0
        assert invoke("mock", "--stop").exit_code == 0
        with Store() as store:
            [session] = store.mock_sessions("paged-kv")
            asked = store.mock(session.id).followups
        assert [q["level"] for q in asked] == [1, 1]  # stopped at level 1: two level-1 follow-ups
        num_points = len(asked[0]["points"])
        all_points = sum(len(q["points"]) for q in asked)
        first = " ".join(asked[0]["points"][:2])  # names the first question's points 1 and 2
        answers = tmp_path / "answers.json"
        answers.write_text(json.dumps({"answers": [{"answer": first}, {"answer": "no idea"}]}))
        scored = invoke("mock", "--answers", answers)
        text = " ".join(scored.output.split())
        assert f"follow-ups: you covered 2 of {all_points} points (scored by the answer keys)" in text
        assert f"what an interviewer listens for (2 of {num_points})" in text and "✗ 3." in text
        answers.write_text(json.dumps({"answers": [{"answer": first, "covered": [1, 2, 3]},
                                                   {"answer": "no idea"}]}))
        marked = json.loads(invoke("mock", "--answers", answers, "--json").output)["debrief"]
        entry = marked["followups"][0]
        assert entry["found"] == [1, 2] and entry["self_marked"] == [1, 2, 3] and entry["covered"] == [1, 2, 3]
        assert marked["coverage"] == {"covered": 3, "points": all_points, "found": 2, "self_marked": 1}
        with Store() as store:
            events = store.events("paged-kv", session_id=session.id, kind="followup")
        assert [(e.level, e.data["found"], e.data["self_marked"]) for e in events
                if e.data["index"] == asked[0]["index"]] == [
            (1, [1, 2], None), (1, [1, 2], [1, 2, 3])]  # the latest event of a question is its score
