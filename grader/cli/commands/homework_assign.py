"""kata homework new | invite: the coach writes the homework file and the candidates' copies."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from grader.catalog import Kata
from grader.cli import output
from grader.cli.common import catalog
from grader.errors import KataError
from grader.homework import invites
from grader.homework.files import check_overwrite, homework_files, write_files
from grader.homework.spec import Homework, PrivateSuite, load_homework, new_homework
from grader.homework.unit import grade_reference


def new(
    katas: Annotated[list[str], typer.Option("--kata", "-k", help="A kata to assign (repeat the option).")],
    out: Annotated[Path, typer.Option("-o", "--output", help="Where to write the homework file.")],
    minutes: Annotated[Optional[int], typer.Option("--minutes", min=1, max=1440, help="Minutes per kata.")] = None,
    due: Annotated[Optional[str], typer.Option("--due", help="Due date, YYYY-MM-DD.")] = None,
    title: Annotated[Optional[str], typer.Option("--title", help="Title shown to the candidate.")] = None,
    suites: Annotated[Optional[list[str]], typer.Option(
        "--suite", help="A private suite: PATH or SLUG=PATH (repeat). Embedded; never shown to the candidate.")] = None,
    candidates: Annotated[Optional[list[str]], typer.Option(
        "--candidates", help='Invite by name: "Ada,Grace" (repeatable). Each gets a file of their own, and a '
                             "bundle is accepted only with the name its file was issued to.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace existing homework files (backed up first).")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask to confirm a due date in the past.")] = False,
) -> None:
    """Write a homework file and the candidates' copies (validated; each private suite must pass on the reference)."""
    names = invites.parse_names(candidates) if candidates else None
    due_date = _parse_date(due) if due else None
    cat = catalog()
    hw = new_homework(cat, katas, minutes=minutes, due=due_date, title=title, suites=suites or [], candidates=names)
    files = homework_files(hw, out)
    if not force:
        check_overwrite(list(files), force=False)  # refuse before the suites are graded (seconds)
    if due_date is not None and due_date < dt.date.today() and not yes:
        _confirm(f"the due date {due_date} is in the past, so every submission will show as late. Write it anyway?")
    for suite in hw.private_suites:
        _check_suite(cat.get(suite.kata), suite)
    _write(files, force)
    load_homework(out, cat)  # validated on write: what we wrote must read back
    output.console.print(f"wrote [bold]{escape(str(out))}[/] ({hw.id}: {', '.join(k.slug for k in hw.katas)})")
    _say_send(hw, out, [f for f in files if f != out])


def _write(files: dict[Path, str], force: bool) -> None:
    for saved in check_overwrite(list(files), force=force):
        output.console.print(f"backed up the old file to [bold]{escape(str(saved))}[/]")
    write_files(files)


def _say_send(hw: Homework, coach: Path, sent: list[Path]) -> None:
    private = f"everything but your {len(hw.private_suites)} private suite(s)" if hw.private_suites else "the homework"
    if hw.invite_secret is None:
        output.console.print(f"send the candidate [bold]{escape(str(sent[0]))}[/] ({private}). Keep "
                             f"{escape(coach.name)} for `kata homework review`.")
        return
    paths = invites.candidate_paths(coach, list(hw.invited))
    lines = [f"  {escape(name)}: [bold]{escape(str(paths[name]))}[/]" for name in hw.invited if paths[name] in sent]
    output.console.print("send each candidate their own file (it holds " + private + " and their invitation):\n"
                         + "\n".join(lines))
    output.console.print(f"a bundle is accepted only with the name its file was issued to. Keep "
                         f"{escape(coach.name)} (it holds the invitations' secret) for `kata homework review`; "
                         f"`kata homework invite {escape(str(coach))} --candidates NAME` invites more.")


def invite(homework_file: Annotated[Path, typer.Argument(help="Your homework file (the coach's copy).", show_default=False)],
           candidates: Annotated[list[str], typer.Option("--candidates", help='Names to invite: "Ada,Grace" (repeatable).')],
           force: Annotated[bool, typer.Option("--force", help="Replace a candidate's file that differs (backed up first).")] = False) -> None:
    """Invite candidates by name to an existing homework: one file each, whose token binds a bundle to that name."""
    cat = catalog()
    hw = load_homework(homework_file, cat)
    if hw.invitation is not None:
        raise KataError(f"{homework_file} is a candidate's copy (issued to {hw.invitation.candidate!r})",
                        hint="invite from your own homework file, the one with the private suites and the secret")
    first = hw.invite_secret is None
    if first:
        hw = dataclasses.replace(hw, invite_secret=invites.new_secret())
    known = {name.casefold(): name for name in hw.invited}
    names = [known.get(name.casefold(), name) for name in invites.parse_names(candidates)]
    hw = dataclasses.replace(hw, invited=hw.invited + tuple(n for n in names if n.casefold() not in known))
    paths = invites.candidate_paths(homework_file, list(hw.invited))
    files = {paths[n]: hw.to_toml(include_private=False, invitation=hw.invitation_for(n)) for n in names}
    changed = [p for p, text in files.items() if p.exists() and p.read_text(encoding="utf-8") != text]
    check_overwrite(changed, force=force)
    _write({homework_file: hw.to_toml(), **files}, force=True)  # the coach's file: same homework, names added
    load_homework(homework_file, cat)
    if first:
        output.console.print(f"[bold yellow]note:[/] {escape(hw.id)} had no invitations: from now on the review "
                             "rejects a bundle without one, so every candidate needs a file of their own")
    _say_send(hw, homework_file, list(files))


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
    from grader.grading import new_seed  # the engine: imported when a command grades, not when the CLI starts

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


def _parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise KataError(f"--due '{text}' is not a date", hint="write it as YYYY-MM-DD, e.g. 2026-12-10") from exc


