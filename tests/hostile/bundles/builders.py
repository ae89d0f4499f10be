"""Builders of hostile bundles: every malformed-manifest and injection case of the security
review, made on the fly so that each is a small, named edit of an honest manifest.

MALFORMED maps a case to (an edit of the manifest, the reason the review must give). An
edit returns a new manifest (a dict, dumped with json, which writes NaN and Infinity the way
an attacker would) or raw manifest text.
"""

from __future__ import annotations

import hashlib
import json
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

from tests.kata_testing import REPO_ROOT

REFERENCE = REPO_ROOT / "reference" / "paged_kv.py"
STUB = REPO_ROOT / "katas" / "paged_kv" / "stub.py"
HOMEWORK_SHA = "0" * 64


def manifest(source: bytes, homework_id: str = "hw-000000000000", *, homework_sha256: str = HOMEWORK_SHA,
             candidate: str = "Eve", claimed: dict | None = None, **entry: Any) -> dict[str, Any]:
    """An honest-looking manifest for one paged-kv solution."""
    now = time.time()
    kata = {"slug": "paged-kv", "module": "paged_kv", "missing": False, "file": "solutions/paged_kv.py",
            "sha256": hashlib.sha256(source).hexdigest(), "session_started_at": now - 3000,
            "graded_at": now - 100, "time_used_s": 2900.0, "time_limit_s": 3600.0, "hints_used": 0,
            "reveals": [], "claimed": claimed}
    kata.update(entry)
    return {"format": 1, "homework_id": homework_id, "homework_sha256": homework_sha256,
            "homework_title": "Week 1", "candidate": candidate, "created_at": now - 50, "katas": [kata]}


def claim(score: int = 100, seed: int = 4, passed: bool | None = None) -> dict[str, Any]:
    passed = score == 100 if passed is None else passed
    return {"score": score, "passed": passed, "seed": seed,
            "levels": [{"level": i, "passed": passed} for i in (1, 2, 3)]}


def write_bundle(path: Path, manifest_data: dict | list | str | bytes, files: dict[str, bytes],
                 extra: list[tuple[Any, bytes]] | None = None) -> Path:
    if isinstance(manifest_data, (dict, list)):
        manifest_data = json.dumps(manifest_data)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", manifest_data)
        for name, data in files.items():
            zf.writestr(name, data)
        for info, data in extra or []:
            zf.writestr(info, data)
    return path


def solution_bundle(path: Path, source: bytes, homework_id: str = "hw-000000000000", **kwargs: Any) -> Path:
    return write_bundle(path, manifest(source, homework_id, **kwargs), {"solutions/paged_kv.py": source})


def _kata(edit: Callable[[dict], None]) -> Callable[[dict], dict]:
    def apply(m: dict) -> dict:
        edit(m["katas"][0])
        return m
    return apply


def _top(key: str, value: Any) -> Callable[[dict], dict]:
    return lambda m: {**m, key: value}


def _set(key: str, value: Any) -> Callable[[dict], dict]:
    return _kata(lambda k: k.__setitem__(key, value))


def _claimed(key: str, value: Any) -> Callable[[dict], dict]:
    return _kata(lambda k: k.__setitem__("claimed", {**claim(), key: value}))


def _v2(**kata: Any) -> Callable[[dict], dict]:
    """A format 2 manifest (session end, grades, first passes) with `kata` changed."""
    def apply(m: dict) -> dict:
        entry = m["katas"][0]
        start = entry["session_started_at"]
        entry.update({"session_ended_at": start + 2900, "end_reason": "submitted", "num_grades": 2,
                      "levels": [{"level": 1, "passed_at": start + 600, "used_s": 600.0}]})
        entry.update(kata)
        return {**m, "format": 2}
    return apply


