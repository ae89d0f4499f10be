"""kata watch: run the visible examples every time your solution is saved (as rustlings
does), clear the screen, and show the first failing example. Ctrl-C stops.

During a mock only the revealed levels' examples run, and watching stops when the mock ends.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from grader import textsafe
from grader.catalog import Kata
from grader.cli import output
from grader.cli.commands.check import run_examples
from grader.cli.common import OptionalSlugArg, catalog, kata_for
from grader.sessions import expire_if_due, revealed_levels
from grader.store import Store
from grader.workspace import solution_path

FileOpt = Annotated[Optional[Path], typer.Option("--file", "-f", help="Watch this file instead.")]

POLL_TIMEOUT_MS = 200  # how often the watcher wakes without a change (to notice a stop)
QUIET_MS = 50          # a save is reported once no further write came for this long


def watch_saves(path: Path, stop: threading.Event | None = None,
                ready: threading.Event | None = None) -> Iterator[None]:
    """Yield once per save of `path`. The folder is watched, not the file: editors often save
    by writing a new file and renaming it over the old one. `ready` is set once watching."""
    import watchfiles

    target = path.resolve()

    def is_target(change: watchfiles.Change, changed: str) -> bool:
        return change != watchfiles.Change.deleted and Path(changed).resolve() == target

    for changes in watchfiles.watch(target.parent, watch_filter=is_target, step=QUIET_MS,
                                    debounce=1_000, rust_timeout=POLL_TIMEOUT_MS, yield_on_timeout=True,
                                    stop_event=stop, recursive=False, raise_interrupt=True):
        if ready is not None:
            ready.set()
        if changes:
            yield


def watch(slug: OptionalSlugArg = None, file: FileOpt = None) -> None:
    """Re-run `kata check` on every save of your solution; shows the first failing example.

    Ctrl-C stops. During a mock, only the revealed levels are checked."""
    if importlib.util.find_spec("watchfiles") is None:
        output.fail("kata watch needs the watchfiles package", "pip install 'watchfiles>=0.21,<1.4'")
    from grader.cli.commands.check import _warm

    _warm()
    cat = catalog()
    with Store() as store:
        kata, session = kata_for(slug, store, cat)
        path = file or (Path(session.solution_path) if session else solution_path(kata))
        mock_id = session.id if session is not None and session.is_mock else None
    if not path.exists():
        output.fail(f"{path} does not exist", f"`kata start {kata.slug}` writes it from the stub")
    output.console.print(f"watching [bold]{textsafe.markup(path)}[/]: every save runs the examples (Ctrl-C stops)")
    try:
        if not check_once(kata, path, mock_id):
            return
        for _ in watch_saves(path):
            if not check_once(kata, path, mock_id):
                return
    except KeyboardInterrupt:
        output.console.print("\nstopped watching")


def check_once(kata: Kata, path: Path, mock_id: int | None) -> bool:
    """One check, printed on a clear screen; False when a watched mock has ended."""
    with Store() as store:
        session = store.active_session(kata.slug)
        session = expire_if_due(store, session) if session else None
        if mock_id is not None and (session is None or session.id != mock_id or session.status != "active"):
            output.console.print("the mock is over: watching stopped (`kata mock` for its follow-ups)")
            return False
        levels = revealed_levels(store, session)
        started = time.monotonic()
        card = run_examples(kata, path, levels=levels).to_dict()
        if session is not None and session.status == "active" and path.resolve() == Path(session.solution_path).resolve():
            store.record_check(kata.slug, session.id, {lv["level"]: lv["passed"] for lv in card["levels"]})
    if output.console.is_terminal:
        output.console.clear()
    else:
        output.console.rule(f"checked at {time.strftime('%H:%M:%S')}")
    _print_result(kata, path, card, time.monotonic() - started)
    return True


def _print_result(kata: Kata, path: Path, card: dict[str, Any], seconds: float) -> None:
    output.console.print(f"{kata.slug}: {textsafe.markup(path.name)} checked in {seconds:.1f} s "
                         f"[dim](kata watch; Ctrl-C stops)[/]")
    if card.get("import_error"):
        output.console.print(f"[red]✗[/] {textsafe.markup(card['import_error'])}")
        return
    failing = [t for t in card["tests"] if not t["passed"]]
    if not failing:
        output.console.print(f"[green]✓ all {len(card['tests'])} examples pass[/]; the hidden suite checks "
                             "much more: `kata grade` when you are ready")
        return
    first = min(failing, key=lambda t: t["level"])
    output.console.print(f"[red]✗[/] L{first['level']} {textsafe.markup(first['description'])}")
    output.console.print(f"    {textsafe.markup(first['message'] or 'failed')}")
    for key in ("input", "expected", "got", "where", "note"):
        if first["details"].get(key):
            output.console.print(f"    [cyan]{key}:[/] {textsafe.markup(first['details'][key])}")
    more = len(failing) - 1
    passed = len(card["tests"]) - len(failing)
    output.console.print(f"{passed}/{len(card['tests'])} examples pass"
                         + (f"; {more} more failing after this one" if more else ""))
