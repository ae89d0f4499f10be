"""History: SQLite in $KATA_HOME (default: the platform's user data folder).

One file, WAL, every write in a transaction, a busy timeout so that two ``kata`` processes
at once wait for each other instead of failing. The schema version lives in
``PRAGMA user_version`` (grader/store_schema.py migrates older files); a database from a
newer kata, or one that is not a database, is refused with a message saying what to do.

A session is timed (every level shown at once) or a mock (levels revealed one at a time).
It stays open across grades until every level passes, it is stopped, or (a mock) its time
runs out; `session_levels` keeps each level's clock: when it was revealed and the first grade
that passed it. Timestamps come from grader.clock, so tests can move time.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from grader import clock
from grader.errors import StoreError
from grader.store_schema import SCHEMA_VERSION, migrate

DB_NAME = "kata.sqlite3"
_BUSY_TIMEOUT_MS = 15_000


def kata_home() -> Path:
    env = os.environ.get("KATA_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("kata", appauthor=False))


ENV_CACHE = "KATA_CACHE"


def cache_dir() -> Path:
    """What kata may compute again (the reference's timings, the parsed catalog): KATA_CACHE,
    else the user's cache folder."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("kata", appauthor=False))


@dataclass(frozen=True)
class Event:
    """One row of `events` (see record_event)."""

    id: int
    session_id: int | None
    kata: str
    at: float
    kind: str
    level: int | None
    data: dict[str, Any]


@dataclass
class Session:
    id: int
    kata: str
    solution_path: str
    started_at: float
    minutes: int
    deadline: float
    ended_at: float | None
    status: str       # 'active', 'ended' or 'abandoned'
    homework: str | None
    mode: str = "timed"  # 'timed' or 'mock'
    end_reason: str | None = None

    @property
    def is_mock(self) -> bool:
        return self.mode == "mock"

    @property
    def elapsed_s(self) -> float:
        return (self.ended_at or clock.now()) - self.started_at

    @property
    def remaining_s(self) -> float:
        return self.deadline - clock.now()


_SESSION_COLUMNS = ("id, kata, solution_path, started_at, minutes, deadline, ended_at, status, homework, "
                    "mode, end_reason")


@dataclass
class SessionLevel:
    """One level's clock in a session: revealed (a timed session reveals every level at its
    start) and first passed, as timestamps."""

    level: int
    minutes: int
    revealed_at: float | None
    passed_at: float | None
    passed_attempt_id: int | None


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
    only_level: int | None = None  # `kata grade --level N`: the one level graded

    @property
    def timed(self) -> bool:
        """Graded in one of the candidate's own sessions (not an untimed `--file` grade)."""
        return self.session_id is not None

    def scorecard(self, store: "Store") -> dict[str, Any]:
        row = store._one("SELECT scorecard FROM attempts WHERE id = ?", (self.id,))
        return json.loads(row[0])


_ATTEMPT_COLUMNS = ("id, session_id, kata, graded_at, seed, score, passed, levels_passed, num_levels, "
                    "time_used_s, time_limit_s, hints_used, solution_path, source_sha256, only_level")


@dataclass
class MockRecord:
    session_id: int
    followups: list[dict[str, Any]] | None  # [{"question", "points", "index"}], chosen when coding ends
    answers: list[str] | None
    marks: list[list[int]] | None            # per question, the 1-based numbers of points covered
    debrief: dict[str, Any] | None
    finished_at: float | None


def _inserted_id(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT on `cur` just added (sqlite3 types it as int or None)."""
    row_id = cur.lastrowid
    assert row_id is not None, "an INSERT sets lastrowid"
    return row_id


def _attempt(row: Any) -> Attempt:
    """An Attempt from a row of _ATTEMPT_COLUMNS: SQLite stores `passed` as 0 or 1."""
    values = list(row)
    values[6] = bool(values[6])
    return Attempt(*values)


class Store:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or kata_home() / DB_NAME
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000,
                                        isolation_level=None)
            self.conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            self.conn.execute("PRAGMA journal_mode = WAL")
            self._migrate()
            self.conn.execute("PRAGMA foreign_keys = ON")
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
        # Foreign keys are still off here (they are switched on after): version 2 rebuilds the
        # sessions table under the references of attempts, hints and reveals.
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
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version < SCHEMA_VERSION:
                migrate(conn, version)

    def _one(self, sql: str, args: tuple = ()) -> Any:
        return self.conn.execute(sql, args).fetchone()

    # ------------------------------------------------------------------ sessions

    def start_session(self, kata: str, solution_path: Path | str, minutes: int,
                      homework: str | None = None, *, mode: str = "timed",
                      levels: tuple[tuple[int, int], ...] = ()) -> Session:
        """A new active session of `kata` (an active one is abandoned). `levels` are the kata's
        (level, minutes): a timed session reveals them all now, a mock only the first."""
        now = clock.now()
        with self.transaction() as conn:
            conn.execute("UPDATE sessions SET status = 'abandoned', end_reason = 'restarted', ended_at = ? "
                         "WHERE kata = ? AND status = 'active'", (now, kata))
            cur = conn.execute(
                "INSERT INTO sessions (kata, solution_path, started_at, minutes, deadline, status, homework, mode) "
                "VALUES (?, ?, ?, ?, ?, 'active', ?, ?)",
                (kata, str(solution_path), now, minutes, now + 60 * minutes, homework, mode))
            session_id = _inserted_id(cur)
            for level, level_minutes in levels:
                shown = mode == "timed" or level == 1
                conn.execute("INSERT INTO session_levels (session_id, level, minutes, revealed_at) "
                             "VALUES (?, ?, ?, ?)", (session_id, level, level_minutes, now if shown else None))
            if mode == "mock":
                conn.execute("INSERT INTO mocks (session_id) VALUES (?)", (session_id,))
        return self.session(session_id)

    def session(self, session_id: int) -> Session:
        row = self._one(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        if row is None:
            raise StoreError(f"no session {session_id}")
        return Session(*row)

    def _sessions(self, where: str, args: tuple = ()) -> list[Session]:
        rows = self.conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {where}", args).fetchall()
        return [Session(*r) for r in rows]

    def active_sessions(self) -> list[Session]:
        return self._sessions("status = 'active' ORDER BY started_at")

    def active_session(self, kata: str) -> Session | None:
        found = self._sessions("kata = ? AND status = 'active' ORDER BY started_at DESC LIMIT 1", (kata,))
        return found[0] if found else None

    def sessions_for_homework(self, homework: str) -> list[Session]:
        return self._sessions("homework = ? ORDER BY started_at", (homework,))

    def latest_session(self, kata: str) -> Session | None:
        """The most recent session of `kata`, timed or mock, active or not."""
        found = self._sessions("kata = ? ORDER BY started_at DESC, id DESC LIMIT 1", (kata,))
        return found[0] if found else None

    def mock_sessions(self, kata: str | None = None) -> list[Session]:
        """Every mock, newest first."""
        if kata:
            return self._sessions("mode = 'mock' AND kata = ? ORDER BY started_at DESC, id DESC", (kata,))
        return self._sessions("mode = 'mock' ORDER BY started_at DESC, id DESC")

    def end_session(self, session_id: int, reason: str, at: float | None = None) -> None:
        """End an active session: 'passed', 'stopped' or 'time' (at: when; default now)."""
        with self.transaction() as conn:
            conn.execute("UPDATE sessions SET status = 'ended', end_reason = ?, ended_at = ? "
                         "WHERE id = ? AND status = 'active'", (reason, clock.now() if at is None else at,
                                                                  session_id))

    def session_levels(self, session_id: int) -> list[SessionLevel]:
        rows = self.conn.execute("SELECT level, minutes, revealed_at, passed_at, passed_attempt_id "
                                 "FROM session_levels WHERE session_id = ? ORDER BY level", (session_id,))
        return [SessionLevel(*r) for r in rows.fetchall()]

    # ------------------------------------------------------------------ attempts

    def record_attempt(self, card: dict[str, Any], *, source: str, session_id: int | None,
                       passed_levels: tuple[int, ...] = (), reveal_level: int | None = None,
                       end_reason: str | None = None, only_level: int | None = None) -> int:
        """Record a grade, and in the same transaction what it does to its session: the
        levels it passed first (their pass time is this grade), the level it reveals (a mock),
        and the session's end (every level passed, or a mock's time ran out). `only_level`:
        a grade of that level alone (`kata grade --level N`), which does none of these."""
        if only_level is not None and (passed_levels or reveal_level is not None or end_reason is not None):
            raise ValueError("a grade of one level passes, reveals and ends nothing of its session")
        levels = card["levels"]
        now = clock.now()
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO attempts (session_id, kata, graded_at, seed, score, passed, levels_passed, "
                "num_levels, time_used_s, time_limit_s, hints_used, solution_path, source, "
                "source_sha256, scorecard, only_level) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, card["kata"], now, card["seed"], card["score"], int(card["passed"]),
                 sum(1 for lv in levels if lv["passed"]), len(levels), card.get("time_used_s"),
                 card.get("time_limit_s"), card.get("hints_used", 0), card["solution"], source,
                 card["solution_sha256"], json.dumps(card), only_level))
            attempt_id = _inserted_id(cur)
            if session_id is not None:
                for level in passed_levels:
                    conn.execute("UPDATE session_levels SET passed_at = ?, passed_attempt_id = ? "
                                 "WHERE session_id = ? AND level = ? AND passed_at IS NULL",
                                 (now, attempt_id, session_id, level))
                if reveal_level is not None:
                    conn.execute("UPDATE session_levels SET revealed_at = ? WHERE session_id = ? "
                                 "AND level = ? AND revealed_at IS NULL", (now, session_id, reveal_level))
                if end_reason is not None:
                    conn.execute("UPDATE sessions SET status = 'ended', end_reason = ?, ended_at = ? "
                                 "WHERE id = ? AND status = 'active'", (end_reason, now, session_id))
            return attempt_id

    def attempts(self, kata: str | None = None, limit: int | None = None,
                 timed: bool | None = None) -> list[Attempt]:
        """Newest first; `timed` True keeps the candidate's own session grades, False the
        untimed `--file` grades."""
        clauses, args = [], []
        if kata:
            clauses.append("kata = ?")
            args.append(kata)
        if timed is not None:
            clauses.append("session_id IS NOT NULL" if timed else "session_id IS NULL")
        sql = f"SELECT {_ATTEMPT_COLUMNS} FROM attempts"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY graded_at DESC, id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [_attempt(r) for r in self.conn.execute(sql, tuple(args)).fetchall()]

    def attempts_for_session(self, session_id: int) -> list[Attempt]:
        rows = self.conn.execute(f"SELECT {_ATTEMPT_COLUMNS} FROM attempts WHERE session_id = ? "
                                 "ORDER BY graded_at DESC, id DESC", (session_id,)).fetchall()
        return [_attempt(r) for r in rows]

    def attempt_source(self, attempt_id: int) -> str:
        return self._one("SELECT source FROM attempts WHERE id = ?", (attempt_id,))[0]

    def best_score(self, kata: str, *, timed: bool = True, num_levels: int | None = None) -> int | None:
        """The best score of the candidate's own timed attempts (timed=False: of the untimed
        `--file` grades). With num_levels, only grades of every level count (a mock's early
        grades score its revealed levels only). A grade of one level (`--level`) never counts."""
        sql = (f"SELECT MAX(score) FROM attempts WHERE kata = ? AND session_id IS {'NOT ' if timed else ''}NULL "
               "AND only_level IS NULL")
        args: tuple = (kata,)
        if num_levels is not None:
            sql += " AND num_levels = ?"
            args += (num_levels,)
        return self._one(sql, args)[0]

    # ------------------------------------------------------------------ checks

    def record_check(self, kata: str, session_id: int | None, levels_passed: dict[int, bool]) -> None:
        """Which levels' visible examples passed (steers `kata hint`; not history)."""
        with self.transaction() as conn:
            conn.execute("INSERT INTO checks (session_id, kata, checked_at, levels) VALUES (?, ?, ?, ?)",
                         (session_id, kata, clock.now(), json.dumps({str(k): v for k, v in levels_passed.items()})))

    def latest_check(self, kata: str, session_id: int | None) -> tuple[float, dict[int, bool]] | None:
        row = self._one("SELECT checked_at, levels FROM checks WHERE kata = ? AND session_id IS ? "
                        "ORDER BY checked_at DESC, id DESC LIMIT 1", (kata, session_id))
        if row is None:
            return None
        return float(row[0]), {int(k): bool(v) for k, v in json.loads(row[1]).items()}

    # ------------------------------------------------------------------ mocks

    def mock(self, session_id: int) -> MockRecord | None:
        row = self._one("SELECT session_id, followups, answers, marks, debrief, finished_at FROM mocks "
                        "WHERE session_id = ?", (session_id,))
        if row is None:
            return None
        followups, answers, marks, debrief = (None if v is None else json.loads(v) for v in row[1:5])
        return MockRecord(row[0], followups, answers, marks, debrief, row[5])

    def mock_record(self, session_id: int) -> MockRecord:
        """The record of a mock session, written when it starts (so never missing for one)."""
        record = self.mock(session_id)
        assert record is not None, f"session {session_id} is not a mock"
        return record

    def update_mock(self, session_id: int, **fields: Any) -> None:
        """Set followups, answers, marks, debrief (JSON-encoded) or finished_at."""
        allowed = {"followups", "answers", "marks", "debrief", "finished_at"}
        if not fields or set(fields) - allowed:
            raise ValueError(f"update_mock takes {sorted(allowed)}")
        names = sorted(fields)
        values = [fields[n] if n == "finished_at" else json.dumps(fields[n]) for n in names]
        with self.transaction() as conn:
            conn.execute(f"UPDATE mocks SET {', '.join(f'{n} = ?' for n in names)} WHERE session_id = ?",
                         (*values, session_id))

    # ------------------------------------------------------------------ hints, reveals

    def record_hint(self, kata: str, level: int, stage: int, session_id: int | None) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT INTO hints (session_id, kata, level, stage, shown_at) VALUES (?, ?, ?, ?, ?)",
                         (session_id, kata, level, stage, clock.now()))

    def hints_shown(self, kata: str, session_id: int | None, level: int | None = None) -> int:
        sql = "SELECT COUNT(*) FROM hints WHERE kata = ? AND session_id IS ?"
        args: tuple = (kata, session_id)
        if level is not None:
            sql += " AND level = ?"
            args += (level,)
        return self._one(sql, args)[0]

    def hints_total(self, kata: str) -> int:
        return self._one("SELECT COUNT(*) FROM hints WHERE kata = ?", (kata,))[0]

    def record_reveal(self, kata: str, session_id: int | None) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT INTO reveals (session_id, kata, revealed_at) VALUES (?, ?, ?)",
                         (session_id, kata, clock.now()))

    # ------------------------------------------------------------------ events

    def record_event(self, kata: str, kind: str, session_id: int | None, *, level: int | None = None,
                     data: dict[str, Any] | None = None) -> int:
        """Something that happened besides grades and hints (see store_schema, version 3):
        `kind` says what ('ask', 'spec', 'nudge', 'followup'), `data` the rest, as JSON."""
        with self.transaction() as conn:
            cur = conn.execute("INSERT INTO events (session_id, kata, at, kind, level, data) VALUES (?, ?, ?, ?, ?, ?)",
                               (session_id, kata, clock.now(), kind, level, json.dumps(data or {})))
            return _inserted_id(cur)

    def events(self, kata: str, *, session_id: int | None = None, kind: str | None = None,
               since: float = 0.0) -> list[Event]:
        """The events of `kata` (of one session, of one kind, from `since`), oldest first."""
        sql, args = "SELECT id, session_id, kata, at, kind, level, data FROM events WHERE kata = ? AND at >= ?", [kata, since]
        if session_id is not None:
            sql += " AND session_id = ?"
            args.append(session_id)
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        rows = self.conn.execute(sql + " ORDER BY at, id", args).fetchall()
        return [Event(id=r[0], session_id=r[1], kata=r[2], at=float(r[3]), kind=r[4], level=r[5],
                      data=json.loads(r[6] or "{}")) for r in rows]

    def record_homework(self, homework_id: str, path: Path, sha256: str, title: str) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT INTO homeworks (id, path, sha256, title, recorded_at) VALUES (?, ?, ?, ?, ?) "
                         "ON CONFLICT (id) DO UPDATE SET path = excluded.path, sha256 = excluded.sha256, "
                         "title = excluded.title", (homework_id, str(path), sha256, title, clock.now()))

    def reveals(self, kata: str, since: float = 0.0) -> int:
        return self._one("SELECT COUNT(*) FROM reveals WHERE kata = ? AND revealed_at >= ?",
                         (kata, since))[0]

    def reveal_log(self, kata: str) -> list[tuple[float, int | None]]:
        """Every reveal of `kata`, oldest first: (revealed_at, session id or None when it was
        made outside a session)."""
        rows = self.conn.execute("SELECT revealed_at, session_id FROM reveals WHERE kata = ? "
                                 "ORDER BY revealed_at, id", (kata,)).fetchall()
        return [(float(at), session_id) for at, session_id in rows]
