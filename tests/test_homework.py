"""Coach homework: the whole loop, the coach's checks on a new homework, hostile bundles,
hostile solutions, the HTML report in a browser. (Malformed manifests and injections:
tests/hostile/test_hostile_bundles.py.)"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from grader.catalog import load_catalog
from grader.cli.app import app
from grader.engine import sandbox
from grader.engine.limits import Limits
from grader.engine.runner import run_suite
from grader.homework.bundle import BundleError, open_bundle
from grader.homework.spec import load_homework
from tests.hostile.bundles import builders
from tests.hostile.bundles.builders import claim, manifest, solution_bundle, write_bundle
from tests.kata_testing import REPO_ROOT

runner = CliRunner()
REFERENCE = REPO_ROOT / "reference" / "paged_kv.py"
HOSTILE = Path(__file__).parent / "hostile"
TOY_SUITE = Path(__file__).parent / "engine_fixtures" / "toy_suite.py"

PRIVATE_SUITE = '''
KATA = "paged-kv"

from grader.protocol import expect, kata_test


@kata_test(level=1, category="edge cases", description="a single-block pool fills and empties")
def test_single_block_pool(solution):
    alloc = solution.PagedKVCacheAllocator(1, 4)
    expect(alloc.allocate("a", 4), "4 tokens fit in one block of 4")
    expect(not alloc.allocate("b", 1), "no room is left for b")
    alloc.free("a")
    expect(alloc.num_free_blocks == 1, "freeing returns the block", got=alloc.num_free_blocks)
'''


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False, input=input)


def said(result) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def workspace_file() -> Path:
    return Path(os.environ["KATA_WORKSPACE"]) / "paged_kv.py"


@pytest.fixture(scope="module")
def homework_files(tmp_path_factory):
    """Written once per module: `homework new` grades the reference with the private suite."""
    folder = tmp_path_factory.mktemp("homework")
    suite = folder / "private_edges.py"
    suite.write_text(PRIVATE_SUITE)
    out = folder / "week1.toml"
    result = invoke("homework", "new", "--kata", "paged-kv", "--minutes", "60", "--due", "2099-12-10",
                    "--title", "Week 1", "--suite", suite, "-o", out)
    assert result.exit_code == 0, result.output
    assert "checking private suite private_edges.py against the paged-kv reference" in said(result)
    return folder


@pytest.fixture
def homework(homework_files, tmp_path):
    for name in ("week1.toml", "week1.candidate.toml"):
        shutil.copy(homework_files / name, tmp_path / name)
    return tmp_path / "week1.toml"


def test_new_writes_a_coach_copy_and_a_candidate_copy_with_the_same_hash(homework):
    catalog = load_catalog()
    coach = load_homework(homework, catalog)
    candidate = load_homework(homework.with_name("week1.candidate.toml"), catalog)
    assert coach.title == "Week 1" and str(coach.due) == "2099-12-10"
    assert [(k.slug, k.minutes, k.required_levels) for k in coach.katas] == [("paged-kv", 60, 3)]
    assert len(coach.private_suites) == 1 and "test_single_block_pool" in coach.private_suites[0].source
    assert candidate.private_suites == () and "test_single_block_pool" not in homework.with_name(
        "week1.candidate.toml").read_text()
    assert coach.sha256 == candidate.sha256 and coach.id == candidate.id


def test_new_refuses_to_overwrite_a_homework_file_unless_forced(tmp_path):
    """A new homework has a new id: writing over week1.toml would orphan every bundle made for it."""
    out = tmp_path / "week1.toml"
    assert invoke("homework", "new", "--kata", "paged-kv", "-o", out).exit_code == 0
    first = out.read_text()
    old_id = load_homework(out, load_catalog()).id
    refused = invoke("homework", "new", "--kata", "rope", "-o", out)
    assert refused.exit_code == 2 and out.read_text() == first
    unwrapped = "".join(refused.output.split())  # rich breaks long paths anywhere
    assert f"{out},{out.with_name('week1.candidate.toml')}alreadyexist(homework{old_id})" in unwrapped
    assert "bundles made for the old file would be rejected" in said(refused) and "--force" in said(refused)
    forced = invoke("homework", "new", "--kata", "rope", "-o", out, "--force")
    assert forced.exit_code == 0 and "backed up the old file to" in said(forced)
    assert load_homework(out, load_catalog()).katas[0].slug == "rope"
    saved = sorted((tmp_path / ".backups").iterdir())
    assert [p.read_text() for p in saved if p.name.startswith("week1.2")] == [first]
    assert len(saved) == 2  # the coach's copy and the candidate's


def test_new_writes_the_candidates_copy_without_private_suites(tmp_path):
    """The README's week1.candidate.toml is written always: the coach always has the file to send."""
    out = tmp_path / "week1.toml"
    result = invoke("homework", "new", "--kata", "paged-kv", "-o", out)
    candidate = tmp_path / "week1.candidate.toml"
    assert result.exit_code == 0 and f"sendthecandidate{candidate}" in "".join(result.output.split())
    coach, theirs = load_homework(out, load_catalog()), load_homework(candidate, load_catalog())
    assert coach.sha256 == theirs.sha256 and theirs.invitation is None and theirs.private_suites == ()


