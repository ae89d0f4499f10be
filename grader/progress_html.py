"""`kata progress --html`: one self-contained page with the progress tables and two plots
(scores over time, and the fastest time per level as a heat map), drawn with matplotlib's Agg
canvas and embedded as base64 PNG. The page loads nothing and runs no script (its
Content-Security-Policy allows only inline styles and data: images)."""

from __future__ import annotations

import base64
import html
import io
import time
from typing import Any

from grader.progress import KataProgress

PLOTS_HINT = "pip install 'kata[plots]' (or: pip install 'matplotlib>=3.7,<3.12')"


class PlotsUnavailable(RuntimeError):
    pass


def _figure(width_in: float, height_in: float) -> Any:
    try:
        from matplotlib.figure import Figure  # the Agg canvas: no display, no pyplot state
    except ImportError as exc:
        raise PlotsUnavailable(f"kata progress --html draws its plots with matplotlib, which is not "
                               f"installed: {PLOTS_HINT}") from exc
    return Figure(figsize=(width_in, height_in), dpi=100, layout="constrained")


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def scores_plot(rows: list[KataProgress]) -> str:
    """Scores over time, one colour per kata: a line through the timed attempts, hollow dots
    for the untimed `--file` grades. Only grades of every level: a mock's early grades score
    its revealed levels alone."""
    import datetime as dt

    def when(at: float) -> dt.datetime:
        return dt.datetime.fromtimestamp(at)

    fig = _figure(8, 3.6)
    ax = fig.add_subplot()
    for index, row in enumerate(rows):
        color = f"C{index % 10}"
        timed = [s for s in row.scores if s["timed"] and s["full"]]
        untimed = [s for s in row.scores if not s["timed"] and s["full"]]
        if timed:
            ax.plot([when(s["at"]) for s in timed], [s["score"] for s in timed], marker="o", color=color,
                    label=row.slug)
        if untimed:
            ax.scatter([when(s["at"]) for s in untimed], [s["score"] for s in untimed], marker="o",
                       facecolors="none", edgecolors=color, label=None if timed else f"{row.slug} (untimed)")
    ax.set_ylim(-5, 105)
    ax.set_ylabel("score")
    ax.set_title("Scores of grades of every level (hollow: untimed --file grades)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right", fontsize="small")
        fig.autofmt_xdate()
    else:
        ax.set_xticks([])
        ax.text(0.5, 0.5, "no attempts yet", ha="center", va="center", transform=ax.transAxes)
    return _png(fig)


def heatmap_plot(rows: list[KataProgress], level_minutes: dict[str, list[int]]) -> str:
    """Per kata and level: the fastest pass as a share of the level's minutes (green: within
    them; red: over), the minutes written in each cell; grey where never passed."""
    import numpy as np

    num_levels = max((r.num_levels for r in rows), default=1)
    ratios = np.full((len(rows), num_levels), np.nan)
    fig = _figure(8, 0.5 * len(rows) + 1.4)
    ax = fig.add_subplot()
    for i, row in enumerate(rows):
        for level, seconds in row.best_level_s.items():
            minutes = level_minutes[row.slug][level - 1]
            ratios[i, level - 1] = min(seconds / 60.0 / minutes, 2.0)
            ax.text(level - 1, i, f"{seconds / 60:.0f}/{minutes} min", ha="center", va="center", fontsize=8)
    import matplotlib

    cmap = matplotlib.colormaps["RdYlGn_r"].with_extremes(bad="#dddddd")
    image = ax.imshow(np.ma.masked_invalid(ratios), cmap=cmap, vmin=0.0, vmax=2.0, aspect="auto")
    ax.set_xticks(range(num_levels), [f"level {n + 1}" for n in range(num_levels)])
    ax.set_yticks(range(len(rows)), [r.slug for r in rows])
    ax.set_title("Fastest pass per level, against its minutes (grey: not passed yet)")
    fig.colorbar(image, ax=ax, label="time used / level minutes")
    return _png(fig)


def render_page(rows: list[KataProgress], level_minutes: dict[str, list[int]],
                suggestion: tuple[str, str] | None) -> str:
    """The whole page. Plots first (they raise PlotsUnavailable without matplotlib)."""
    scores = scores_plot(rows)
    heat = heatmap_plot(rows, level_minutes)
    e = html.escape
    out = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
           "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src data:; "
           "style-src 'unsafe-inline'\">",
           "<title>kata progress</title>", f"<style>{_CSS}</style></head><body>",
           "<h1>kata progress</h1>",
           f"<p class='when'>{e(time.strftime('%Y-%m-%d %H:%M'))}</p>"]
    if suggestion:
        out.append(f"<p class='next'>Next: <code>kata mock {e(suggestion[0])}</code> ({e(suggestion[1])})</p>")
    out.append("<table id='progress'><thead><tr><th>kata</th><th>levels passed</th><th>best (timed)</th>"
               "<th>best untimed</th><th>fastest per level</th><th>mocks</th><th>hints</th></tr></thead><tbody>")
    for r in rows:
        fastest = _fastest(r, level_minutes)
        mocks = "; ".join(f"{time.strftime('%Y-%m-%d', time.localtime(m['started_at']))}: {m['signal']}"
                          for m in r.mocks) or "-"
        out.append(f"<tr><td>{e(r.slug)}</td><td>{r.levels_passed}/{r.num_levels}</td>"
                   f"<td>{_dash(r.best_score)}</td><td>{_dash(r.best_untimed)}</td><td>{e(fastest)}</td>"
                   f"<td>{e(mocks)}</td><td>{r.hints_used}</td></tr>")
    out.append("</tbody></table>")
    out.append(f"<figure><img id='scores' alt='scores over time' src='data:image/png;base64,{scores}'>"
               "<figcaption>Scores over time</figcaption></figure>")
    out.append(f"<figure><img id='levels' alt='fastest pass per level' src='data:image/png;base64,{heat}'>"
               "<figcaption>Fastest pass per level</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _level_cell(row: KataProgress, level: int, level_minutes: dict[str, list[int]]) -> str:
    seconds = row.best_level_s.get(level)
    minutes = level_minutes[row.slug][level - 1]
    return f"L{level} -" if seconds is None else f"L{level} {seconds / 60:.0f}/{minutes} min"


def _fastest(row: KataProgress, level_minutes: dict[str, list[int]]) -> str:
    if not row.best_level_s:
        return "-"
    return " · ".join(_level_cell(row, n, level_minutes) for n in range(1, row.num_levels + 1))


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 62em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border-bottom: 1px solid #ccc; padding: .3em .7em; text-align: left; vertical-align: top; }
figure { margin: 1.5em 0; } img { max-width: 100%; }
.when { color: #666; } .next { font-size: 1.1em; }
"""
