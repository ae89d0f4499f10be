"""kata homework review | grade-one | assemble: the coach re-grades every bundle with their own
seed and reads the roster (terminal, --json, --html)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from grader.catalog import Catalog
from grader import textsafe
from grader.cli import output
from grader.cli.common import JsonOpt, catalog
from grader.errors import KataError
from grader.homework.html import render_html
from grader.homework.review import default_jobs
from grader.homework.review import review as run_review
from grader.homework.roster import build_rows
from grader.homework.spec import Homework, load_homework
from grader.homework.terminal import render_roster
from grader.homework.unit import grade_unit, read_unit_results, why_uncontained


SeedOpt = Annotated[Optional[int], typer.Option(
    "--seed", min=0, max=2**32 - 1, help="Your seed for the re-grading (default: a new random one, printed and recorded).")]
AllowUncontainedOpt = Annotated[bool, typer.Option(
    "--allow-uncontained", help="Grade even where the candidates' code cannot be sandboxed (no bubblewrap).")]
HtmlOpt = Annotated[Optional[Path], typer.Option("--html", help="Also write a self-contained HTML report.")]


def review(bundles: Annotated[list[Path], typer.Argument(
               help="Bundles (.kata.zip) to re-grade, or folders of them.", show_default=False)],
           homework_file: Annotated[Path, typer.Option("--homework", help="Your homework file (with private suites).")],
           html_out: HtmlOpt = None, seed: SeedOpt = None,
           jobs: Annotated[Optional[int], typer.Option(
               "--jobs", "-j", min=1, max=256, help="Units graded at once (default: this machine's cores).")] = None,
           allow_uncontained: AllowUncontainedOpt = False, as_json: JsonOpt = False) -> None:
    """Re-grade every bundle from source with your seed (hidden + private suites) and show the roster."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    _refuse_uncontained(allow_uncontained)
    bundles = _expand(bundles)
    from grader.grading import new_seed  # the engine: imported when a command grades, not when the CLI starts

    seed = new_seed() if seed is None else seed
    jobs = jobs or default_jobs()
    if not as_json:
        output.console.print(f"re-grading {len(bundles)} bundle(s) with your seed {seed}, {jobs} at a time "
                             f"(replay: --seed {seed})")
    with _UnitProgress(enabled=not as_json) as progress:
        run = run_review(bundles, hw, cat, seed=seed, jobs=jobs, allow_uncontained=allow_uncontained,
                         on_planned=progress.planned, on_done=progress.done)
    _report(hw, cat, run.results, seed, html_out, as_json, extra={"num_gradings": run.num_gradings})


def grade_one(homework_file: Annotated[Path, typer.Option("--homework", help="Your homework file (with private suites).")],
              bundle: Annotated[Path, typer.Option("--bundle", help="One bundle (.kata.zip).")],
              slug: Annotated[str, typer.Option("--kata", help="One kata of the homework.")],
              seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Your seed (the same for the whole cohort).")],
              out: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write the JSON result here (default: stdout).")] = None,
              allow_uncontained: AllowUncontainedOpt = False, as_json: JsonOpt = False) -> None:
    """Grade one bundle x one kata x one seed into a JSON result (a job of a cluster array);
    `kata homework assemble` turns the results into the roster."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    _refuse_uncontained(allow_uncontained)
    result = grade_unit(hw, cat, bundle, slug, seed, allow_uncontained=allow_uncontained)
    if out is not None:
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=1), encoding="utf-8")
        tmp.replace(out)  # a job killed midway leaves no half-written result behind
    if as_json and out is None:
        output.print_json(result)
    elif not as_json:
        score = result.get("regraded", {}).get("score", result["status"])
        output.console.print(textsafe.text(f"{bundle.name} {result['kata']} seed {seed}: {score}"
                                           + (f" -> {out}" if out else "")))


def assemble(results: Annotated[list[Path], typer.Argument(
                 help="Unit results (.json) from grade-one, or folders of them.", show_default=False)],
             homework_file: Annotated[Path, typer.Option("--homework", help="Your homework file.")],
             html_out: HtmlOpt = None, as_json: JsonOpt = False) -> None:
    """Build the roster (terminal, --json, --html) from grade-one results."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    units = read_unit_results(results, hw)
    seeds = sorted({u["seed"] for u in units if isinstance(u.get("seed"), int)})
    _report(hw, cat, units, seeds[0] if len(seeds) == 1 else None, html_out, as_json,
            extra={"seeds": seeds})


def _expand(paths: list[Path]) -> list[Path]:
    """Folders stand for the bundles in them (*.zip, in name order)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.zip"))
            if not found:
                raise KataError(f"{path} holds no bundles (*.kata.zip)",
                                hint="name the bundles, or the folder the candidates' *.kata.zip files are in")
            out.extend(found)
        else:
            out.append(path)
    return out


def _refuse_uncontained(allowed: bool) -> None:
    why = why_uncontained()
    if why and not allowed:
        raise KataError(f"the candidates' code would run uncontained here: {why}",
                        hint="install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or pass "
                             "--allow-uncontained to grade with limits only (see the README)")
    if why:
        output.err_console.print(f"[yellow]warning:[/] grading uncontained ({escape(why)})")


def _report(hw: Homework, cat: Catalog, results: list[dict], seed: int | None, html_out: Optional[Path],
            as_json: bool, extra: dict) -> None:
    rows = build_rows(hw, cat, results)
    if html_out:
        html_out.write_text(render_html(hw, rows, seed), encoding="utf-8")
    if as_json:
        output.print_json({"homework": hw.id, "seed": seed, **extra, "rows": [r.to_dict() for r in rows]})
    else:
        render_roster(output.console, hw, rows, seed)
        if html_out:
            output.console.print(f"wrote [bold]{escape(str(html_out))}[/]")
    raise typer.Exit(output.EXIT_FAILED if any(r.needs_attention for r in rows) else output.EXIT_OK)


class _UnitProgress:
    """A progress bar over the units of a review (only on a terminal)."""

    def __init__(self, enabled: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.enabled = enabled and output.console.is_terminal
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=output.console, transient=True)
        self.task: Any = None  # rich's TaskID once started

    def __enter__(self) -> "_UnitProgress":
        if self.enabled:
            self.progress.start()
            self.task = self.progress.add_task("grading", total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.stop()

    def planned(self, num_units: int) -> None:
        if self.enabled:
            self.progress.update(self.task, total=num_units)

    def done(self, result: dict) -> None:
        if self.enabled:
            self.progress.update(self.task, advance=1,
                                 description=textsafe.markup(f"{result.get('candidate') or '?'}: {result.get('kata')}"[:40]))


