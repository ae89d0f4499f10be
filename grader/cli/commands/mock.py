"""kata mock: a mock interview. Level 1 first; each grade that passes every revealed level
reveals the next; two follow-up questions when the coding part ends (every level passed, the
time ran out, or `--stop`); then the debrief."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markdown import Markdown
from rich.markup import escape

from grader import clock
from grader.catalog import Catalog
from grader.cli import mock_view, output
from grader.cli.commands.start import begin
from grader.cli.common import JsonOpt, LangOpt, OptionalSlugArg, catalog, check_lang
from grader.debrief import build_debrief, debrief_to_reprint
from grader.errors import KataError, StoreError
from grader.followups import record_scores, score_answer
from grader.mock import ANSWERS_FORMAT, choose_followups, parse_marks, read_answers
from grader.progress import most_needed
from grader.sessions import expire_if_due, level_clocks, pacing, revealed_levels, running_mock, waiting_mock
from grader.statement import render
from grader.store import Session, Store
from grader.timeline import build_timeline

MinutesOpt = Annotated[Optional[int], typer.Option(
    "--minutes", min=1, max=24 * 60, help="Length of the whole mock (default: the kata's, 75).")]
StopOpt = Annotated[bool, typer.Option("--stop", help="End the running mock now: follow-ups, then the debrief.")]
AnswersOpt = Annotated[Optional[Path], typer.Option(
    "--answers", help="Answer the follow-up questions from this file (TOML or JSON; see the README).",
    show_default=False)]

DebriefOpt = Annotated[bool, typer.Option(
    "--debrief", help="Reprint the debrief of your latest finished mock, with its timeline; "
                      "`--debrief ID` of any mock (`kata history --mock` lists the ids), "
                      "`--debrief SLUG` of a kata's latest.")]

_END_WORDS = {"passed": "every level passed", "stopped": "you stopped it", "time": "the time ran out"}


def interactive() -> bool:
    """Whether the follow-ups can be asked here (a test replaces this)."""
    return sys.stdin.isatty()


def mock(slug: OptionalSlugArg = None, minutes: MinutesOpt = None, stop: StopOpt = False,
         answers: AnswersOpt = None, debrief: DebriefOpt = False, lang: LangOpt = "py",
         as_json: JsonOpt = False) -> None:
    """A mock interview: the framing and level 1 only, the next level when the revealed ones
    pass, two follow-up questions at the end, and a debrief.

    Without a slug: the kata you most need (never attempted, then your lowest best score,
    then the one attempted longest ago). `kata grade` grades the revealed levels; `kata mock`
    again shows where you are; `--stop` ends it; `--answers FILE` answers the follow-ups;
    `--debrief [ID]` reprints a finished mock's debrief with its timeline."""
    cat = catalog()
    if debrief:
        if stop or answers is not None or minutes is not None:
            raise KataError("--debrief reprints a finished mock: it takes no --stop, --answers or --minutes",
                            hint="`kata mock --debrief [ID]`, or `kata mock` without --debrief")
        with Store() as store:
            return _reprint(store, cat, slug, as_json)
    with Store() as store:
        kata_slug = cat.get(slug).slug if slug else None
        running = running_mock(store, kata_slug)
        if running is not None:
            running = expire_if_due(store, running)
        if stop:
            if running is None or running.status != "active":
                session = running or waiting_mock(store, kata_slug)
                if session is None:
                    raise KataError("no mock is running", hint="`kata mock` starts one")
            else:
                store.end_session(running.id, "stopped")
                session = store.session(running.id)
            return _end_of_coding(store, cat, session, answers, as_json)
        if running is not None and running.status == "active":
            if answers is not None:
                raise KataError(f"the mock of {running.kata} is still running: the follow-ups come at the end",
                                hint=f"`kata mock --stop --answers {answers}` ends it and answers")
            return _show_running(store, cat, running, as_json)
        if running is not None:  # its time ran out just now
            return _end_of_coding(store, cat, running, answers, as_json)
        if answers is not None:
            waiting = waiting_mock(store, kata_slug)
            if waiting is None:
                raise KataError("no mock is waiting for answers", hint="`kata history --mock` lists your mocks")
            return _end_of_coding(store, cat, waiting, answers, as_json)
        # Without a slug, unanswered follow-ups come first; a slug starts a new mock.
        waiting = None if kata_slug else waiting_mock(store, None)
        if waiting is not None and store.mock_record(waiting.id).answers is None:
            return _end_of_coding(store, cat, waiting, None, as_json)
        _start(store, cat, kata_slug, minutes, as_json, lang)


