"""Per-candidate invitations (issue 37, item 10): `homework new --candidates` and `homework
invite` write one file per name whose token binds a bundle to that name; the review rejects
a bundle under another name, without a token, or with a token the coach never issued. A
candidate holds only their own token, never the secret that makes them.

Nothing here is graded: bundles are checked the way the review checks them before grading.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader.catalog import load_catalog
from grader.cli.app import app
from grader.homework import invites
from grader.homework.bundle import BundleError
from grader.homework.spec import load_homework
from grader.homework.unit import check_bundle
from tests.hostile.bundles.builders import STUB, manifest, write_bundle

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def said(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture
def cohort(tmp_path):
    out = tmp_path / "week1.toml"
    result = invoke("homework", "new", "--kata", "paged-kv", "--minutes", "60", "-o", out,
                    "--candidates", "Ada Lovelace, Grace")
    assert result.exit_code == 0, result.output
    return out


def _bundle(path: Path, hw, candidate: str, token: str | None) -> Path:
    source = STUB.read_bytes()
    data = manifest(source, hw.id, homework_sha256=hw.sha256, candidate=candidate)
    if token is not None:
        data["token"] = token
    return write_bundle(path, data, {"solutions/paged_kv.py": source})


def _check(bundle: Path, coach_file: Path) -> None:
    """What the review does before grading a bundle (BundleError: one rejected row)."""
    with tempfile.TemporaryDirectory() as tmp:
        check_bundle(bundle, load_homework(coach_file, load_catalog()), load_catalog(), Path(tmp) / "s")


def test_new_writes_one_file_per_candidate_with_their_token_and_no_secret(cohort):
    coach = load_homework(cohort, load_catalog())
    ada_file, grace_file = (cohort.with_name(f"week1.candidate-{s}.toml") for s in ("ada-lovelace", "grace"))
    ada, grace = load_homework(ada_file, load_catalog()), load_homework(grace_file, load_catalog())
    assert coach.invited == ("Ada Lovelace", "Grace") and coach.invite_secret is not None
    assert ada.invitation.candidate == "Ada Lovelace" and grace.invitation.candidate == "Grace"
    assert ada.invitation.token == invites.token_for(coach.invite_secret, coach.id, "Ada Lovelace")
    assert ada.invitation.token != grace.invitation.token
    assert coach.sha256 == ada.sha256 == grace.sha256  # one homework, whoever holds it
    for path in (ada_file, grace_file):
        assert coach.invite_secret not in path.read_text() and "[invitations]" not in path.read_text()
    assert not cohort.with_name("week1.candidate.toml").exists()  # a copy without a token would be rejected


@pytest.mark.parametrize("names,message", [
    ("Ada,ada", "names 'Ada' twice"),
    ("Zoë,Zoe", "'Zoë' and 'Zoe' would share the file"),
    (" , ", "names nobody"),
    ("A\x1b[2J", "is not a name"),
])
def test_new_refuses_names_it_cannot_tell_apart(tmp_path, names, message):
    result = invoke("homework", "new", "--kata", "paged-kv", "-o", tmp_path / "w.toml", "--candidates", names)
    assert result.exit_code == 2 and message in said(result) and not (tmp_path / "w.toml").exists()


def test_submit_takes_the_name_from_the_invitation(cohort, tmp_path):
    ada_file = cohort.with_name("week1.candidate-ada-lovelace.toml")
    assert invoke("homework", "start", ada_file).exit_code == 0
    bundle = tmp_path / "ada.kata.zip"
    other = invoke("homework", "submit", ada_file, "--name", "Grace", "-o", bundle)
    assert other.exit_code == 2 and "this homework file was issued to 'Ada Lovelace', not 'Grace'" in said(other)
    assert not bundle.exists()
    done = invoke("homework", "submit", ada_file, "-o", bundle)
    assert done.exit_code == 0 and "for Ada Lovelace" in said(done)
    with zipfile.ZipFile(bundle) as zf:
        data = json.loads(zf.read("manifest.json"))
    ada = load_homework(ada_file, load_catalog())
    assert data["candidate"] == "Ada Lovelace" and data["token"] == ada.invitation.token and data["format"] == 2
    _check(bundle, cohort)  # accepted


def test_a_bundle_without_invitation_needs_a_name(tmp_path):
    out = tmp_path / "w.toml"
    assert invoke("homework", "new", "--kata", "paged-kv", "-o", out).exit_code == 0
    assert invoke("homework", "start", out).exit_code == 0
    result = invoke("homework", "submit", out, "-o", tmp_path / "b.kata.zip")
    assert result.exit_code == 2 and "--name is missing: this homework file names no candidate" in said(result)


def test_the_review_rejects_a_bundle_under_another_name_or_without_a_token(cohort, tmp_path):
    coach = load_homework(cohort, load_catalog())
    ada_token = invites.token_for(coach.invite_secret, coach.id, "Ada Lovelace")
    _check(_bundle(tmp_path / "ok.kata.zip", coach, "Ada Lovelace", ada_token), cohort)
    cases = {
        "renamed": (("Grace", ada_token), "the bundle names 'Grace', but its invitation was issued to 'Ada Lovelace'"),
        "self-declared": (("Mallory", None), "carries no invitation token"),
        "forged": (("Mallory", "f" * 64), "its invitation token was not issued for homework"),
        "another homework's": (("Ada Lovelace", invites.token_for("0" * 64, coach.id, "Ada Lovelace")),
                               "not issued for homework"),
    }
    for case, ((name, token), reason) in cases.items():
        with pytest.raises(BundleError) as caught:
            _check(_bundle(tmp_path / f"{case}.kata.zip", coach, name, token), cohort)
        assert reason in caught.value.message, case
    # In a review: one rejected row naming the mismatch, nothing graded.
    renamed = _bundle(tmp_path / "renamed.kata.zip", coach, "Grace", ada_token)
    data = json.loads(invoke("homework", "review", renamed, "--homework", cohort, "--json").output)
    assert data["num_gradings"] == 0 and data["rows"][0]["status"] == "rejected"
    assert "issued to 'Ada Lovelace'" in data["rows"][0]["problem"]


def test_a_token_cannot_be_made_without_the_secret(cohort):
    """The token is an HMAC keyed by the coach's secret: knowing your own token, the id and
    another's name gives nothing (no plain hash of what a candidate can see matches)."""
    import hashlib

    coach = load_homework(cohort, load_catalog())
    grace = invites.token_for(coach.invite_secret, coach.id, "Grace")
    ada = load_homework(cohort.with_name("week1.candidate-ada-lovelace.toml"), load_catalog()).invitation.token
    for guess in (f"{coach.id}\nGrace", f"{ada}{coach.id}\nGrace", f"{coach.id}Grace", "Grace"):
        assert hashlib.sha256(guess.encode()).hexdigest() != grace


