"""kata homework: a coach assigns, a candidate works and submits, the coach re-grades."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from grader.catalog import Catalog, Kata
from grader.cli import output
from grader.cli.commands.start import begin
from grader.cli.common import JsonOpt, catalog
from grader.errors import KataError
from grader.grading import new_seed
from grader.homework.bundle import build_bundle
from grader.homework.html import render_html
from grader.homework.review import default_jobs
from grader.homework.review import review as run_review
from grader.homework.roster import build_rows
from grader.homework.spec import Homework, PrivateSuite, load_homework, new_homework, write_homework
from grader.homework.terminal import render_roster
from grader.homework.unit import grade_reference, grade_unit, read_unit_results, why_uncontained
from grader.store import Session, Store

homework_app = typer.Typer(
    help="Coach homework: new, start, status, submit, review (grade-one and assemble for a cluster).",
    no_args_is_help=True)

HomeworkArg = Annotated[Path, typer.Argument(help="The homework file (.toml) from your coach.", show_default=False)]


def new(
    katas: Annotated[list[str], typer.Option("--kata", "-k", help="A kata to assign (repeat the option).")],
    out: Annotated[Path, typer.Option("-o", "--output", help="Where to write the homework file.")],
    minutes: Annotated[Optional[int], typer.Option("--minutes", min=1, max=1440, help="Minutes per kata.")] = None,
    due: Annotated[Optional[str], typer.Option("--due", help="Due date, YYYY-MM-DD.")] = None,
    title: Annotated[Optional[str], typer.Option("--title", help="Title shown to the candidate.")] = None,
    suites: Annotated[Optional[list[str]], typer.Option(
        "--suite", help="A private suite: PATH or SLUG=PATH (repeat). Embedded; never shown to the candidate.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask to confirm a due date in the past.")] = False,
) -> None:
    """Write a homework file (validated; each private suite must pass on the reference)."""
    due_date = _parse_date(due) if due else None
    if due_date is not None and due_date < dt.date.today() and not yes:
        _confirm(f"the due date {due_date} is in the past, so every submission will show as late. Write it anyway?")
    cat = catalog()
    hw = new_homework(cat, katas, minutes=minutes, due=due_date, title=title, suites=suites or [])
    for suite in hw.private_suites:
        _check_suite(cat.get(suite.kata), suite)
    coach, candidate = write_homework(hw, out)
    load_homework(coach, cat)  # validated on write: what we wrote must read back
    output.console.print(f"wrote [bold]{escape(str(coach))}[/] ({hw.id}: {', '.join(k.slug for k in hw.katas)})")
    if candidate:
        output.console.print(f"send the candidate [bold]{escape(str(candidate))}[/]; it holds everything but your "
                             f"{len(hw.private_suites)} private suite(s). Keep {escape(coach.name)} for "
                             "`kata homework review`.")
    else:
        output.console.print(f"send it to the candidate: `kata homework start {escape(str(coach))}`")


def _confirm(question: str) -> None:
    try:
        ok = typer.confirm(question, default=False)
    except typer.Abort:
        ok = False
    if not ok:
        raise KataError("nothing written: the due date is in the past",
                        hint="pass a later --due, or --yes to write it anyway")


def _check_suite(kata: Kata, suite: PrivateSuite) -> None:
    """Refuse a private suite that the kata's own reference fails (or that cannot run)."""
    seed = new_seed()
    output.console.print(f"checking private suite {escape(suite.name)} against the {kata.slug} reference (seed {seed})")
    try:
        card = grade_reference(kata, suite, seed)
    except KataError as exc:
        raise KataError(f"private suite {suite.name} cannot run: {exc.message}",
                        hint="fix the suite; see 'Private suites' in the README") from exc
    failed = [t for t in card.tests if not t.passed]
    if not card.tests or failed:
        first = f": {failed[0].name}: {failed[0].message}" if failed else ": it collected no tests"
        raise KataError(f"the {kata.slug} reference fails {len(failed)} of {len(card.tests)} test(s) of "
                        f"private suite {suite.name} (seed {seed}){first[:500]}",
                        hint="a suite the reference fails would fail every honest candidate; fix the suite")