@pytest.mark.parametrize("args,message", [
    (["--kata", "nope"], "unknown kata 'nope'"),
    (["--kata", "paged-kv", "--due", "10/12/2026"], "is not a date"),
    (["--kata", "paged-kv", "--kata", "paged-kv"], "listed twice"),
    (["--kata", "paged-kv", "--suite", "/does/not/exist.py"], "does not exist"),
])
def test_new_rejects_bad_arguments(tmp_path, args, message):
    result = invoke("homework", "new", *args, "-o", tmp_path / "hw.toml")
    assert result.exit_code == 2 and message in said(result)
    assert not (tmp_path / "hw.toml").exists()


@pytest.mark.parametrize("edit,field", [
    (lambda t: t.replace('title = "Week 1"', "title = 3"), "field 'title' must be a str"),
    (lambda t: t.replace("minutes = 60", 'minutes = "sixty"'), "katas[0]: field 'minutes' must be a int"),
    (lambda t: t.replace("format = 1", "format = 9"), "field 'format' must be 1"),
    (lambda t: t.replace('slug = "paged-kv"', 'slug = "nope"'), "unknown kata 'nope'"),
    (lambda t: t + "\n[[[", "not a valid homework file"),
])
def test_a_bad_homework_file_names_the_field(homework, edit, field):
    homework.write_text(edit(homework.read_text()))
    result = invoke("homework", "start", homework)
    assert result.exit_code == 2 and field in said(result)


def test_new_refuses_a_private_suite_the_reference_fails(tmp_path):
    suite = tmp_path / "wrong.py"
    suite.write_text(PRIVATE_SUITE.replace("alloc.num_free_blocks == 1", "alloc.num_free_blocks == 2"))
    result = invoke("homework", "new", "--kata", "paged-kv", "--suite", suite, "-o", tmp_path / "hw.toml")
    assert result.exit_code == 2, result.output
    assert "the paged-kv reference fails 1 of 1 test(s) of private suite wrong.py" in said(result)
    assert "test_single_block_pool" in said(result) and not (tmp_path / "hw.toml").exists()


def test_new_asks_before_writing_a_due_date_in_the_past(tmp_path):
    out = tmp_path / "hw.toml"
    args = ("homework", "new", "--kata", "paged-kv", "--due", "2001-01-02", "-o", out)
    declined = invoke(*args, input="n\n")
    assert declined.exit_code == 2 and "the due date 2001-01-02 is in the past" in said(declined)
    assert "nothing written" in said(declined) and not out.exists()
    assert invoke(*args, input="\n").exit_code == 2 and not out.exists()  # the default is no
    assert invoke(*args, input="y\n").exit_code == 0 and out.exists()
    out.unlink()
    out.with_name("hw.candidate.toml").unlink()
    skipped = invoke(*args, "--yes")
    assert skipped.exit_code == 0 and "in the past" not in skipped.output and out.exists()


def test_start_twice_names_the_open_kata_instead_of_opening_the_next(tmp_path):
    out = tmp_path / "hw.toml"
    assert invoke("homework", "new", "--kata", "paged-kv", "--kata", "rope", "-o", out).exit_code == 0
    first = invoke("homework", "start", out)
    assert first.exit_code == 0 and "started" in first.output
    again = invoke("homework", "start", out)
    assert again.exit_code == 0 and "paged-kv is already open" in said(again) and "started" not in again.output
    named = invoke("homework", "start", out, "paged-kv")
    assert "paged-kv is already open" in said(named)
    status = json.loads(invoke("homework", "status", out, "--json").output)
    assert [k["state"] for k in status["katas"]] == ["in progress", "not started"]
    other = invoke("homework", "start", out, "rope")  # naming another kata opens it
    assert other.exit_code == 0 and "started" in other.output


