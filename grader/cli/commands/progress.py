"""kata progress: per kata your levels passed, best scores, fastest time per level, mocks and
hints; `--html FILE` adds plots (matplotlib) in one self-contained page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from grader.cli import output
from grader.cli.common import JsonOpt, catalog
from grader.errors import KataError
from grader.progress import all_progress, most_needed
from grader.store import Store

HtmlOpt = Annotated[Optional[Path], typer.Option(
    "--html", help="Also write a page with plots of your scores and levels (needs matplotlib).",
    show_default=False)]


def progress(html_file: HtmlOpt = None, as_json: JsonOpt = False) -> None:
    """Your progress per kata, and the kata to practise next (the rule of `kata mock`)."""
    cat = catalog()
    with Store() as store:
        rows = all_progress(store, cat)
        suggestion = None
        if cat.katas:
            kata, why = most_needed(cat, store)
            suggestion = (kata.slug, why)
    minutes = {k.slug: [lv.minutes for lv in k.levels] for k in cat.katas.values()}
    if html_file is not None:
        from grader.progress_html import PLOTS_HINT, PlotsUnavailable, render_page

        try:
            page = render_page(rows, minutes, suggestion)
        except PlotsUnavailable as exc:
            raise KataError(str(exc).split(": pip")[0], hint=PLOTS_HINT) from exc
        try:
            html_file.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise KataError(f"could not write {html_file}: {exc}", hint="pick a writable path: --html FILE") from exc
    if as_json:
        output.print_json({"katas": [r.to_dict() for r in rows],
                           "next": None if suggestion is None else {"kata": suggestion[0], "why": suggestion[1]},
                           "html": None if html_file is None else str(html_file)})
        return
    table = output.table("progress")
    for col in ("kata", "levels", "best", "untimed", "fastest per level", "mocks", "hints"):
        table.add_column(col)
    for r in rows:
        fastest = " ".join("-" if n not in r.best_level_s else f"{r.best_level_s[n] / 60:.0f}/{m}"
                           for n, m in enumerate(minutes[r.slug], start=1))
        mocks = f"{len(r.mocks)}: {r.mocks[0]['signal']}" if r.mocks else "-"
        table.add_row(r.slug, f"{r.levels_passed}/{r.num_levels}", _dash(r.best_score), _dash(r.best_untimed),
                      fastest, escape(mocks), str(r.hints_used))
    output.console.print(table)
    output.console.print("[dim]fastest per level: minutes of your fastest pass / the level's minutes; "
                         "mocks: how many, and the last one's signal[/]")
    if suggestion:
        output.console.print(f"next: [bold]kata mock {suggestion[0]}[/] ({escape(suggestion[1])})")
    if html_file is not None:
        output.console.print(f"wrote [bold]{escape(str(html_file))}[/]")


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)
