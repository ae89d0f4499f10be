"""kata homework: a coach assigns (homework_assign.py), a candidate works and submits (here),
the coach re-grades (homework_review.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from grader.cli import output
from grader.cli.commands.start import begin
from grader.cli.common import JsonOpt, LangOpt, catalog, check_lang
from grader.errors import KataError
from grader.homework.bundle import build_bundle, submitter
from grader.homework.spec import Homework, load_homework
from grader.store import Session, Store

HomeworkArg = Annotated[Path, typer.Argument(help="The homework file (.toml) from your coach.", show_default=False)]


def start(homework_file: HomeworkArg,
          slug: Annotated[Optional[str], typer.Argument(help="Which kata (default: the next not started).")] = None,
          force: Annotated[bool, typer.Option("--force", help="Back up and replace a changed solution file.")] = False,
          lang: LangOpt = "py") -> None:
    """Record the homework and start the timed session of its next kata (--lang cpp: in C++,
    where the kata has a C++ version)."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    with Store() as store:
        store.record_homework(hw.id, homework_file.resolve(), hw.sha256, hw.title)
        sessions = store.sessions_for_homework(hw.id)
        _refuse_after_submission(hw, sessions)
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
        session = begin(kata, store, nxt.minutes, force=force, homework=hw.id, lang=check_lang(kata, lang))
    output.console.print(f"[bold green]started[/] {kata.title} for {escape(hw.title)}: edit "
                         f"[bold]{escape(str(session.solution_path))}[/], {nxt.minutes} min (deadline "
                         f"{output.fmt_when(session.deadline)}). `kata show {kata.slug}` for the statement, "
                         "`kata grade` as often as you like (the session ends when every level passes, or "
                         "with `kata stop`).")


def _refuse_after_submission(hw: Homework, sessions: list[Session]) -> None:
    """`submit` ended the homework's sessions: a new one would not be part of what was sent."""
    submitted = [s for s in sessions if s.end_reason == "submitted"]
    if submitted:
        when = output.fmt_when(max(s.ended_at or 0.0 for s in submitted))
        raise KataError(f"you submitted {hw.title} ({when}); its sessions ended then, and a new one would not "
                        "be part of the homework",
                        hint="`kata start <slug>` practises the kata outside the homework; for a new submission, "
                             "ask your coach for a new homework file")


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
    """Each kata of the homework: not started, in progress, graded, submitted, late."""
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
    row: dict[str, Any] = {"kata": slug, "state": "not started", "score": None, "time": "-",
           "late": hw.due is not None and hw.is_late(time.time())}
    if not sessions:
        return row
    session = sessions[-1]
    attempts = store.attempts_for_session(session.id)
    row["submitted"] = session.end_reason == "submitted"
    if attempts:
        a = attempts[0]
        row.update(state="graded", score=a.score, late=hw.is_late(a.graded_at),
                   time=f"{output.fmt_duration(a.time_used_s)} used of {session.minutes} min")
    elif session.status == "active":
        left = session.remaining_s
        row.update(state="in progress", late=hw.is_late(time.time()),
                   time=f"{output.fmt_duration(left)} left" if left >= 0 else f"{output.fmt_duration(-left)} over")
    elif not row["submitted"]:
        row.update(state="abandoned", late=hw.is_late(time.time()))
    if row["submitted"]:
        row["state"] = "submitted" + (", graded" if attempts else ", never graded")
    return row


def _last_homework_path(store: Store) -> Path:
    row = store.conn.execute("SELECT path FROM homeworks ORDER BY recorded_at DESC LIMIT 1").fetchone()
    if row is None:
        raise KataError("no homework started yet", hint="`kata homework start <file.toml>`")
    return Path(row[0])


def submit(homework_file: HomeworkArg,
           out: Annotated[Path, typer.Option("-o", "--output", help="Where to write the bundle (.kata.zip).")],
           name: Annotated[Optional[str], typer.Option(
               "--name", help="Your name, as the coach knows you (not needed when your homework file names you).")] = None,
           allow_missing: Annotated[bool, typer.Option("--allow-missing", help="Submit even if a kata was never started.")] = False) -> None:
    """Write one bundle with your solutions, their hashes, times, hints and scorecards; this ends
    the homework's open sessions (grades after it are not part of the homework)."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    candidate = submitter(hw, name)
    with Store() as store:
        open_before = {s.kata for s in store.sessions_for_homework(hw.id) if s.status == "active"}
        manifest = build_bundle(hw, store, cat, candidate=candidate, out=out, allow_missing=allow_missing)
    done = [e["slug"] for e in manifest["katas"] if not e.get("missing")]
    output.console.print(f"wrote [bold]{escape(str(out))}[/] for {escape(candidate)}: {', '.join(done) or 'no katas'}; "
                         "send it to your coach")
    if open_before:
        output.console.print(f"the homework's clock stopped: {', '.join(sorted(open_before))} ended now; grades "
                             "from here on are not part of the homework")
