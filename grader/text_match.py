"""Words as a matcher sees them: lower case, split on anything but letters and digits, each
reduced to its Snowball stem (PyStemmer), so that "caches", "caching" and "cached" are one
word. `kata ask` ranks clarifications over these tokens (grader/ask.py), and a follow-up's
answer key matches its terms on them (grader/followups.py).

A term of several words ("kv cache", "O(n^2)") matches where its tokens stand in a row.
"""

from __future__ import annotations

import functools
import re

import Stemmer

_WORD = re.compile(r"[a-z0-9]+")


@functools.cache
def _stemmer() -> "Stemmer.Stemmer":
    return Stemmer.Stemmer("english")


def tokens(text: str) -> list[str]:
    """The stemmed words of `text`, in order."""
    return _stemmer().stemWords(_WORD.findall(text.lower()))


def has_word(text: str) -> bool:
    """Whether `text` has a letter or digit: a token to match (`tokens` of it is not empty)."""
    return _WORD.search(text.lower()) is not None


def contains_term(text_tokens: list[str], term: str) -> bool:
    """Whether `term` (one word or several) stands in `text_tokens`, its words in a row."""
    wanted = tokens(term)
    if not wanted:
        return False
    n = len(wanted)
    return any(text_tokens[i:i + n] == wanted for i in range(len(text_tokens) - n + 1))
