"""kata grade: run the hidden suite, show the scorecard, record the attempt.

In a session the grade counts for the session, which stays open: each level's pass time is
the first grade that passed it, and the session ends when every level passes. In a mock only
the revealed levels are graded, a grade that passes all of them reveals the next, and each
failing test's box leads with the interviewer's nudge (grader/nudges.py), recorded once per rule."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape

from grader import clock, textsafe
from grader.catalog import Kata
from grader.cli import last_run, output
from grader.cli.common import JsonOpt, JsonStreamOpt, OptionalSlugArg, catalog, json_modes, kata_for, kata_for_file
from grader.cli.progress import RunProgress
from grader.cli.scorecard import ScorecardView
from grader.errors import CatalogError, KataError
from grader.mock import render_level
from grader.nudges import Nudge, nudges, record_nudges
from grader.sessions import GradeEffect, deadline_warning, pacing, plan_grade, revealed_levels
from grader.statement import Statement, load_statement
from grader.store import Session, Store
from grader.workspace import solution_path

if TYPE_CHECKING:
    from grader.engine.report import Scorecard

FileOpt = Annotated[Optional[Path], typer.Option(
    "--file", "-f", help="Grade this file instead of your session's solution (no session needed).")]
SeedOpt = Annotated[Optional[int], typer.Option(
    "--seed", min=0, help="Replay a grading run: the same file and seed give the same scorecard.")]
LevelOpt = Annotated[Optional[int], typer.Option(
    "--level", min=1, help="Grade this level alone (recorded as such; a session's level times count "
                           "full grades only).")]
SanitizeOpt = Annotated[bool, typer.Option(
    "--sanitize", help="C++ only: build with AddressSanitizer and UndefinedBehaviorSanitizer; a report "
                       "(out-of-bounds, use after free, overflow) fails the test with its lines.")]
SanitizeThreadsOpt = Annotated[bool, typer.Option(
    "--sanitize-threads", help="C++ only: build with ThreadSanitizer; a data race fails the test with its lines.")]


def grade(slug: OptionalSlugArg = None, file: FileOpt = None, seed: SeedOpt = None, level: LevelOpt = None,
          sanitize: SanitizeOpt = False, sanitize_threads: SanitizeThreadsOpt = False,
          as_json: JsonOpt = False, json_stream: JsonStreamOpt = False) -> None:
    """Grade a solution with the hidden suite. Exit 0 when every test passes, 1 otherwise.

    In a session, grade as often as you like: the session stays open until every level
    passes (or `kata stop`). During a mock only the revealed levels are graded. With
    --level N only level N's tests run: faster, recorded as a grade of that level, and it
    passes no level of the session (its level times count full grades only).

    A C++ solution (.cpp, `kata start SLUG --lang cpp`) is compiled first, inside the
    sandbox, and cached; --sanitize / --sanitize-threads build it with sanitizers."""
    from grader.engine.precheck import missing_names_notes  # the engine: imported when a command grades,
    from grader.grading import new_seed, read_solution  # not when the CLI starts

    json_modes(as_json, json_stream)
    from grader.cli.commands.check import _warm

    _warm()
    if sanitize and sanitize_threads:
        raise KataError("--sanitize and --sanitize-threads cannot be combined (the two runtimes exclude each other)",
                        hint="grade once with each")
    sanitizer = "address" if sanitize else "thread" if sanitize_threads else None
    cat = catalog()
    with Store() as store:
        if file is not None and slug is None:
            kata = kata_for_file(file, cat)
            session = store.active_session(kata.slug)
        else:
            kata, session = kata_for(slug, store, cat)
        # A running mock hides its later levels from every grade of its kata, any file's.
        running_mock = session if session is not None and session.is_mock else None
        path = file if file is not None else (Path(session.solution_path) if session else solution_path(kata))
        if session is not None and path.resolve() != Path(session.solution_path).resolve():
            session = None  # grading some other file leaves the session running
        source = read_solution(path)
        seed = new_seed() if seed is None else seed
        extra: dict[str, Any] = {}
        if session is not None:
            extra = {"time_used_s": clock.now() - session.started_at,
                     "time_limit_s": session.minutes * 60.0,
                     "hints_used": store.hints_shown(kata.slug, session.id)}
        levels = _levels_to_grade(kata, revealed_levels(store, running_mock), level)
        if not (as_json or json_stream):
            levels_shown = f", levels {', '.join(map(str, sorted(levels)))}" if levels else ""
            output.console.print(f"grading [bold]{textsafe.markup(output.shown_path(path))}[/] against {kata.slug}'s "
                                 f"hidden suite (seed {seed}{levels_shown})")
        with RunProgress(kata=kata.slug, suite="hidden", file=str(path), seed=seed, json_stream=json_stream,
                         quiet=as_json) as progress:
            if sanitizer is not None:
                extra["sanitize"] = sanitizer
            card = grade_file(kata, path, seed=seed, on_event=progress.on_event, levels=levels, **extra)
        data = card.to_dict()
        statement, shown = _nudges(kata, data, levels) if session is not None and session.is_mock else (None, {})
        if level is not None:
            data["only_level"] = level
        effect = plan_grade(store, session, kata, data) if session is not None and level is None else None
        if effect is not None and session is not None:  # (an effect comes from a session)
            data["signal"] = effect.signal  # from the levels' pass times, this grade counted
            data["session"] = _session_block(session, kata, effect)
        store.record_attempt(data, source=source, session_id=session.id if session else None,
                             passed_levels=effect.newly_passed if effect else (),
                             reveal_level=effect.revealed if effect else None,
                             end_reason=effect.ended if effect else None, only_level=level)
        if shown and session is not None and statement is not None and levels:
            record_nudges(store, kata, statement, session.id, data, shown, levels)
        last_run.save(data, "grade")
        ended = store.session(session.id) if session is not None and effect is not None and effect.ended else None
        if as_json or json_stream:
            if ended is not None and ended.is_mock:
                from grader.cli.commands import mock as mock_cmd  # (a mock's end only)

                data["mock"] = mock_cmd.coding_over(store, cat, ended, as_json=True)
            if json_stream:
                progress.end(data)
            else:
                output.print_json(data)
        else:
            output.console.print(ScorecardView(data))
            for note in missing_names_notes(data["notes"]):
                output.console.print(f"[yellow]note:[/] {textsafe.markup(note)}")
            if effect is not None and session is not None:
                _say_session(store, cat, kata, session, effect, data, ended)
            elif level is not None and session is not None:
                output.console.print(f"a grade of level {level} alone: your session's level times count "
                                     f"full grades only (`kata grade` without --level)")
            output.console.print(f"replay this run: kata grade {kata.slug} --file "
                                 f"{textsafe.markup(output.shown_path(path))} --seed {seed}")
    raise typer.Exit(output.EXIT_OK if card.passed else output.EXIT_FAILED)


def _levels_to_grade(kata: Kata, revealed: set[int] | None, level: int | None) -> set[int] | None:
    """The levels a grade runs: the revealed ones (None: every level), or `level` alone,
    which must be one of them."""
    if level is None:
        return revealed
    numbers = [lv.level for lv in kata.levels] if revealed is None else sorted(revealed)
    if level not in numbers:
        shown = ", ".join(map(str, numbers))
        raise KataError(f"{kata.slug} has no level {level} to grade" + (" yet (this mock has revealed "
                        f"{shown})" if revealed is not None else f" (its levels: {shown})"),
                        hint=f"`kata grade {kata.slug} --level {numbers[-1]}`, or leave out --level to grade them all")
    return {level}


def grade_file(kata: Kata, path: Path, **kwargs: Any) -> Scorecard:
    """grader.grading.grade, imported when a grade runs: the CLI starts without the engine."""
    from grader.grading import grade as grade_with_suite

    return grade_with_suite(kata, path, **kwargs)


def _nudges(kata: Kata, data: dict[str, Any], revealed: set[int] | None) -> tuple[Statement | None, dict[str, Nudge]]:
    """In a mock: each failing test that met a rule gets the interviewer's nudge (its box
    leads with it; --json has it as the test's "nudge")."""
    try:
        statement = load_statement(kata)
    except CatalogError:
        return None, {}  # (a statement that does not parse is reported where it is shown)
    shown = nudges(data, statement, revealed or set())
    for test in data["tests"]:
        if test["nodeid"] in shown:
            test["nudge"] = shown[test["nodeid"]].line
    return statement, shown


