"""The candidate's progress per kata, from the history: levels passed, best scores (timed and
untimed apart), the fastest time per level, mocks and their signals, hints; and the kata the
candidate most needs next (the rule `kata mock` and `kata progress` share).

"Best" counts only the candidate's own timed attempts (a session or a mock) that graded every
level: an untimed `--file` grade may be anyone's file, and a mock's early grades score only the
levels revealed so far. Untimed grades are reported in their own column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader.catalog import DIFFICULTIES, Catalog, Kata
from grader.sessions import level_clocks, session_details_missed, session_signal
from grader.store import Store


@dataclass
class KataProgress:
    slug: str
    title: str
    num_levels: int
    levels_passed: int = 0              # most levels passed in order in one timed session
    best_score: int | None = None       # timed attempts that graded every level
    best_untimed: int | None = None     # `--file` grades
    best_level_s: dict[int, float] = field(default_factory=dict)  # fastest pass per level
    mocks: list[dict[str, Any]] = field(default_factory=list)     # newest first
    hints_used: int = 0
    num_timed: int = 0
    num_untimed: int = 0
    last_timed_at: float | None = None
    scores: list[dict[str, Any]] = field(default_factory=list)    # oldest first, for plots

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["best_level_s"] = {str(k): round(v, 1) for k, v in self.best_level_s.items()}
        return data


def kata_progress(store: Store, kata: Kata) -> KataProgress:
    out = KataProgress(kata.slug, kata.title, len(kata.levels))
    timed = store.attempts(kata.slug, timed=True)
    untimed = store.attempts(kata.slug, timed=False)
    out.num_timed, out.num_untimed = len(timed), len(untimed)
    out.best_score = store.best_score(kata.slug, timed=True, num_levels=len(kata.levels))
    out.best_untimed = store.best_score(kata.slug, timed=False)
    out.last_timed_at = timed[0].graded_at if timed else None
    out.hints_used = store.hints_total(kata.slug)
    out.scores = [{"at": a.graded_at, "score": a.score, "timed": a.timed,
                   "full": a.num_levels == len(kata.levels)} for a in reversed(timed + untimed)]
    out.scores.sort(key=lambda s: s["at"])
    out.levels_passed = max([a.levels_passed for a in timed if a.num_levels == len(kata.levels)
                             and a.passed] or [0])
    session_ids = {a.session_id for a in timed if a.session_id is not None} | {s.id for s in store.mock_sessions(kata.slug)}
    for session_id in session_ids:
        session = store.session(session_id)
        clocks = level_clocks(store, session, kata)
        in_order = 0
        for c in clocks:
            if c.passed_at is None:
                break
            in_order += 1
        out.levels_passed = max(out.levels_passed, in_order)
        for c in clocks:
            used = c.used_s(c.passed_at or 0.0) if c.passed_at is not None else None
            if used is not None and (c.level not in out.best_level_s or used < out.best_level_s[c.level]):
                out.best_level_s[c.level] = used
        if session.is_mock:
            record = store.mock(session.id)
            debrief = record.debrief if record else None
            out.mocks.append({
                "session_id": session.id, "started_at": session.started_at,
                "signal": debrief["signal"] if debrief else session_signal(
                    clocks, session.deadline, session_details_missed(store, session)),
                "levels_passed": in_order, "finished": debrief is not None})
    out.mocks.sort(key=lambda m: -m["started_at"])
    return out


def all_progress(store: Store, catalog: Catalog) -> list[KataProgress]:
    return [kata_progress(store, kata) for kata in catalog.katas.values()]


def most_needed(catalog: Catalog, store: Store, exclude: frozenset[str] = frozenset()) -> tuple[Kata, str]:
    """The kata to practise next, and why: never attempted (timed) first, easier first; then
    the lowest best score (a kata whose timed attempts never graded every level counts as
    lowest); then the one attempted longest ago."""
    katas = [k for k in catalog.katas.values() if k.slug not in exclude] or list(catalog.katas.values())
    if not katas:
        raise LookupError("no katas")
    progress = {k.slug: kata_progress(store, k) for k in katas}
    fresh = [k for k in katas if progress[k.slug].num_timed == 0 and not progress[k.slug].mocks]
    if fresh:
        kata = min(fresh, key=lambda k: DIFFICULTIES.index(k.difficulty))
        why = "you have never attempted it in a timed session or a mock"
        return kata, why + ("; of those, an easiest one" if len(fresh) > 1 else "")

    def best(k: Kata) -> int:
        score = progress[k.slug].best_score
        return -1 if score is None else score

    lowest = min(best(k) for k in katas)
    tied = [k for k in katas if best(k) == lowest]
    kata = min(tied, key=lambda k: progress[k.slug].last_timed_at or 0.0)
    why = ("no timed attempt of yours graded every level yet" if lowest < 0
           else f"your lowest best score ({lowest}/100, timed attempts)")
    if len(tied) > 1:
        why += "; of those, the one you attempted longest ago"
    return kata, why
