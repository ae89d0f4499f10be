"""kata show's views (issue 38): a mock shows the revealed Asks; practice shows every Ask and
clarification and the Specs of passed levels; --spec opens the others and records it."""

from __future__ import annotations

from typer.testing import CliRunner

from grader.cli.app import app
from grader.statement import load_statement
from grader.store import Store
from tests.kata_testing import kata

runner = CliRunner()
KV = kata("kv-budget")
STATEMENT = load_statement(KV)
SPEC_1 = "(replicated + sharded / tp) · bytes_per_param"  # in level 1's Spec only
SPEC_3 = "max(bytes / hbm_bytes_per_s, flops / flops_per_s)"  # in level 3's Spec only


def show(*args: str):
    result = runner.invoke(app, ["show", *args], catch_exceptions=False, env={"PAGER": "cat"})
    return result, " ".join(result.output.split())


def spec_events() -> list[tuple[int | None, int | None]]:
    with Store() as store:
        return [(e.level, e.session_id) for e in store.events("kv-budget", kind="spec")]


def test_practice_shows_asks_and_clarifications_and_no_spec():
    result, text = show("kv-budget")
    assert result.exit_code == 0
    assert "Which architecture exactly" in text and "Do memory time and compute time add up" not in text
    assert "Under tensor parallelism, what is split and what is replicated?" in text
    assert SPEC_1 not in text and SPEC_3 not in text and spec_events() == []


def test_spec_opens_every_level_or_one_and_is_recorded():
    _, text = show("kv-budget", "--spec", "--level", "3")
    assert SPEC_3 in text and SPEC_1 not in text
    assert spec_events() == [(3, None)]
    _, text = show("kv-budget", "--spec")
    assert SPEC_1 in text and SPEC_3 in text
    assert spec_events() == [(3, None), (1, None), (2, None), (3, None)]


def test_a_mock_shows_the_ask_alone_and_refuses_the_spec():
    assert runner.invoke(app, ["mock", "kv-budget"], catch_exceptions=False).exit_code == 0
    result, text = show()
    assert result.exit_code == 0 and "param_count(spec)" in text
    assert "Which architecture exactly" not in text and "Capacity" not in text  # no level 2, no clarification
    refused, text = show("--spec")
    assert refused.exit_code == 2 and "the Spec opens when the mock is over" in text
    assert spec_events() == []


def test_level_without_spec_is_a_usage_error():
    result, text = show("kv-budget", "--level", "2")
    assert result.exit_code == 2 and "it goes with --spec" in text
    result, text = show("kv-budget", "--spec", "--level", "4")
    assert result.exit_code == 2 and "kv-budget has levels 1..3" in text


def test_a_passed_level_opens_its_spec_without_cost(tmp_path):
    """A session that passed every level (the reference, graded) leaves every Spec open:
    nothing is recorded."""
    import os
    from pathlib import Path

    from tests.kata_testing import REPO_ROOT

    assert runner.invoke(app, ["start", "kv-budget", "--quiet"], catch_exceptions=False).exit_code == 0
    mine = Path(os.environ["KATA_WORKSPACE"]) / "kv_budget.py"
    mine.write_text((REPO_ROOT / "reference" / "kv_budget.py").read_text())
    graded = runner.invoke(app, ["grade", "--seed", "1"], catch_exceptions=False)
    assert graded.exit_code == 0, graded.output
    _, text = show("kv-budget")
    assert SPEC_1 in text and SPEC_3 in text and spec_events() == []
