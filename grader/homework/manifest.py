"""The bundle's manifest.json as a schema: every field a type and a range.

A manifest comes from the candidate's machine, so the review believes none of it: the score
shown is always the coach's own re-grading. What the manifest may still carry — claimed
results (compared, never shown as evidence), self-reported times, hints and reveals — is
checked here field by field, and only the validated values travel on: finite numbers in
their ranges, short printable strings, bounded lists. A manifest that breaks a rule is
rejected with the field named (``katas[0].claimed.score: must be an integer 0..100``).

    {"format": 2, "homework_id": "hw-…", "homework_sha256": "<64 hex>", "homework_title": "…",
     "candidate": "Ada", "created_at": 1760000000.0, "token": "<64 hex>" (with an invitation),
     "katas": [{"slug": "paged-kv", "module": "paged_kv", "missing": false,
                "file": "solutions/paged_kv.py", "sha256": "<64 hex>",
                "session_started_at": …, "session_ended_at": …, "end_reason": "submitted",
                "graded_at": …, "time_used_s": …, "time_limit_s": …, "num_grades": 3,
                "levels": [{"level": 1, "passed_at": …, "used_s": 412.5}],
                "hints_used": 0, "reveals": [{"at": …, "during_session": false}],
                "claimed": {"score": 100, "passed": true, "seed": 11,
                            "levels": [{"level": 1, "passed": true}], "scorecard": {…ignored…}}}]}

Format 2 added the token, the session's end, the number of grades and each level's first
pass (``levels``: required in format 2 for a kata with a session). Format 1 bundles are
still read: those fields are then unknown (None), and the roster says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from grader.errors import KataError

BUNDLE_FORMAT = 2
READABLE_FORMATS = (1, 2)
MAX_NAME_CHARS = 100
MAX_TITLE_CHARS = 200
MAX_KATAS = 32
MAX_LEVELS = 16
MAX_REVEALS = 200
MAX_HINTS = 1000
MAX_GRADES = 100_000
END_REASONS = ("passed", "stopped", "time", "submitted", "restarted", "graded")
MAX_SEED = 2**64 - 1  # `kata grade --seed` takes any non-negative integer hypothesis can use
# Timestamps between 2001 and 2100; durations up to a year. Anything else is not a clock.
MIN_TIMESTAMP, MAX_TIMESTAMP = 1_000_000_000.0, 4_102_444_800.0
MAX_DURATION_S = 366 * 86400.0

_HW_ID = re.compile(r"hw-[A-Za-z0-9_-]{1,64}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_TOP_KEYS = {"format", "homework_id", "homework_sha256", "homework_title", "candidate", "created_at", "katas",
             "token"}
_KATA_KEYS = {"slug", "module", "missing", "file", "sha256", "session_started_at", "graded_at",
              "time_used_s", "time_limit_s", "hints_used", "reveals", "claimed",
              "session_ended_at", "end_reason", "num_grades", "levels"}
_V2_KATA_KEYS = ("num_grades", "levels")  # what format 2 must state for a kata it holds
_CLAIM_KEYS = {"score", "passed", "seed", "levels", "scorecard"}  # the scorecard is never read


class ManifestError(KataError):
    """The manifest breaks the schema; the message names the field and the rule."""


@dataclass(frozen=True)
class Claim:
    """What the candidate's own grading said; only compared with a replay, never shown as a score."""

    score: int
    passed: bool
    seed: int
    levels: tuple[tuple[int, bool], ...]


@dataclass(frozen=True)
class Reveal:
    at: float
    during_session: bool


@dataclass(frozen=True)
class LevelPass:
    """A level's first pass in the candidate's session (self-reported)."""

    level: int
    passed_at: float | None  # None: never passed
    used_s: float | None     # from the level's start (the session's, or the level before's pass)


@dataclass(frozen=True)
class KataEntry:
    slug: str
    module: str
    missing: bool
    file: str | None = None
    sha256: str | None = None
    session_started_at: float | None = None
    graded_at: float | None = None
    time_used_s: float | None = None
    time_limit_s: float | None = None
    hints_used: int = 0
    reveals: tuple[Reveal, ...] = ()
    reveal_count: int = 0  # a bundle from an older kata sends a count without times
    claimed: Claim | None = None
    session_ended_at: float | None = None
    end_reason: str | None = None
    num_grades: int | None = None          # None: a format 1 bundle does not say
    levels: tuple[LevelPass, ...] | None = None


@dataclass(frozen=True)
class Manifest:
    homework_id: str
    homework_sha256: str
    candidate: str
    katas: tuple[KataEntry, ...]
    homework_title: str = ""
    created_at: float | None = None
    token: str | None = None  # the invitation's, when the homework file carried one
    format: int = BUNDLE_FORMAT

    def entry(self, slug: str) -> KataEntry | None:
        return next((e for e in self.katas if e.slug == slug), None)