def test_the_whole_loop_candidate_then_coach(homework, tmp_path):
    candidate_copy = homework.with_name("week1.candidate.toml")
    early = invoke("reveal", "paged-kv")  # before `homework start`: must travel in the bundle
    assert early.exit_code == 0 and "class PagedKVCacheAllocator" in early.output
    started = invoke("homework", "start", candidate_copy)
    assert started.exit_code == 0 and "60 min" in started.output
    status = json.loads(invoke("homework", "status", "--json").output)
    assert status["katas"][0]["state"] == "in progress"
    workspace_file().write_text(REFERENCE.read_text())
    assert invoke("grade", "--seed", "11").exit_code == 0
    status = json.loads(invoke("homework", "status", candidate_copy, "--json").output)
    assert status["katas"][0]["state"] == "graded" and status["katas"][0]["score"] == 100
    bundle = tmp_path / "ada-week1.kata.zip"
    submitted = invoke("homework", "submit", candidate_copy, "--name", "Ada", "-o", bundle)
    assert submitted.exit_code == 0, submitted.output
    with zipfile.ZipFile(bundle) as zf:
        manifest_data = json.loads(zf.read("manifest.json"))
        assert sorted(zf.namelist()) == ["manifest.json", "solutions/paged_kv.py"]
    entry = manifest_data["katas"][0]
    assert manifest_data["candidate"] == "Ada" and entry["claimed"]["score"] == 100 and entry["claimed"]["seed"] == 11
    assert entry["claimed"]["scorecard"]["kata"] == "paged-kv" and entry["session_started_at"] > 0
    assert entry["sha256"] == hashlib.sha256(REFERENCE.read_bytes()).hexdigest()
    [reveal] = entry["reveals"]
    assert reveal["at"] < entry["session_started_at"] and reveal["during_session"] is False

    report = tmp_path / "report.html"
    reviewed = invoke("homework", "review", bundle, "--homework", homework, "--html", report, "--json",
                      "--seed", "12")
    assert reviewed.exit_code == 1, reviewed.output  # 100, but a copy of the reference: look at it
    data = json.loads(reviewed.output)
    row = data["rows"][0]
    assert data["seed"] == 12 and row["seed"] == 12 and data["num_gradings"] == 2  # hidden + private
    assert row["candidate"] == "Ada" and row["score"] == 100 and row["levels_passed"] == 3
    assert row["private_total"] == 1 and row["private_passed"] == 1
    assert not row["mismatch"] and row["claim_note"] == "claim matches" and row["claimed_seed"] == 11
    assert not row["late"] and row["time_limit_s"] == 3600 and row["signal"] == "Strong hire"
    assert row["copy_of_reference"] and row["reference_similarity"] == 1.0
    assert row["reveals"] == 1 and row["reveals_before_start"] == 1
    # The reference pasted and graded at once: every level passed within seconds, in one grade.
    assert row["num_grades"] == 1 and row["fast_levels"] == [1, 2, 3] and row["flags"] == ["COPY", "FAST"]
    assert [lv["budget_min"] for lv in row["level_times"]] == [30, 55, 75]
    assert all(lv["passed_after_s"] is not None and lv["passed_after_s"] < 120 for lv in row["level_times"])
    page = report.read_text()
    assert "Ada" in page and "a copy of the reference" in page and "1 before the session started" in page
    assert "follow-up questions for the debrief" in page and "class PagedKVCacheAllocator" not in page  # highlighted
    assert "<span class=\"k\">class</span>" in page


def test_review_prints_the_coachs_seed_and_a_readable_roster(homework, tmp_path):
    bundle = tmp_path / "bo.kata.zip"
    hw = load_homework(homework, load_catalog())
    solution_bundle(bundle, b"x = 1\n", hw.id, homework_sha256=hw.sha256, candidate="Bo")
    result = invoke("homework", "review", bundle, "--homework", homework, "--seed", "77", "--jobs", "1")
    assert result.exit_code == 1
    assert "with your seed 77" in result.output and "Week 1 (hw-" in said(result)
    assert max(len(line) for line in result.output.splitlines()) <= 80
    # A format 1 bundle (the builders' default) is read; what it cannot say is said so.
    assert ("self-reported: paged-kv 48 min 20 s of 1 h, grades not recorded, 0 hints, 0 reveals; "
            "first passes: not in this bundle (made by an older kata)") in said(result)
    assert "L0: loading the file" in said(result) and "PagedKVCacheAllocator" in said(result)


def test_submit_refuses_a_kata_never_started_unless_allowed(homework, tmp_path):
    bundle = tmp_path / "b.kata.zip"
    refused = invoke("homework", "submit", homework, "--name", "Bo", "-o", bundle)
    assert refused.exit_code == 2 and "never started: paged-kv" in refused.output and not bundle.exists()
    allowed = invoke("homework", "submit", homework, "--name", "Bo", "-o", bundle, "--allow-missing")
    assert allowed.exit_code == 0
    reviewed = json.loads(invoke("homework", "review", bundle, "--homework", homework, "--json").output)
    assert reviewed["rows"][0]["status"] == "missing" and reviewed["num_gradings"] == 0


