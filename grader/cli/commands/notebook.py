"""kata notebook: write the paired .ipynb of a kata's walkthrough (jupytext)."""

from __future__ import annotations

import typer

from grader.cli import output
from grader.cli.common import SlugArg, catalog
from grader.errors import KataError


def notebook(slug: SlugArg) -> None:
    """Write notebooks/<module>.ipynb from the py:percent walkthrough, paired with it."""
    import jupytext

    kata = catalog().get(slug)
    source = kata.notebook_path
    if not source.is_file():
        raise KataError(f"{kata.slug} has no walkthrough yet ({source} is missing)")
    target = source.with_suffix(".ipynb")
    nb = jupytext.read(source)
    nb.metadata.setdefault("jupytext", {})["formats"] = "ipynb,py:percent"
    jupytext.write(nb, target)
    output.console.print(f"wrote [bold]{target}[/] (paired with {source.name}: edits to either sync "
                         "through jupytext)\nopen it with: [bold]jupyter lab " + str(target) + "[/]"
                         "  (pip install jupyterlab if needed)")


def register(app: typer.Typer) -> None:
    app.command("notebook")(output.handle_errors(notebook))
