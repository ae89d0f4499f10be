"""The scorecard is a rich renderable: drawn onto a console of our own (no global console), at
that console's width, it is exactly what `kata grade` prints between its first line and its
replay line (the snapshots of tests/test_cli_layout.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from grader.cli import output
from grader.cli.scorecard import ScorecardView
from tests.test_cli_layout import SNAPSHOTS, fake_card, fake_card_with_details_missed


def drawn(view: ScorecardView, width: int) -> str:
    console = Console(record=True, width=width, file=io.StringIO(), highlight=False)
    console.print(view)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


def snapshot_body(name: str) -> str:
    """A `kata grade` snapshot without its "grading ..." line and its "replay this run" line."""
    lines = (SNAPSHOTS / name).read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("grading ") and lines[-1].startswith("replay this run: ")
    return "\n".join(lines[1:-1]) + "\n"


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("make_card, snapshot", [(fake_card, "grade"),
                                                 (fake_card_with_details_missed, "grade-details")])
def test_the_view_draws_what_kata_grade_prints(make_card, snapshot, width):
    card = make_card(Path("solutions/paged_kv.py")).to_dict()
    assert drawn(ScorecardView(card), width) == snapshot_body(f"{snapshot}-{width}.txt")


def test_the_width_is_the_drawing_consoles_not_the_global_ones(monkeypatch):
    """Compact below 100 columns ("L" for "level") by the console it is drawn on, whatever
    width the program's own console has."""
    monkeypatch.setattr(output.console, "_width", 200)
    card = fake_card(Path("x.py")).to_dict()
    narrow, wide = drawn(ScorecardView(card), 80), drawn(ScorecardView(card), 120)
    assert "L ┃ name" in narrow and "level ┃ name" in wide
    assert all(len(line) <= 80 for line in narrow.splitlines())


def test_title_passed_tests_and_loud_output_are_drawn_when_asked():
    card = fake_card(Path("x.py")).to_dict()
    card["output_bytes"] = 250_000
    text = drawn(ScorecardView(card, show_passed=True, title="[red]my[/] title"), 120)
    assert text.splitlines()[1].strip("│ ") == "my title"
    assert "✓ L1 test free restores" in text and "✓ L3 test prefix hits" in text
    assert "note: your code printed 250,000 bytes while graded" in text


def test_an_import_error_is_one_panel_not_a_box_per_test():
    card = fake_card(Path("x.py")).to_dict()
    error = "SyntaxError: invalid syntax (paged_kv.py, line 3)"
    card["import_error"] = error
    for test in card["tests"]:
        if not test["passed"]:
            test["message"] = error
    text = drawn(ScorecardView(card), 80)
    assert "your file could not be loaded" in text and error in text
    assert "failing test" not in text  # every failure was the import error's


def test_drawing_twice_draws_the_same():
    card = fake_card(Path("x.py")).to_dict()
    view = ScorecardView(card)
    assert drawn(view, 80) == drawn(view, 80)