def _start(store: Store, cat: Catalog, slug: str | None, minutes: int | None, as_json: bool,
           lang: str = "py") -> None:
    reason = None
    if slug:
        kata = cat.get(slug)
    else:
        # A kata with a timed session open is being practised already.
        kata, reason = most_needed(cat, store, exclude=frozenset(s.kata for s in store.active_sessions()))
    timed = store.active_session(kata.slug)
    if timed is not None:
        raise KataError(f"{kata.slug} has a timed session open",
                        hint=f"`kata stop {kata.slug}` ends it, then `kata mock {kata.slug}`")
    for stale in store.mock_sessions(kata.slug):  # a mock never answered: its debrief as it stands
        if stale.status == "ended" and store.mock_record(stale.id).debrief is None:
            store.update_mock(stale.id, debrief=build_debrief(store, stale, kata, cat), finished_at=clock.now())
    session = begin(kata, store, minutes or kata.minutes, force=True, mode="mock", lang=check_lang(kata, lang))
    statement = render(kata, 1, clarifications=False)  # the Ask; clarifications come through `kata ask`
    levels = pacing(level_clocks(store, session, kata), clock.now(), _names(kata))
    if as_json:
        output.print_json({"kata": kata.slug, "session_id": session.id, "why": reason,
                           "minutes": session.minutes, "deadline": session.deadline,
                           "solution": session.solution_path, "levels": levels, "statement": statement})
        return
    if reason:
        output.console.print(f"[bold]mock interview: {kata.slug}[/] ({escape(reason)})")
    output.console.print(Markdown(statement))
    first = kata.levels[0]
    output.console.print(
        f"\n[bold green]the clock runs[/]: level 1 ~{first.minutes} min; the whole mock {session.minutes} min, "
        f"until {output.fmt_when(session.deadline)}. Edit [bold]{escape(session.solution_path)}[/]\n"
        "`kata check` runs the examples of the revealed levels, `kata grade` grades them; "
        "`kata mock` shows where you are; `kata mock --stop` ends the mock")


def _names(kata) -> dict[int, str]:
    return {lv.level: lv.name for lv in kata.levels}


def _show_running(store: Store, cat: Catalog, session: Session, as_json: bool) -> None:
    kata = cat.get(session.kata)
    levels = pacing(level_clocks(store, session, kata), clock.now(), _names(kata))
    if as_json:
        output.print_json({"kata": kata.slug, "session_id": session.id, "running": True,
                           "elapsed_s": round(session.elapsed_s, 1), "remaining_s": round(session.remaining_s, 1),
                           "levels": levels})
        return
    output.console.print(f"mock of {kata.slug} running: {output.fmt_duration(session.elapsed_s)} used, "
                         f"{output.fmt_duration(session.remaining_s)} left")
    mock_view.print_pacing(levels)
    output.console.print("`kata show` prints the statement so far; `kata grade` grades the revealed levels; "
                         "`kata mock --stop` ends the mock")


# ----------------------------------------------------------------------------- the end


def coding_over(store: Store, cat: Catalog, session: Session, as_json: bool) -> dict[str, Any]:
    """Called by `kata grade` when its grade ended the mock: the questions now (asked at once
    in a terminal), or how to answer them later. Returns what --json adds."""
    if interactive() and not as_json:
        _end_of_coding(store, cat, session, None, as_json=False)
        return {"ended": session.end_reason}
    questions = _followups(store, cat, session)
    if not as_json:
        output.console.print(f"\n[bold]The coding part is over[/] ({_END_WORDS.get(session.end_reason or '', '')}).")
        mock_view.print_questions(questions, answers_hint=True)
    return {"ended": session.end_reason, "followups": [q["question"] for q in questions]}


def _followups(store: Store, cat: Catalog, session: Session) -> list[dict[str, Any]]:
    record = store.mock_record(session.id)
    if record.followups is None:
        kata = cat.get(session.kata)
        chosen = choose_followups(kata, store, session, revealed_levels(store, session) or {1})
        store.update_mock(session.id, followups=chosen)
        return chosen
    return record.followups


def _end_of_coding(store: Store, cat: Catalog, session: Session, answers_path: Path | None,
                   as_json: bool) -> None:
    """Ask the follow-ups (from the file, or here), score them by their keys, show the answer
    keys, take any self-marks, then write and print the debrief."""
    kata = cat.get(session.kata)
    questions = _followups(store, cat, session)
    record = store.mock_record(session.id)
    given = read_answers(answers_path, questions) if answers_path is not None else None
    scored_now = False  # answers or self-marks recorded by this call: their scores go on record
    if not as_json and record.answers is None:
        output.console.print(f"\n[bold]The coding part is over[/] ({_END_WORDS.get(session.end_reason or '', '')}).")
    if record.answers is None and questions:
        if given is not None:
            answers = list(given.answers)
        elif interactive() and not as_json:
            answers = _ask_answers(questions)
        else:
            if as_json:
                output.print_json({"kata": kata.slug, "session_id": session.id, "waiting_for": "answers",
                                   "followups": [q["question"] for q in questions], "format": ANSWERS_FORMAT})
            else:
                mock_view.print_questions(questions, answers_hint=True)
            return
        store.update_mock(session.id, answers=answers)  # before the answer keys are shown
        scored_now = True
    elif record.answers is None:
        store.update_mock(session.id, answers=[], marks=[])
    elif given is not None and list(given.answers) != record.answers:
        raise KataError("your answers were recorded already, before the answer keys were shown; "
                        "only covered = [...] may be added now",
                        hint=f"keep each answer as it was in {answers_path} and add the covered points")
    record = store.mock_record(session.id)
    key_shown = False
    if record.marks is None and questions:
        if given is not None and given.covered is not None:
            store.update_mock(session.id, marks=[None if c is None else list(c) for c in given.covered])
            scored_now = True
        elif interactive() and not as_json and given is None:
            assert record.answers is not None  # recorded above, or this call has returned
            store.update_mock(session.id, marks=_ask_marks(questions, record.answers))
            key_shown = scored_now = True
    debrief = build_debrief(store, session, kata, cat)
    store.update_mock(session.id, debrief=debrief, finished_at=clock.now())
    if scored_now:
        record_scores(store, kata.slug, session.id, debrief["followups"])
    if as_json:
        output.print_json({"kata": kata.slug, "session_id": session.id, "debrief": debrief})
        return
    mock_view.print_debrief(debrief, answer_keys=not key_shown)


