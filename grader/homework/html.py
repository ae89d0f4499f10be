"""The review as one self-contained HTML page: inline CSS, no scripts, nothing fetched.

Every string that came from a bundle or from the candidate's code is HTML-escaped (the
source through pygments, which escapes it too), and the page carries a Content-Security-Policy
that allows no script at all and only the one stylesheet it holds (by hash): were an
escaping bug ever to let markup through, the browser would still run nothing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import time
from itertools import groupby
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from grader.homework.roster import candidate_summary
from grader.homework.row import RosterRow
from grader.homework.selfreport import duration
from grader.homework.terminal import level_time
from grader.homework.spec import Homework

_FORMATTER = HtmlFormatter(cssclass="src", linenos="inline", wrapcode=True)
_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em; color: #222; max-width: 75em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; white-space: nowrap; }
td.text { overflow-wrap: anywhere; min-width: 8em; max-width: 22em; }
.bad { color: #b00020; font-weight: bold; }
.ok { color: #1b7f3b; font-weight: bold; }
.flag { color: #7a1fa2; font-weight: bold; }
.self { color: #666; }
.summary { background: #f7f7f7; padding: 6px 10px; border-left: 4px solid #999; }
pre { background: #f7f7f7; padding: 6px; white-space: pre-wrap; margin: 2px 0; }
.src pre { white-space: pre; overflow-x: auto; }
details { margin: 0.5em 0; }
section.candidate { border-top: 2px solid #ddd; margin-top: 2em; }
""" + _FORMATTER.get_style_defs(".src")


def content_security_policy() -> str:
    style_hash = base64.b64encode(hashlib.sha256(_CSS.encode()).digest()).decode()
    return ("default-src 'none'; script-src 'none'; object-src 'none'; base-uri 'none'; "
            f"form-action 'none'; img-src 'none'; style-src 'sha256-{style_hash}'")


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)




def _when(timestamp: float | None) -> str:
    return "-" if timestamp is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def render_html(homework: Homework, rows: list[RosterRow], seed: int | None = None) -> str:
    out = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
           f"<meta http-equiv='Content-Security-Policy' content=\"{content_security_policy()}\">",
           "<meta name='referrer' content='no-referrer'>",
           f"<title>{_e(homework.title)} — review</title><style>{_CSS}</style></head><body>",
           f"<h1>{_e(homework.title)}</h1>",
           f"<p>homework {_e(homework.id)}; due {_e(homework.due or 'not set')}; reviewed "
           f"{_e(_when(time.time()))} with your seed <b>{_e(seed)}</b>. Every score is your own "
           "re-grading of the submitted source with that seed; a claimed score is only compared "
           "(replayed with the candidate's seed when it differs) to flag a MISMATCH. "
           "<span class='self'>Time used, grades, first passes, hints, reveals and lateness are "
           "self-reported: they come from the candidate's machine.</span></p>",
           "<table id='roster'><thead><tr>"]
    for col in ("candidate", "kata", "score", "levels", "private", "signal", "claim",
                "time used*", "grades*", "first passes*", "hints*", "reveals*", "late*", "flags", "notes"):
        out.append(f"<th>{col}</th>")
    out.append("</tr></thead><tbody>")
    out.extend(_row(row) for row in rows)
    out.append("</tbody></table><p class='self'>* self-reported</p>")
    for _, group in groupby(rows, key=lambda r: (r.candidate, r.bundle)):
        out.append(_candidate(list(group)))
    out.append("</body></html>")
    return "\n".join(out)