MALFORMED: dict[str, tuple[Callable[[dict], Any], str]] = {  # the edit may make any JSON value
    "format 3": (_top("format", 3), "format: must be one of 1, 2, not 3"),
    "format 2 without first passes": (_v2(levels=None), "levels: missing (format 2"),
    "first passes not a list": (_v2(levels={"1": 600}), "levels: must be a list"),
    "format 2 without grades": (lambda m: _drop(_v2()(m), "num_grades"), "num_grades: missing (format 2"),
    "grades negative": (_v2(num_grades=-1), "num_grades: must be an integer 0..100000"),
    "a level passed before the session": (_v2(levels=[{"level": 1, "passed_at": 1.1e9, "used_s": 1.0}]),
                                          "levels[0].passed_at: before the session started"),
    "a level listed twice": (_v2(levels=[{"level": 1, "passed_at": None, "used_s": None}] * 2),
                             "levels: a level is listed twice"),
    "a level's time NaN": (_v2(levels=[{"level": 1, "passed_at": None, "used_s": float("nan")}]),
                           "levels[0].used_s: must be a finite number"),
    "a level with a forged field": (_v2(levels=[{"level": 1, "passed_at": None, "used_s": 1.0, "fast": False}]),
                                    "unknown field 'fast'"),
    "session ended for an unknown reason": (_v2(end_reason="coach approved"), "end_reason: must be one of"),
    "token not hex": (lambda m: {**_v2()(m), "token": "Ada"}, "token: must be 64 lowercase hex"),
    "claimed score is a list": (_claimed("score", [100]), "claimed.score: must be an integer 0..100"),
    "claimed score is markup": (_claimed("score", "[green]100 (verified)[/]"), "claimed.score: must be an integer"),
    "claimed score is html": (_claimed("score", "<script>alert(1)</script>"), "claimed.score: must be an integer"),
    "claimed score over 100": (_claimed("score", 101), "claimed.score: must be an integer 0..100"),
    "claimed score is true": (_claimed("score", True), "claimed.score: must be an integer"),
    "claimed seed negative": (_claimed("seed", -1), "claimed.seed: must be an integer"),
    "claimed seed huge": (_claimed("seed", 2**70), "claimed.seed: must be an integer 0..18446744073709551615"),
    "claimed passed is a string": (_claimed("passed", "yes"), "claimed.passed: must be true or false"),
    "claimed levels not a list": (_claimed("levels", {"1": True}), "claimed.levels: must be a list"),
    "claimed levels too many": (_claimed("levels", [{"level": 1, "passed": True}] * 17), "at most 16 levels"),
    "claimed level is a float": (_claimed("levels", [{"level": 1.5, "passed": True}]), "levels[0].level"),
    "claimed has a forged field": (_claimed("verified", True), "unknown field 'verified'"),
    "claim is a string": (_set("claimed", "100 (verified)"), "claimed: must be an object"),
    "hints Infinity": (_set("hints_used", float("inf")), "hints_used: must be an integer 0..1000"),
    "hints negative": (_set("hints_used", -3), "hints_used: must be an integer"),
    "time NaN": (_set("time_used_s", float("nan")), "time_used_s: must be a finite number"),
    "time -Infinity": (_set("time_used_s", float("-inf")), "time_used_s: must be a finite number"),
    "time huge": (_set("time_used_s", 1e300), "time_used_s: must be a finite number"),
    "time is a string": (_set("time_used_s", "52 min"), "time_used_s: must be a finite number"),
    "graded_at NaN": (_set("graded_at", float("nan")), "graded_at: must be a finite number"),
    "graded_at in 1970": (_set("graded_at", 5.0), "graded_at: must be a finite number"),
    "reveals a string": (_set("reveals", "none"), "reveals: must be an integer"),
    "reveals negative": (_set("reveals", -1), "reveals: must be an integer"),
    "reveal time not a number": (_set("reveals", [{"at": "yesterday"}]), "reveals[0].at"),
    "too many reveals": (_set("reveals", [{"at": 1.7e9}] * 201), "more than 200 reveals"),
    "candidate too long": (_top("candidate", "A" * 10_000), "candidate: longer than 100 characters"),
    "candidate with a newline": (_top("candidate", "Eve\n[green](verified)"), "candidate: must be plain printable"),
    "candidate with terminal escapes": (_top("candidate", "a\x1b[2Jb"), "candidate: must be plain printable"),
    "candidate empty": (_top("candidate", "   "), "candidate: must be plain printable"),
    "candidate a number": (_top("candidate", 7), "candidate: must be a string"),
    "title too long": (_top("homework_title", "T" * 1000), "homework_title: longer than 200"),
    "homework id with markup": (_top("homework_id", "hw-[/]<b>"), "homework_id: must look like"),
    "homework sha not hex": (_top("homework_sha256", "<script>" * 8), "homework_sha256: must be 64"),
    "format is a string": (_top("format", "1"), "format: must be an integer"),
    "katas not a list": (_top("katas", {"paged-kv": {}}), "katas: must be a list"),
    "kata entry not an object": (_top("katas", ["paged-kv"]), "katas[0]: must be an object"),
    "kata listed twice": (lambda m: {**m, "katas": m["katas"] * 2}, "a kata is listed twice"),
    "slug with markup": (_set("slug", "[red]paged-kv[/]"), "slug: must be a kata slug"),
    "module is a path": (_set("module", "../../x"), "module: must be a Python module name"),
    "sha256 not hex": (_set("sha256", "Z" * 64), "sha256: must be 64 lowercase hex"),
    "unknown top-level field": (_top("verified", True), "unknown field 'verified'"),
    "manifest is a list": (lambda m: [m], "manifest: must be an object"),
    "manifest not json": (lambda m: "{nope", "not valid JSON"),
    "manifest nested too deep": (lambda m: "[" * 100_000 + "]" * 100_000, "not valid JSON"),
    "number with 5000 digits": (lambda m: json.dumps(m).replace('"hints_used": 0', '"hints_used": ' + "9" * 5000),
                                "not valid JSON"),
}


def _drop(m: dict, key: str) -> dict:
    del m["katas"][0][key]
    return m


def malformed_bundle(path: Path, case: str, homework_id: str = "hw-000000000000") -> Path:
    source = STUB.read_bytes()
    edit, _ = MALFORMED[case]
    return write_bundle(path, edit(manifest(source, homework_id, claimed=claim())), {"solutions/paged_kv.py": source})


# A solution that passes nothing and fills every channel the report shows with markup,
# scripts, terminal escapes, bidirectional overrides and megabytes of text.
INJECTION_SOURCE = b'''"""</details></pre><script>document.title = "PWNED"</script>"""
# \xe2\x80\xae reversed text hides code from a reader  [bold green](verified)[/]

BIG = "<script>document.title='PWNED'</script> [/] [green]100 (verified)[/] \\x1b[2J " * 50_000


class PagedKVCacheAllocator:
    def __init__(self, num_blocks, block_size):
        raise ValueError(BIG)
''' + b"#" * 990_000 + b"\n"

INJECTION_NAME = "<script>document.title='PWNED'</script>[green]Mallory (verified)[/]"
