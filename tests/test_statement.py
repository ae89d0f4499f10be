"""The statement skeleton: a statement is parsed into its parts, a malformed one is named
precisely (file, heading, line), and a mock's render shows only the revealed levels."""

from __future__ import annotations

import shutil

import pytest

from grader.catalog import KATAS_DIR, load_kata
from grader.statement import StatementError, load_statement, parse_statement, render

GOOD = """\
# Toy kata

*75 minutes · easy · two levels*

## The interview

> "Write `add`."

## Level 1 — Add two numbers (~30 min)

```python
def add(a: int, b: int) -> int
## not a heading: this is inside a code block
```

- Return `a + b`.

## Level 2 — Add many numbers (~45 min)

> "Now `add_all`."

```python
def add_all(xs: list[int]) -> int
```

## Worked example

`add(1, 2) == 3`

### Level 2

`add_all([1, 2, 3]) == 6`

## Constraints

- Plain Python.

### Level 2 — efficiency

- `add_all` is O(n).

## Follow-up questions

- Why is addition commutative,
  and does it matter here?
- What about overflow?
"""


_SECTIONS = ("## The interview", "## Level 1", "## Level 2", "## Worked example", "## Constraints",
             "## Follow-up questions")


def _without(text: str, heading: str) -> str:
    """The statement with one '## ' section (heading and body) removed."""
    start = text.index(heading)
    later = [text.index(h) for h in _SECTIONS if h in text and text.index(h) > start]
    return text[:start] + (text[min(later):] if later else "")


def test_a_statement_is_parsed_into_its_parts():
    statement = parse_statement(GOOD, "katas/toy/README.md")
    assert statement.title == "Toy kata"
    assert statement.tagline == "*75 minutes · easy · two levels*"
    assert statement.interview == '> "Write `add`."'
    assert [(lv.number, lv.name, lv.minutes) for lv in statement.levels] == [
        (1, "Add two numbers", 30), (2, "Add many numbers", 45)]
    assert "## not a heading" in statement.levels[0].body  # a '##' line in a code fence stays body
    assert [(p.level, p.text.splitlines()[0]) for p in statement.worked_example] == [
        (None, "`add(1, 2) == 3`"), (2, "### Level 2")]
    assert [p.level for p in statement.constraints] == [None, 2]
    assert statement.followups == ("Why is addition commutative, and does it matter here?",
                                   "What about overflow?")


@pytest.mark.parametrize("mutate,message", [
    (lambda t: t.replace("# Toy kata\n", "Toy kata\n", 1), "must start with '# <title>'"),
    # Without the framing it reads as the layered skeleton, whose levels start with their Ask.
    (lambda t: _without(t, "## The interview"), "'Level 1 — Add two numbers (~30 min)' (line 5) must "
                                                "start with '### Ask'"),
    (lambda t: _without(t, "## Constraints"), "expected '## Constraints' after '## Worked example', "
                                              "found '## Follow-up questions'"),
    (lambda t: _without(t, "## Follow-up questions"), "the heading '## Follow-up questions' is missing "
                                                      "(expected after '## Constraints')"),
    (lambda t: _without(t, "## Level 1"), "'## Level 2 — Add many numbers (~45 min)' is out of order: "
                                          "expected level 1 here"),
    (lambda t: _without(_without(t, "## Level 2"), "## Level 1"), "the heading '## Level 1 — <name> "
                                                                   "(~<minutes> min)' is missing"),
    (lambda t: t.replace("## Level 2 — Add many numbers (~45 min)", "## Level 2 - Add many numbers (45 min)"),
     "'## Level 2 - Add many numbers (45 min)' is not a level heading of the form"),
    (lambda t: t.replace("## Worked example", "## Constraints", 1).replace(
        "## Constraints\n\n- Plain", "## Worked example\n\n- Plain"), "expected '## Worked example'"),
    (lambda t: t + "\n## Notes\n\nmore\n", "'## Notes' after '## Follow-up questions', which must be the last"),
    (lambda t: t + "\n# Another title\n", "a second title '# Another title'"),
    (lambda t: t.replace("`add(1, 2) == 3`", "").replace("### Level 2\n\n`add_all([1, 2, 3]) == 6`", ""),
     "the section '## Worked example' is empty"),
    (lambda t: t.replace("### Level 2 — efficiency", "### Level 3 — efficiency"),
     "'## Constraints' has the sub-section '### Level 3 — efficiency' out of order"),
    (lambda t: t.replace("- What about overflow?", "What about overflow?"),
     "'## Follow-up questions' must be a list, one item per question; found 'What about overflow?'"),
])
def test_a_malformed_statement_names_the_file_and_the_heading(mutate, message):
    with pytest.raises(StatementError) as excinfo:
        parse_statement(mutate(GOOD), "katas/toy/README.md")
    assert excinfo.value.message.startswith("katas/toy/README.md: ")
    assert message in excinfo.value.message


