"""The files a coach's commands write: the coach's homework file and the candidates' copies
beside it, never over an existing file unasked (a new homework has a new id, and every bundle
made for the old file would be rejected).
"""

from __future__ import annotations

import sys
from pathlib import Path

from grader.homework import invites
from grader.homework.spec import Homework, HomeworkError
from grader.workspace import backup

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def homework_files(homework: Homework, path: Path) -> dict[Path, str]:
    """What `homework new` writes: the coach's copy at `path`, and beside it the candidate's
    copy <stem>.candidate.toml, or with invitations one <stem>.candidate-<name>.toml each."""
    files = {path: homework.to_toml()}
    if homework.invite_secret is None:
        files[path.with_name(path.stem + ".candidate.toml")] = homework.to_toml(include_private=False)
        return files
    for name, file in invites.candidate_paths(path, list(homework.invited)).items():
        files[file] = homework.to_toml(include_private=False, invitation=homework.invitation_for(name))
    return files


def check_overwrite(files: list[Path], *, force: bool) -> list[Path]:
    """Refuse to replace a homework file unless forced; forced, back each one up first.
    Returns the backups made."""
    existing = [f for f in files if f.exists()]
    if existing and not force:
        what = ", ".join(str(f) for f in existing)
        raise HomeworkError(
            f"{what} already exist{'s' if len(existing) == 1 else ''}{_old_id(existing[0])}: a new homework "
            "gets a new id, so bundles made for the old file would be rejected",
            hint="write elsewhere with -o, or pass --force to back the old file up (to .backups/ beside it) "
                 "and replace it")
    return [backup(f) for f in existing]


def _old_id(path: Path) -> str:
    try:
        old = tomllib.loads(path.read_text(encoding="utf-8")).get("id")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return ""
    return f" (homework {old})" if isinstance(old, str) else ""


def write_files(files: dict[Path, str]) -> None:
    for path, text in files.items():
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # never half a homework file