def _session_block(session: Session, kata: Kata, effect: GradeEffect) -> dict[str, Any]:
    """What --json adds about the session: the clocks of the revealed levels, what this grade
    revealed or ended. A level not revealed is a number only."""
    block: dict[str, Any] = {
        "id": session.id, "mode": session.mode, "ended": effect.ended, "overtime": effect.overtime,
        "levels": pacing(effect.clocks, clock.now(), {lv.level: lv.name for lv in kata.levels}),
        "revealed_level": None}
    if effect.revealed is not None:
        block["revealed_level"] = {"level": effect.revealed,
                                   "statement": render_level(load_statement(kata), effect.revealed)}
    return block


def _say_session(store: Store, cat, kata: Kata, session: Session, effect: GradeEffect,
                 data: dict[str, Any], ended: Session | None) -> None:
    from grader.cli import mock_view  # (rich.markdown: only a mock session's grade shows a level)

    mock_view.print_pacing(data["session"]["levels"])
    if effect.revealed is not None:
        mock_view.print_revealed(effect.revealed, data["session"]["revealed_level"]["statement"])
        if session.solution_path.endswith(".cpp") and kata.cpp_stub_path.is_file():
            from grader.mock import cpp_level_blocks

            blocks = cpp_level_blocks(kata.cpp_stub_path.read_text(encoding="utf-8"), effect.revealed)
            if blocks:
                output.console.print(f"C++: level {effect.revealed}'s declarations and binding lines, "
                                     "for your file (the binding's go inside PYBIND11_MODULE):")
                output.console.print(escape("\n\n".join(blocks)), soft_wrap=True, highlight=False)
        return
    if ended is not None and ended.is_mock:
        from grader.cli.commands import mock as mock_cmd

        mock_cmd.coding_over(store, cat, ended, as_json=False)
    elif ended is not None:
        output.console.print("every level passed: session finished and recorded; `kata history` shows it")
    elif effect.overtime:
        output.console.print(f"[red]overtime[/]: this grade is recorded after the deadline; "
                             f"`kata stop {kata.slug}` ends the session")
    else:
        output.console.print(f"the session stays open: fix and `kata grade` again "
                             f"({output.fmt_duration(session.remaining_s)} left); `kata stop` ends it")
        if (warning := deadline_warning(session)) is not None:
            output.console.print(f"[bold yellow]warning:[/] {escape(warning)}")
