"""The homework file: a self-contained TOML document a coach writes and a candidate works.

    format = 1
    id = "hw-3f2a..."                # stable across the coach's and the candidate's copies
    title = "Week 1"
    due = "2026-12-10"               # optional, a date (late = graded after the end of that day)
    [[katas]]
    slug = "paged-kv"
    minutes = 75
    required_levels = 3              # levels the coach expects passed
    [[private_suites]]               # only in the coach's copy
    kata = "paged-kv"
    name = "edge_cases.py"
    source = '''...pytest file...'''
    [invitations]                    # format 2, only in the coach's copy (invites.py)
    secret = "<64 hex>"
    candidates = ["Ada", "Grace"]
    [invitation]                     # format 2, only in one candidate's copy
    candidate = "Ada"
    token = "<64 hex>"

The hash that a bundle records covers the public part only (id, title, due, katas), so the
candidate's copies (without private suites or the secret) and the coach's copy have the same
hash. A file is written as format 1 unless it holds an invitation: an older kata reads what it
can and refuses what it cannot check.
"""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import json
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from grader import pyast
from grader.catalog import Catalog
from grader.errors import KataError
from grader.homework import invites

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FORMAT = 1             # a file without invitations
INVITE_FORMAT = 2      # a file with [invitations] or [invitation]
MAX_SUITE_BYTES = 200_000


class HomeworkError(KataError):
    """A homework file is malformed (names the file and the field)."""

    default_hint = "fix the homework file, or ask the coach for a new one (`kata homework new` makes one)"


@dataclass(frozen=True)
class HomeworkKata:
    slug: str
    minutes: int
    required_levels: int


@dataclass(frozen=True)
class PrivateSuite:
    kata: str
    name: str
    source: str


@dataclass(frozen=True)
class Invitation:
    """One candidate's: their name and its token (invites.py)."""

    candidate: str
    token: str


@dataclass(frozen=True)
class Homework:
    id: str
    title: str
    due: dt.date | None
    katas: tuple[HomeworkKata, ...]
    private_suites: tuple[PrivateSuite, ...] = field(default=())
    invite_secret: str | None = None     # the coach's copy of a homework with invitations
    invited: tuple[str, ...] = ()
    invitation: Invitation | None = None  # a candidate's copy

    def invitation_for(self, name: str) -> Invitation:
        assert self.invite_secret is not None
        return Invitation(name, invites.token_for(self.invite_secret, self.id, name))

    @property
    def sha256(self) -> str:
        # "format": 1 whatever the file's format: the hash of a homework never changes.
        public = {"format": 1, "id": self.id, "title": self.title,
                  "due": self.due.isoformat() if self.due else None,
                  "katas": [k.__dict__ for k in self.katas]}
        return hashlib.sha256(json.dumps(public, sort_keys=True).encode()).hexdigest()

    def kata(self, slug: str) -> HomeworkKata | None:
        return next((k for k in self.katas if k.slug == slug), None)

    def is_late(self, when: float) -> bool:
        if self.due is None:
            return False
        end_of_due = dt.datetime.combine(self.due, dt.time.max)
        return dt.datetime.fromtimestamp(when) > end_of_due

    def suites_for(self, slug: str) -> list[PrivateSuite]:
        return [s for s in self.private_suites if s.kata == slug]

    def to_toml(self, *, include_private: bool = True, invitation: Invitation | None = None) -> str:
        """The coach's copy, or (include_private False) a candidate's, with their invitation."""
        invitations = include_private and self.invite_secret is not None
        data: dict[str, Any] = {"format": INVITE_FORMAT if invitations or invitation else FORMAT,
                                "id": self.id, "title": self.title}
        if self.due:
            data["due"] = self.due
        data["katas"] = [dict(k.__dict__) for k in self.katas]
        if include_private and self.private_suites:
            data["private_suites"] = [dict(s.__dict__) for s in self.private_suites]
        if invitations:
            data["invitations"] = {"secret": self.invite_secret, "candidates": list(self.invited)}
        if invitation is not None:
            data["invitation"] = dict(invitation.__dict__)
        return tomli_w.dumps(data, multiline_strings=True)


def new_homework(catalog: Catalog, slugs: list[str], *, minutes: int | None, due: dt.date | None,
                 title: str | None, suites: list[str], candidates: list[str] | None = None) -> Homework:
    """Build a homework from the command line's choices, validating every part."""
    if not slugs:
        raise HomeworkError("a homework needs at least one kata", hint="add --kata <slug> (see `kata list`)")
    katas: list[HomeworkKata] = []
    for slug in slugs:
        kata = catalog.get(slug)
        if any(k.slug == kata.slug for k in katas):
            raise HomeworkError(f"kata '{kata.slug}' is listed twice")
        katas.append(HomeworkKata(kata.slug, minutes or kata.minutes, len(kata.levels)))
    private = tuple(_private_suite(spec, [k.slug for k in katas], catalog) for spec in suites)
    title = title or "Homework: " + ", ".join(k.slug for k in katas)
    return Homework(id="hw-" + secrets.token_hex(6), title=title, due=due, katas=tuple(katas),
                    private_suites=private, invite_secret=invites.new_secret() if candidates else None,
                    invited=tuple(candidates or ()))


