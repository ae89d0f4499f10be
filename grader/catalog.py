"""The catalog of katas, discovered from ``katas/*/kata.toml``.

A kata folder ``katas/<module>/`` holds README.md (the statement), kata.toml (metadata),
stub.py (what ``kata start`` copies) and examples.py (the visible examples, a pytest file
run by ``kata check``). Its reference is ``reference/<module>.py`` and its hidden suite the
package ``grader/suites/<module>/`` (or one module ``grader/suites/<module>.py``). A
malformed folder is reported with the file and the field, and never hides the other katas.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import re
import sys
import tempfile
import time
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.errors import CatalogError
from grader.text_match import has_word

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PACKAGE_DIR = Path(__file__).resolve().parent
# The folder holding the `grader` and `reference` packages: the checkout, or site-packages
# when kata is installed from a wheel.
REPO_ROOT = PACKAGE_DIR.parent


def _shipped(name: str) -> Path:
    """katas/ and notebooks/ ship in the wheel as grader/katas and grader/notebooks (no
    top-level names of their own); in a checkout they are the repository's folders."""
    packaged = PACKAGE_DIR / name
    return packaged if packaged.is_dir() else REPO_ROOT / name


KATAS_DIR = _shipped("katas")
NOTEBOOKS_DIR = _shipped("notebooks")
REFERENCE_DIR = REPO_ROOT / "reference"
SUITES_DIR = PACKAGE_DIR / "suites"


def checkout_root() -> Path | None:
    """The repository kata runs from, or None when it runs from an installed wheel."""
    if (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "katas").is_dir():
        return REPO_ROOT
    return None

DIFFICULTIES = ("easy", "medium", "hard")
REQUIRED_FILES = ("README.md", "kata.toml", "stub.py", "examples.py")


@dataclass(frozen=True)
class Level:
    level: int
    name: str
    minutes: int
    hints: tuple[str, ...]


# Per point of a follow-up: groups of alternative key terms. The point counts when every group
# has an alternative in the answer (grader/followups.py).
PointKeys = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Followup:
    """A discussion question for the end of an interview, with the points an interviewer
    listens for in a good answer (empty when the kata's toml gives none), each point's key
    terms (`keys[i]` belongs to `points[i]`; empty for a point given as plain text) and the
    lowest level whose content the question and its points need: a mock asks it only once
    that level is revealed."""

    question: str
    points: tuple[str, ...] = ()
    keys: tuple[PointKeys, ...] = ()
    level: int = 1

    def __str__(self) -> str:
        return self.question


@dataclass(frozen=True)
class Kata:
    slug: str
    module: str
    title: str
    minutes: int
    difficulty: str
    tags: tuple[str, ...]
    summary: str
    levels: tuple[Level, ...]
    followups: tuple[Followup, ...]
    folder: Path = field(compare=False)
    support: tuple[str, ...] = ()  # public files of the kata the solution may import
    # How many judges a grading with the hidden suite may split its tests over (kata.toml's
    # `judges`, default 1): 2 where measured faster (suites of many quick calls; a suite
    # of heavy tensor work gains nothing, its judges' starts cost more).
    judges: int = 1

    @property
    def statement_path(self) -> Path:
        return self.folder / "README.md"

    @property
    def stub_path(self) -> Path:
        return self.folder / "stub.py"

    @property
    def cpp_stub_path(self) -> Path:
        """The C++ stub (`--lang cpp`), where the kata offers one."""
        return self.folder / "stub.cpp"

    @property
    def cpp_reference_path(self) -> Path:
        return REFERENCE_DIR / "cpp" / f"{self.module}.cpp"

    @property
    def uses_torch(self) -> bool:
        """Whether the reference imports torch (a solution then does too, as a rule): a
        grading's every judge and worker, started cold, imports it."""
        try:
            text = self.reference_path.read_text(encoding="utf-8")
        except OSError:
            return False
        return re.search(r"^\s*(import torch|from torch[ .])", text, re.MULTILINE) is not None

    @property
    def languages(self) -> tuple[str, ...]:
        """"py", and "cpp" where the kata ships a C++ stub."""
        return ("py", "cpp") if self.cpp_stub_path.is_file() else ("py",)

    def stub_for(self, path_or_lang: Path | str) -> Path:
        """The stub of a language ("py", "cpp") or of a solution file's (by its suffix)."""
        lang = path_or_lang if path_or_lang in ("py", "cpp") else (
            "cpp" if str(path_or_lang).lower().endswith((".cpp", ".cc", ".cxx")) else "py")
        return self.cpp_stub_path if lang == "cpp" else self.stub_path

    @property
    def examples_path(self) -> Path:
        return self.folder / "examples.py"

    @property
    def reference_path(self) -> Path:
        return REFERENCE_DIR / f"{self.module}.py"

    @property
    def suite_path(self) -> Path:
        """The hidden suite: a package ``grader/suites/<module>/`` (one ``test_level<N>.py``
        per level, plus its strategies and lockstep machines), or a single module
        ``grader/suites/<module>.py``."""
        package = SUITES_DIR / self.module
        if (package / "__init__.py").is_file():
            return package
        return SUITES_DIR / f"{self.module}.py"

    @property
    def support_paths(self) -> tuple[Path, ...]:
        """Files shipped with the kata that the candidate's code imports (e.g. a model)."""
        return tuple(self.folder / name for name in self.support)

    @property
    def notebook_path(self) -> Path:
        return NOTEBOOKS_DIR / f"{self.module}.py"

    def level(self, number: int) -> Level | None:
        return next((lv for lv in self.levels if lv.level == number), None)


