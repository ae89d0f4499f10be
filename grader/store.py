"""History: SQLite in $KATA_HOME (default: the platform's user data folder).

One file, WAL, every write in a transaction, a busy timeout so that two ``kata`` processes
at once wait for each other instead of failing. The schema version lives in
``PRAGMA user_version``; a database from a newer kata, or one that is not a database, is
refused with a message saying what to do.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from grader.errors import StoreError

SCHEMA_VERSION = 1
DB_NAME = "kata.sqlite3"
_BUSY_TIMEOUT_MS = 15_000

_SCHEMA = """
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    kata TEXT NOT NULL,
    solution_path TEXT NOT NULL,
    started_at REAL NOT NULL,
    minutes INTEGER NOT NULL,
    deadline REAL NOT NULL,
    ended_at REAL,
    status TEXT NOT NULL CHECK (status IN ('active', 'graded', 'abandoned')),
    homework TEXT
);
CREATE INDEX sessions_kata ON sessions (kata, status);
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY,
    session_id INTEGER REFERENCES sessions (id),
    kata TEXT NOT NULL,
    graded_at REAL NOT NULL,
    seed INTEGER NOT NULL,
    score INTEGER NOT NULL,
    passed INTEGER NOT NULL,
    levels_passed INTEGER NOT NULL,
    num_levels INTEGER NOT NULL,
    time_used_s REAL,
    time_limit_s REAL,
    hints_used INTEGER NOT NULL,
    solution_path TEXT NOT NULL,
    source TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    scorecard TEXT NOT NULL
);
CREATE INDEX attempts_kata ON attempts (kata, graded_at);
CREATE TABLE hints (
    id INTEGER PRIMARY KEY,
    session_id INTEGER REFERENCES sessions (id),
    kata TEXT NOT NULL,
    level INTEGER NOT NULL,
    stage INTEGER NOT NULL,
    shown_at REAL NOT NULL
);
CREATE TABLE homeworks (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    title TEXT NOT NULL,
    recorded_at REAL NOT NULL
);
CREATE TABLE reveals (
    id INTEGER PRIMARY KEY,
    session_id INTEGER REFERENCES sessions (id),
    kata TEXT NOT NULL,
    revealed_at REAL NOT NULL
);
"""


def kata_home() -> Path:
    env = os.environ.get("KATA_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("kata", appauthor=False))


@dataclass
class Session:
    id: int
    kata: str
    solution_path: str
    started_at: float
    minutes: int
    deadline: float
    ended_at: float | None
    status: str
    homework: str | None

    @property
    def elapsed_s(self) -> float:
        return (self.ended_at or time.time()) - self.started_at

    @property
    def remaining_s(self) -> float:
        return self.deadline - time.time()


@dataclass
class Attempt:
    id: int
    session_id: int | None
    kata: str
    graded_at: float
    seed: int
    score: int
    passed: bool
    levels_passed: int
    num_levels: int
    time_used_s: float | None
    time_limit_s: float | None
    hints_used: int
    solution_path: str
    source_sha256: str

    def scorecard(self, store: "Store") -> dict[str, Any]:
        row = store._one("SELECT scorecard FROM attempts WHERE id = ?", (self.id,))
        return json.loads(row[0])


_ATTEMPT_COLUMNS = ("id, session_id, kata, graded_at, seed, score, passed, levels_passed, num_levels, "
                    "time_used_s, time_limit_s, hints_used, solution_path, source_sha256")


class Store:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or kata_home() / DB_NAME
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000,
                                        isolation_level=None)
            self.conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"the history database {self.path} cannot be read: {exc}",
                hint=f"move it aside (mv '{self.path}' '{self.path}.bad') and run again; "
                     "kata starts a new history") from exc
        except OSError as exc:
            raise StoreError(f"cannot create the history folder {self.path.parent}: {exc}",
                             hint="set KATA_HOME to a writable folder") from exc

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise StoreError(f"the history database {self.path} is busy or read-only: {exc}",
                             hint="wait for the other kata command to finish, then retry") from exc

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the history database {self.path} was written by a newer kata "
                f"(schema {version}, this kata knows {SCHEMA_VERSION})",
                hint="upgrade kata (git pull && pip install -e .), or point KATA_HOME elsewhere")
        if version == SCHEMA_VERSION:
            return
        with self.transaction() as conn:
            # Re-read inside the write lock: another process may have migrated meanwhile.
            if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _one(self, sql: str, args: tuple = ()) -> Any:
        return self.conn.execute(sql, args).fetchone()

    # ------------------------------------------------------------------ sessions

    def start_session(self, kata: str, solution_path: Path, minutes: int,
                      homework: str | None = None) -> Session:
        now = time.time()
        with self.transaction() as conn:
            conn.execute("UPDATE sessions SET status = 'abandoned', ended_at = ? "
                         "WHERE kata = ? AND status = 'active'", (now, kata))
            cur = conn.execute(
                "INSERT INTO sessions (kata, solution_path, started_at, minutes, deadline, status, homework) "
                "VALUES (?, ?, ?, ?, ?, 'active', ?)",
                (kata, str(solution_path), now, minutes, now + 60 * minutes, homework))
            session_id = cur.lastrowid
        return self.session(session_id)

    def session(self, session_id: int) -> Session:
        row = self._one("SELECT * FROM sessions WHERE id = ?", (session_id,))
        if row is None:
            raise StoreError(f"no session {session_id}")
        return Session(*row)

    def active_sessions(self) -> list[Session]:
        rows = self.conn.execute(
            "SELECT * FROM sessions WHERE status = 'active' ORDER BY started_at").fetchall()
        return [Session(*r) for r in rows]

    def active_session(self, kata: str) -> Session | None:
        row = self._one("SELECT * FROM sessions WHERE kata = ? AND status = 'active' "
                        "ORDER BY started_at DESC LIMIT 1", (kata,))
        return Session(*row) if row else None

    def sessions_for_homework(self, homework: str) -> list[Session]:
        rows = self.conn.execute("SELECT * FROM sessions WHERE homework = ? ORDER BY started_at",
                                 (homework,)).fetchall()
        return [Session(*r) for r in rows]

    def end_session(self, session_id: int, status: str = "graded") -> None:
        with self.transaction() as conn:
            conn.execute("UPDATE sessions SET status = ?, ended_at = ? WHERE id = ? AND status = 'active'",
                         (status, time.time(), session_id))

    # ------------------------------------------------------------------ attempts

    def record_attempt(self, card: dict[str, Any], *, source: str, session_id: int | None) -> int:
        levels = card["levels"]
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO attempts (session_id, kata, graded_at, seed, score, passed, levels_passed, "
                "num_levels, time_used_s, time_limit_s, hints_used, solution_path, source, "
                "source_sha256, scorecard) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, card["kata"], time.time(), card["seed"], card["score"], int(card["passed"]),
                 sum(1 for lv in levels if lv["passed"]), len(levels), card.get("time_used_s"),
                 card.get("time_limit_s"), card.get("hints_used", 0), card["solution"], source,
                 card["solution_sha256"], json.dumps(card)))
            if session_id is not None:
                conn.execute("UPDATE sessions SET status = 'graded', ended_at = ? "
                             "WHERE id = ? AND status = 'active'", (time.time(), session_id))
            return cur.lastrowid

    def attempts(self, kata: str | None = None, limit: int | None = None) -> list[Attempt]:
        sql = f"SELECT {_ATTEMPT_COLUMNS} FROM attempts"
        args: tuple = ()
        if kata:
            sql += " WHERE kata = ?"
            args = (kata,)
        sql += " ORDER BY graded_at DESC, id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [Attempt(*r[:6], bool(r[6]), *r[7:]) for r in self.conn.execute(sql, args).fetchall()]

    def attempts_for_session(self, session_id: int) -> list[Attempt]:
        rows = self.conn.execute(f"SELECT {_ATTEMPT_COLUMNS} FROM attempts WHERE session_id = ? "
                                 "ORDER BY graded_at DESC, id DESC", (session_id,)).fetchall()
        return [Attempt(*r[:6], bool(r[6]), *r[7:]) for r in rows]

    def attempt_source(self, attempt_id: int) -> str:
        return self._one("SELECT source FROM attempts WHERE id = ?", (attempt_id,))[0]

    def best_score(self, kata: str) -> int | None:
        row = self._one("SELECT MAX(score) FROM attempts WHERE kata = ?", (kata,))
        return row[0]

    # ------------------------------------------------------------------ hints, reveals

    def record_hint(self, kata: str, level: int, stage: int, session_id: int | None) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT INTO hints (session_id, kata, level, stage, shown_at) VALUES (?, ?, ?, ?, ?)",
                         (session_id, kata, level, stage, time.time()))

    def hints_shown(self, kata: str, session_id: int | None, level: int | None = None) -> int:
        sql = "SELECT COUNT(*) FROM hints WHERE kata = ? AND session_id IS ?"
        args: tuple = (kata, session_id)
        if level is not None:
            sql += " AND level = ?"
            args += (level,)
        return self._one(sql, args)[0]

    def record_reveal(self, kata: str, session_id: int | None) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT INTO reveals (session_id, kata, revealed_at) VALUES (?, ?, ?)",
                         (session_id, kata, time.time()))

    def record_homework(self, homework_id: str, path: Path, sha256: str, title: str) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT INTO homeworks (id, path, sha256, title, recorded_at) VALUES (?, ?, ?, ?, ?) "
                         "ON CONFLICT (id) DO UPDATE SET path = excluded.path, sha256 = excluded.sha256, "
                         "title = excluded.title", (homework_id, str(path), sha256, title, time.time()))

    def reveals(self, kata: str, since: float = 0.0) -> int:
        return self._one("SELECT COUNT(*) FROM reveals WHERE kata = ? AND revealed_at >= ?",
                         (kata, since))[0]

    def reveal_log(self, kata: str) -> list[tuple[float, int | None]]:
        """Every reveal of `kata`, oldest first: (revealed_at, session id or None when it was
        made outside a session)."""
        rows = self.conn.execute("SELECT revealed_at, session_id FROM reveals WHERE kata = ? "
                                 "ORDER BY revealed_at, id", (kata,)).fetchall()
        return [(float(at), session_id) for at, session_id in rows]
