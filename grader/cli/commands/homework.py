"""kata homework: a coach assigns, a candidate works and submits, the coach re-grades."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from grader.cli import output
from grader.cli.commands.start import begin
from grader.cli.common import JsonOpt, catalog
from grader.errors import KataError
from grader.homework.bundle import build_bundle
from grader.homework.html import render_html
from grader.homework.review import review as run_review
from grader.homework.spec import Homework, load_homework, new_homework, write_homework
from grader.store import Store

homework_app = typer.Typer(help="Coach homework: new, start, status, submit, review.", no_args_is_help=True)

HomeworkArg = Annotated[Path, typer.Argument(help="The homework file (.toml) from your coach.", show_default=False)]


def new(
    katas: Annotated[list[str], typer.Option("--kata", "-k", help="A kata to assign (repeat the option).")],
    out: Annotated[Path, typer.Option("-o", "--output", help="Where to write the homework file.")],
    minutes: Annotated[Optional[int], typer.Option("--minutes", min=1, max=1440, help="Minutes per kata.")] = None,
    due: Annotated[Optional[str], typer.Option("--due", help="Due date, YYYY-MM-DD.")] = None,
    title: Annotated[Optional[str], typer.Option("--title", help="Title shown to the candidate.")] = None,
    suites: Annotated[Optional[list[str]], typer.Option(
        "--suite", help="A private suite: PATH or SLUG=PATH (repeat). Embedded; never shown to the candidate.")] = None,
) -> None:
    """Write a homework file (validated) for the katas given."""
    due_date = _parse_date(due) if due else None
    hw = new_homework(catalog(), katas, minutes=minutes, due=due_date, title=title, suites=suites or [])
    coach, candidate = write_homework(hw, out)
    load_homework(coach, catalog())  # validated on write: what we wrote must read back
    output.console.print(f"wrote [bold]{coach}[/] ({hw.id}: {', '.join(k.slug for k in hw.katas)})")
    if candidate:
        output.console.print(f"send the candidate [bold]{candidate}[/]; it holds everything but your "
                             f"{len(hw.private_suites)} private suite(s). Keep {coach.name} for `kata homework review`.")
    else:
        output.console.print(f"send it to the candidate: `kata homework start {coach}`")


def start(homework_file: HomeworkArg,
          slug: Annotated[Optional[str], typer.Argument(help="Which kata (default: the next not started).")] = None,
          force: Annotated[bool, typer.Option("--force", help="Back up and replace a changed solution file.")] = False) -> None:
    """Record the homework and start the timed session of its next kata."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    with Store() as store:
        store.record_homework(hw.id, homework_file.resolve(), hw.sha256, hw.title)
        started = {s.kata for s in store.sessions_for_homework(hw.id)}
        if slug is None:
            nxt = next((k for k in hw.katas if k.slug not in started), None)
            if nxt is None:
                output.console.print("every kata of this homework is started; "
                                     f"`kata homework submit {homework_file} --name ...` when you are done")
                return
        else:
            nxt = hw.kata(cat.get(slug).slug)
            if nxt is None:
                raise KataError(f"'{slug}' is not part of this homework",
                                hint="its katas: " + ", ".join(k.slug for k in hw.katas))
        kata = cat.get(nxt.slug)
        session = begin(kata, store, nxt.minutes, force=force, homework=hw.id)
    output.console.print(f"[bold green]started[/] {kata.title} for {escape(hw.title)}: edit "
                         f"[bold]{session.solution_path}[/], {nxt.minutes} min (deadline "
                         f"{output.fmt_when(session.deadline)}). `kata show {kata.slug}` for the statement, "
                         "`kata grade` to finish.")


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
    output.console.print(f"wrote [bold]{out}[/] for {escape(name)}: {', '.join(done) or 'no katas'}; "
                         "send it to your coach")


def review(bundles: Annotated[list[Path], typer.Argument(help="Bundles (.kata.zip) to re-grade.", show_default=False)],
           homework_file: Annotated[Path, typer.Option("--homework", help="Your homework file (with private suites).")],
           html_out: Annotated[Optional[Path], typer.Option("--html", help="Also write a self-contained HTML report.")] = None,
           as_json: JsonOpt = False) -> None:
    """Re-grade every bundle from source (hidden + private suites) and show the roster."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    with output.GradingProgress("re-grading", enabled=not as_json) as progress:
        rows = run_review(bundles, hw, cat, on_progress=lambda text: progress.on_event("note", {"text": text}))
    if html_out:
        html_out.write_text(render_html(hw, rows), encoding="utf-8")
    if as_json:
        output.print_json({"homework": hw.id, "rows": [r.to_dict() for r in rows]})
    else:
        _render_roster(hw, rows)
        if html_out:
            output.console.print(f"wrote [bold]{html_out}[/]")
    bad = any(r.status != "graded" or r.mismatch or r.score != 100 for r in rows)
    raise typer.Exit(output.EXIT_FAILED if bad else output.EXIT_OK)


def _render_roster(hw: Homework, rows: list) -> None:
    table = Table(title=f"{hw.title}: roster")
    for col in ("candidate", "kata", "score", "levels", "private", "claimed", "time used", "hints", "reveals", "late", "notes"):
        table.add_column(col)
    for r in rows:
        score = str(r.score) if r.status == "graded" else f"[red]{r.status}[/]"
        claimed = "-" if r.claimed_score is None else str(r.claimed_score)
        if r.mismatch:
            claimed = f"[bold red]{claimed} MISMATCH[/]"
        used = f"{output.fmt_duration(r.time_used_s)}/{output.fmt_duration(r.time_limit_s)}"
        table.add_row(escape(r.candidate), r.kata, score,
                      f"{r.levels_passed}/{r.num_levels}" if r.status == "graded" else "-",
                      f"{r.private_passed}/{r.private_total}" if r.private_total else "-", claimed, used,
                      str(r.hints_used), str(r.reveals), "[red]late[/]" if r.late else "", escape(r.problem))
    output.console.print(table)
    for r in rows:
        for f in r.failures[:5]:
            src = f" (private {f['private_suite']})" if f.get("private_suite") else ""
            output.console.print(f"[red]✗[/] {escape(r.candidate)} {r.kata} L{f['level']}{src}: "
                                 f"{escape(f['description'])}: {escape(f['message'])}")
        if len(r.failures) > 5:
            output.console.print(f"  ... {len(r.failures) - 5} more for {escape(r.candidate)} {r.kata} (--html or --json)")


def _parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise KataError(f"--due '{text}' is not a date", hint="write it as YYYY-MM-DD, e.g. 2026-12-10") from exc


def register(app: typer.Typer) -> None:
    for name, fn in (("new", new), ("start", start), ("status", status), ("submit", submit), ("review", review)):
        homework_app.command(name)(output.handle_errors(fn))
    app.add_typer(homework_app, name="homework")
