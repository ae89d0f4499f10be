"""kata notebook: write the paired .ipynb of a kata's walkthrough (jupytext)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from grader.cli import output
from grader.cli.common import SlugArg, catalog
from grader.errors import KataError
from grader.workspace import backup, current_workspace


def notebook(slug: SlugArg) -> None:
    """Write notebooks/<module>.ipynb in your workspace, paired with the py:percent walkthrough."""
    import jupytext

    kata = catalog().get(slug)
    shipped = kata.notebook_path
    if not shipped.is_file():
        raise KataError(f"{kata.slug} has no walkthrough yet ({shipped} is missing)",
                        hint="`kata list` shows the katas; `kata show <slug>` and `kata reveal <slug>` work for every one")
    folder = current_workspace().notebooks_dir
    source = folder / shipped.name
    try:
        if not source.exists():  # a walkthrough you edited stays as it is
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shipped, source)
        target = source.with_suffix(".ipynb")
        nb = jupytext.read(source)
        nb.metadata.setdefault("jupytext", {})["formats"] = "ipynb,py:percent"
        text = jupytext.writes(nb, fmt="ipynb")
        if not target.exists() or not _same_notebook(target.read_text(encoding="utf-8"), text):
            if target.exists():
                saved = backup(target)  # it may hold your outputs and edits
                output.console.print(f"backed up your previous notebook to [bold]{saved}[/]")
            target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise KataError(f"could not write the notebook in {folder}: {exc}",
                        hint="run it in a workspace you can write to (`kata init` makes one)") from exc
    output.console.print(f"wrote [bold]{target}[/] (paired with {_name(source)}: edits to either sync "
                         "through jupytext)\nopen it with: [bold]jupyter lab " + str(target) + "[/]"
                         "  (pip install jupyterlab if needed)")


def _same_notebook(old: str, new: str) -> bool:
    """Same cells and metadata; cell ids are drawn afresh by every write, so they do not count."""
    try:
        notebooks = [json.loads(old), json.loads(new)]
    except ValueError:
        return False
    for nb in notebooks:
        for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
            cell.pop("id", None)
    return notebooks[0] == notebooks[1]


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"
