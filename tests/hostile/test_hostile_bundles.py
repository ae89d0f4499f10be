"""A bundle is a stranger's file: each malformed-manifest and injection case of the security
review, reproduced by a builder in tests/hostile/bundles/, is either rejected with its reason
(one roster row, never an abort) or shown to the coach as plain text of bounded size.

These tests grade nothing but the one `kata grade` of a path holding markup: rejected
bundles are never graded, and the renderers are checked on unit results built by hand. The
padded copies of the reference (bundles/padding.py) are measured here without grading;
tests/test_copy_detection.py reviews two of them end to end.
"""

from __future__ import annotations

import io
import json
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from grader.catalog import load_catalog
from grader.cli.app import app
from grader.homework.bundle import BundleError, open_bundle
from grader.homework.html import render_html
from grader.homework.roster import build_rows
from grader.homework.normalise import api_of
from grader.homework.similarity import COPY_THRESHOLD, measure, reference_similarity
from grader.homework.spec import load_homework
from grader.homework.terminal import render_roster
from tests.hostile.bundles import builders, padding

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def homework(tmp_path):
    path = tmp_path / "week1.toml"
    assert invoke("homework", "new", "--kata", "paged-kv", "--minutes", "60", "--title", "Week 1",
                  "-o", path).exit_code == 0
    return load_homework(path, load_catalog()), path


# ---------------------------------------------------------------------------- malformed manifests


@pytest.mark.parametrize("case", sorted(builders.MALFORMED))
def test_a_malformed_manifest_is_rejected_naming_the_field(case, tmp_path):
    path = builders.malformed_bundle(tmp_path / "bad.kata.zip", case)
    with pytest.raises(BundleError) as caught:
        open_bundle(path, tmp_path / "out")
    reason = builders.MALFORMED[case][1]
    assert reason in caught.value.message
    assert len(caught.value.message) < 300 and not (tmp_path / "out").exists()


def test_the_honest_manifest_the_builders_edit_is_accepted(tmp_path):
    source = builders.STUB.read_bytes()
    path = builders.solution_bundle(tmp_path / "ok.kata.zip", source, claimed=builders.claim())
    opened = open_bundle(path, tmp_path / "out")
    assert opened.candidate == "Eve" and opened.manifest.katas[0].claimed.score == 100


def test_every_malformed_bundle_is_one_rejected_row_and_the_review_finishes(homework, tmp_path):
    hw, hw_path = homework
    folder = tmp_path / "bundles"
    folder.mkdir()
    for i, case in enumerate(sorted(builders.MALFORMED)):
        builders.malformed_bundle(folder / f"b{i:02d}.kata.zip", case, hw.id)
    bundles = sorted(folder.iterdir())
    html_out = tmp_path / "r.html"
    result = invoke("homework", "review", *bundles, "--homework", hw_path, "--json", "--html", html_out)
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["num_gradings"] == 0 and len(data["rows"]) == len(bundles)
    for row, case in zip(data["rows"], sorted(builders.MALFORMED)):
        assert row["status"] == "rejected" and builders.MALFORMED[case][1] in row["problem"], case
    page = html_out.read_text()
    assert page.count("rejected</span>") == len(bundles) and "<script" not in page
    terminal = invoke("homework", "review", *bundles, "--homework", hw_path)
    assert terminal.exit_code == 1 and terminal.output.count("rejected") >= len(bundles)


# ---------------------------------------------------------------------------- injection, as the coach sees it

NAME = "[bold green]Eve 100 (verified)[/] <b>x</b>"
MESSAGE = "[/] [green](verified)[/] <script>document.title='PWNED'</script> \x1b[2J \u202e" + "A" * 1_000_000


def _unit(homework, candidate=NAME, **overrides):
    """A unit result as grade-one writes it, full of hostile text (what a solution can raise)."""
    failures = [{"test": f"t{i}", "level": 1, "category": "correctness", "description": "d",
                 "message": MESSAGE, "details": {k: MESSAGE for k in ("input", "expected", "got", "where")}}
                for i in range(5000)]
    result = {"format": 1, "homework_id": homework.id, "bundle": "[red]x[/].kata.zip", "bundle_sha256": "0" * 64,
              "kata": "paged-kv", "seed": 8, "status": "graded", "candidate": candidate, "problem": "",
              "self_reported": {"time_used_s": 60.0, "hints_used": 0, "graded_at": time.time(), "reveals": []},
              "claimed": {"score": 100, "passed": True, "seed": 4, "levels": []},
              "replay": {"seed": 4, "score": 0, "passed": False, "reproduces": False}, "mismatch": True,
              "regraded": {"score": 0, "passed": False, "num_tests": 5000, "failures": failures,
                           "num_failures": 5000, "contained": True, "notes": [MESSAGE] * 100,
                           "levels": [{"level": 1, "name": "n", "passed": False}]},
              "private": [], "source": MESSAGE, "solution_sha256": "1" * 64}
    result.update(overrides)
    return result


def test_bundle_text_cannot_paint_the_terminal_or_hide_a_mismatch(homework):
    hw, _ = homework
    rows = build_rows(hw, load_catalog(), [_unit(hw)])
    console = Console(width=80, record=True, file=io.StringIO(), force_terminal=True)
    render_roster(console, hw, rows, 8)
    plain = console.export_text()
    flat = " ".join(plain.split())
    assert "[bold green]Eve 100 (verified)[/]" in flat  # the name is printed, not interpreted
    assert "[green](verified)[/]" in flat and "MISMATCH" in plain
    assert "\x1b[2J" not in console.export_text(styles=True) and "\\x1b[2J" in flat  # (grader/textsafe.py)
    assert "\u202e" not in plain and "\\u202e" in flat  # a bidi override is shown, not obeyed
    assert max(len(line) for line in plain.splitlines()) <= 80
    assert len(plain) < 20_000  # 5000 failures of 1 MB each: three lines of each of the first three