def start(homework_file: HomeworkArg,
          slug: Annotated[Optional[str], typer.Argument(help="Which kata (default: the next not started).")] = None,
          force: Annotated[bool, typer.Option("--force", help="Back up and replace a changed solution file.")] = False) -> None:
    """Record the homework and start the timed session of its next kata."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    with Store() as store:
        store.record_homework(hw.id, homework_file.resolve(), hw.sha256, hw.title)
        sessions = store.sessions_for_homework(hw.id)
        open_now = [s for s in sessions if s.status == "active"]
        if slug is None and open_now:
            _say_open(homework_file, open_now[-1])
            return
        if slug is None:
            started = {s.kata for s in sessions}
            nxt = next((k for k in hw.katas if k.slug not in started), None)
            if nxt is None:
                output.console.print("every kata of this homework is started; "
                                     f"`kata homework submit {escape(str(homework_file))} --name ...` when you are done")
                return
        else:
            nxt = hw.kata(cat.get(slug).slug)
            if nxt is None:
                raise KataError(f"'{slug}' is not part of this homework",
                                hint="its katas: " + ", ".join(k.slug for k in hw.katas))
            mine = [s for s in open_now if s.kata == nxt.slug]
            if mine and not force:
                _say_open(homework_file, mine[-1])
                return
        kata = cat.get(nxt.slug)
        session = begin(kata, store, nxt.minutes, force=force, homework=hw.id)
    output.console.print(f"[bold green]started[/] {kata.title} for {escape(hw.title)}: edit "
                         f"[bold]{escape(str(session.solution_path))}[/], {nxt.minutes} min (deadline "
                         f"{output.fmt_when(session.deadline)}). `kata show {kata.slug}` for the statement, "
                         "`kata grade` as often as you like (the session ends when every level passes, or "
                         "with `kata stop`).")


def _say_open(homework_file: Path, session: Session) -> None:
    left = session.remaining_s
    when = f"{output.fmt_duration(left)} left" if left >= 0 else f"{output.fmt_duration(-left)} over time"
    output.console.print(
        f"{session.kata} is already open ({when}); keep editing [bold]{escape(str(session.solution_path))}[/]. "
        f"It ends when a grade passes every level, or with `kata stop {session.kata}`; then "
        f"`kata homework start {escape(str(homework_file))}` opens the next kata.")


def status(homework_file: Annotated[Optional[Path], typer.Argument(
        help="The homework file (default: the one you started last).")] = None,
        as_json: JsonOpt = False) -> None:
    """Each kata of the homework: not started, in progress, graded, late."""
    cat = catalog()
    with Store() as store:
        path = homework_file or _last_homework_path(store)
        hw = load_homework(path, cat)
        rows = [_status_row(hw, k.slug, store) for k in hw.katas]
    if as_json:
        output.print_json({"homework": hw.id, "title": hw.title, "katas": rows})
        return
    table = Table(title=f"{hw.title} (due {hw.due or 'not set'})")
    for col in ("kata", "state", "score", "time"):
        table.add_column(col)
    for r in rows:
        state = r["state"] + (" [red](late)[/]" if r["late"] else "")
        table.add_row(r["kata"], state, "-" if r["score"] is None else str(r["score"]), r["time"])
    output.console.print(table)


def _status_row(hw: Homework, slug: str, store: Store) -> dict:
    sessions = [s for s in store.sessions_for_homework(hw.id) if s.kata == slug]
    row = {"kata": slug, "state": "not started", "score": None, "time": "-",
           "late": hw.due is not None and hw.is_late(time.time())}
    if not sessions:
        return row
    session = sessions[-1]
    attempts = store.attempts_for_session(session.id)
    if attempts:
        a = attempts[0]
        row.update(state="graded", score=a.score, late=hw.is_late(a.graded_at),
                   time=f"{output.fmt_duration(a.time_used_s)} used of {session.minutes} min")
    elif session.status == "active":
        left = session.remaining_s
        row.update(state="in progress", late=hw.is_late(time.time()),
                   time=f"{output.fmt_duration(left)} left" if left >= 0 else f"{output.fmt_duration(-left)} over")
    else:
        row.update(state="abandoned", late=hw.is_late(time.time()))
    return row


def _last_homework_path(store: Store) -> Path:
    row = store.conn.execute("SELECT path FROM homeworks ORDER BY recorded_at DESC LIMIT 1").fetchone()
    if row is None:
        raise KataError("no homework started yet", hint="`kata homework start <file.toml>`")
    return Path(row[0])


def submit(homework_file: HomeworkArg,
           name: Annotated[str, typer.Option("--name", help="Your name, as the coach knows you.")],
           out: Annotated[Path, typer.Option("-o", "--output", help="Where to write the bundle (.kata.zip).")],
           allow_missing: Annotated[bool, typer.Option("--allow-missing", help="Submit even if a kata was never started.")] = False) -> None:
    """Write one bundle with your solutions, their hashes, times, hints and scorecards."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    with Store() as store:
        manifest = build_bundle(hw, store, cat, candidate=name, out=out, allow_missing=allow_missing)
    done = [e["slug"] for e in manifest["katas"] if not e.get("missing")]
    output.console.print(f"wrote [bold]{escape(str(out))}[/] for {escape(name)}: {', '.join(done) or 'no katas'}; "
                         "send it to your coach")


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
        output.console.print(Text(f"{bundle.name} {result['kata']} seed {seed}: {score}"
                                  + (f" -> {out}" if out else "")))


def assemble(results: Annotated[list[Path], typer.Argument(
                 help="Unit results (.json) from grade-one, or folders of them.", show_default=False)],
             homework_file: Annotated[Path, typer.Option("--homework", help="Your homework file.")],
             html_out: HtmlOpt = None, as_json: JsonOpt = False) -> None:
    """Build the roster (terminal, --json, --html) from grade-one results."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    units = read_unit_results(results, hw)
    seeds = sorted({u.get("seed") for u in units if isinstance(u.get("seed"), int)})
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
        self.task = None

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
                                 description=escape(f"{result.get('candidate') or '?'}: {result.get('kata')}"[:40]))


def _parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise KataError(f"--due '{text}' is not a date", hint="write it as YYYY-MM-DD, e.g. 2026-12-10") from exc


def register(app: typer.Typer) -> None:
    for name, fn in (("new", new), ("start", start), ("status", status), ("submit", submit), ("review", review),
                     ("grade-one", grade_one), ("assemble", assemble)):
        homework_app.command(name)(output.handle_errors(fn))
    app.add_typer(homework_app, name="homework")