def _private_suite(spec: str, slugs: list[str], catalog: Catalog) -> PrivateSuite:
    """`--suite PATH` or `--suite SLUG=PATH`; a PATH alone names its kata with KATA = "slug"
    at top level, or belongs to the homework's only kata."""
    slug, _, path_text = spec.rpartition("=") if "=" in spec else ("", "", spec)
    path = Path(path_text)
    if not path.is_file():
        raise HomeworkError(f"private suite {path} does not exist")
    source = path.read_text(encoding="utf-8")
    if len(source.encode()) > MAX_SUITE_BYTES:
        raise HomeworkError(f"private suite {path} is larger than {MAX_SUITE_BYTES // 1000} kB")
    try:
        tree = pyast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise HomeworkError(f"private suite {path} has a syntax error at line {exc.lineno}: {exc.msg}") from exc
    declared = _declared_kata(tree)
    slug = slug or declared or (slugs[0] if len(slugs) == 1 else "")
    if not slug:
        raise HomeworkError(f"cannot tell which kata the private suite {path} is for",
                            hint=f"write --suite <slug>={path}, or put KATA = \"<slug>\" in the file")
    slug = catalog.get(slug).slug
    if slug not in slugs:
        raise HomeworkError(f"private suite {path} is for '{slug}', which is not in this homework")
    if not any(isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in tree.body):
        raise HomeworkError(f"private suite {path} has no test functions",
                            hint="see 'Private suites' in the README for the protocol")
    return PrivateSuite(kata=slug, name=path.name, source=source)


def _declared_kata(tree: ast.Module) -> str | None:
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "KATA"
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return None


def load_homework(path: Path, catalog: Catalog) -> Homework:
    """Read and validate a homework file; HomeworkError names the file and the field."""
    if not path.is_file():
        raise HomeworkError(f"homework file {path} does not exist")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise HomeworkError(f"{path} is not a valid homework file: {exc}") from exc
    where = str(path)
    if data.get("format") not in (FORMAT, INVITE_FORMAT):
        raise HomeworkError(f"{where}: field 'format' must be {FORMAT} or {INVITE_FORMAT}, got {data.get('format')!r}",
                            hint="was it written by a newer kata?")
    hw_id = _field(data, "id", str, where)
    if not hw_id.startswith("hw-"):
        raise HomeworkError(f"{where}: field 'id' must start with 'hw-'")
    title = _field(data, "title", str, where)
    due = data.get("due")
    if due is not None and not isinstance(due, dt.date):
        raise HomeworkError(f"{where}: field 'due' must be a date like 2026-12-10")
    katas = []
    for i, raw in enumerate(_field(data, "katas", list, where)):
        at = f"{where}: katas[{i}]"
        if not isinstance(raw, dict):
            raise HomeworkError(f"{at} must be a table")
        slug = catalog.get(_field(raw, "slug", str, at)).slug
        minutes = _field(raw, "minutes", int, at)
        levels = _field(raw, "required_levels", int, at)
        if minutes < 1 or levels < 1:
            raise HomeworkError(f"{at}: 'minutes' and 'required_levels' must be >= 1")
        katas.append(HomeworkKata(slug, minutes, levels))
    if not katas:
        raise HomeworkError(f"{where}: field 'katas' is empty")
    suites = []
    for i, raw in enumerate(data.get("private_suites", [])):
        at = f"{where}: private_suites[{i}]"
        suite = PrivateSuite(kata=_field(raw, "kata", str, at), name=_field(raw, "name", str, at),
                             source=_field(raw, "source", str, at))
        if suite.kata not in [k.slug for k in katas]:
            raise HomeworkError(f"{at}: field 'kata' is '{suite.kata}', which is not in this homework")
        suites.append(suite)
    secret, invited = _invitations(data.get("invitations"), where)
    return Homework(id=hw_id, title=title, due=due if not isinstance(due, dt.datetime) else due.date(),
                    katas=tuple(katas), private_suites=tuple(suites), invite_secret=secret, invited=invited,
                    invitation=_invitation(data.get("invitation"), where))


def _invitations(raw: Any, where: str) -> tuple[str | None, tuple[str, ...]]:
    if raw is None:
        return None, ()
    at = f"{where}: [invitations]"
    if not isinstance(raw, dict):
        raise HomeworkError(f"{at} must be a table")
    secret = _field(raw, "secret", str, at)
    if not invites.SECRET_HEX.fullmatch(secret):
        raise HomeworkError(f"{at}: field 'secret' must be 64 lowercase hex digits")
    names = _field(raw, "candidates", list, at)
    return secret, tuple(invites.clean_name(str(n), f"{at} candidates") for n in names)


def _invitation(raw: Any, where: str) -> Invitation | None:
    if raw is None:
        return None
    at = f"{where}: [invitation]"
    if not isinstance(raw, dict):
        raise HomeworkError(f"{at} must be a table")
    token = _field(raw, "token", str, at)
    if not invites.SECRET_HEX.fullmatch(token):
        raise HomeworkError(f"{at}: field 'token' must be 64 lowercase hex digits")
    return Invitation(invites.clean_name(_field(raw, "candidate", str, at), f"{at} candidate"), token)


def _field(data: dict, name: str, kind: type, where: str) -> Any:
    if name not in data:
        raise HomeworkError(f"{where}: field '{name}' is missing")
    value = data[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise HomeworkError(f"{where}: field '{name}' must be a {kind.__name__}")
    if isinstance(value, str) and not value.strip():
        raise HomeworkError(f"{where}: field '{name}' is empty")
    return value
