"""Shared options and lookups for the commands."""

from __future__ import annotations

import difflib
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
JsonStreamOpt = Annotated[bool, typer.Option(
    "--json-stream", help="Print JSON lines as the tests run: start, each result, end with the scorecard.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Go ahead (your file is backed up first).")]
LangOpt = Annotated[str, typer.Option(
    "--lang", help="The language you write in: py (default) or cpp (C++17 with a pybind11 binding; "
                   "paged-kv, scheduler, tensor-lib).")]


def check_lang(kata: Kata, lang: str) -> str:
    """`lang` ("py" or "cpp", any case; "python", "c++" too) where the kata offers it; a
    KataError saying which languages it does offer otherwise. For C++, a missing compiler is
    said (with how to get one) on stderr; the file is written all the same."""
    chosen = {"python": "py", "c++": "cpp", "cxx": "cpp"}.get(lang.strip().lower(), lang.strip().lower())
    if chosen not in ("py", "cpp"):
        raise KataError(f"--lang {lang!r} is not a language kata grades", hint="use --lang py or --lang cpp")
    if chosen not in kata.languages:
        offered = [k.slug for k in catalog().katas.values() if "cpp" in k.languages]
        raise KataError(f"{kata.slug} has no C++ version (yet)",
                        hint=f"write it in Python (leave out --lang), or pick one with C++: {', '.join(offered)}")
    if chosen == "cpp":
        from grader.cpp.toolchain import missing

        why = missing()
        if why:
            from grader.cli import output

            output.err_console.print(f"[yellow]note:[/] C++ solutions cannot be graded on this machine yet: {why}")
        else:
            from grader.cpp.build import warm_in_background

            warm_in_background()  # the precompiled headers, before the first grade needs them
    return chosen


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
                        hint=f"for example `kata {_command_name()} {active[0].kata}`")
    return cat.get(active[0].kata), active[0]


def _command_name() -> str:
    """The running subcommand ("grade"), for messages that show the command to type."""
    from grader.cli.output import command_name

    return command_name() or "grade"


def json_modes(as_json: bool, json_stream: bool) -> None:
    if as_json and json_stream:
        raise KataError("--json and --json-stream cannot be used together",
                        hint="--json prints one object at the end; --json-stream prints one line per "
                             "event, the last one holding the same scorecard")


def kata_for_file(path: Path, cat: Catalog) -> Kata:
    """Infer the kata from a file name (paged_kv.py -> paged-kv)."""
    if not path.is_file():
        from grader.grading import read_solution  # the engine, only when the file is not there

        read_solution(path)  # says what is wrong: missing, a folder, ...
    kata = cat.by_module(path.stem)
    if kata is None:
        close = difflib.get_close_matches(path.stem.lower(), [k.module for k in cat.katas.values()], n=1)
        closest = cat.by_module(close[0]) if close else None
        slug = closest.slug if closest is not None else "SLUG"
        raise KataError(f"cannot tell which kata {path.name} is for (its name is none of the katas' modules)",
                        hint=f"name the kata: `kata {_command_name()} {slug} --file {path}`"
                             + ("" if close else f", SLUG one of {', '.join(cat.katas)}"))
    return kata