def _ask_answers(questions: list[dict[str, Any]]) -> list[str]:
    answers = []
    for i, q in enumerate(questions, start=1):
        output.console.print(f"\n[bold]{i}. {escape(q['question'])}[/]\n"
                             "[dim]your answer (end with an empty line):[/]")
        lines = []
        while (line := sys.stdin.readline()) and line.strip():
            lines.append(line.rstrip("\n"))
        answers.append("\n".join(lines).strip() or "(no answer)")
    return answers


def _ask_marks(questions: list[dict[str, Any]], answers: list[str]) -> list[list[int] | None]:
    """Per question: its answer key with the points the keys found, then the candidate's own
    mark if they disagree (None: the keys' score stands)."""
    marks: list[list[int] | None] = []
    for i, q in enumerate(questions, start=1):
        scored = {**q, "answer": answers[i - 1], **score_answer(q, answers[i - 1], None)}
        mock_view.print_answer_key([scored], first_number=i)
        while True:
            found = "no keys" if scored["found"] is None else \
                f"the keys found {len(scored['found'])} of {scored['num_points']}"
            output.console.print(f"question {i}: {found}. Enter keeps that, or type the points you covered "
                                 "(e.g. 1, 3; none for none): ", end="")
            line = sys.stdin.readline()
            text = line.strip()
            if not text or text.lower() in ("none", "0", "-"):
                marks.append([] if text else None)
                break
            try:
                marks.append(list(parse_marks(text, len(q["points"]), f"question {i}")))
                break
            except KataError as exc:
                output.err_console.print(f"[red]{escape(exc.message)}[/]")
    return marks


# ----------------------------------------------------------------------------- a past debrief


def _reprint(store: Store, cat: Catalog, which: str | None, as_json: bool) -> None:
    """The debrief of a finished mock as recorded, with its timeline: the latest, the one of
    session id `which`, or the latest of the kata `which`."""
    session = _finished_mock(store, cat, which)
    kata = cat.get(session.kata)
    stored = store.mock_record(session.id).debrief
    assert stored is not None  # _finished_mock returns a mock with its debrief
    debrief = debrief_to_reprint(store, session, kata, cat, stored)
    timeline = build_timeline(store, session, kata)
    if as_json:
        output.print_json({"kata": kata.slug, "session_id": session.id, "debrief": {**debrief, "timeline": timeline}})
        return
    mock_view.print_debrief(debrief, reprint=True)
    mock_view.print_timeline(timeline)


def _finished_mock(store: Store, cat: Catalog, which: str | None) -> Session:
    listed = "`kata history --mock` lists your mocks and their ids"
    if which is not None and which.strip().isdigit():
        try:
            session = store.session(int(which))
        except StoreError:
            raise KataError(f"no mock has the id {which.strip()}", hint=listed) from None
        record = store.mock(session.id) if session.is_mock else None
        if record is None:
            raise KataError(f"session {session.id} is a timed session of {session.kata}, not a mock", hint=listed)
        if session.status == "active":
            raise KataError(f"mock {session.id} ({session.kata}) is still running: its debrief comes at the end",
                            hint="`kata mock --stop` ends it; the follow-ups, then the debrief")
        if record.debrief is None:
            raise KataError(f"mock {session.id} ({session.kata}) waits for your follow-up answers",
                            hint="`kata mock` asks them (or `kata mock --answers FILE`); the debrief follows")
        return session
    slug = cat.get(which).slug if which is not None else None
    for session in store.mock_sessions(slug):
        record = store.mock(session.id)
        if record is not None and record.debrief is not None and session.kata in cat.katas:
            return session
    of = f" of {slug}" if slug else ""
    raise KataError(f"no finished mock{of} yet", hint=f"`kata mock{' ' + slug if slug else ''}` starts one; "
                                                     "its debrief is recorded once the follow-ups are answered")
