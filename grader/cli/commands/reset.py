"""kata reset: put the stub back (your file is backed up first)."""

from __future__ import annotations

from rich.markup import escape

from grader.cli import output
from grader.cli.common import SlugArg, catalog
from grader.mock import mock_stub
from grader.sessions import expire_if_due, running_mock
from grader.store import Store
from grader.workspace import backup, differs_from_stub, solution_path, write_stub


def reset(slug: SlugArg) -> None:
    """Restore the stub in solutions/<module>.py after backing up the current file. During a
    mock of the kata, the stub is the mock's own: the full stub declares every level's API."""
    kata = catalog().get(slug)
    with Store() as store:
        mock = running_mock(store, kata.slug)
        mock = expire_if_due(store, mock) if mock else None
        in_mock = mock is not None and mock.status == "active"
    # The file of the kata's open session (a C++ one too), else the Python one.
    with Store() as store:
        active = store.active_session(kata.slug)
    path = solution_path(kata, "cpp" if active is not None and active.solution_path.endswith(".cpp") else "py")
    if differs_from_stub(kata, path):
        saved = backup(path)
        output.console.print(f"backed up your file to [bold]{escape(str(saved))}[/]")
    elif path.exists():
        output.console.print(f"{escape(str(path))} already holds the stub; nothing to back up")
    write_stub(kata, path, mock_stub(kata, "cpp" if path.suffix == ".cpp" else "py") if in_mock else None)
    what = "the mock's starting file" if in_mock else "the stub"
    output.console.print(f"restored {what} in [bold]{escape(str(path))}[/]")