def test_submit_stops_the_homework_clock(homework, tmp_path):
    """The sessions end at submission: time stops counting, a later grade is outside the
    homework (no session to count in), and `homework start` refuses to open a new one."""
    from grader import clock
    from grader.store import Store

    candidate_copy = homework.with_name("week1.candidate.toml")
    fake = clock.FakeClock()
    with clock.use(fake):
        assert invoke("homework", "start", candidate_copy).exit_code == 0
        fake.t += 9
        bundle = tmp_path / "ada.kata.zip"
        submitted = invoke("homework", "submit", candidate_copy, "--name", "Ada", "-o", bundle)
        assert submitted.exit_code == 0, submitted.output
        assert "the homework's clock stopped: paged-kv ended now" in said(submitted)
        fake.t += 3600
        again = invoke("homework", "submit", candidate_copy, "--name", "Ada", "-o", bundle)
        assert again.exit_code == 0 and "clock stopped" not in again.output
        with zipfile.ZipFile(bundle) as zf:
            entry = json.loads(zf.read("manifest.json"))["katas"][0]
        assert entry["time_used_s"] == 9.0 and entry["end_reason"] == "submitted" and entry["num_grades"] == 0
        assert entry["session_ended_at"] - entry["session_started_at"] == 9.0
        assert [lv["passed_at"] for lv in entry["levels"]] == [None, None, None]
        status = json.loads(invoke("homework", "status", candidate_copy, "--json").output)["katas"][0]
        assert status["state"] == "submitted, never graded" and status["submitted"]
        late_grade = invoke("grade")  # the session is over: nothing to count a grade in
        assert late_grade.exit_code == 2 and "no active session" in said(late_grade)
        reopened = invoke("homework", "start", candidate_copy, "paged-kv")
        assert reopened.exit_code == 2 and "you submitted Week 1" in said(reopened)
        assert "a new one would not be part of the homework" in said(reopened)
    with Store() as store:
        [session] = store.sessions_for_homework(load_homework(homework, load_catalog()).id)
        assert session.status == "ended" and session.end_reason == "submitted"


def _timed_unit(hw, candidate, *, used_s, levels, grades=1, score=100):
    """A graded unit result whose self-reported block is `levels`: [(passed_after_s or None)]."""
    start = time.time() - 10_000
    passes = [{"level": i, "passed_at": None if after is None else start + after, "used_s": after}
              for i, after in enumerate(levels, start=1)]
    return {"format": 1, "homework_id": hw.id, "bundle": f"{candidate}.kata.zip", "bundle_sha256": "0" * 64,
            "kata": "paged-kv", "seed": 8, "status": "graded", "candidate": candidate, "problem": "",
            "self_reported": {"time_used_s": used_s, "hints_used": 0, "graded_at": start + used_s, "reveals": [],
                              "session_started_at": start, "num_grades": grades, "levels": passes},
            "claimed": None, "mismatch": False, "private": [], "source": "", "solution_sha256": candidate * 64,
            "reference_similarity": 0.3, "similarity_not_measured": "",
            "regraded": {"score": score, "passed": score == 100, "num_tests": 3, "failures": [], "num_failures": 0,
                         "contained": True, "notes": [],
                         "levels": [{"level": i, "name": "n", "passed": after is not None}
                                    for i, after in enumerate(levels, start=1)]}}


def test_the_roster_shows_seconds_grades_first_passes_and_flags_fast_levels(homework):
    """9 seconds reads "9 s", never "0 min"; each level's first pass from the start, against
    the minutes up to it (paged-kv: 30, 55, 75); FAST under 10 % of those, at every level."""
    from grader.homework.html import render_html
    from grader.homework.roster import build_rows
    from grader.homework.terminal import render_roster

    hw = load_homework(homework, load_catalog())
    units = [_timed_unit(hw, "Zip", used_s=9.0, levels=[9, 9, 9]),
             _timed_unit(hw, "Ann", used_s=2700.0, levels=[2400, 2400, 2700], grades=4),  # one grade for L1-2
             _timed_unit(hw, "Ty", used_s=150.0, levels=[150, 330, None], score=70)]
    rows = {r.candidate: r for r in build_rows(hw, load_catalog(), units)}
    assert rows["Zip"].fast_levels == [1, 2, 3] and rows["Zip"].flags == ["FAST"] and rows["Zip"].needs_attention
    assert rows["Ann"].fast_levels == [] and rows["Ann"].flags == [] and not rows["Ann"].needs_attention
    assert rows["Ty"].fast_levels == [1] and rows["Ty"].level_times[2]["passed_after_s"] is None  # 150 s < 180 s
    assert rows["Zip"].to_dict()["level_times"][0] == {"level": 1, "budget_min": 30, "passed_after_s": 9.0,
                                                       "used_s": 9, "fast": True}
    console = Console(width=80, record=True, file=io.StringIO())
    render_roster(console, hw, list(rows.values()), 8)
    plain = console.export_text()
    text = " ".join(plain.split())
    assert ("paged-kv 9 s of 1 h, 1 grade, 0 hints, 0 reveals; first passes: L1 at 9 s of 30 min (FAST), "
            "L2 at 9 s of 55 min (FAST), L3 at 9 s of 75 min (FAST)") in text
    assert "paged-kv 45 min of 1 h, 4 grades" in text and "L3 at 45 min of 75 min" in text
    assert "L3 not passed" in text and "FAST, passed in under 10 % of the minutes (self-reported): paged-kv L1" in text
    assert max(len(line) for line in plain.splitlines()) <= 80
    page = render_html(hw, list(rows.values()), 8)
    assert "<div class='bad'>L1 at 9 s of 30 min (fast)</div>" in page and "fast: L1, L2, L3" in page
    assert "<th>grades*</th>" in page and "<th>first passes*</th>" in page and "9 s / 1 h" in page