@pytest.fixture
def paged_kv_copy(tmp_path):
    folder = tmp_path / "katas" / "paged_kv"
    shutil.copytree(KATAS_DIR / "paged_kv", folder)
    return folder


def test_level_names_and_minutes_must_agree_with_kata_toml(paged_kv_copy):
    readme = paged_kv_copy / "README.md"
    readme.write_text(readme.read_text().replace("## Level 2 — Fork and copy-on-write (~25 min)",
                                                 "## Level 2 — Fork and copy-on-write (~20 min)"))
    with pytest.raises(StatementError) as excinfo:
        load_statement(load_kata(paged_kv_copy))
    assert excinfo.value.message == ("katas/paged_kv/README.md: '## Level 2 — Fork and copy-on-write (~20 min)' "
                                     "disagrees with kata.toml level 2 ('Fork and copy-on-write', 25 min)")
    assert "(~25 min)" in excinfo.value.hint


def test_the_title_must_be_kata_tomls(paged_kv_copy):
    readme = paged_kv_copy / "README.md"
    readme.write_text(readme.read_text().replace("# Paged KV-cache block allocator", "# Paged allocator", 1))
    with pytest.raises(StatementError, match="the title '# Paged allocator' is not kata.toml's title"):
        load_statement(load_kata(paged_kv_copy))


def test_render_shows_only_the_given_levels(paged_kv_copy):
    kata = load_kata(paged_kv_copy)
    first = render(kata, 1)
    assert "## Level 1 — Allocate and free (~30 min)" in first
    assert "## Level 2" not in first and "### Level 2" not in first and "fork(" not in first
    assert "## Follow-up questions" not in first  # asked at the end, with every level shown
    assert "The interviewer adds level 2" in first
    two = render(kata, [1, 2])
    assert "## Level 2 — Fork and copy-on-write (~25 min)" in two and "pop_copies" in two
    assert "## Level 3" not in two and "allocate_prompt" not in two
    assert render(kata, 2) == two
    everything = render(kata)
    assert everything == render(kata, 3) == render(kata, {3, 2, 1})
    assert "## Follow-up questions" in everything and "The interviewer adds" not in everything
    statement = parse_statement(kata.statement_path.read_text(), "x")
    if statement.layered:  # a view drops the layer headings: it holds every Ask, it does not round-trip
        assert all(level.ask in everything for level in statement.levels)
    else:
        assert parse_statement(everything, "x") == statement


@pytest.mark.parametrize("levels", [4, -1, [0], [1, 4]])
def test_render_rejects_levels_the_kata_lacks(paged_kv_copy, levels):
    with pytest.raises(ValueError, match="levels? .*1..3"):
        render(load_kata(paged_kv_copy), levels)


