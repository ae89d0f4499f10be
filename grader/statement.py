"""A kata's statement (``katas/<module>/README.md``) in its one skeleton, and the statement
a mock interview shows with only the levels revealed so far.

Every statement has these headings, in this order (headings inside code fences do not count)::

    # <title>                            the kata.toml title
    <an optional short line, e.g. *75 minutes · medium · three levels*>
    ## The interview                     the framing an interviewer says at minute 0
    ## Level 1 — <name> (~<N> min)       name and minutes as in kata.toml; the level's API and rules
    ## Level 2 — <name> (~<N> min)       ... one section per level, numbered 1, 2, ...
    ## Worked example
    ## Constraints
    ## Follow-up questions               a list: one item per question of kata.toml

A mock reveals the levels one at a time, so nothing before a level's section may give it
away, and each level's section is complete for that level. ``## Worked example`` and
``## Constraints`` may hold ``### Level N`` sub-sections for what belongs to one level; the
text before the first of them applies to every level.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from grader.errors import CatalogError

if TYPE_CHECKING:
    from grader.catalog import Kata

INTERVIEW = "The interview"
WORKED_EXAMPLE = "Worked example"
CONSTRAINTS = "Constraints"
FOLLOWUPS = "Follow-up questions"
LEVEL_FORMAT = "## Level <N> — <name> (~<minutes> min)"

_LEVEL_HEADING = re.compile(r"^Level (\d+) — (.+?) \(~(\d+) min\)$")
_LEVEL_SUBHEADING = re.compile(r"^### Level (\d+)\b")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_LIST_ITEM = re.compile(r"^(?:[-*]|\d+[.)])\s+(.*)$")


class StatementError(CatalogError):
    """A statement does not follow the skeleton (names the file, the heading and the line)."""


@dataclass(frozen=True)
class LevelSection:
    number: int
    name: str
    minutes: int
    body: str  # the markdown under the heading

    @property
    def heading(self) -> str:
        return f"## Level {self.number} — {self.name} (~{self.minutes} min)"


@dataclass(frozen=True)
class Part:
    """A piece of the worked example or the constraints: for every level (level None), or
    a ``### Level N`` sub-section (its heading line included in ``text``)."""

    level: int | None
    text: str


@dataclass(frozen=True)
class Statement:
    where: str  # the file, as messages name it
    title: str
    tagline: str  # the optional line(s) between the title and the interview
    interview: str
    levels: tuple[LevelSection, ...]
    worked_example: tuple[Part, ...]
    constraints: tuple[Part, ...]
    followups: tuple[str, ...]  # the questions, as listed

    def level(self, number: int) -> LevelSection:
        return self.levels[number - 1]


@dataclass
class _Heading:
    depth: int  # 1 for '#', 2 for '##'
    text: str
    line_no: int  # 1-based


# ----------------------------------------------------------------------------- parsing


def parse_statement(text: str, where: str = "README.md") -> Statement:
    """The parts of a statement; StatementError naming ``where``, the heading and its line
    when a heading is missing, misordered, malformed or followed by an empty section."""
    lines = text.splitlines()
    headings = _headings(lines)
    if not headings or headings[0].depth != 1:
        raise StatementError(f"{where}: the statement must start with '# <title>'",
                             hint="put the kata's title on the first line, as '# Title'")
    title_heading, sections = headings[0], headings[1:]
    if extra := next((h for h in sections if h.depth == 1), None):
        raise StatementError(f"{where}: line {extra.line_no}: a second title '# {extra.text}'",
                             hint="only the first heading is '# '; sections are '## '")
    if title_heading.line_no != _first_text_line(lines):
        raise StatementError(f"{where}: the statement must start with '# <title>'")

    bodies = [_body(lines, h.line_no, nxt.line_no - 1 if nxt else len(lines))
              for h, nxt in zip(sections, sections[1:] + [None])]
    tagline = _body(lines, title_heading.line_no, sections[0].line_no - 1 if sections else len(lines))
    reader = _SectionReader(where, sections, bodies)

    interview = reader.expect(INTERVIEW, after="'# <title>'")
    levels = reader.levels()
    worked = reader.expect(WORKED_EXAMPLE, after=f"'{levels[-1].heading}'")
    constraints = reader.expect(CONSTRAINTS, after=f"'## {WORKED_EXAMPLE}'")
    followups = reader.expect(FOLLOWUPS, after=f"'## {CONSTRAINTS}'")
    reader.expect_end()
    return Statement(
        where=where, title=title_heading.text, tagline=tagline, interview=interview, levels=levels,
        worked_example=_parts(worked, len(levels), where, WORKED_EXAMPLE),
        constraints=_parts(constraints, len(levels), where, CONSTRAINTS),
        followups=_questions(followups, where))


