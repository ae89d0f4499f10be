"""kata reveal: the reference solution (recorded; asks for --force during a session; refused
during a mock, by grader/mock.py's COMMAND_POLICY)."""

from __future__ import annotations

import sys

from rich.syntax import Syntax

from grader.cli import output
from grader.cli.common import ForceOpt, SlugArg, catalog
from grader.errors import KataError
from grader.store import Store


def reveal(slug: SlugArg, force: ForceOpt = False) -> None:
    """Show the reference implementation: in a pager on a terminal ($PAGER, else less; PAGER=cat
    prints it), the plain file when piped or redirected."""
    kata = catalog().get(slug)
    with Store() as store:
        session = store.active_session(kata.slug)
        if session is not None and not force:
            raise KataError(
                f"{kata.slug} has an active session ({output.fmt_duration(max(session.remaining_s, 0))} left); "
                "seeing the reference now is recorded as a reveal in your history",
                hint=f"`kata stop {kata.slug}` ends the session first, or `kata reveal {kata.slug} --force`")
        store.record_reveal(kata.slug, session.id if session else None)
    code = kata.reference_path.read_text(encoding="utf-8")
    if not output.console.is_terminal:
        # Piped or redirected: the file exactly, so `kata reveal x > ref.py` runs and no line
        # is ever cut to a console width.
        sys.stdout.write(code)
        sys.stdout.flush()
        return
    # Long lines wrap under their number instead of being cropped; the pager scrolls.
    output.page(Syntax(code, "python", line_numbers=True, word_wrap=True))