def parse_manifest(raw: Any) -> Manifest:
    """The validated manifest, or ManifestError naming the first field that breaks a rule."""
    top = _object(raw, "manifest", _TOP_KEYS)
    version = _int(top.get("format"), "format", 0, 1000)
    if version not in READABLE_FORMATS:
        raise ManifestError(f"format: must be one of {', '.join(map(str, READABLE_FORMATS))}, not {version} "
                            "(was the bundle made by a newer kata? ask for it again from this version)")
    homework_id = _text(top.get("homework_id"), "homework_id", 67)
    if not _HW_ID.fullmatch(homework_id):
        raise ManifestError("homework_id: must look like hw-3f2a9c1b0d4e")
    homework_sha256 = _text(top.get("homework_sha256"), "homework_sha256", 64)
    if not _SHA256.fullmatch(homework_sha256):
        raise ManifestError("homework_sha256: must be 64 lowercase hex digits")
    candidate = _text(top.get("candidate"), "candidate", MAX_NAME_CHARS)
    title = _text(top.get("homework_title", ""), "homework_title", MAX_TITLE_CHARS, empty_ok=True)
    created_at = _timestamp(top.get("created_at"), "created_at")
    token = top.get("token")
    if token is not None and not (isinstance(token, str) and _SHA256.fullmatch(token)):
        raise ManifestError("token: must be 64 lowercase hex digits (the invitation's token)")
    katas_raw = top.get("katas")
    if not isinstance(katas_raw, list) or len(katas_raw) > MAX_KATAS:
        raise ManifestError(f"katas: must be a list of at most {MAX_KATAS} entries")
    katas = tuple(_kata(item, f"katas[{i}]", version) for i, item in enumerate(katas_raw))
    slugs = [k.slug for k in katas]
    if len(set(slugs)) != len(slugs):
        raise ManifestError("katas: a kata is listed twice")
    return Manifest(homework_id=homework_id, homework_sha256=homework_sha256, candidate=candidate,
                    katas=katas, homework_title=title, created_at=created_at, token=token, format=version)


def _kata(raw: Any, at: str, version: int) -> KataEntry:
    entry = _object(raw, at, _KATA_KEYS)
    slug = _text(entry.get("slug"), f"{at}.slug", 64)
    if not _SLUG.fullmatch(slug):
        raise ManifestError(f"{at}.slug: must be a kata slug like paged-kv")
    module = _text(entry.get("module"), f"{at}.module", 64)
    if not module.isidentifier() or not module.isascii():
        raise ManifestError(f"{at}.module: must be a Python module name like paged_kv")
    missing = _bool(entry.get("missing", False), f"{at}.missing")
    if missing:
        return KataEntry(slug=slug, module=module, missing=True)
    file = entry.get("file")
    if file not in (f"solutions/{module}.py", f"solutions/{module}.cpp"):
        raise ManifestError(f"{at}.file: must be solutions/{module}.py (or .cpp, a C++ solution)")
    sha256 = _text(entry.get("sha256"), f"{at}.sha256", 64)
    if not _SHA256.fullmatch(sha256):
        raise ManifestError(f"{at}.sha256: must be 64 lowercase hex digits")
    reveals, reveal_count = _reveals(entry.get("reveals", 0), f"{at}.reveals")
    started = _timestamp(entry.get("session_started_at"), f"{at}.session_started_at")
    if version >= 2:
        for key in _V2_KATA_KEYS:
            if entry.get(key) is None:
                raise ManifestError(f"{at}.{key}: missing (format {version} states it for every kata it holds)")
    num_grades = entry.get("num_grades")
    end_reason = entry.get("end_reason")
    if end_reason is not None and end_reason not in END_REASONS:
        raise ManifestError(f"{at}.end_reason: must be one of {', '.join(END_REASONS)}")
    return KataEntry(
        slug=slug, module=module, missing=False, file=file, sha256=sha256, session_started_at=started,
        graded_at=_timestamp(entry.get("graded_at"), f"{at}.graded_at"),
        time_used_s=_number(entry.get("time_used_s"), f"{at}.time_used_s", 0.0, MAX_DURATION_S),
        time_limit_s=_number(entry.get("time_limit_s"), f"{at}.time_limit_s", 0.0, MAX_DURATION_S),
        hints_used=_int(entry.get("hints_used", 0), f"{at}.hints_used", 0, MAX_HINTS),
        reveals=reveals, reveal_count=reveal_count, claimed=_claim(entry.get("claimed"), f"{at}.claimed"),
        session_ended_at=_after(entry.get("session_ended_at"), started, f"{at}.session_ended_at"),
        end_reason=end_reason,
        num_grades=None if num_grades is None else _int(num_grades, f"{at}.num_grades", 0, MAX_GRADES),
        levels=_levels(entry.get("levels"), started, f"{at}.levels"))