LAYERED = """\
# Toy kata

*75 minutes · easy · two levels*

## Level 1 — Add two numbers (~30 min)

### Ask

> "Write `add` for me."

```python
def add(a: int, b: int) -> int
### not a layer: this is inside a code block
```

### Clarifications

- **What about floats?** `floats`
  Integers only.
  Keys: float, integer, int
- **Should it check its argument types?** `types`
  No: `add("a", "b")` is the caller's problem,
  whatever it returns.
  Keys: type, check, validate

### Spec

- Return `a + b`; `add(1, 2) == 3`.

## Level 2 — Add many numbers (~45 min)

### Ask

> "Now `add_all`."

```python
def add_all(xs: list[int]) -> int
```

### Clarifications

- **And the empty list?** `empty`
  0.
  Keys: empty, no numbers

### Spec

- O(n); `add_all([1, 2, 3]) == 6`; `add_all([]) == 0` (a detail).

## Follow-up questions

- Why is addition commutative?
"""


def test_a_layered_statement_gives_each_level_its_ask_clarifications_and_spec():
    statement = parse_statement(LAYERED, "katas/toy/README.md")
    assert statement.layered and [lv.name for lv in statement.levels] == ["Add two numbers", "Add many numbers"]
    one = statement.level(1)
    assert one.ask.startswith('> "Write `add` for me."') and "### not a layer" in one.ask
    assert one.spec == "- Return `a + b`; `add(1, 2) == 3`."
    floats, types = one.clarifications
    assert (floats.id, floats.level, floats.question, floats.answer, floats.keys) == (
        "floats", 1, "What about floats?", "Integers only.", ("float", "integer", "int"))
    assert types.answer == "No: `add(\"a\", \"b\")` is the caller's problem,\nwhatever it returns."
    assert [c.id for c in statement.clarifications()] == ["floats", "types", "empty"]
    assert [c.id for c in statement.clarifications([2])] == ["empty"]
    assert statement.followups == ("Why is addition commutative?",)


@pytest.mark.parametrize("mutate,message", [
    (lambda t: t.replace("### Clarifications\n\n- **And", "### Notes\n\n- **And"),
     "has the parts ['Ask', 'Notes', 'Spec'], not ['Ask', 'Clarifications', 'Spec']"),
    (lambda t: t.replace("- O(n); `add_all([1, 2, 3]) == 6`; `add_all([]) == 0` (a detail).\n", ""),
     "'Level 2 — Add many numbers (~45 min)' has an empty '### Spec'"),
    (lambda t: t.replace("  Keys: empty, no numbers\n", ""), "the clarification '- **And the empty list?** "
                                                              "`empty`' is not"),
    (lambda t: t.replace("**What about floats?** `floats`", "**What about floats** `floats`"), "is not"),
    (lambda t: t.replace("`empty`", "`floats`"), "the clarification id `floats` is used twice"),
    (lambda t: t.replace("- **And the empty list?** `empty`", "And the empty list?"),
     "level 2's clarifications must be a list; found 'And the empty list?'"),
])
def test_a_malformed_layered_statement_says_what_and_where(mutate, message):
    with pytest.raises(StatementError) as excinfo:
        parse_statement(mutate(LAYERED), "katas/toy/README.md")
    assert message in excinfo.value.message


def test_the_views_of_a_layered_statement():
    from grader.statement import render_statement

    statement = parse_statement(LAYERED, "katas/toy/README.md")
    mock = render_statement(statement, frozenset({1}), clarifications=False)
    assert "Write `add`" in mock and "What about floats" not in mock and "Return `a + b`" not in mock
    assert "add_all" not in mock and "Why is addition" not in mock
    practice = render_statement(statement, frozenset({1, 2}))
    assert "**What about floats?**" in practice and "  Integers only." in practice
    assert "Keys:" not in practice and "`floats`" not in practice  # the matcher's, not the reader's
    assert "### Spec" not in practice and "Why is addition commutative?" in practice
    passed_one = render_statement(statement, frozenset({1, 2}), spec_levels=frozenset({1}))
    assert "Return `a + b`" in passed_one and "`add_all([]) == 0`" not in passed_one
