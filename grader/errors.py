"""Domain errors. Core code raises these; the CLI turns them into a message and exit code 2."""

from __future__ import annotations


class KataError(Exception):
    """A user-facing error: `message` says what went wrong, `hint` says what to do next."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class CatalogError(KataError):
    """A kata folder is malformed or incomplete (names the file and the field)."""


class StoreError(KataError):
    """The history database cannot be used (corrupt, newer schema, unwritable)."""


class GradingError(KataError):
    """The grader itself could not grade (a broken suite, not the candidate's code)."""