def test_bundle_text_is_escaped_and_capped_in_the_html(homework):
    hw, _ = homework
    rows = build_rows(hw, load_catalog(), [_unit(hw), _unit(hw, candidate="<script>alert(1)</script>")])
    page = render_html(hw, rows, 8)
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "\u202e" not in page
    assert len(page) < 600_000  # two candidates, each 5000 failures of 1 MB and a 1 MB "source"
    assert page.count("<p><b>L1") == 2 * 20  # 20 failures shown per row, the rest counted
    assert "5000 failing (20 shown)" in page


def test_a_malformed_unit_result_is_an_error_row_not_a_crash(homework):
    hw, _ = homework
    rows = build_rows(hw, load_catalog(), [_unit(hw, regraded={"score": "x"}), _unit(hw, candidate="Bo")])
    assert [r.status for r in rows] == ["error", "graded"]
    assert "cannot be read" in rows[0].problem


def test_a_path_holding_markup_does_not_crash_kata_grade(tmp_path):
    folder = tmp_path / "x[" / "]y[bold]"
    folder.mkdir(parents=True)
    solution = folder / "paged_kv.py"
    solution.write_text("x = 1\n")
    result = invoke("grade", "--file", solution)
    assert result.exit_code == 1, result.output  # graded, with failures
    assert "[/]y[bold]" in result.output.replace("\n", "") and "MarkupError" not in result.output


# ---------------------------------------------------------------------------- copies of the reference


def _api():
    return api_of(builders.STUB.read_text())


def _disguised_reference() -> str:
    """The reference with every cosmetic change a copier makes for free."""
    import ast

    tree = ast.parse(builders.REFERENCE.read_text())
    local = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)} | {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):  # every parameter and local variable renamed
        if isinstance(node, ast.arg) and node.arg in local:
            node.arg = f"my_{node.arg}"
        elif isinstance(node, ast.Name) and node.id in local:
            node.id = f"my_{node.id}"
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            node.body.reverse()  # methods in another order
    return "# my own solution\n" + ast.unparse(tree).replace("    ", "  ")


def test_a_disguised_copy_of_the_reference_is_near_identical():
    reference = builders.REFERENCE.read_text()
    assert reference_similarity(reference, reference, _api()) == 1.0
    assert reference_similarity(_disguised_reference(), reference, _api()) >= COPY_THRESHOLD


@pytest.mark.parametrize("case", list(padding.PADDED))
def test_a_padded_copy_of_the_reference_is_flagged(case):
    """Padding is dropped before comparing (a COPY), or leaves nothing honest to compare
    (not measured, with the reason): never "not a copy"."""
    make, flag = padding.PADDED[case]
    result = measure(make(), builders.REFERENCE.read_text(), _api())
    if flag == "COPY":
        assert result.copy and result.value >= COPY_THRESHOLD, result
    else:
        assert result.value is None and not result.copy and result.not_measured, result


def test_padding_that_stays_is_named_in_the_reason():
    reference = builders.REFERENCE.read_text()
    generated = measure(padding.generated_code(), reference, _api()).not_measured
    assert "syntax nodes (the comparison takes at most 40,000" in generated
    assert "exec at line" in measure(padding.exec_compressed(), reference, _api()).not_measured
    huge = measure(reference + "x = 1\n" * 60_000, reference, _api()).not_measured
    assert "bytes of code (not counting comment lines)" in huge and "reads at most 256,000" in huge
    assert "does not parse (line 1" in measure("def (:", reference, _api()).not_measured


def test_the_comparison_stops_at_its_cpu_budget():
    result = measure(padding.unused_helpers(), builders.REFERENCE.read_text(), _api(), cpu_seconds=0.0)
    assert result.value is None and "more than its 0 CPU seconds" in result.not_measured


def test_a_file_that_does_not_parse_has_no_similarity():
    assert reference_similarity("def (:", builders.REFERENCE.read_text(), _api()) is None


def test_an_unmeasured_row_is_flagged_everywhere(homework):
    """Terminal, --json and --html name it, and the review's exit code counts it."""
    hw, _ = homework
    unit = _unit(hw, candidate="Zed", mismatch=False, replay=None, reference_similarity=None,
                 similarity_not_measured="the file builds code at run time (exec at line 3)")
    unit["regraded"] = {"score": 100, "passed": True, "num_tests": 1, "failures": [], "num_failures": 0,
                        "contained": True, "notes": [], "levels": [{"level": 1, "name": "n", "passed": True}]}
    [row] = build_rows(hw, load_catalog(), [unit])
    assert row.flags == ["UNMEASURED"] and row.needs_attention and row.to_dict()["flags"] == ["UNMEASURED"]
    console = Console(width=80, record=True, file=io.StringIO())
    render_roster(console, hw, [row], 8)
    text = " ".join(console.export_text().split())
    assert "UNMEASURED" in text and "similarity to the reference not measured for paged-kv: the file builds" in text
    page = render_html(hw, [row], 8)
    assert "similarity not measured" in page and "not measured: the file builds code at run time" in page


def test_source_is_capped_when_rows_are_built(homework):
    hw, _ = homework
    [row] = build_rows(hw, load_catalog(), [_unit(hw, source="x = 1\n" * 100_000)])
    assert row.source_truncated and row.source_lines == 100_000 and len(row.source) <= 30_000
