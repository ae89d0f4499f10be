"""kata init: make a practice folder (a workspace) the way `rustlings init` does."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from grader.cli import output
from grader.cli.common import catalog
from grader.workspace import MARKER, init_workspace

DEFAULT_FOLDER = "kata-practice"

DirArg = Annotated[Path, typer.Argument(
    help=f"The folder to make (default: ./{DEFAULT_FOLDER}); it may exist already.", show_default=False)]
NotebooksOpt = Annotated[bool, typer.Option(
    "--notebooks", help="Also copy the walkthroughs (py:percent) into notebooks/.")]


def init(folder: DirArg = Path(DEFAULT_FOLDER), notebooks: NotebooksOpt = False) -> None:
    """Make a practice folder: solutions/, the kata-workspace.toml marker, optionally notebooks/."""
    report = init_workspace(folder, with_notebooks=notebooks)
    root = report.workspace.root
    if report.created:
        output.console.print(f"[bold green]made[/] a kata workspace in [bold]{root}[/]\n"
                             f"  solutions/   your solutions: `kata start <slug>` writes them here\n"
                             f"  {MARKER}  marks the folder; kata finds it from any folder inside")
    else:
        output.console.print(f"{root} is a kata workspace already; nothing in it was changed")
    if report.notebooks_copied:
        output.console.print(f"  notebooks/   {len(report.notebooks_copied)} walkthroughs; "
                             "`kata notebook <slug>` writes the paired .ipynb")
    if report.notebooks_kept:
        output.console.print(f"  notebooks/   kept {len(report.notebooks_kept)} walkthroughs already there "
                             f"as they were ({', '.join(report.notebooks_kept)})")
    katas = catalog().katas
    first = "paged-kv" if "paged-kv" in katas else next(iter(katas), "<slug>")
    cd = "" if root == Path.cwd().resolve() else f"cd {_shown(root)} && "
    output.console.print(f"[yellow]next:[/] [bold]{cd}kata start {first}[/]   "
                         "(`kata list` shows every kata)")


def _shown(path: Path) -> str:
    """The path as short as it can be said from here."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return rel if not rel.startswith("..") else str(path)
