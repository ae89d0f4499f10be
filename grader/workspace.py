"""The candidate's workspace: where solutions live, and backups before anything is replaced.

The workspace is ``solutions/`` of the checkout unless ``KATA_WORKSPACE`` says otherwise.
Nothing a candidate wrote is ever overwritten without a copy in ``<workspace>/.backups/``.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from grader.catalog import REPO_ROOT, Kata
from grader.errors import KataError


def workspace_dir() -> Path:
    env = os.environ.get("KATA_WORKSPACE")
    return Path(env).expanduser() if env else REPO_ROOT / "solutions"


def solution_path(kata: Kata) -> Path:
    return workspace_dir() / f"{kata.module}.py"


def differs_from_stub(kata: Kata, path: Path) -> bool:
    """True when `path` exists and holds something other than the kata's stub."""
    if not path.exists():
        return False
    try:
        return path.read_bytes() != kata.stub_path.read_bytes()
    except OSError:
        return True


def backup(path: Path) -> Path:
    """Copy `path` to <workspace>/.backups/<name>.<timestamp>.py and return the copy's path."""
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


def write_stub(kata: Kata, dest: Path) -> None:
    """Write the kata's stub to `dest` (the caller has backed up anything there)."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".py.tmp")
        shutil.copyfile(kata.stub_path, tmp)
        os.replace(tmp, dest)  # atomic: a crash never leaves half a file
    except OSError as exc:
        raise KataError(f"could not write {dest}: {exc}",
                        hint="set KATA_WORKSPACE to a writable folder") from exc
