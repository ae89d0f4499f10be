"""kata grade: run the hidden suite, show the scorecard, record the attempt."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from grader.cli import last_run, output
from grader.cli.common import JsonOpt, JsonStreamOpt, OptionalSlugArg, catalog, kata_for, kata_for_file, json_modes
from grader.cli.progress import RunProgress
from grader.grading import grade as grade_file
from grader.grading import new_seed, read_solution
from grader.store import Store
from grader.workspace import solution_path

FileOpt = Annotated[Optional[Path], typer.Option(
    "--file", "-f", help="Grade this file instead of your session's solution (no session needed).")]
SeedOpt = Annotated[Optional[int], typer.Option(
    "--seed", min=0, help="Replay a grading run: the same file and seed give the same scorecard.")]


def grade(slug: OptionalSlugArg = None, file: FileOpt = None, seed: SeedOpt = None,
          as_json: JsonOpt = False, json_stream: JsonStreamOpt = False) -> None:
    """Grade a solution with the hidden suite. Exit 0 when every test passes, 1 otherwise."""
    json_modes(as_json, json_stream)
    cat = catalog()
    with Store() as store:
        if file is not None and slug is None:
            kata = kata_for_file(file, cat)
            session = store.active_session(kata.slug)
        else:
            kata, session = kata_for(slug, store, cat)
        path = file if file is not None else (Path(session.solution_path) if session else solution_path(kata))
        if session is not None and path.resolve() != Path(session.solution_path).resolve():
            session = None  # grading some other file leaves the session running
        source = read_solution(path)
        seed = new_seed() if seed is None else seed
        extra = {}
        if session is not None:
            extra = {"time_used_s": time.time() - session.started_at,
                     "time_limit_s": session.minutes * 60.0,
                     "hints_used": store.hints_shown(kata.slug, session.id)}
        if not (as_json or json_stream):
            output.console.print(f"grading [bold]{escape(output.shown_path(path))}[/] against {kata.slug}'s hidden suite (seed {seed})")
        with RunProgress(kata=kata.slug, suite="hidden", file=str(path), seed=seed, json_stream=json_stream,
                         quiet=as_json) as progress:
            card = grade_file(kata, path, seed=seed, on_event=progress.on_event, **extra)
        data = card.to_dict()
        store.record_attempt(data, source=source, session_id=session.id if session else None)
        last_run.save(data, "grade")
    if json_stream:
        progress.end(data)
    elif as_json:
        output.print_json(data)
    else:
        output.render_scorecard(data)
        if session is not None:
            output.console.print("session finished and recorded; `kata history` shows your attempts")
        output.console.print(f"replay this run: kata grade {kata.slug} --file {escape(output.shown_path(path))} --seed {seed}")
    raise typer.Exit(output.EXIT_OK if card.passed else output.EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.command("grade")(output.handle_errors(grade))
