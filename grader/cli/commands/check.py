"""kata check: run the visible examples against your solution (not graded; during a mock,
only the revealed levels' examples). Which levels passed is remembered for `kata hint`.

What you are working on first: the examples of your current level (the lowest one your
session's grades have not passed; level 1 without a session) and of the levels after it, in
order, stopping at the first that fails. `--all` runs every revealed level's examples."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.padding import Padding
from rich.text import Text

from grader import textsafe
from grader.cli import last_run, output
from grader.cli.common import JsonOpt, JsonStreamOpt, OptionalSlugArg, catalog, json_modes, kata_for, kata_for_file
from grader.cli.progress import RunProgress
from grader.cli.scorecard import detail_lines, printed_output, unimplemented_levels, unimplemented_lines
from grader.sessions import current_level, expire_if_due, level_clocks, revealed_levels
from grader.store import Store
from grader.workspace import solution_path

if TYPE_CHECKING:
    from grader.catalog import Kata
    from grader.engine.report import Scorecard

FileOpt = Annotated[Optional[Path], typer.Option("--file", "-f", help="Check this file instead.")]
AllOpt = Annotated[bool, typer.Option(
    "--all", help="Every revealed level's examples, all of them (default: from your current level, "
                  "stopping at the first failure).")]
STOPPED_NOTE = "stopped at the first failing test: "  # the runner's note (grader/engine/runner.py)


def check(slug: OptionalSlugArg = None, file: FileOpt = None, every_level: AllOpt = False,
          as_json: JsonOpt = False, json_stream: JsonStreamOpt = False) -> None:
    """Run the kata's visible examples against your solution; fast, and not graded.

    Your current level's examples first (the lowest level your session's grades have not
    passed), then the later levels', stopping at the first failure; --all runs every
    revealed level's. During a mock, only the revealed levels' examples run."""
    json_modes(as_json, json_stream)
    _warm()
    cat = catalog()
    with Store() as store:
        if file is not None and slug is None:
            kata, session = kata_for_file(file, cat), None
        else:
            kata, session = kata_for(slug, store, cat)
        session = expire_if_due(store, session or store.active_session(kata.slug))
        active = session if session and session.status == "active" else None
        levels = revealed_levels(store, active)
        start = 1
        if not every_level:
            now = current_level(level_clocks(store, active, kata)) if active is not None else None
            start = now.level if now is not None else 1
            levels = {lv.level for lv in kata.levels if lv.level >= start and (levels is None or lv.level in levels)}
        path = file or (Path(session.solution_path) if session else solution_path(kata))
        with RunProgress(kata=kata.slug, suite="examples", file=str(path), seed=0, json_stream=json_stream,
                         quiet=as_json) as progress:
            card = run_examples(kata, path, levels=levels, on_event=progress.on_event,
                                stop_at_first_failure=not every_level).to_dict()
        if session is not None and session.status == "active" and \
                path.resolve() == Path(session.solution_path).resolve():
            store.record_check(kata.slug, session.id, {lv["level"]: lv["passed"] for lv in card["levels"]})
    last_run.save(card, "check")
    if json_stream:
        progress.end(card)
    elif as_json:
        output.print_json(card)
    else:
        _render(kata.slug, path, card, start)
    raise typer.Exit(output.EXIT_OK if card["passed"] else output.EXIT_FAILED)


def run_examples(kata: Kata, path: Path, **kwargs: Any) -> Scorecard:
    """grader.grading.check, imported when a check runs: the CLI starts without the engine."""
    from grader.grading import check as check_examples

    return check_examples(kata, path, **kwargs)


def _render(slug: str, path: Path, card: dict[str, Any], start: int = 1) -> None:
    from grader.engine.precheck import missing_names_notes

    console = output.console
    console.print(f"visible examples of {slug} on [bold]{textsafe.markup(output.shown_path(path))}[/]:")
    if start > 1:
        console.print(f"[dim]from level {start}, your current level (levels before it passed a grade; "
                      "`kata check --all` runs theirs too)[/]")
    if card.get("import_error"):
        console.print(f"[red]✗[/] {textsafe.markup(card['import_error'])}")
    unimplemented = {} if card.get("import_error") else unimplemented_levels(card, noun="examples")
    if unimplemented:
        console.print(unimplemented_lines(unimplemented))
    for test in [] if card.get("import_error") else card["tests"]:
        if test["level"] in unimplemented:
            continue
        mark = "[green]✓[/]" if test["passed"] else "[red]✗[/]"
        console.print(f"{mark} L{test['level']} {textsafe.markup(test['description'])}")
        if test["passed"]:
            continue
        body = [textsafe.text(test["message"])] + detail_lines(test["details"])
        for line in body:
            console.print(Padding(line, (0, 0, 0, 4), expand=False))
        printed = printed_output(test, indent="    ")
        if printed is not None:
            console.print(printed)
        if test["details"].get("snippet"):
            console.print(Text.assemble(("    reproduce: ", "cyan"), f"kata repro --test {textsafe.clean(test['name'])}"))
    for note in missing_names_notes(card["notes"]):
        console.print(f"[yellow]note:[/] {textsafe.markup(note)}")
    passed = sum(t["passed"] for t in card["tests"])
    stopped = next((n for n in card["notes"] if n.startswith(STOPPED_NOTE)), None)
    if stopped is not None:
        console.print(f"{passed}/{len(card['tests'])} examples pass, then a failure: stopped there "
                      f"({stopped.removeprefix(STOPPED_NOTE)}; `kata check --all` runs every one).")
        return
    console.print(f"{passed}/{len(card['tests'])} examples pass. The hidden suite checks much "
                  "more: `kata grade` when you are ready.")


def _warm() -> None:
    """This command grades for you at the keyboard: its judges come from the warm service
    (grader/engine/warm.py), started in the background by the first grading that finds none."""
    from grader.engine import warm

    warm.enable()
