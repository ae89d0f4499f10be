"""Shared options and lookups for the commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from grader.catalog import Catalog, Kata, load_catalog
from grader.errors import KataError
from grader.store import Session, Store

SlugArg = Annotated[str, typer.Argument(help="The kata's slug, e.g. paged-kv (see `kata list`).",
                                        show_default=False)]
OptionalSlugArg = Annotated[Optional[str], typer.Argument(
    help="The kata's slug; defaults to the kata of your active session.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Go ahead (your file is backed up first).")]


def catalog() -> Catalog:
    return load_catalog()


def kata_for(slug: Optional[str], store: Store, cat: Catalog | None = None) -> tuple[Kata, Session | None]:
    """The kata named by `slug`, or the one of the single active session."""
    cat = cat or catalog()
    if slug:
        kata = cat.get(slug)
        return kata, store.active_session(kata.slug)
    active = store.active_sessions()
    if not active:
        raise KataError("no active session, so name the kata",
                        hint="`kata start <slug>` to begin one, or pass the slug (see `kata list`)")
    if len(active) > 1:
        names = ", ".join(s.kata for s in active)
        raise KataError(f"several sessions are active ({names}); name the kata",
                        hint=f"for example `kata ... {active[0].kata}`")
    return cat.get(active[0].kata), active[0]


def kata_for_file(path: Path, cat: Catalog) -> Kata:
    """Infer the kata from a file name (paged_kv.py -> paged-kv)."""
    kata = cat.by_module(path.stem)
    if kata is None:
        raise KataError(f"cannot tell which kata {path.name} is for",
                        hint=f"name the kata: `kata grade <slug> --file {path}`")
    return kata
