"""The history store: transactions, two processes at once, schema versioning."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from grader.store import SCHEMA_VERSION, Store


def _card(kata: str, score: int) -> dict:
    return {"kata": kata, "seed": 1, "score": score, "passed": score == 100, "solution": "x.py",
            "solution_sha256": "0" * 64, "levels": [{"level": 1, "passed": score == 100}],
            "hints_used": 0}


def test_schema_is_versioned_and_wal(tmp_path):
    with Store(tmp_path / "db.sqlite3") as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_attempt_ends_its_session_and_best_score(tmp_path):
    with Store(tmp_path / "db.sqlite3") as store:
        session = store.start_session("k", tmp_path / "k.py", 75)
        store.record_attempt(_card("k", 40), source="a", session_id=session.id)
        store.record_attempt(_card("k", 90), source="b", session_id=None)
        assert store.active_session("k") is None and store.session(session.id).status == "graded"
        assert store.best_score("k") == 90
        assert [a.score for a in store.attempts("k")] == [90, 40]


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
