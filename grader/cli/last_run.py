"""The scorecard of the last `grade` or `check` of each kata, kept for `kata repro`.

One JSON file per kata in ``$KATA_HOME/last-run/<slug>.json`` (next to the history database,
so it works for `--file` grades outside any workspace too), overwritten by every run. It is
state, not history: the attempts themselves are recorded in the store.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.store import kata_home

FOLDER = "last-run"


@dataclass
class LastRun:
    kind: str              # "grade" or "check"
    saved_at: float
    solution_path: Path    # the graded file, absolute (the card has it as it was typed)
    card: dict[str, Any]   # Scorecard.to_dict()


def _path(slug: str) -> Path:
    return kata_home() / FOLDER / f"{slug}.json"


def save(card: dict[str, Any], kind: str) -> None:
    """Keep `card` as the kata's last run. Never fails a command: repro is a convenience."""
    path = _path(card["kata"])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp",
                                         encoding="utf-8") as fh:
            json.dump({"kind": kind, "saved_at": time.time(), "card": card,
                       "solution_path": str(Path(card["solution"]).resolve())}, fh, default=str)
        os.replace(fh.name, path)
    except OSError:
        pass


def load(slug: str) -> LastRun | None:
    try:
        data = json.loads(_path(slug).read_text(encoding="utf-8"))
        return LastRun(kind=str(data["kind"]), saved_at=float(data["saved_at"]),
                       solution_path=Path(data["solution_path"]), card=dict(data["card"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def all_runs() -> list[LastRun]:
    """The last run of every kata, the most recent first."""
    folder = kata_home() / FOLDER
    runs = [run for p in (sorted(folder.glob("*.json")) if folder.is_dir() else [])
            if (run := load(p.stem)) is not None]
    return sorted(runs, key=lambda r: r.saved_at, reverse=True)
