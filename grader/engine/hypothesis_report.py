"""The shrunk example hypothesis found, read from a failure in a way that survives its releases.

Hypothesis attaches what it reports for the final, shrunk failing run to the exception as
PEP 678 notes (``exc.__notes__``), one note per reported fragment:

    hypothesis 6.90 .. 6.158            hypothesis 6.159 and later
    "Falsifying example: test_add(      "Failing test case: test_add(
        a=2,                                a=2,
        b=1,                                b=1,
    )"                                  )"

and for a ``RuleBasedStateMachine`` the header (``"Falsifying example:"`` or
``"Failing test case: <state machine>"``) is followed by one note per step
(``"state = Machine()"``, ``"state.push(k=4)"``, ``"state.teardown()"``).

The notes are the one channel that every release since 6.5x fills: the reporter hook
(``hypothesis.reporting.with_reporter``) is overridden by hypothesis itself while it replays
the failing example, so a hook of ours never sees those lines. The wording of the header is
what changes between releases, so it is recognised from a list of known wordings
(``KNOWN_HEADERS``), then by its shape (a short label and a colon, then a call or nothing)
for a wording not seen yet. ``tests/test_hypothesis_report.py`` fails loudly when the
installed hypothesis writes a header that only the shape matches, so the list is extended
before a candidate ever sees a scorecard without its example.

The returned text always starts with ``"Falsifying example:"`` whatever the release wrote, so
the same file and seed give the same scorecard under every hypothesis the bounds allow.
"""

from __future__ import annotations

import re

HEADER = "Falsifying example:"

# Every header wording hypothesis has used for the shrunk failing example, oldest first.
# "Trying example" is what verbosity=verbose prints for an explicit @example.
KNOWN_HEADERS = re.compile(
    r"^(?:Falsifying|Failing|Trying)(?: explicit)? (?:example|test case):\s*", re.IGNORECASE)

# A wording not in the list yet: a short label and a colon, then a call, a placeholder for a
# state machine, or nothing (the steps follow in their own notes).
_SHAPE = re.compile(r"^[A-Z][A-Za-z ]{2,40}:(?:\s+(?=\w+\()|\s*(?=<[\w ]+>\s*$)|\s*$)")

# A state machine's steps: ``state = Machine()``, ``state.rule(...)``, ``state.teardown()``.
_STEP = re.compile(r"^state(?:\s*=|\.\w+\()")

# Lines of a note that are never part of the example: fixtures hypothesis prints with the
# arguments (the candidate's module, the reference), and hints on reproducing a failure.
_FIXTURE_ARG = re.compile(r"^\s*(?:(?:solution|reference)=.*,|\w+=<module\b.*)\s*$")
_NOT_EXAMPLE = ("reproduce_failure", "Explanation", "@seed(", "--hypothesis-seed",
                "other explicit example", "Unreliable", "Flaky")

_MAX_CHARS = 4000


def header_kind(note: str) -> str | None:
    """'known' when `note` starts with a header wording in KNOWN_HEADERS, 'shape' when only
    its shape looks like one, None when it is not a header."""
    first_line = note.splitlines()[0] if note else ""
    if KNOWN_HEADERS.match(first_line):
        return "known"
    if _SHAPE.match(first_line) and not first_line.startswith(_NOT_EXAMPLE):
        return "shape"
    return None


def notes_of(exc: BaseException) -> list[str]:
    """The notes that describe `exc`'s failure: its own, then (for an exception group, whose
    first member the scorecard describes) those of its first member."""
    notes = [str(n) for n in getattr(exc, "__notes__", None) or []]
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        notes += [str(n) for n in getattr(exc.exceptions[0], "__notes__", None) or []]
    return notes


def falsifying_example(exc: BaseException) -> str | None:
    """The shrunk example behind `exc`, as ``"Falsifying example: test_x(a=2, ...)"`` or the
    steps of a state machine, or None when hypothesis reported none."""
    notes = notes_of(exc)
    start = _header_index(notes)
    if start is None:
        # No header at all (or one hypothesis wrote in a way no rule knows): a state machine's
        # steps still identify themselves.
        start = next((i for i, note in enumerate(notes) if _STEP.match(note)), None)
        if start is None:
            return None
        lines = [HEADER]
    else:
        call = _strip_header(notes[start])
        lines = [HEADER + (" " + call if call else "")]
        start += 1
    for note in notes[start:]:
        if note.startswith(_NOT_EXAMPLE) or header_kind(note):
            break  # the example ended; what follows is advice or another failure
        lines.append(note)
    text = "\n".join(line for line in "\n".join(lines).splitlines() if not _FIXTURE_ARG.match(line))
    return text.strip()[:_MAX_CHARS] or None


def _header_index(notes: list[str]) -> int | None:
    for wanted in ("known", "shape"):
        for i, note in enumerate(notes):
            if header_kind(note) == wanted:
                return i
    return None


def _strip_header(note: str) -> str:
    """The call after the header (``test_add(a=2, ...)``), or '' for a bare header or the
    ``<state machine>`` placeholder."""
    rest = KNOWN_HEADERS.sub("", note, count=1) if KNOWN_HEADERS.match(note) else note.split(":", 1)[1]
    rest = rest.strip()
    return "" if re.fullmatch(r"<[\w ]+>", rest) else rest
