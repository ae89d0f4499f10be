"""kata ask: ask the interviewer a clarifying question (recorded, with its time).

The answer comes from the statement's clarifications (grader/ask.py) of the levels you can
see: during a mock the revealed ones, otherwise every level. Outside a session name the kata.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text

from grader import textsafe
from grader.ask import ANSWERED, LATER_LEVEL, THRESHOLD, Matcher, Reply
from grader.catalog import Kata
from grader.cli import output
from grader.cli.common import JsonOpt, OptionalSlugArg, catalog, kata_for
from grader.errors import KataError
from grader.sessions import current_level, expire_if_due, level_clocks, revealed_levels
from grader.statement import Statement, load_statement
from grader.store import Session, Store

QuestionArg = Annotated[Optional[str], typer.Argument(
    help='Your question, in quotes: "Can the input be empty?"', show_default=False)]
ListOpt = Annotated[bool, typer.Option(
    "--list", help="List the topics you can ask about: the questions of the levels you can see "
                   "(`kata ask --list [SLUG]`); recorded.")]

EXAMPLE = 'kata ask "Can the input be empty?"'


def ask(question: QuestionArg = None, slug: OptionalSlugArg = None, as_json: JsonOpt = False,
        list_topics: ListOpt = False) -> None:
    """Ask the interviewer a clarifying question. Recorded, with its time.

    The answer comes from the statement's clarifications of the levels you can see (in a
    mock, the revealed ones); what the statement leaves open is your call. Outside a session
    name the kata: every level counts.

    Examples: kata ask "Are the norms replicated?" · kata ask "Do K and V both count?" kv-budget
    · kata ask --list"""
    if list_topics and question is not None and slug is None and _is_slug(question):
        question, slug = None, question  # `kata ask --list kv-budget`
    if list_topics and question is not None:
        raise KataError("--list shows the topics and takes no question",
                        hint="`kata ask --list [SLUG]`, or ask without --list")
    if not list_topics and question is not None and slug is None and _is_slug(question):
        raise KataError(f"no question to ask ({question.strip()} is a kata)",
                        hint=f'`kata ask "QUESTION" {question.strip()}`, or `kata ask --list {question.strip()}`')
    if not list_topics and not (question or "").strip():
        raise KataError("no question to ask" if question is None else "the question is empty",
                        hint=f"`{EXAMPLE}` (in quotes), or `kata ask --list` for the topics")
    with Store() as store:
        kata, session = _kata_and_session(slug, store)
        statement = _layered_statement(kata)
        revealed = revealed_levels(store, session)
        level_now = _level_now(store, session, kata)
        session_id = session.id if session else None
        if list_topics:
            store.record_event(kata.slug, "ask", session_id, level=level_now, data={"list": True})
            _print_topics(kata, statement, revealed, as_json)
            return
        assert question is not None
        reply = Matcher(statement.clarifications()).ask(question, revealed)
        level = reply.clarification.level if reply.clarification else level_now
        record(store, kata.slug, session_id, reply, level)
        num_asked = sum(1 for e in store.events(kata.slug, session_id=session_id, kind="ask")
                        if not e.data.get("list")) if session else None
    if as_json:
        output.print_json(reply.to_dict())
        return
    _print_reply(reply, session, num_asked)


def record(store: Store, kata: str, session_id: int | None, reply: Reply, level: int | None) -> None:
    """One ask as an event of kind "ask". Its data: the question as typed, the clarification
    answered (its id; None when it was the candidate's call or a later level's), the score,
    and the outcome ("answer", "later", "your-call"). A later level's match is not named."""
    store.record_event(kata, "ask", session_id, level=level, data={
        "question": reply.question, "clarification": reply.clarification.id if reply.clarification else None,
        "score": reply.score, "outcome": reply.outcome})


def _is_slug(text: str) -> bool:
    key = text.strip().lower()
    return any(key in (k.slug, k.module) for k in catalog().katas.values())


def _kata_and_session(slug: Optional[str], store: Store) -> tuple[Kata, Session | None]:
    """The kata asked about and its running session (None outside one, or once it ended)."""
    if slug is None:
        active = store.active_sessions()
        if not active:
            raise KataError("no session is running, so name the kata",
                            hint='`kata ask "QUESTION" SLUG` (every level counts outside a session), or '
                                 "start one first: `kata mock SLUG` or `kata start SLUG`")
        if len(active) > 1:
            names = ", ".join(s.kata for s in active)
            raise KataError(f"several sessions are running ({names}); name the kata",
                            hint=f'`kata ask "QUESTION" {active[0].kata}`')
    kata, session = kata_for(slug, store)
    session = expire_if_due(store, session) if session else None
    return kata, session if session is not None and session.status == "active" else None


def _layered_statement(kata: Kata) -> Statement:
    statement = load_statement(kata)
    if not statement.clarifications():
        raise KataError(f"{kata.slug}'s statement has no clarifications to answer from: it states its "
                        "rules in full", hint=f"`kata show {kata.slug}` shows them")
    return statement


def _level_now(store: Store, session: Session | None, kata: Kata) -> int | None:
    """The level being worked on: the lowest revealed one not passed (None outside a session)."""
    if session is None:
        return None
    now = current_level(level_clocks(store, session, kata))
    return now.level if now else None


def _print_reply(reply: Reply, session: Session | None, num_asked: int | None) -> None:
    console = output.console
    console.print(Text.assemble(("you: ", "bold"), textsafe.text(reply.question)))
    if reply.outcome == ANSWERED:
        assert reply.clarification is not None
        c = reply.clarification
        body: Group | Text = Group(Text(c.question, style="italic"), Text(""), Markdown(c.answer))
        title = f"the interviewer · level {c.level}"
    else:
        body, title = Text(reply.answer), "the interviewer"
    console.print(Panel(body, title=title, title_align="left", expand=False))
    if reply.outcome == ANSWERED:
        why = f"read as the question in italics: match {reply.score:.2f} (under {THRESHOLD:.2f}, your call)"
    elif reply.outcome == LATER_LEVEL:
        why = "a level you have not reached settles this: ask again once it is revealed"
    else:
        why = (f"the statement leaves this open: best match {reply.score:.2f} (under {THRESHOLD:.2f}); "
               "`kata ask --list` shows what you can ask about")
    where = f"questions asked in this {'mock' if session.is_mock else 'session'}: {num_asked}" if session else \
        "asked outside a session"
    console.print(Text(why, style="dim"))
    console.print(Text(where, style="dim"))


def _print_topics(kata: Kata, statement: Statement, revealed: set[int] | None, as_json: bool) -> None:
    levels = [s for s in statement.levels if revealed is None or s.number in revealed]
    if as_json:
        output.print_json({"kata": kata.slug, "levels": [
            {"level": s.number, "name": s.name,
             "topics": [{"clarification": c.id, "question": c.question} for c in s.clarifications]}
            for s in levels]})
        return
    blocks = [f"Questions you can ask about {kata.slug}, by level:"]
    for section in levels:
        topics = "\n".join(f"- {c.question}" for c in section.clarifications) or "- (none at this level)"
        blocks += [f"**Level {section.number} — {section.name}**", topics]
    if revealed is not None and len(levels) < len(statement.levels):
        blocks.append("*Each level the interviewer adds brings its own.*")
    output.console.print(Markdown("\n\n".join(blocks)))
    output.console.print(Text(f"ask in your own words, e.g. {EXAMPLE}", style="dim"))
