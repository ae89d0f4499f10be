"""The history store: transactions, two processes at once, schema versioning."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest

from grader.store import SCHEMA_VERSION, Store


def _card(kata: str, score: int) -> dict:
    return {"kata": kata, "seed": 1, "score": score, "passed": score == 100, "solution": "x.py",
            "solution_sha256": "0" * 64, "levels": [{"level": 1, "passed": score == 100}],
            "hints_used": 0}


def test_schema_is_versioned_and_wal(tmp_path):
    with Store(tmp_path / "db.sqlite3") as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_grade_keeps_its_session_open_and_best_counts_timed_attempts_only(tmp_path):
    with Store(tmp_path / "db.sqlite3") as store:
        session = store.start_session("k", tmp_path / "k.py", 75)
        store.record_attempt(_card("k", 40), source="a", session_id=session.id)
        store.record_attempt(_card("k", 90), source="b", session_id=None)  # untimed: anyone's file
        assert store.active_session("k").id == session.id
        assert store.best_score("k") == 40 and store.best_score("k", timed=False) == 90
        assert [a.score for a in store.attempts("k")] == [90, 40]
        assert [a.score for a in store.attempts("k", timed=True)] == [40]
        assert [a.timed for a in store.attempts("k")] == [False, True]
        store.end_session(session.id, "stopped")
        ended = store.session(session.id)
        assert ended.status == "ended" and ended.end_reason == "stopped" and store.active_session("k") is None


def test_level_clocks_pass_times_are_the_first_grade_that_passed_and_a_grade_can_end_the_session(tmp_path):
    from grader import clock

    fake = clock.FakeClock()
    with clock.use(fake), Store(tmp_path / "db.sqlite3") as store:
        session = store.start_session("k", "k.py", 75, mode="mock", levels=((1, 30), (2, 25)))
        assert [(lv.level, lv.revealed_at) for lv in store.session_levels(session.id)] == [(1, fake.t), (2, None)]
        fake.advance(minutes=10)
        first = store.record_attempt(_card("k", 100), source="a", session_id=session.id,
                                     passed_levels=(1,), reveal_level=2)
        fake.advance(minutes=5)
        store.record_attempt(_card("k", 100), source="b", session_id=session.id, passed_levels=(1,))
        level1, level2 = store.session_levels(session.id)
        assert (level1.passed_at, level1.passed_attempt_id) == (session.started_at + 600, first)  # the first pass
        assert level2.revealed_at == session.started_at + 600 and level2.passed_at is None
        store.record_attempt(_card("k", 100), source="c", session_id=session.id, passed_levels=(2,),
                             end_reason="passed")
        ended = store.session(session.id)
        assert ended.status == "ended" and ended.end_reason == "passed" and ended.ended_at == fake.t
        assert store.mock(session.id).answers is None and store.mock_sessions("k")[0].id == session.id


def test_checks_and_mock_records_round_trip(tmp_path):
    with Store(tmp_path / "db.sqlite3") as store:
        session = store.start_session("k", "k.py", 75, mode="mock", levels=((1, 30),))
        assert store.latest_check("k", session.id) is None
        store.record_check("k", session.id, {1: False, 2: True})
        assert store.latest_check("k", session.id)[1] == {1: False, 2: True}
        store.update_mock(session.id, followups=[{"index": 0, "question": "q", "points": ["p"]}],
                          answers=["a"], marks=[[1]])
        record = store.mock(session.id)
        assert record.answers == ["a"] and record.marks == [[1]] and record.followups[0]["question"] == "q"
        with pytest.raises(ValueError):
            store.update_mock(session.id, score=1)


def test_a_version_1_database_is_migrated_and_keeps_its_history(tmp_path):
    from grader import store_schema

    db = tmp_path / "db.sqlite3"
    conn = sqlite3.connect(db)
    store_schema._run(conn, store_schema._V1)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO sessions VALUES (1, 'k', 'k.py', 1.0, 75, 4501.0, 99.0, 'graded', NULL)")
    conn.execute("INSERT INTO sessions VALUES (2, 'k', 'k.py', 1.0, 75, 4501.0, 50.0, 'abandoned', NULL)")
    conn.execute("INSERT INTO sessions VALUES (3, 'k', 'k.py', 1.0, 75, 4501.0, NULL, 'active', 'hw1')")
    conn.execute("INSERT INTO attempts VALUES (1, 1, 'k', 99.0, 7, 40, 0, 1, 3, 98.0, 4500.0, 0, 'k.py', "
                 "'src', 'sha', '{}')")
    conn.execute("INSERT INTO hints (session_id, kata, level, stage, shown_at) VALUES (1, 'k', 1, 0, 5.0)")
    conn.commit()
    conn.close()
    with Store(db) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        graded, abandoned, active = (store.session(i) for i in (1, 2, 3))
        assert (graded.status, graded.end_reason, graded.mode) == ("ended", "graded", "timed")
        assert (abandoned.status, abandoned.end_reason) == ("abandoned", "restarted")
        assert active.status == "active" and active.homework == "hw1"
        assert [a.score for a in store.attempts_for_session(1)] == [40] and store.hints_shown("k", 1) == 1
        assert store.conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert store.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_a_failed_write_changes_nothing(tmp_path):
    with Store(tmp_path / "db.sqlite3") as store:
        try:
            with store.transaction() as conn:
                conn.execute("INSERT INTO reveals (kata, revealed_at) VALUES ('k', 1)")
                raise RuntimeError("interrupted")
        except RuntimeError:
            pass
        assert store.reveals("k") == 0


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    db = tmp_path / "db.sqlite3"
    Store(db).close()
    script = textwrap.dedent(f"""
        import sys
        from grader.store import Store
        card = {{"kata": "k", "seed": 1, "score": 50, "passed": False, "solution": "x.py",
                 "solution_sha256": "0" * 64, "levels": [], "hints_used": 0}}
        with Store(__import__("pathlib").Path({str(db)!r})) as store:
            for i in range(100):
                s = store.start_session("k" + sys.argv[1], "x.py", 75)
                store.record_attempt(card, source="x", session_id=s.id)
                store.record_hint("k", 1, i, None)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)]) for n in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with Store(db) as store:
        assert len(store.attempts("k")) == 200
        assert store.hints_shown("k", None) == 200
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_events_are_recorded_in_order_and_read_by_session_and_kind(tmp_path, monkeypatch):
    """Version 3's events: what happened in a session besides grades and hints (an ask, a
    Spec opened), in order, with its level and data; a version-2 database gains the table."""
    monkeypatch.setenv("KATA_HOME", str(tmp_path))
    with Store() as store:
        session = store.start_session("k", tmp_path / "k.py", 75, levels=[(1, 30), (2, 45)], mode="mock")
        store.record_event("k", "ask", session.id, level=1, data={"question": "floats?", "answer": "no"})
        store.record_event("k", "spec", session.id, level=2)
        store.record_event("k", "ask", None, data={"question": "outside"})
        events = store.events("k", session_id=session.id)
        assert [(e.kind, e.level) for e in events] == [("ask", 1), ("spec", 2)]
        assert events[0].data == {"question": "floats?", "answer": "no"} and events[0].at <= events[1].at
        assert [e.data["question"] for e in store.events("k", kind="ask")] == ["floats?", "outside"]


