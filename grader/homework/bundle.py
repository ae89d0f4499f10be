"""The submission bundle: a zip with manifest.json and solutions/<module>.py per kata.

Writing one is the candidate's side (``kata homework submit``). Opening one is the coach's
side, and the coach is opening something a stranger made: every member is checked (no path
traversal, absolute paths, links, unexpected or duplicate members, oversize members or
total), hashes and manifest are checked against the files, and the only things written are
files the coach's side names itself, inside a temporary folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from grader.catalog import Catalog, Kata
from grader.errors import KataError
from grader.homework.manifest import (BUNDLE_FORMAT, MAX_NAME_CHARS, MAX_REVEALS, Manifest, ManifestError,
                                      parse_manifest)
from grader.homework.invites import clean_name
from grader.homework.spec import Homework
from grader.sessions import level_clocks
from grader.store import Store

MANIFEST = "manifest.json"
MAX_MEMBER_BYTES = 1_000_000
MAX_TOTAL_BYTES = 8_000_000
MAX_MEMBERS = 64


class BundleError(KataError):
    """A bundle cannot be trusted or read; the message says which member and why."""

    default_hint = "ask for a bundle made again with `kata homework submit`"


@dataclass
class OpenedBundle:
    path: Path
    sha256: str  # of the bundle file, naming it in unit results
    manifest: Manifest
    files: dict[str, Path]  # kata slug -> extracted solution

    @property
    def candidate(self) -> str:
        return self.manifest.candidate


# ---------------------------------------------------------------------------- submit


def submitter(homework: Homework, name: str | None) -> str:
    """Who submits: the name the candidate's invitation binds, or (no invitation) `--name`."""
    invitation = homework.invitation
    if invitation is not None:
        if name is not None and clean_name(name, "--name") != invitation.candidate:
            raise KataError(f"this homework file was issued to {invitation.candidate!r}, not {name.strip()!r}",
                            hint="leave out --name (the invitation names you), or submit with the file "
                                 "your coach sent you")
        return invitation.candidate
    if name is None or not name.strip():
        raise KataError("--name is missing: this homework file names no candidate",
                        hint='for example --name "Ada Lovelace", as your coach knows you')
    name = name.strip()
    if len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise KataError("--name must be 1 to 100 printable characters", hint='for example --name "Ada Lovelace"')
    return name


def build_bundle(homework: Homework, store: Store, catalog: Catalog, *, candidate: str, out: Path,
                 allow_missing: bool) -> dict[str, Any]:
    """End the homework's open sessions (submitting stops the clock: a later grade is not
    part of the homework), write the bundle to `out` and return its manifest."""
    sessions = store.sessions_for_homework(homework.id)
    started = {s.kata for s in sessions}
    missing = [k.slug for k in homework.katas if k.slug not in started]
    if missing and not allow_missing:
        raise KataError(f"never started: {', '.join(missing)}",
                        hint="`kata homework start <file> <slug>` to work it, or submit with --allow-missing")
    for session in sessions:
        if session.status == "active":
            store.end_session(session.id, "submitted")
    sessions = store.sessions_for_homework(homework.id)
    entries, files = [], {}
    for hw_kata in homework.katas:
        kata = catalog.get(hw_kata.slug)
        mine = [s for s in sessions if s.kata == kata.slug]
        if not mine:
            entries.append({"slug": kata.slug, "module": kata.module, "missing": True})
            continue
        entry, source = _entry(store, kata, mine[-1])
        entries.append(entry)
        files[entry["file"]] = source
    manifest = {"format": BUNDLE_FORMAT, "homework_id": homework.id, "homework_sha256": homework.sha256,
                "homework_title": homework.title, "candidate": candidate, "created_at": time.time(),
                "katas": entries}
    if homework.invitation is not None:
        manifest["token"] = homework.invitation.token
    parse_manifest(json.loads(json.dumps(manifest)))  # what we send must pass the coach's schema
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST, json.dumps(manifest, indent=2))
        for name, source in files.items():
            zf.writestr(name, source)
    os.replace(tmp, out)
    return manifest


def _entry(store: Store, kata: Kata, session: Any) -> tuple[dict[str, Any], str]:
    slug, module = kata.slug, kata.module
    attempts = store.attempts_for_session(session.id)
    if attempts:
        latest = attempts[0]
        source = store.attempt_source(latest.id)
        card = latest.scorecard(store)
        claimed = {"score": card["score"], "passed": card["passed"], "seed": card["seed"],
                   "levels": [{"level": lv["level"], "passed": lv["passed"]} for lv in card["levels"]],
                   "scorecard": card}
        graded_at, time_used = latest.graded_at, latest.time_used_s
    else:
        path = Path(session.solution_path)
        source = path.read_text(encoding="utf-8") if path.is_file() else ""
        claimed, graded_at, time_used = None, None, session.elapsed_s
    suffix = ".cpp" if str(session.solution_path).endswith(".cpp") else ".py"  # a C++ session's file
    entry = {"slug": slug, "module": module, "missing": False, "file": f"solutions/{module}{suffix}",
             "sha256": hashlib.sha256(source.encode()).hexdigest(),
             "session_started_at": session.started_at, "session_ended_at": session.ended_at,
             "end_reason": session.end_reason, "graded_at": graded_at,
             "time_used_s": time_used, "time_limit_s": session.minutes * 60.0,
             "num_grades": len(attempts), "levels": _level_passes(store, session, kata),
             "hints_used": store.hints_shown(slug, session.id),
             # Every reveal of this kata, before the session too: seeing the reference before
             # `homework start` is exactly what a coach wants to know.
             "reveals": [{"at": at, "during_session": session_id is not None}
                         for at, session_id in store.reveal_log(slug)[-MAX_REVEALS:]],
             "claimed": claimed}
    return entry, source