def load_statement(kata: Kata) -> Statement:
    """The kata's statement, checked against its kata.toml: title, level names and minutes."""
    where = f"katas/{kata.folder.name}/README.md"
    statement = parse_statement(Path(kata.statement_path).read_text(encoding="utf-8"), where)
    if statement.title != kata.title:
        raise StatementError(f"{where}: the title '# {statement.title}' is not kata.toml's "
                             f"title '{kata.title}'")
    if len(statement.levels) != len(kata.levels):
        raise StatementError(f"{where}: {len(statement.levels)} level section(s), but kata.toml "
                             f"has {len(kata.levels)} levels")
    for section, level in zip(statement.levels, kata.levels):
        if (section.name, section.minutes) != (level.name, level.minutes):
            raise StatementError(
                f"{where}: '{section.heading}' disagrees with kata.toml level {level.level} "
                f"('{level.name}', {level.minutes} min)",
                hint=f"write the heading as '## Level {level.level} — {level.name} (~{level.minutes} min)'")
    return statement


class _SectionReader:
    """Walks the '##' headings in order, naming the first one out of place."""

    def __init__(self, where: str, sections: list[_Heading], bodies: list[str]) -> None:
        self.where, self.sections, self.bodies, self.index = where, sections, bodies, 0

    def _peek(self) -> _Heading | None:
        return self.sections[self.index] if self.index < len(self.sections) else None

    def expect(self, name: str, after: str) -> str:
        heading = self._peek()
        if heading is None:
            raise StatementError(f"{self.where}: the heading '## {name}' is missing (expected after {after})",
                                 hint=_SKELETON_HINT)
        if heading.text != name:
            raise StatementError(f"{self.where}: line {heading.line_no}: expected '## {name}' after "
                                 f"{after}, found '## {heading.text}'", hint=_SKELETON_HINT)
        return self._take(heading)

    def levels(self) -> tuple[LevelSection, ...]:
        levels: list[LevelSection] = []
        while (heading := self._peek()) is not None and heading.text.startswith("Level"):
            number = len(levels) + 1
            match = _LEVEL_HEADING.match(heading.text)
            if not match:
                raise StatementError(f"{self.where}: line {heading.line_no}: '## {heading.text}' is not "
                                     f"a level heading of the form '{LEVEL_FORMAT}'",
                                     hint="use an em dash and the minutes of kata.toml, e.g. "
                                          "'## Level 1 — Allocate and free (~30 min)'")
            if int(match.group(1)) != number:
                raise StatementError(f"{self.where}: line {heading.line_no}: '## {heading.text}' is out of "
                                     f"order: expected level {number} here", hint="number the levels 1, 2, ... in order")
            levels.append(LevelSection(number, match.group(2), int(match.group(3)), self._take(heading)))
        if not levels:
            found = f", found '## {heading.text}' (line {heading.line_no})" if heading else ""
            raise StatementError(f"{self.where}: the heading '## Level 1 — <name> (~<minutes> min)' is "
                                 f"missing (expected after '## {INTERVIEW}'){found}", hint=_SKELETON_HINT)
        return tuple(levels)

    def expect_end(self) -> None:
        if (heading := self._peek()) is not None:
            raise StatementError(f"{self.where}: line {heading.line_no}: '## {heading.text}' after "
                                 f"'## {FOLLOWUPS}', which must be the last section", hint=_SKELETON_HINT)

    def _take(self, heading: _Heading) -> str:
        body = self.bodies[self.index]
        self.index += 1
        if not body:
            raise StatementError(f"{self.where}: line {heading.line_no}: the section '## {heading.text}' is empty")
        return body


_SKELETON_HINT = (f"the sections are, in order: '## {INTERVIEW}', '{LEVEL_FORMAT}' for each level, "
                  f"'## {WORKED_EXAMPLE}', '## {CONSTRAINTS}', '## {FOLLOWUPS}'")


def _headings(lines: list[str]) -> list[_Heading]:
    """'#' and '##' headings outside fenced code blocks (a '# comment' in code is not one)."""
    out: list[_Heading] = []
    fence: str | None = None
    for line_no, line in enumerate(lines, start=1):
        if match := _FENCE.match(line):
            marker = match.group(1)
            fence = None if fence == marker else (fence or marker)
            continue
        if fence is None:
            for depth in (1, 2):
                prefix = "#" * depth + " "
                if line.startswith(prefix):
                    out.append(_Heading(depth, line[len(prefix):].strip(), line_no))
    return out


def _first_text_line(lines: list[str]) -> int:
    return next((i for i, line in enumerate(lines, start=1) if line.strip()), 0)


def _body(lines: list[str], heading_line_no: int, last_line_no: int) -> str:
    """The lines after a heading up to last_line_no (1-based), without blank edges."""
    return "\n".join(lines[heading_line_no:last_line_no]).strip("\n").rstrip()