def _levels(raw: Any, started: float | None, at: str) -> tuple[LevelPass, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) > MAX_LEVELS:
        raise ManifestError(f"{at}: must be a list of at most {MAX_LEVELS} levels")
    levels = []
    for i, item in enumerate(raw):
        level = _object(item, f"{at}[{i}]", {"level", "passed_at", "used_s"})
        levels.append(LevelPass(level=_int(level.get("level"), f"{at}[{i}].level", 1, MAX_LEVELS),
                                passed_at=_after(level.get("passed_at"), started, f"{at}[{i}].passed_at"),
                                used_s=_number(level.get("used_s"), f"{at}[{i}].used_s", 0.0, MAX_DURATION_S)))
    if len({lv.level for lv in levels}) != len(levels):
        raise ManifestError(f"{at}: a level is listed twice")
    return tuple(levels)


def _after(raw: Any, started: float | None, at: str) -> float | None:
    """A time that cannot come before the session's start."""
    when = _timestamp(raw, at)
    if when is not None and started is not None and when < started:
        raise ManifestError(f"{at}: before the session started")
    return when


def _claim(raw: Any, at: str) -> Claim | None:
    if raw is None:
        return None
    claim = _object(raw, at, _CLAIM_KEYS)
    levels_raw = claim.get("levels")
    if not isinstance(levels_raw, list) or len(levels_raw) > MAX_LEVELS:
        raise ManifestError(f"{at}.levels: must be a list of at most {MAX_LEVELS} levels")
    levels = []
    for i, level in enumerate(levels_raw):
        item = _object(level, f"{at}.levels[{i}]", {"level", "passed"})
        levels.append((_int(item.get("level"), f"{at}.levels[{i}].level", 1, MAX_LEVELS),
                       _bool(item.get("passed"), f"{at}.levels[{i}].passed")))
    return Claim(score=_int(claim.get("score"), f"{at}.score", 0, 100),
                 passed=_bool(claim.get("passed"), f"{at}.passed"),
                 seed=_int(claim.get("seed"), f"{at}.seed", 0, MAX_SEED), levels=tuple(levels))


def _reveals(raw: Any, at: str) -> tuple[tuple[Reveal, ...], int]:
    if not isinstance(raw, list):
        return (), _int(raw, at, 0, MAX_REVEALS)
    if len(raw) > MAX_REVEALS:
        raise ManifestError(f"{at}: more than {MAX_REVEALS} reveals")
    reveals = []
    for i, item in enumerate(raw):
        reveal = _object(item, f"{at}[{i}]", {"at", "during_session"})
        when = _timestamp(reveal.get("at"), f"{at}[{i}].at")
        if when is None:
            raise ManifestError(f"{at}[{i}].at: must be a time")
        reveals.append(Reveal(at=when, during_session=_bool(reveal.get("during_session", False),
                                                            f"{at}[{i}].during_session")))
    return tuple(reveals), len(reveals)


# ---------------------------------------------------------------------------- field rules


def _object(raw: Any, at: str, keys: set[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ManifestError(f"{at}: must be an object")
    unknown = sorted(str(k) for k in raw if k not in keys)
    if unknown:
        raise ManifestError(f"{at}: unknown field {_shown(unknown[0])}")
    return raw


def _text(raw: Any, at: str, max_chars: int, empty_ok: bool = False) -> str:
    if not isinstance(raw, str):
        raise ManifestError(f"{at}: must be a string")
    if len(raw) > max_chars:
        raise ManifestError(f"{at}: longer than {max_chars} characters")
    if not raw.isprintable() or (not empty_ok and not raw.strip()):
        raise ManifestError(f"{at}: must be plain printable text")
    return raw


def _bool(raw: Any, at: str) -> bool:
    if not isinstance(raw, bool):
        raise ManifestError(f"{at}: must be true or false")
    return raw


def _int(raw: Any, at: str, low: int, high: int) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or not low <= raw <= high:
        raise ManifestError(f"{at}: must be an integer {low}..{high}")
    return raw


def _number(raw: Any, at: str, low: float, high: float) -> float | None:
    """A finite number in range, or None when absent. NaN and Infinity are refused (json
    parses them from a bundle even though they are not JSON)."""
    if raw is None:
        return None
    if not isinstance(raw, (int, float)) or isinstance(raw, bool) or not math.isfinite(raw) \
            or not low <= raw <= high:
        raise ManifestError(f"{at}: must be a finite number {low:g}..{high:g}")
    return float(raw)


def _timestamp(raw: Any, at: str) -> float | None:
    return _number(raw, at, MIN_TIMESTAMP, MAX_TIMESTAMP)


def _shown(text: str) -> str:
    """A key from the bundle, quoted and cut short for an error message."""
    return repr(text[:40] + ("…" if len(text) > 40 else ""))