def _link_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def _raw_zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _encrypted_member(path: Path) -> Path:
    solution_bundle(path, SRC)
    data = bytearray(path.read_bytes())
    # Set the "encrypted" flag of every member in the local and central headers.
    for sig, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(sig)
        while at != -1:
            data[at + offset] |= 1
            at = data.find(sig, at + 4)
    path.write_bytes(bytes(data))
    return path


SRC = b"x = 1\n"
FILES = {"solutions/paged_kv.py": SRC}
# A file that loads, so that its code runs (where it runs is what containment is about): a
# file that cannot load is answered by a compile check, and nothing of it runs at all.
RUNS = (REPO_ROOT / "katas" / "paged_kv" / "stub.py").read_bytes()
HOSTILE_BUNDLES = {
    "path traversal": (lambda p: write_bundle(p, manifest(SRC), FILES, [("../escape.py", b"boom")]), "path traversal"),
    "absolute path": (lambda p: write_bundle(p, manifest(SRC), FILES, [("/tmp/abs.py", b"boom")]), "absolute"),
    "link": (lambda p: write_bundle(p, manifest(SRC), {}, [(_link_info("solutions/paged_kv.py"), b"/etc/passwd")]),
             "is a link"),
    "unexpected member": (lambda p: write_bundle(p, manifest(SRC), {**FILES, "solutions/extra.py": b"x"}),
                          "unexpected member"),
    "oversize member": (lambda p: write_bundle(p, manifest(SRC), {"solutions/paged_kv.py": b"#" * 2_000_000}),
                        "over the 1,000,000-byte limit"),
    "oversize total": (lambda p: write_bundle(p, manifest(SRC), {f"m{i}.py": b"#" * 900_000 for i in range(10)}),
                       "add up to over"),
    "wrong hash": (lambda p: write_bundle(p, manifest(SRC), {"solutions/paged_kv.py": b"x = 2\n"}),
                   "does not match its sha256"),
    "manifest lists a missing file": (lambda p: write_bundle(p, manifest(SRC), {}), "does not hold it"),
    "not a zip": (lambda p: (p.write_bytes(b"PK? not really a zip"), p)[1], "not a zip file"),
    "no manifest": (lambda p: _raw_zip(p, {"solutions/paged_kv.py": SRC}), "no manifest.json"),
    "duplicate member": (lambda p: write_bundle(p, manifest(SRC), FILES, [("solutions/paged_kv.py", SRC)]),
                         "appears twice"),
    "encrypted member": (_encrypted_member, "cannot be read"),
    "long member name": (lambda p: write_bundle(p, manifest(SRC), FILES, [("x" * 5000, b"")]),
                         "unexpected member 'xxxxx"),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", sorted(HOSTILE_BUNDLES))
def test_hostile_bundles_are_rejected_with_a_message_and_write_nothing_outside(case, tmp_path):
    make, message = HOSTILE_BUNDLES[case]
    path = make(tmp_path / "evil.kata.zip")
    dest = tmp_path / "out" / "solutions"
    before = set(tmp_path.parent.iterdir())
    with pytest.raises(BundleError, match=message) as caught:
        open_bundle(path, dest)
    assert len(caught.value.message) < 400
    assert set(tmp_path.parent.iterdir()) == before
    assert not dest.exists() or list(dest.iterdir()) == []


def test_review_flags_a_tampered_claim_and_shows_failures(homework, tmp_path):
    hw = load_homework(homework, load_catalog())
    stub = (REPO_ROOT / "katas" / "paged_kv" / "stub.py").read_bytes()
    bundle = solution_bundle(tmp_path / "eve.kata.zip", stub, hw.id, homework_sha256=hw.sha256,
                             claimed=claim(100, seed=4))
    report = tmp_path / "r.html"
    result = invoke("homework", "review", bundle, "--homework", homework, "--html", report, "--json",
                    "--seed", "5")
    assert result.exit_code == 1
    data = json.loads(result.output)
    row = data["rows"][0]
    assert row["score"] == 0 and row["claimed_score"] == 100 and row["mismatch"]
    assert row["claim_note"] == "MISMATCH: claimed 100 with seed 4, but that seed re-grades to 0"
    assert data["num_gradings"] == 3  # your seed, the claimed seed (they disagree), the private suite
    assert row["private_passed"] == 0 and row["private_total"] == 1
    assert any(f["private_suite"] == "private_edges.py" for f in row["failures"])
    assert all("your code" not in f["message"] for f in row["failures"])
    assert any("the solution raised NotImplementedError" in f["message"] for f in row["failures"])
    assert "MISMATCH" in report.read_text()


def test_review_of_a_bundle_for_another_homework_is_rejected(homework, tmp_path):
    bundle = solution_bundle(tmp_path / "x.kata.zip", SRC, "hw-ffffffffffff")
    row = json.loads(invoke("homework", "review", bundle, "--homework", homework, "--json").output)["rows"][0]
    assert row["status"] == "rejected" and "for homework hw-ffffffffffff" in row["problem"]


def test_review_refuses_to_run_uncontained_unless_the_coach_allows_it(homework, tmp_path, monkeypatch):
    hw = load_homework(homework, load_catalog())
    bundle = solution_bundle(tmp_path / "bo.kata.zip", RUNS, hw.id, homework_sha256=hw.sha256, candidate="Bo")
    monkeypatch.setenv(sandbox.ENV_SANDBOX, "none")
    refused = invoke("homework", "review", bundle, "--homework", homework)
    assert refused.exit_code == 2 and "would run uncontained here: KATA_SANDBOX=none" in said(refused)
    assert "--allow-uncontained" in said(refused) and "Bo" not in refused.output
    one = invoke("homework", "grade-one", "--homework", homework, "--bundle", bundle, "--kata", "paged-kv",
                 "--seed", "1", "--json")
    assert one.exit_code == 2 and "uncontained" in said(one)
    allowed = invoke("homework", "review", bundle, "--homework", homework, "--allow-uncontained")
    assert allowed.exit_code == 1 and "UNCONTAINED" in allowed.output and "graded uncontained" in said(allowed)


def test_a_grading_that_comes_back_uncontained_is_not_shown_without_permission(homework, tmp_path, monkeypatch):
    """The sandbox can fail after the pre-check (the scorecard says so): the score is withheld."""
    from grader.homework import unit

    hw = load_homework(homework, load_catalog())
    bundle = solution_bundle(tmp_path / "bo.kata.zip", RUNS, hw.id, homework_sha256=hw.sha256, candidate="Bo")
    monkeypatch.setenv(sandbox.ENV_SANDBOX, "none")
    result = unit.grade_unit(hw, load_catalog(), bundle, "paged-kv", 3)
    assert result["status"] == "uncontained" and "regraded" not in result and "private" not in result


def test_grade_one_and_assemble_give_the_roster_review_gives(homework, tmp_path):
    hw = load_homework(homework, load_catalog())
    good = solution_bundle(tmp_path / "bo.kata.zip", SRC, hw.id, homework_sha256=hw.sha256, candidate="Bo")
    bad = solution_bundle(tmp_path / "cy.kata.zip", SRC, "hw-ffffffffffff", candidate="Cy")
    reviewed = json.loads(invoke("homework", "review", good, bad, "--homework", homework, "--seed", "3",
                                 "--json").output)
    results = tmp_path / "results"
    results.mkdir()
    for bundle in (good, bad):
        one = invoke("homework", "grade-one", "--homework", homework, "--bundle", bundle, "--kata", "paged-kv",
                     "--seed", "3", "-o", results / f"{bundle.stem}.json")
        assert one.exit_code == 0, one.output
    unit = json.loads((results / "bo.kata.json").read_text())
    assert unit["seed"] == 3 and unit["status"] == "graded" and unit["regraded"]["score"] == 0
    assert set(unit) >= {"bundle_sha256", "solution_sha256", "self_reported", "claimed", "private", "source"}
    html_out = tmp_path / "assembled.html"
    assembled = invoke("homework", "assemble", results, "--homework", homework, "--json", "--html", html_out)
    assert assembled.exit_code == 1
    data = json.loads(assembled.output)
    assert data["seeds"] == [3] and data["rows"] == reviewed["rows"]
    assert "Bo" in html_out.read_text()
    wrong = invoke("homework", "assemble", homework, "--homework", homework)
    assert wrong.exit_code == 2 and "is not a unit result" in said(wrong)


# ---------------------------------------------------------------------------- hostile solutions


# Each verdict below must come from the limit the test names, whatever the machine's load: the
# wall-clock limit per test is far above what the passing tests and the limit being tested
# need with both cores busy (a loaded 2-core machine ran the hoard to 1 GiB for over 3 s; at a
# load average of 16 a grading child gets ~10% of a core).
# Only the sleeping solution meets it, and it sleeps for an hour.
_GENEROUS_TEST_TIMEOUT_S = 120.0


def _contained_run(name: str, workdir: Path, test_timeout_s: float = _GENEROUS_TEST_TIMEOUT_S, **limits):
    settings = dict(cpu_seconds=20, memory_bytes=2 * 1024**3, max_file_bytes=10 * 1024**2)
    settings.update(limits)
    outcome = run_suite(TOY_SUITE, HOSTILE / f"{name}.py", "toy", 1, test_timeout_s=test_timeout_s,
                        total_timeout_s=300.0, limits=Limits(**settings), workdir=workdir)
    return {t.name: t for t in outcome.tests}


def test_a_sleeping_solution_gets_a_timeout_verdict(tmp_path):
    # 10 s: the sleep (an hour) always meets it; test_scale (0.4 s at a load average of 16)
    # passes far within it.
    tests = _contained_run("sleeps", tmp_path, test_timeout_s=10.0)
    assert "timed out after 10 s" in tests["test_add"].message and tests["test_scale"].passed


def test_unbounded_allocation_hits_the_memory_limit(tmp_path):
    tests = _contained_run("allocates", tmp_path, memory_bytes=1024**3)
    assert not tests["test_add"].passed and ("MemoryError" in tests["test_add"].message
                                             or "crashed" in tests["test_add"].message), tests["test_add"].message
    assert tests["test_scale"].passed


def test_cpu_burn_is_stopped_by_the_cpu_limit(tmp_path):
    # 2 CPU seconds: the burn meets them long before the wall-clock limit even on a loaded
    # machine (3 CPU s took 44 s of wall time at a load average of 16), and a fresh child starts
    # and passes test_scale in ~0.5 CPU s, well within them.
    tests = _contained_run("burns_cpu", tmp_path, cpu_seconds=2)
    assert "SIGXCPU" in tests["test_add"].message or "SIGKILL" in tests["test_add"].message, tests["test_add"].message
    assert tests["test_scale"].passed


def test_a_solution_cannot_fork(tmp_path):
    """No child process at all (seccomp), so none can outlive the run."""
    tests = _contained_run("forks", tmp_path)
    assert not tests["test_add"].passed and "PermissionError" in tests["test_add"].message
    assert not (tmp_path / "pid.txt").exists()
    assert tests["test_scale"].passed


@pytest.mark.skipif(sandbox.bwrap_available() is not None, reason="no sandbox here")
def test_files_a_solution_writes_stay_in_its_sandbox(tmp_path, monkeypatch):
    coach_cwd = tmp_path / "coach"
    coach_cwd.mkdir()
    monkeypatch.chdir(coach_cwd)
    workdir = tmp_path / "work"
    workdir.mkdir()
    tests = _contained_run("writes_files", workdir)
    assert tests["test_add"].passed  # writing in its own private /tmp is allowed ...
    assert list(coach_cwd.iterdir()) == []  # ... and nothing lands where the coach works
    assert not list(workdir.rglob("written_by_candidate.txt"))


def test_file_size_is_limited(tmp_path):
    tests = _contained_run("huge_file", tmp_path, max_file_bytes=5 * 1024**2)
    assert not tests["test_add"].passed, tests["test_add"].message
    assert "SIGXFSZ" in tests["test_add"].message or "File too large" in tests["test_add"].message
    assert tests["test_scale"].passed


def test_the_coachs_home_and_environment_are_not_visible(tmp_path, monkeypatch):
    coach_home = tmp_path / "coach-home"
    coach_home.mkdir()
    (coach_home / "coach_secret.txt").write_text("s3cr3t")
    monkeypatch.setenv("HOME", str(coach_home))
    monkeypatch.setenv("COACH_TOKEN", "tok-123")
    workdir = tmp_path / "work"
    workdir.mkdir()
    message = _contained_run("reads_home", workdir)["test_add"].message
    assert "leak no-secret no-token" in message


# ---------------------------------------------------------------------------- a cohort with a hostile bundle


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    """One review (JSON and HTML) of a folder of honest bundles with hostile ones among them:
    a copy of the reference, an independent correct solution, a stub claiming 100, a
    solution that injects markup and scripts everywhere, and a malformed manifest."""
    folder = tmp_path_factory.mktemp("cohort")
    homework = folder / "week1.toml"
    assert invoke("homework", "new", "--kata", "paged-kv", "--minutes", "60", "--title", "Week 1",
                  "-o", homework).exit_code == 0
    hw = load_homework(homework, load_catalog())
    bundles = folder / "bundles"
    bundles.mkdir()
    correct = REPO_ROOT / "tests" / "corpus" / "paged_kv" / "correct_highest_id_first.py"
    common = dict(homework_id=hw.id, homework_sha256=hw.sha256)
    solution_bundle(bundles / "ada.kata.zip", builders.REFERENCE.read_bytes(), candidate="Ada",
                    claimed=claim(100, seed=11), **common)
    solution_bundle(bundles / "bo.kata.zip", correct.read_bytes(), candidate="Bo", claimed=claim(100, seed=3),
                    **common)
    solution_bundle(bundles / "eve.kata.zip", builders.STUB.read_bytes(), candidate="Eve",
                    claimed=claim(100, seed=4), **common)
    solution_bundle(bundles / "mallory.kata.zip", builders.INJECTION_SOURCE, candidate=builders.INJECTION_NAME,
                    claimed=claim(0, seed=5), **common)
    builders.malformed_bundle(bundles / "zed.kata.zip", "claimed score is a list", hw.id)
    report = folder / "report.html"
    result = invoke("homework", "review", bundles, "--homework", homework, "--seed", "8",
                    "--jobs", "2", "--html", report, "--json")
    return {"folder": folder, "result": result, "report": report, "homework": hw,
            "mallory_bytes": (bundles / "mallory.kata.zip").stat().st_size}


def test_a_cohort_with_hostile_bundles_gives_the_full_roster(cohort):
    result = cohort["result"]
    assert result.exit_code == 1
    data = json.loads(result.output)
    rows = {r["candidate"] if r["status"] != "rejected" else r["bundle"]: r for r in data["rows"]}
    assert list(rows) == ["Ada", "Bo", "Eve", builders.INJECTION_NAME, "zed.kata.zip"], \
        [(r["candidate"], r["bundle"], r["status"], r.get("problem")) for r in data["rows"]]
    assert rows["Ada"]["score"] == 100 and rows["Ada"]["copy_of_reference"]
    assert rows["Bo"]["score"] == 100 and rows["Bo"]["claim_note"] == "claim matches"
    assert rows["Bo"]["reference_similarity"] < rows["Ada"]["reference_similarity"] == 1.0
    assert rows["Eve"]["score"] == 0 and rows["Eve"]["mismatch"]
    mallory = rows[builders.INJECTION_NAME]
    assert mallory["score"] == 0 and not mallory["mismatch"] and mallory["source_truncated"]
    assert all(len(f["message"]) <= 500 for f in mallory["failures"])
    assert "claimed.score: must be an integer 0..100" in rows["zed.kata.zip"]["problem"]
    # Ada, Bo, Eve with your seed, Eve's claimed seed, Mallory: nothing graded twice.
    assert data["seed"] == 8 and data["num_gradings"] == 5


def test_a_hostile_bundle_cannot_bloat_or_script_the_report(cohort):
    page = cohort["report"].read_text()
    assert cohort["mallory_bytes"] < 3000 and len(page) < 400_000  # 1 MB of source, 1 MB messages
    assert "<script" not in page and "&lt;script&gt;document.title" in page
    assert "http-equiv='Content-Security-Policy'" in page and "script-src 'none'" in page


def test_the_terminal_roster_shows_bundle_text_as_text(cohort):
    from grader.homework.roster import RosterRow
    from grader.homework.terminal import render_roster

    fields = set(RosterRow.__dataclass_fields__)
    rows = [RosterRow(**{k: v for k, v in r.items() if k in fields}) for r in json.loads(cohort["result"].output)["rows"]]
    console = Console(width=80, record=True, file=io.StringIO(), force_terminal=True)
    render_roster(console, cohort["homework"], rows, 8)
    text = console.export_text()
    assert "[green]Mallory (verified)[/]" in " ".join(text.split())  # printed, not interpreted
    assert "MISMATCH" in text and "COPY" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _run_chromium(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    """Headless Chromium on `page`, offline; its DOM after loading on stdout (`extra` adds
    flags, e.g. --enable-logging=stderr to see the page's console messages)."""
    result = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", *extra, "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert "<html" in result.stdout, result.stderr[-2000:]
    return result


def _dump_dom(page: Path, profile: Path) -> str:
    return _run_chromium(page, profile).stdout


SPLICED = "<script>document.title = 'PWNED'; document.body.setAttribute('data-pwned', 'yes')</script>"


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_the_report_runs_no_script_in_headless_chromium(cohort, tmp_path):
    report = cohort["report"]
    dom = _dump_dom(report, tmp_path / "profile")
    assert '<table id="roster">' in dom and "Eve" in dom and "not implemented" in dom
    assert "<title>Week 1 — review</title>" in dom and "data-pwned" not in dom
    assert "<script" not in dom  # the injected markup stayed text
    # Were an escaping bug to let a script through, the page's policy would still block it ...
    page = report.read_text()
    spliced = tmp_path / "spliced.html"
    spliced.write_text(page.replace("</h1>", "</h1>" + SPLICED, 1))
    dom = _dump_dom(spliced, tmp_path / "profile")
    assert "document.title = 'PWNED'" in dom  # the script element is there ...
    assert "<title>Week 1 — review</title>" in dom and 'data-pwned="yes"' not in dom  # ... and did not run
    # ... which is what stops it: without the policy the same script runs (the check can fail).
    unprotected = tmp_path / "unprotected.html"
    unprotected.write_text(re.sub(r"<meta http-equiv='Content-Security-Policy'[^>]*>", "", spliced.read_text()))
    dom = _dump_dom(unprotected, tmp_path / "profile")
    assert 'data-pwned="yes"' in dom and "<title>PWNED</title>" in dom