def _level_passes(store: Store, session: Any, kata: Kata) -> list[dict[str, Any]]:
    """Each level's first pass and the time it took from the level's start (sessions.py)."""
    passes = []
    for clock in level_clocks(store, session, kata):
        used = clock.used_s(clock.passed_at) if clock.passed_at is not None else None
        passes.append({"level": clock.level, "passed_at": clock.passed_at,
                       "used_s": None if used is None else round(used, 1)})
    return passes


# ---------------------------------------------------------------------------- open


def open_bundle(path: Path, dest: Path) -> OpenedBundle:
    """Check every member of the bundle and extract the solutions into `dest`."""
    if not path.is_file():
        raise BundleError(f"{path} does not exist")
    if path.stat().st_size > MAX_TOTAL_BYTES * 2:
        raise BundleError(f"{path.name} is larger than {MAX_TOTAL_BYTES * 2 // 1_000_000} MB")
    data = path.read_bytes()
    if not zipfile.is_zipfile(path):
        raise BundleError(f"{path.name} is not a kata bundle (not a zip file)")
    try:
        with zipfile.ZipFile(path) as zf:
            infos = _checked_members(zf, path)
            manifest = _manifest(zf, infos, path)
            files = _extract(zf, infos, manifest, path, dest)
    except zipfile.BadZipFile as exc:
        raise BundleError(f"{path.name} is a damaged zip file: {exc}") from exc
    except (NotImplementedError, RuntimeError, EOFError, ValueError, OSError, zlib.error) as exc:
        # Encrypted members, unknown compression methods, truncated streams: not a bundle we made.
        raise BundleError(f"{path.name} cannot be read: {type(exc).__name__}: {str(exc)[:200]}") from exc
    return OpenedBundle(path=path, sha256=hashlib.sha256(data).hexdigest(), manifest=manifest, files=files)


def _checked_members(zf: zipfile.ZipFile, path: Path) -> dict[str, zipfile.ZipInfo]:
    infos: dict[str, zipfile.ZipInfo] = {}
    total = 0
    members = zf.infolist()
    if len(members) > MAX_MEMBERS:
        raise BundleError(f"{path.name}: {len(members)} members, more than a bundle ever has ({MAX_MEMBERS})")
    for info in members:
        name = info.filename
        pure = PurePosixPath(name)
        if "\\" in name or "\x00" in name or pure.is_absolute() or name.startswith("/") or ":" in pure.parts[0]:
            raise BundleError(f"{path.name}: member {_quoted(name)} has an absolute or malformed path")
        if ".." in pure.parts:
            raise BundleError(f"{path.name}: member {_quoted(name)} points outside the bundle (path traversal)")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise BundleError(f"{path.name}: member {_quoted(name)} is a link; bundles hold plain files only")
        if info.is_dir():
            raise BundleError(f"{path.name}: member {_quoted(name)} is a folder entry; bundles hold plain files only")
        if name in infos:
            raise BundleError(f"{path.name}: member {_quoted(name)} appears twice")
        if info.file_size > MAX_MEMBER_BYTES:
            raise BundleError(f"{path.name}: member {_quoted(name)} is {info.file_size:,} bytes, over the "
                              f"{MAX_MEMBER_BYTES:,}-byte limit")
        total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise BundleError(f"{path.name}: members add up to over {MAX_TOTAL_BYTES:,} bytes")
        infos[name] = info
    return infos


def _read(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    # Read at most the limit + 1 whatever the header claims: a lying header cannot bomb us.
    with zf.open(info) as fh:
        data = fh.read(MAX_MEMBER_BYTES + 1)
    if len(data) > MAX_MEMBER_BYTES:
        raise BundleError(f"member {_quoted(info.filename)} unpacks to more than {MAX_MEMBER_BYTES:,} bytes")
    return data


def _manifest(zf: zipfile.ZipFile, infos: dict[str, zipfile.ZipInfo], path: Path) -> Manifest:
    if MANIFEST not in infos:
        raise BundleError(f"{path.name}: no {MANIFEST}; is this a kata bundle?")
    try:
        raw = json.loads(_read(zf, infos[MANIFEST]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BundleError(f"{path.name}: {MANIFEST} is not valid JSON: {str(exc)[:200]}") from exc
    try:
        return parse_manifest(raw)
    except ManifestError as exc:
        raise BundleError(f"{path.name}: {MANIFEST} {exc.message}") from exc


def _extract(zf: zipfile.ZipFile, infos: dict[str, zipfile.ZipInfo], manifest: Manifest,
             path: Path, dest: Path) -> dict[str, Path]:
    expected = {e.file: e for e in manifest.katas if not e.missing and e.file is not None}  # (always, when not missing)
    for name in infos:
        if name != MANIFEST and name not in expected:
            raise BundleError(f"{path.name}: unexpected member {_quoted(name)} (not in the manifest)")
    files: dict[str, Path] = {}
    dest.mkdir(parents=True, exist_ok=True)
    for name, entry in expected.items():
        if name not in infos:
            raise BundleError(f"{path.name}: the manifest lists {name}, but the bundle does not hold it")
        data = _read(zf, infos[name])
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise BundleError(f"{path.name}: {name} does not match its sha256 in the manifest (altered?)")
        suffix = ".cpp" if name.endswith(".cpp") else ".py"  # the manifest allows these two only
        target = dest / f"{entry.module}{suffix}"  # a name we make, never one from the zip
        target.write_bytes(data)
        files[entry.slug] = target
    return files


def _quoted(name: str) -> str:
    """A member name from the zip, quoted and cut short: it is the stranger's text."""
    return repr(name[:100] + ("…" if len(name) > 100 else ""))
