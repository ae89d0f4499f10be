"""Domain errors. Core code raises these; the CLI turns them into a message and exit code 2."""

from __future__ import annotations


class KataError(Exception):
    """A user-facing error: `message` says what went wrong, `hint` says what to do next.
    A subclass's `default_hint` stands in where a raise gives none."""

    default_hint: str | None = None

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint


class CatalogError(KataError):
    """A kata folder is malformed or incomplete (names the file and the field)."""

    default_hint = ("fix the file named above, or reinstall kata if you did not change it; "
                    "`kata list` shows the katas that load")


class StoreError(KataError):
    """The history database cannot be used (corrupt, newer schema, unwritable)."""

    default_hint = "set KATA_HOME to another folder to keep your history elsewhere"


class GradingError(KataError):
    """The grader itself could not grade (a broken suite, not the candidate's code)."""

    default_hint = "this is a bug in the grader, not in your code; run with `kata --debug ...` and report it"