def _parts(body: str, num_levels: int, where: str, section: str) -> tuple[Part, ...]:
    """Split a section at its '### Level N' sub-headings (outside code fences)."""
    parts: list[Part] = []
    current: list[str] = []
    level: int | None = None
    fence: str | None = None
    for line in body.splitlines():
        if match := _FENCE.match(line):
            marker = match.group(1)
            fence = None if fence == marker else (fence or marker)
        elif fence is None and (sub := _LEVEL_SUBHEADING.match(line)):
            number = int(sub.group(1))
            if not 1 <= number <= num_levels or (level is not None and number <= level):
                raise StatementError(f"{where}: '## {section}' has the sub-section '{line.strip()}' out "
                                     f"of order", hint=f"'### Level N' sub-sections name levels 1..{num_levels} "
                                                       "in increasing order")
            parts.append(Part(level, "\n".join(current).strip("\n")))
            current, level = [line], number
            continue
        current.append(line)
    parts.append(Part(level, "\n".join(current).strip("\n")))
    return tuple(p for p in parts if p.text.strip())


def _questions(body: str, where: str) -> tuple[str, ...]:
    """The items of the follow-up list; a continuation line is indented under its item."""
    items: list[list[str]] = []
    for line in body.splitlines():
        if not line.strip():
            continue
        if match := _LIST_ITEM.match(line):
            items.append([match.group(1).strip()])
        elif items and line.startswith((" ", "\t")):
            items[-1].append(line.strip())
        else:
            raise StatementError(f"{where}: '## {FOLLOWUPS}' must be a list, one item per question; "
                                 f"found '{line.strip()}'", hint="start each question with '- '")
    return tuple(" ".join(words) for words in items)


# ----------------------------------------------------------------------------- rendering


CODE_BLOCK = re.compile(r"```.*?```", re.S)
DECLARED = re.compile(r"\b(?:def|class)\s+([A-Za-z_]\w*)")


def declared_names(sections: Iterable[LevelSection]) -> set[str]:
    """The functions and classes the code blocks of these level sections declare."""
    return {name for section in sections for block in CODE_BLOCK.findall(section.body)
            for name in DECLARED.findall(block)}


def later_names(statement: Statement, levels: Iterable[int]) -> frozenset[str]:
    """What the code of a level outside `levels` declares and no level in it does: the names
    a grading of `levels` alone must not show (a mock's level 1 must not name level 3's class)."""
    wanted = set(levels)
    inside = declared_names(s for s in statement.levels if s.number in wanted)
    return frozenset(declared_names(s for s in statement.levels if s.number not in wanted) - inside)


def render(kata: Kata, levels_shown: int | Iterable[int] | None = None) -> str:
    """The statement's markdown with only the given levels: a number n shows levels 1..n, a
    collection shows those levels; None shows them all. Level sub-sections of the worked
    example and the constraints follow their level; the follow-up questions come only with
    every level (they are asked at the end)."""
    statement = load_statement(kata)
    shown = _levels_shown(levels_shown, len(statement.levels))
    return render_statement(statement, shown)


def render_statement(statement: Statement, shown: frozenset[int]) -> str:
    blocks = [f"# {statement.title}"]
    if statement.tagline:
        blocks.append(statement.tagline)
    blocks += [f"## {INTERVIEW}", statement.interview]
    for section in statement.levels:
        if section.number in shown:
            blocks += [section.heading, section.body]
    hidden = [lv.number for lv in statement.levels if lv.number not in shown]
    if hidden:
        blocks.append(f"*The interviewer adds level {hidden[0]} when the levels above pass.*")
    for name, parts in ((WORKED_EXAMPLE, statement.worked_example), (CONSTRAINTS, statement.constraints)):
        texts = [p.text for p in parts if p.level is None or p.level in shown]
        if texts:
            blocks += [f"## {name}", *texts]
    if not hidden:
        blocks += [f"## {FOLLOWUPS}", "\n".join(f"- {q}" for q in statement.followups)]
    return "\n\n".join(blocks) + "\n"


def _levels_shown(levels_shown: int | Iterable[int] | None, num_levels: int) -> frozenset[int]:
    if levels_shown is None:
        return frozenset(range(1, num_levels + 1))
    if isinstance(levels_shown, int):
        if not 0 <= levels_shown <= num_levels:
            raise ValueError(f"levels_shown={levels_shown}: the kata has levels 1..{num_levels}")
        return frozenset(range(1, levels_shown + 1))
    shown = frozenset(levels_shown)
    if unknown := sorted(n for n in shown if not 1 <= n <= num_levels):
        raise ValueError(f"levels {unknown} do not exist: the kata has levels 1..{num_levels}")
    return shown
