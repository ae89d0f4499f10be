"""The review as one self-contained HTML page (inline CSS, no scripts, nothing fetched)."""

from __future__ import annotations

import html
import time
from typing import Any

from grader.homework.review import RosterRow
from grader.homework.spec import Homework

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.bad { color: #b00020; font-weight: bold; }
.ok { color: #1b7f3b; font-weight: bold; }
pre { background: #f7f7f7; padding: 6px; white-space: pre-wrap; margin: 2px 0; }
details { margin: 0.5em 0; }
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.0f} min"


def render_html(homework: Homework, rows: list[RosterRow]) -> str:
    out = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{_e(homework.title)} — review</title>",
           f"<style>{_CSS}</style></head><body>",
           f"<h1>{_e(homework.title)}</h1>",
           f"<p>homework {_e(homework.id)}; due {_e(homework.due or 'not set')}; reviewed "
           f"{_e(time.strftime('%Y-%m-%d %H:%M'))}. Every score below was re-graded from the submitted "
           "source; claimed scores are shown only to flag mismatches.</p>",
           "<table id='roster'><thead><tr>"]
    for col in ("candidate", "kata", "score", "levels", "private", "claimed", "time used", "hints",
                "reveals", "late", "notes"):
        out.append(f"<th>{col}</th>")
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append(_row(row))
    out.append("</tbody></table><h2>Failures</h2>")
    for row in rows:
        if row.failures:
            out.append(f"<details open><summary>{_e(row.candidate)} — {_e(row.kata)}: "
                       f"{len(row.failures)} failing</summary>")
            for failure in row.failures:
                out.append(_failure(failure))
            out.append("</details>")
    out.append("</body></html>")
    return "\n".join(out)


def _row(row: RosterRow) -> str:
    if row.status == "graded":
        score = f"<span class='{'ok' if row.score == 100 else 'bad'}'>{row.score}</span>"
        levels = f"{row.levels_passed}/{row.num_levels} (needs {row.required_levels})"
    else:
        score, levels = f"<span class='bad'>{_e(row.status)}</span>", "-"
    private = f"{row.private_passed}/{row.private_total}" if row.private_total else "-"
    claimed = "-" if row.claimed_score is None else str(row.claimed_score)
    if row.mismatch:
        claimed = f"<span class='bad'>{claimed} (MISMATCH)</span>"
    used = _minutes(row.time_used_s)
    if row.time_used_s is not None and row.time_limit_s and row.time_used_s > row.time_limit_s:
        used = f"<span class='bad'>{used}</span>"
    cells = [_e(row.candidate), _e(row.kata), score, levels, private, claimed,
             f"{used} / {_minutes(row.time_limit_s)}", str(row.hints_used), str(row.reveals),
             "<span class='bad'>late</span>" if row.late else "no", _e(row.problem)]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _failure(failure: dict[str, Any]) -> str:
    where = f" (private suite {_e(failure['private_suite'])})" if failure.get("private_suite") else ""
    parts = [f"<p><b>L{_e(failure['level'])} {_e(failure['description'])}</b>{where}: {_e(failure['message'])}</p>"]
    for key in ("input", "expected", "got", "example", "where", "note"):
        value = (failure.get("details") or {}).get(key)
        if value:
            parts.append(f"<div>{key}:</div><pre>{_e(value)}</pre>")
    return "\n".join(parts)
