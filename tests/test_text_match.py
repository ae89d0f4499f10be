"""Words as kata's matchers see them: case, spacing, punctuation and inflection do not count."""

from __future__ import annotations

from grader.text_match import contains_term, tokens


def test_inflections_case_and_punctuation_are_one_word():
    assert tokens("Caching the KV-caches, cached!") == tokens("cache the kv cache cache")


def test_a_term_of_several_words_matches_its_words_in_a_row():
    said = tokens("We cache the keys and values: a KV cache grows with O(n^2) attention.")
    assert contains_term(said, "kv cache") and contains_term(said, "caching the key")
    assert contains_term(said, "O(n^2)") and contains_term(said, "o n 2")
    assert not contains_term(said, "value cache") and not contains_term(said, "")