def test_invite_adds_a_candidate_to_a_homework(cohort):
    before = load_homework(cohort, load_catalog())
    result = invoke("homework", "invite", cohort, "--candidates", "Linus,grace")
    assert result.exit_code == 0, result.output
    after = load_homework(cohort, load_catalog())
    assert after.id == before.id and after.invite_secret == before.invite_secret and after.sha256 == before.sha256
    assert after.invited == ("Ada Lovelace", "Grace", "Linus")  # 'grace' is Grace, invited again
    linus = load_homework(cohort.with_name("week1.candidate-linus.toml"), load_catalog())
    assert linus.invitation.token == invites.token_for(after.invite_secret, after.id, "Linus")
    assert "Linus: " in said(result) and "Grace: " in said(result)
    refused = invoke("homework", "invite", cohort.with_name("week1.candidate-linus.toml"), "--candidates", "Eve")
    assert refused.exit_code == 2 and "is a candidate's copy (issued to 'Linus')" in said(refused)


def test_invite_on_a_homework_without_invitations_says_the_plain_copy_stops_working(tmp_path):
    out = tmp_path / "w.toml"
    assert invoke("homework", "new", "--kata", "paged-kv", "-o", out).exit_code == 0
    result = invoke("homework", "invite", out, "--candidates", "Ada")
    assert result.exit_code == 0 and "rejects a bundle without one" in said(result)
    hw = load_homework(out, load_catalog())
    with pytest.raises(BundleError, match="carries no invitation token"):
        _check(_bundle(tmp_path / "plain.kata.zip", hw, "Ada", None), out)