def _row(row: RosterRow) -> str:
    if row.status == "graded":
        score = f"<span class='{'ok' if row.score == 100 else 'bad'}'>{_e(row.score)}</span>"
        levels = f"{row.levels_passed}/{row.num_levels} (needs {row.required_levels})"
    else:
        score, levels = f"<span class='bad'>{_e(row.status)}</span>", "-"
    private = f"{row.private_passed}/{row.private_total}" if row.private_total else "-"
    if row.mismatch:
        claim = f"<span class='bad'>{_e(row.claimed_score)} (MISMATCH)</span>"
    else:
        claim = "-" if row.claimed_score is None else _e(f"{row.claimed_score}")
    used = f"{duration(row.time_used_s)} / {duration(row.time_limit_s)}"
    if row.overtime:
        used = f"<span class='bad'>{_e(used)}</span>"
    flags = [name for name, on in (("copy of the reference", row.copy_of_reference),
                                   ("similarity not measured", bool(row.similarity_not_measured)),
                                   ("fast: " + ", ".join(f"L{lv}" for lv in row.fast_levels), bool(row.fast_levels)),
                                   ("uncontained", row.contained is False),
                                   ("identical to " + ", ".join(row.identical_to), bool(row.identical_to))) if on]
    who = row.candidate if row.status != "rejected" else f"? ({row.bundle})"
    reported = row.status not in ("rejected", "missing")
    grades = "-" if row.num_grades is None or not reported else _e(row.num_grades)
    cells = [_e(who), _e(row.kata), score, levels, private, _e(row.signal) or "-", claim,
             used if reported else "-", grades, _passes(row) if reported else "-",
             _e(row.hints_used) if reported else "-", _e(row.reveals) if reported else "-",
             "<span class='bad'>late</span>" if row.late else ("no" if reported else "-"),
             "".join(f"<div class='flag'>{_e(f)}</div>" for f in flags), _e(row.problem)]
    texts = {0, len(cells) - 1}  # the candidate's name and the notes: long, from outside
    return "<tr>" + "".join(f"<td class='text'>{c}</td>" if i in texts else f"<td>{c}</td>"
                            for i, c in enumerate(cells)) + "</tr>"


def _passes(row: RosterRow) -> str:
    """Each level's first pass from the session's start, a FAST one marked."""
    if row.level_times is None:
        return "not in this bundle"
    out = []
    for lv in row.level_times:
        text = level_time(lv)
        out.append(f"<div class='bad'>{_e(text)} (fast)</div>" if lv["fast"] else f"<div>{_e(text)}</div>")
    return "".join(out)


def _candidate(rows: list[RosterRow]) -> str:
    first = rows[0]
    heading = first.candidate if first.status != "rejected" else f"bundle {first.bundle}: rejected"
    out = [f"<section class='candidate'><h2>{_e(heading)}</h2>",
           f"<p class='summary'>{_e(candidate_summary(rows))}</p>",
           f"<p class='self'>bundle {_e(first.bundle)}</p>"]
    for row in rows:
        if row.kata == "-":
            continue
        out.append(f"<h3>{_e(row.kata)}: {_e(row.score if row.status == 'graded' else row.status)}"
                   f"{' — ' + _e(row.signal) if row.signal else ''}</h3>")
        out.append(_facts(row))
        if row.failures:
            out.append(f"<details open><summary>{row.num_failures} failing "
                       f"({len(row.failures)} shown)</summary>")
            out.extend(_failure(f) for f in row.failures)
            out.append("</details>")
        if row.source:
            cut = " — cut short" if row.source_truncated else ""
            out.append(f"<details><summary>the candidate's source ({row.source_lines} lines{cut})</summary>"
                       f"{highlight(row.source, PythonLexer(), _FORMATTER)}</details>")
        if row.followups:
            out.append("<details open><summary>follow-up questions for the debrief</summary><ul>")
            out.extend(f"<li>{_e(q)}</li>" for q in row.followups)
            out.append("</ul></details>")
    out.append("</section>")
    return "\n".join(out)


def _facts(row: RosterRow) -> str:
    facts = []
    if row.claim_note:
        facts.append(("claim", row.claim_note))
    if row.reference_similarity is not None:
        facts.append(("similarity to the reference", f"{row.reference_similarity:.0%} of the code the suite "
                      "reaches, after dropping dead code and large literals and normalising names, comments "
                      "and formatting" + (" — a copy of the reference" if row.copy_of_reference else "")))
    elif row.similarity_not_measured:
        facts.append(("similarity to the reference", f"not measured: {row.similarity_not_measured} — "
                      "read the source"))
    facts.append(("time used*", f"{duration(row.time_used_s)} of {duration(row.time_limit_s)}"
                  + ("" if row.num_grades is None else f", {row.num_grades} grade(s)")))
    if row.reveal_times:
        facts.append(("reveals*", ", ".join(_when(t) for t in row.reveal_times)
                      + (f" ({row.reveals_before_start} before the session started)" if row.reveals_before_start else "")))
    for note in row.notes:
        facts.append(("note", note))
    return "<ul>" + "".join(f"<li>{_e(k)}: {_e(v)}</li>" for k, v in facts) + "</ul>"


def _failure(failure: dict[str, Any]) -> str:
    where = f" (private suite {_e(failure['private_suite'])})" if failure.get("private_suite") else ""
    parts = [f"<p><b>L{_e(failure['level'])} {_e(failure['description'])}</b>{where}: {_e(failure['message'])}</p>"]
    for key, value in (failure.get("details") or {}).items():
        parts.append(f"<div>{_e(key)}:</div><pre>{_e(value)}</pre>")
    return "\n".join(parts)
