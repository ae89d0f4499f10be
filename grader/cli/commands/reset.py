"""kata reset: put the stub back (your file is backed up first)."""

from __future__ import annotations

from rich.markup import escape

from grader.cli import output
from grader.cli.common import SlugArg, catalog
from grader.workspace import backup, differs_from_stub, solution_path, write_stub


def reset(slug: SlugArg) -> None:
    """Restore the stub in solutions/<module>.py after backing up the current file."""
    kata = catalog().get(slug)
    path = solution_path(kata)
    if differs_from_stub(kata, path):
        saved = backup(path)
        output.console.print(f"backed up your file to [bold]{escape(str(saved))}[/]")
    elif path.exists():
        output.console.print(f"{escape(str(path))} already holds the stub; nothing to back up")
    write_stub(kata, path)
    output.console.print(f"restored the stub in [bold]{escape(str(path))}[/]")
