"""The history database's schema and its migrations (``PRAGMA user_version``).

Version 1: sessions, attempts, hints, homeworks, reveals; one grade ended a session.
Version 2: sessions survive a grade. A session has a mode (timed, or a mock that reveals its
levels one at a time), ends for a reason (every level passed, stopped, time ran out, restarted),
and keeps a clock per level (`session_levels`: when it was revealed, and the first grade that
passed it). `checks` remembers which levels the visible examples passed (for `kata hint`);
`mocks` holds a mock's follow-up questions, the candidate's answers, self-marks and debrief.
Version 3: `events`, what happened in a session besides grades and hints, in order: a
clarification asked (`kata ask`), a level's Spec opened, a nudge, a follow-up scored; a
mock's timeline and debrief read them.
Version 4: `attempts.only_level`, the level a `kata grade --level N` graded alone (NULL: the
grade ran every level it could). Such a grade is history, not a session's clock: it passes
no level of its session and counts for no best score.
"""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 4

_V1 = """
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

# Version 2 rebuilds `sessions` (SQLite cannot change a CHECK constraint in place): a v1
# session ended by its grade becomes status 'ended' with end_reason 'graded'.
_V2 = """
CREATE TABLE sessions_v2 (
    id INTEGER PRIMARY KEY,
    kata TEXT NOT NULL,
    solution_path TEXT NOT NULL,
    started_at REAL NOT NULL,
    minutes INTEGER NOT NULL,
    deadline REAL NOT NULL,
    ended_at REAL,
    status TEXT NOT NULL CHECK (status IN ('active', 'ended', 'abandoned')),
    homework TEXT,
    mode TEXT NOT NULL DEFAULT 'timed' CHECK (mode IN ('timed', 'mock')),
    -- NULL while active, then 'passed' (every level), 'stopped', 'time', 'restarted', 'graded' (v1)
    end_reason TEXT
);
INSERT INTO sessions_v2 (id, kata, solution_path, started_at, minutes, deadline, ended_at, status,
                         homework, mode, end_reason)
    SELECT id, kata, solution_path, started_at, minutes, deadline, ended_at,
           CASE status WHEN 'graded' THEN 'ended' ELSE status END, homework, 'timed',
           CASE status WHEN 'graded' THEN 'graded' WHEN 'abandoned' THEN 'restarted' END
    FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_v2 RENAME TO sessions;
CREATE INDEX sessions_kata ON sessions (kata, status);
CREATE TABLE session_levels (
    session_id INTEGER NOT NULL REFERENCES sessions (id),
    level INTEGER NOT NULL,
    minutes INTEGER NOT NULL,
    revealed_at REAL,                 -- NULL: not revealed yet (a mock)
    passed_at REAL,                   -- the first grade of the session that passed it
    passed_attempt_id INTEGER REFERENCES attempts (id),
    PRIMARY KEY (session_id, level)
);
CREATE TABLE checks (
    id INTEGER PRIMARY KEY,
    session_id INTEGER REFERENCES sessions (id),
    kata TEXT NOT NULL,
    checked_at REAL NOT NULL,
    levels TEXT NOT NULL              -- JSON {"1": true, "2": false}: levels whose examples passed
);
CREATE TABLE mocks (
    session_id INTEGER PRIMARY KEY REFERENCES sessions (id),
    followups TEXT,                   -- JSON: the questions asked, with their points (a copy)
    answers TEXT,                     -- JSON: one answer per question, recorded before the points show
    marks TEXT,                       -- JSON: per question, the numbers of the points covered
    debrief TEXT,                     -- JSON: written when the mock is over
    finished_at REAL
);
"""


_V3 = """
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    session_id INTEGER REFERENCES sessions (id),   -- NULL: outside a session
    kata TEXT NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,               -- 'ask', 'spec', 'nudge', 'followup', ... (grader/store.py)
    level INTEGER,                    -- the level it concerns, when it concerns one
    data TEXT NOT NULL DEFAULT '{}'   -- JSON: what the kind records
);
CREATE INDEX events_session ON events (session_id, at);
CREATE INDEX events_kata ON events (kata, kind, at);
"""

_V4 = """
ALTER TABLE attempts ADD COLUMN only_level INTEGER;
"""


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring a database at `version` (0: empty) to SCHEMA_VERSION, inside the caller's
    transaction (foreign keys off: the sessions table is rebuilt under its references)."""
    if version == 0:
        _run(conn, _V1)
        version = 1
    if version == 1:
        _run(conn, _V2)
        version = 2
    if version == 2:
        _run(conn, _V3)
        version = 3
    if version == 3:
        _run(conn, _V4)
    problems = conn.execute("PRAGMA foreign_key_check").fetchall()
    if problems:
        raise sqlite3.DatabaseError(f"foreign keys broken by the migration: {problems[:3]}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _run(conn: sqlite3.Connection, script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)