def test_a_version_3_database_gains_only_level_and_keeps_its_attempts(tmp_path):
    """Version 4 (issue 42): `kata grade --level N` is recorded as a grade of that level;
    the grades of an older database are full grades (only_level NULL), best scores as before."""
    from grader import store_schema

    db = tmp_path / "db.sqlite3"
    conn = sqlite3.connect(db)
    for script in (store_schema._V1, store_schema._V2, store_schema._V3):
        store_schema._run(conn, script)
    conn.execute("PRAGMA user_version = 3")
    conn.execute("INSERT INTO attempts VALUES (1, NULL, 'k', 99.0, 7, 40, 0, 1, 3, NULL, NULL, 0, 'k.py', "
                 "'src', 'sha', '{}')")
    conn.commit()
    conn.close()
    with Store(db) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
        assert [(a.score, a.only_level) for a in store.attempts("k")] == [(40, None)]
        card = {"kata": "k", "seed": 1, "score": 100, "passed": True, "solution": "k.py", "solution_sha256": "s",
                "levels": [{"level": 2, "passed": True}]}
        store.record_attempt(card, source="", session_id=None, only_level=2)
        assert store.attempts("k")[0].only_level == 2
        assert store.best_score("k", timed=False) == 40  # a grade of one level is no best score
        with pytest.raises(ValueError):
            store.record_attempt(card, source="", session_id=None, passed_levels=(2,), only_level=2)
