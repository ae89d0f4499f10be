"""The candidate's workspace: where solutions live, and backups before anything is replaced.

A workspace is found, in this order:

1. the nearest folder, from the current directory upward, holding ``kata-workspace.toml``
   (what ``kata init`` makes: the marker, ``solutions/``, optionally ``notebooks/``);
2. ``KATA_WORKSPACE``: a folder made by ``kata init``, or any folder, which then holds the
   solutions itself;
3. ``solutions/`` of the checkout, when kata runs from a checkout (not from a wheel).

Outside all three there is no workspace, and the commands that write a solution say how to
make one. Nothing a candidate wrote is ever overwritten without a copy in
``<solutions>/.backups/``.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from grader import catalog as catalog_module
from grader.catalog import Kata
from grader.errors import KataError

MARKER = "kata-workspace.toml"
ENV_WORKSPACE = "KATA_WORKSPACE"

_MARKER_TEXT = """\
# This folder is a kata workspace, made by `kata init`. Run kata anywhere inside it:
# `kata start <slug>` writes your solution to solutions/<module>.py and starts the clock.
[workspace]
version = 1
"""


@dataclass(frozen=True)
class Workspace:
    root: Path
    solutions_dir: Path
    notebooks_dir: Path
    found_by: str  # "marker" (kata init), "env" (KATA_WORKSPACE) or "checkout"

    def describe(self) -> str:
        how = {"marker": f"the nearest {MARKER}", "env": f"${ENV_WORKSPACE}",
               "checkout": "the checkout you run kata from"}[self.found_by]
        return f"{self.root} (found by {how})"


def find_workspace(start: Path | None = None) -> Workspace | None:
    """The workspace for a command run in `start` (default: the current directory), or None."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / MARKER).is_file():
            return _made_by_init(folder, "marker")
    env = os.environ.get(ENV_WORKSPACE)
    if env:
        folder = Path(env).expanduser().resolve()
        if (folder / MARKER).is_file():
            return _made_by_init(folder, "env")
        return Workspace(root=folder, solutions_dir=folder, notebooks_dir=folder / "notebooks",
                         found_by="env")
    checkout = catalog_module.checkout_root()
    if checkout is not None:
        return Workspace(root=checkout, solutions_dir=checkout / "solutions",
                         notebooks_dir=catalog_module.NOTEBOOKS_DIR, found_by="checkout")
    return None


def _made_by_init(folder: Path, found_by: str) -> Workspace:
    return Workspace(root=folder, solutions_dir=folder / "solutions",
                     notebooks_dir=folder / "notebooks", found_by=found_by)


def current_workspace() -> Workspace:
    """The workspace, or a KataError (exit code 2) saying how to make one."""
    workspace = find_workspace()
    if workspace is None:
        raise KataError(
            f"no kata workspace here: neither {Path.cwd()} nor a folder above it holds {MARKER}, "
            f"and {ENV_WORKSPACE} is not set",
            hint="`kata init` makes a practice folder (kata-practice/) here; then "
                 "`cd kata-practice && kata start <slug>`. Or set KATA_WORKSPACE to a folder of yours")
    return workspace


def workspace_dir() -> Path:
    """The folder the solutions live in."""
    return current_workspace().solutions_dir


def solution_path(kata: Kata, lang: str = "py") -> Path:
    return workspace_dir() / f"{kata.module}.{lang}"


# ---------------------------------------------------------------------------- kata init


@dataclass
class InitReport:
    workspace: Workspace
    created: bool                 # False: the folder was a workspace already
    notebooks_copied: list[str]   # file names
    notebooks_kept: list[str]     # already there: left as they were


def init_workspace(folder: Path, with_notebooks: bool = False) -> InitReport:
    """Make `folder` a workspace: the marker and solutions/ (and the walkthroughs in notebooks/
    when asked). Never replaces a file that is already there."""
    folder = folder.expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise KataError(f"{folder} is a file, not a folder", hint="name a new or existing folder: `kata init DIR`")
    created = not (folder / MARKER).is_file()
    copied: list[str] = []
    kept: list[str] = []
    try:
        (folder / "solutions").mkdir(parents=True, exist_ok=True)
        if created:
            (folder / MARKER).write_text(_MARKER_TEXT, encoding="utf-8")
        if with_notebooks:
            target = folder / "notebooks"
            target.mkdir(exist_ok=True)
            for source in sorted(catalog_module.NOTEBOOKS_DIR.glob("*.py")):
                dest = target / source.name
                if dest.exists():
                    kept.append(source.name)
                else:
                    shutil.copyfile(source, dest)
                    copied.append(source.name)
    except OSError as exc:
        raise KataError(f"could not make a workspace in {folder}: {exc}",
                        hint="pick a folder you can write to: `kata init DIR`") from exc
    return InitReport(_made_by_init(folder, "marker"), created, copied, kept)


# ---------------------------------------------------------------------------- files


def differs_from_stub(kata: Kata, path: Path) -> bool:
    """True when `path` exists and holds something other than the kata's stub."""
    if not path.exists():
        return False
    try:
        return path.read_bytes() != kata.stub_for(path).read_bytes()
    except OSError:
        return True


def backup(path: Path) -> Path:
    """Copy `path` to <its folder>/.backups/<name>.<timestamp><suffix> and return the copy's path."""
    folder = path.parent / ".backups"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = folder / f"{path.stem}.{stamp}{path.suffix}"
    n = 1
    while target.exists():
        target = folder / f"{path.stem}.{stamp}-{n}{path.suffix}"
        n += 1
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    except OSError as exc:
        raise KataError(f"could not back up {path} to {target}: {exc}",
                        hint="nothing was changed; free some space or fix the folder's permissions") from exc
    return target


def write_stub(kata: Kata, dest: Path, text: str | None = None) -> None:
    """Write the kata's stub (or `text`, e.g. a mock's starting file) to `dest` (the caller
    has backed up anything there)."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(dest.suffix + ".tmp")
        if text is None:
            shutil.copyfile(kata.stub_for(dest), tmp)
        else:
            tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, dest)  # atomic: a crash never leaves half a file
    except OSError as exc:
        raise KataError(f"could not write {dest}: {exc}",
                        hint="set KATA_WORKSPACE to a writable folder") from exc


def write_support(kata: Kata, folder: Path) -> list[Path]:
    """Copy the kata's support files (e.g. the model a kata hands the candidate) next to the
    solution, so the candidate's code imports them when run by hand; a changed copy is backed
    up first. The grader itself always uses the kata's own copy."""
    written = []
    for src in kata.support_paths:
        dest = folder / src.name
        try:
            if dest.exists() and dest.read_bytes() == src.read_bytes():
                continue
            if dest.exists():
                backup(dest)
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
        except OSError as exc:
            raise KataError(f"could not write {dest}: {exc}",
                            hint="set KATA_WORKSPACE to a writable folder") from exc
        written.append(dest)
    return written

