"""Copy detection in a review (issue 37): honest solutions are not flagged, stubs are far from
their references, and a padded copy of the reference is flagged COPY or "similarity not
measured" in the terminal, --json and --html, with the review's exit code counting it.
(Each padding, measured without grading: tests/hostile/test_hostile_bundles.py.)
"""

from __future__ import annotations

import difflib
import io
import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from grader.catalog import load_catalog
from grader.cli.app import app
from grader.homework.normalise import api_of
from grader.homework.roster import RosterRow
from grader.homework.similarity import COPY_THRESHOLD, measure
from grader.homework.spec import load_homework
from grader.homework.terminal import render_roster
from tests.hostile.bundles import padding
from tests.hostile.bundles.builders import claim, solution_bundle
from tests.kata_testing import REPO_ROOT

runner = CliRunner()
CORPUS = REPO_ROOT / "tests" / "corpus"
# Corpus files that are the reference with a line or two changed, made to check the suite
# accepts a variant: as a submission each is a copy, and is flagged (the test below checks
# that each really is a near-verbatim edit, so this list cannot hide a false alarm).
EDITS_OF_THE_REFERENCE = {
    "mha/correct_einsum.py": "the reference with its two matmuls written as einsum",
    "tensor_lib/correct_creation_order_array.py": "the reference on an array('d') storage, backward in creation order",
    "tensor_lib/correct_index_broadcast.py": "the reference broadcasting by index arithmetic",
    "tensor_lib/correct_kahn_and_product.py": "the reference with Kahn's order and itertools.product positions",
}


def _measure(module: str, source: str):
    reference = (REPO_ROOT / "reference" / f"{module}.py").read_text()
    api = api_of((REPO_ROOT / "katas" / module / "stub.py").read_text())
    return measure(source, reference, api)


def _correct_files() -> list[str]:
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/correct_*.py"))


@pytest.mark.parametrize("name", _correct_files())
def test_an_honest_solution_is_measured_and_not_flagged(name):
    module = name.split("/")[0]
    result = _measure(module, (CORPUS / name).read_text())
    assert result.value is not None, result.not_measured
    if name in EDITS_OF_THE_REFERENCE:
        source = (CORPUS / name).read_text().splitlines()
        reference = (REPO_ROOT / "reference" / f"{module}.py").read_text().splitlines()
        code = [line for line in source if line.strip() and not line.lstrip().startswith("#")]
        same = sum(b.size for b in difflib.SequenceMatcher(None, code, reference).get_matching_blocks())
        assert same >= 0.9 * len(code) and result.copy, (name, same, len(code))
    else:
        assert result.value < COPY_THRESHOLD, (name, result.value)


@pytest.mark.parametrize("module", sorted(p.parent.name for p in (REPO_ROOT / "katas").glob("*/stub.py")))
def test_a_stub_is_far_from_its_reference(module):
    result = _measure(module, (REPO_ROOT / "katas" / module / "stub.py").read_text())
    assert result.value is not None and result.value < 0.3, (module, result)


def test_library_calls_named_like_dynamic_code_are_measured():
    """model.eval(), torch.compile and nn.Module.modules() are torch, not code built at run time."""
    source = (REPO_ROOT / "reference" / "lora.py").read_text() + (
        "\n\ndef _helper(model):\n    model.eval()\n    for m in model.modules():\n        pass\n"
        "    return torch.compile(model)\n")
    assert _measure("lora", source).value == 1.0


def test_the_reference_is_a_copy_of_itself():
    for module in ("paged_kv", "flash_attn", "scheduler"):
        assert _measure(module, (REPO_ROOT / "reference" / f"{module}.py").read_text()).value == 1.0


# ---------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def padded_review(tmp_path_factory):
    """One review of the red team's padded copy and of a copy padded past measuring."""
    folder = tmp_path_factory.mktemp("padded")
    homework = folder / "week1.toml"
    assert runner.invoke(app, ["homework", "new", "--kata", "paged-kv", "--minutes", "60", "-o", str(homework)]).exit_code == 0
    hw = load_homework(homework, load_catalog())
    common = dict(homework_id=hw.id, homework_sha256=hw.sha256)
    bundles = [solution_bundle(folder / "pad.kata.zip", padding.zeros_table().encode(), candidate="Pad",
                               claimed=claim(100, seed=3), **common),
               solution_bundle(folder / "gen.kata.zip", padding.generated_code().encode(), candidate="Gen",
                               claimed=claim(100, seed=3), **common)]
    report = folder / "report.html"
    result = runner.invoke(app, ["homework", "review", *map(str, bundles), "--homework", str(homework),
                                 "--seed", "3", "--jobs", "2", "--json", "--html", str(report)])
    return {"result": result, "report": report, "homework": hw}


def test_the_padded_copy_is_flagged_copy_and_the_unmeasurable_one_not_measured(padded_review):
    result = padded_review["result"]
    assert result.exit_code == 1, result.output[-2000:]
    rows = {r["candidate"]: r for r in json.loads(result.output)["rows"]}
    assert rows["Pad"]["score"] == 100 and rows["Pad"]["copy_of_reference"] and rows["Pad"]["flags"] == ["COPY"]
    assert rows["Pad"]["reference_similarity"] == 1.0 and rows["Pad"]["similarity_not_measured"] == ""
    gen = rows["Gen"]
    assert gen["score"] == 100 and gen["reference_similarity"] is None and not gen["copy_of_reference"]
    assert "UNMEASURED" in gen["flags"] and "syntax nodes" in gen["similarity_not_measured"]
    page = padded_review["report"].read_text()
    assert "copy of the reference" in page and "similarity not measured" in page
    fields = set(RosterRow.__dataclass_fields__)
    shown = [RosterRow(**{k: v for k, v in r.items() if k in fields}) for r in rows.values()]
    console = Console(width=80, record=True, file=io.StringIO())
    render_roster(console, padded_review["homework"], shown, 3)
    text = console.export_text()
    assert "COPY" in text and "UNMEASURED" in text and max(len(line) for line in text.splitlines()) <= 80