@dataclass
class Catalog:
    katas: dict[str, Kata]
    problems: list[CatalogError]

    def get(self, slug: str) -> Kata:
        """The kata for a slug (or module name); CatalogError naming close matches if unknown."""
        key = slug.strip().lower()  # slugs are lower case: `kata show PPO` means ppo
        for kata in self.katas.values():
            if key in (kata.slug, kata.module):
                return kata
        for problem in self.problems:
            if f"katas/{key.replace('-', '_')}/" in problem.message:
                raise problem
        close = difflib.get_close_matches(key, list(self.katas), n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise CatalogError(f"unknown kata '{slug}'", hint=hint + "`kata list` shows the katas")

    def by_module(self, module: str) -> Kata | None:
        return next((k for k in self.katas.values() if k.module == module), None)


# kata.toml files parsed before, by path: (a hash of the text, data). Parsing all of them took
# about 45 ms of each command's start (`kata list`, `check`); reading and hashing them takes
# well under 1 ms. The cache files are kept beside the reference timings' (grader/store.cache_dir),
# as JSON, one for each katas folder (a checkout's 14 files: decoding one file for every
# checkout and test folder seen, 64 entries, took 17 ms of each start); a review loads
# catalogs from several threads at once, hence the lock.
_TOML_CACHE_PREFIX = "catalog-v3-"
_TOML_CACHE_ENTRIES = 64  # files of a folder still there, the newest parsed (a catalog has 14)
_TOML_CACHE_KEEP_S = 14 * 86400  # another folder's cache file unused this long is removed
_toml_cache: dict[Path, dict[str, Any]] = {}  # by cache file
_toml_cache_dirty: set[Path] = set()
_toml_cache_lock = threading.Lock()


def _toml_cache_path(katas_dir: Path) -> Path:
    from grader.store import cache_dir

    digest = hashlib.blake2b(str(katas_dir).encode(), digest_size=8).hexdigest()
    return cache_dir() / f"{_TOML_CACHE_PREFIX}{digest}.json"


def _parsed_toml(path: Path) -> dict[str, Any]:
    """The TOML file's data: from the cache when this very text was parsed before, else
    parsed (and remembered)."""
    text = path.read_text(encoding="utf-8")
    resolved = path.resolve()
    key, digest = str(resolved), hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    cache_file = _toml_cache_path(resolved.parent.parent)
    with _toml_cache_lock:
        cache = _toml_cache.get(cache_file)
        if cache is None:
            try:
                loaded = json.loads(cache_file.read_text(encoding="utf-8"))
                cache = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                cache = {}
            _toml_cache[cache_file] = cache
        entry = cache.get(key)
    if isinstance(entry, list) and len(entry) == 2 and entry[0] == digest and isinstance(entry[1], dict):
        return entry[1]
    data = tomllib.loads(text)
    try:
        json.dumps(data)  # (a TOML date has no JSON form: such a file is parsed each time)
    except (TypeError, ValueError):
        return data
    with _toml_cache_lock:
        cache.pop(key, None)  # (re-inserted last: the newest)
        cache[key] = [digest, data]
        _toml_cache_dirty.add(cache_file)
    return data


def _save_toml_cache() -> None:
    """Write the parsed files back (atomically; a cache that cannot be written is skipped),
    without the files that are gone, and the newest _TOML_CACHE_ENTRIES of the others."""
    with _toml_cache_lock:  # (written under the lock: an older text never lands after a newer)
        dirty = sorted(_toml_cache_dirty)
        _toml_cache_dirty.clear()
        for target in dirty:
            kept = [(k, v) for k, v in _toml_cache[target].items() if os.path.isfile(k)][-_TOML_CACHE_ENTRIES:]
            _write_toml_cache(target, json.dumps(dict(kept)))
    if dirty:
        _drop_unused_toml_caches(dirty[0].parent)


def _drop_unused_toml_caches(folder: Path) -> None:
    """Remove the cache files of katas folders not loaded for _TOML_CACHE_KEEP_S (test folders,
    old checkouts): a cache file is rewritten only when a file changed, so its age since a
    read is its access time where the file system keeps one, else its change."""
    now = time.time()
    with contextlib.suppress(OSError):
        for old in folder.glob(f"{_TOML_CACHE_PREFIX}*.json"):
            with contextlib.suppress(OSError):
                st = old.stat()
                if now - max(st.st_mtime, st.st_atime) > _TOML_CACHE_KEEP_S:
                    old.unlink()
    for before in ("catalog-v1.json", "catalog-v2.json"):  # the single files of earlier versions
        with contextlib.suppress(OSError):
            (folder / before).unlink()


def _write_toml_cache(target: Path, text: str) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".catalog-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, target)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        pass


def load_catalog(katas_dir: Path = KATAS_DIR) -> Catalog:
    katas: dict[str, Kata] = {}
    problems: list[CatalogError] = []
    if not katas_dir.is_dir():
        return Catalog({}, [CatalogError(f"no katas folder at {katas_dir}",
                                         hint="this kata installation is incomplete; reinstall it")])
    for folder in sorted(p for p in katas_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        try:
            kata = load_kata(folder)
        except CatalogError as exc:
            problems.append(exc)
            continue
        katas[kata.slug] = kata
    _save_toml_cache()
    return Catalog(katas, problems)


def load_kata(folder: Path) -> Kata:
    where = f"katas/{folder.name}/"
    for name in REQUIRED_FILES:
        if not (folder / name).is_file():
            raise CatalogError(f"{where}{name} is missing", hint=f"every kata folder needs {', '.join(REQUIRED_FILES)}")
    toml_path = folder / "kata.toml"
    try:
        data = _parsed_toml(toml_path)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{where}kata.toml is not valid TOML: {exc}") from exc
    get = _FieldReader(data, f"{where}kata.toml")
    slug = get.text("slug")
    module = slug.replace("-", "_")
    if module != folder.name:
        raise CatalogError(f"{where}kata.toml: field 'slug' is '{slug}', but the folder is "
                           f"'{folder.name}'", hint=f"rename the folder to katas/{module}/ or fix the slug")
    difficulty = get.text("difficulty")
    if difficulty not in DIFFICULTIES:
        raise CatalogError(f"{where}kata.toml: field 'difficulty' must be one of {', '.join(DIFFICULTIES)}, got '{difficulty}'")
    levels = tuple(_level(raw, f"{where}kata.toml: levels[{i}]") for i, raw in enumerate(get.items("levels")))
    if not levels or [lv.level for lv in levels] != list(range(1, len(levels) + 1)):
        raise CatalogError(f"{where}kata.toml: field 'levels' must number the levels 1, 2, ... in order")
    kata = Kata(slug=slug, module=module, title=get.text("title"), minutes=get.integer("minutes"),
                difficulty=difficulty, tags=tuple(get.items("tags", str)), summary=get.text("summary"),
                levels=levels, followups=_followups(get.items("followups"), f"{where}kata.toml", len(levels)),
                folder=folder, support=tuple(data.get("support", [])),
                judges=get.integer("judges") if "judges" in data else 1)
    for name in kata.support:
        if not isinstance(name, str) or "/" in name or not name.endswith(".py") or not (folder / name).is_file():
            raise CatalogError(f"{where}kata.toml: field 'support' names {name!r}, which is not a .py file of the folder")
    for path, what in ((kata.reference_path, "reference"), (kata.suite_path, "hidden suite")):
        if not path.exists():
            raise CatalogError(f"{where}: the {what} {path.relative_to(REPO_ROOT)} is missing")
    return kata


def _followups(raw: list, where: str, num_levels: int) -> tuple[Followup, ...]:
    """`followups = ["question", ...]`, or one table per question::

        [[followups]]
        question = "..."
        level = 2                  # asked once level 2 is revealed (default: the last level)

        [[followups.points]]       # one table per point, in order
        text = "what an interviewer listens for"
        keys = [["kv cache", "cache the keys"], ["quadratic", "O(t^2)"]]

    A point may also be plain text (`points = ["...", ...]`): then only a self-mark counts it.
    """
    out = []
    for i, item in enumerate(raw):
        here = f"{where}: followups[{i}]"
        if isinstance(item, str) and item.strip():
            out.append(Followup(item, level=num_levels))
            continue
        if not (isinstance(item, dict) and isinstance(item.get("question"), str) and item["question"].strip()):
            raise CatalogError(f"{here} must be a question, or a table with question = \"...\", "
                               "level = N and [[followups.points]] tables")
        level = item.get("level", num_levels)
        if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= num_levels:
            raise CatalogError(f"{here}: field 'level' must be one of the kata's levels, 1..{num_levels}, "
                               f"got {level!r}")
        raw_points = item.get("points", [])
        if not isinstance(raw_points, list):
            raise CatalogError(f"{here}: field 'points' must be a list of [[followups.points]] tables")
        points = [_point(p, f"{here}.points[{j}]") for j, p in enumerate(raw_points)]
        out.append(Followup(item["question"], tuple(text for text, _ in points),
                            tuple(keys for _, keys in points), level))
    return tuple(out)


_KEYS_EXAMPLE = 'e.g. keys = [["kv cache", "cache the keys"], ["quadratic", "O(t^2)"]]'


def _point(raw: Any, where: str) -> tuple[str, PointKeys]:
    """One point: plain text (no keys), or a table with text and keys."""
    if isinstance(raw, str) and raw.strip():
        return raw, ()
    if not isinstance(raw, dict):
        raise CatalogError(f"{where} must be a table with text = \"...\" and keys = [[...], ...]")
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        raise CatalogError(f"{where}: field 'text' must be a non-empty string")
    if "keys" not in raw:
        raise CatalogError(f"{where}: field 'keys' is missing", hint=_KEYS_EXAMPLE)
    groups = raw["keys"]
    if not (isinstance(groups, list) and groups and all(
            isinstance(g, list) and g and all(isinstance(t, str) for t in g) for g in groups)):
        raise CatalogError(f"{where}: field 'keys' must be a list of groups, each a non-empty list of "
                           "alternative key terms", hint=_KEYS_EXAMPLE)
    for group in groups:
        for term in group:
            if not has_word(term):
                raise CatalogError(f"{where}: field 'keys' holds the term {term!r}, which has no letter or "
                                   "digit to match", hint=_KEYS_EXAMPLE)
    return text, tuple(tuple(g) for g in groups)


def _level(raw: Any, where: str) -> Level:
    if not isinstance(raw, dict):
        raise CatalogError(f"{where} must be a table with level, name, minutes, hints")
    get = _FieldReader(raw, where)
    return Level(level=get.integer("level"), name=get.text("name"), minutes=get.integer("minutes"),
                 hints=tuple(get.items("hints", str)))


class _FieldReader:
    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.data, self.where = data, where

    def _get(self, name: str) -> Any:
        if name not in self.data:
            raise CatalogError(f"{self.where}: field '{name}' is missing")
        return self.data[name]

    def text(self, name: str) -> str:
        value = self._get(name)
        if not isinstance(value, str) or not value.strip():
            raise CatalogError(f"{self.where}: field '{name}' must be a non-empty string")
        return value

    def integer(self, name: str) -> int:
        value = self._get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise CatalogError(f"{self.where}: field '{name}' must be a positive integer")
        return value

    def items(self, name: str, item_type: type | None = None) -> list:
        value = self._get(name)
        if not isinstance(value, list) or (item_type and not all(isinstance(v, item_type) for v in value)):
            kind = f" of {item_type.__name__}" if item_type else ""
            raise CatalogError(f"{self.where}: field '{name}' must be a list{kind}")
        return value
