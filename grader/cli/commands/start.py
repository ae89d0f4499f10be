"""kata start: copy the stub into the workspace and start the clock."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markdown import Markdown
from rich.markup import escape

from grader.catalog import Kata
from grader.cli import output
from grader.cli.common import ForceOpt, LangOpt, SlugArg, catalog, check_lang
from grader.errors import KataError
from grader.mock import mock_stub
from grader.statement import render
from grader.store import Session, Store
from grader.workspace import backup, differs_from_stub, solution_path, write_stub, write_support

MinutesOpt = Annotated[Optional[int], typer.Option(
    "--minutes", min=1, max=24 * 60, help="Length of the session (default: the kata's, 75).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Do not print the statement.")]


def start(slug: SlugArg, minutes: MinutesOpt = None, force: ForceOpt = False,
          quiet: QuietOpt = False, lang: LangOpt = "py") -> None:
    """Start a timed session: writes solutions/<module>.py from the stub and starts the clock.

    With --lang cpp (paged-kv, scheduler, tensor-lib) it writes solutions/<module>.cpp, a
    C++17 stub with the same API and a pybind11 binding at its end; `kata grade` compiles it.

    The statement is shown in a pager on a terminal ($PAGER, else less; PAGER=cat prints it).
    Run it inside a workspace (`kata init` makes one); `--force` restarts the clock."""
    kata = catalog().get(slug)
    lang = check_lang(kata, lang)
    with Store() as store:
        active = store.active_session(kata.slug)
        if active and not force:
            _say_already_active(active)
            return
        session = begin(kata, store, minutes or kata.minutes, force=force, lang=lang)
    if not quiet:  # paged on a terminal; what to do next is printed after it, on screen
        output.print_long(Markdown(render(kata)))  # practice: every Ask and clarification
    output.console.print(
        f"\n[bold green]started[/] {kata.title} ({kata.slug}): edit [bold]{escape(session.solution_path)}[/]\n"
        f"deadline {output.fmt_when(session.deadline)} ({session.minutes} min)\n"
        f"run the visible examples: [bold]kata check[/]   a hint: [bold]kata hint[/]   "
        f"grade: [bold]kata grade[/] (as often as you like; the session ends when every level "
        f"passes, or with [bold]kata stop[/])\n"
        f"started by accident? [bold]kata start {kata.slug} --force[/] restarts the clock "
        "(your file is backed up first)" + (_CPP_NOTE if lang == "cpp" else ""))


_CPP_NOTE = ("\nC++: the statement's API is the Python view of your module; write the classes at the "
             "top of the file, the binding at its end maps them (exceptions: std::invalid_argument is "
             "ValueError, std::out_of_range IndexError, KeyError the file's own). `kata grade` compiles "
             "it (g++ -O2 -std=c++17, in the sandbox; cached), `kata grade --sanitize` with "
             "AddressSanitizer and UBSan.")


def begin(kata: Kata, store: Store, minutes: int, *, force: bool,
          homework: str | None = None, mode: str = "timed", lang: str = "py") -> Session:
    """Write the stub (backing up a changed file when forced) and record a new session
    (`mode` 'mock': the levels are revealed one at a time; `lang` 'cpp': the C++ stub)."""
    path = solution_path(kata, lang)
    if differs_from_stub(kata, path):
        if not force:
            raise KataError(
                f"{path} already holds your changes",
                hint=f"`kata grade {kata.slug}` grades it; `kata start {kata.slug} --force` "
                     "backs it up and starts fresh")
        saved = backup(path)
        # On stderr: `kata mock --json` prints one JSON object on stdout.
        output.err_console.print(f"backed up your previous file to [bold]{escape(str(saved))}[/]")
    if mode == "mock":
        # The stub declares every level's API; a mock starts from a file that shows none.
        write_stub(kata, path, mock_stub(kata, lang))
    elif not path.exists() or differs_from_stub(kata, path):
        write_stub(kata, path)
    write_support(kata, path.parent)
    return store.start_session(kata.slug, path, minutes, homework=homework, mode=mode,
                               levels=tuple((lv.level, lv.minutes) for lv in kata.levels))


def _say_already_active(session: Session) -> None:
    left = session.remaining_s
    when = (f"{output.fmt_duration(left)} left" if left >= 0
            else f"[red]{output.fmt_duration(-left)} over time[/]")
    if session.is_mock:
        output.console.print(f"a mock of {session.kata} is running ({when}); `kata mock` shows where you "
                             f"are, `kata mock --stop` ends it")
        return
    output.console.print(
        f"{session.kata} already has an active session (started {output.fmt_when(session.started_at)}, "
        f"{when}); keep editing [bold]{escape(session.solution_path)}[/]\n"
        f"`kata stop {session.kata}` ends it; `kata start {session.kata} --force` starts over "
        "(your file is backed up first)")
