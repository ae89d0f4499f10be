"""A kata's statement (``katas/<module>/README.md``), parsed, and the views of it a
candidate gets: a mock's (the Ask of the revealed levels), practice's (Ask and
Clarifications), and the editorial (the Spec) once a level has passed or on request.

The skeleton (headings inside code fences do not count)::

    # <title>                            the kata.toml title
    <an optional short line, e.g. *75 minutes · medium · three levels*>
    ## Level 1 — <name> (~<N> min)       name and minutes as in kata.toml
    ### Ask                              what the interviewer says aloud
    ### Clarifications                   the questions a strong candidate asks, answered
    ### Spec                             the editorial: every rule, formulas, worked example
    ## Level 2 — <name> (~<N> min)       ... the same three parts, for each level
    ## Follow-up questions               a list: one item per question of kata.toml

**Ask**: the task in prose as an interviewer would say it (a quote, framing this level
only: the next level's framing is what the interviewer says when it is revealed), the API
(signatures, argument meanings, return types) and the conventions nobody could derive
(units, which exception, arbitrary tie-breaks, tolerances). No formula, algorithm or
intermediate figure that the level's tests check; an end-to-end sanity value is fine.

**Clarifications**: a list, one item per question, each with an id, the interviewer's
answer and the key terms ``kata ask`` matches on::

    - **Which architecture exactly: biases, norms, the MLP?** `arch`
      Hugging Face's `LlamaForCausalLM`: no biases, RMSNorm with a weight only, SwiGLU
      when `gated_mlp`, a plain up/down MLP otherwise.
      Keys: bias, norm, rmsnorm, mlp, swiglu, gated

The question (bold, ending in "?"), then its id in backticks (lower case, digits and
dashes, unique in the kata); the answer on the indented lines after it; last, an indented
``Keys:`` line. Every rule of the level's hidden suite (its RULES map) is settled by the Ask
or by a clarification of that level or an earlier one: the suite's ``SETTLED_BY`` map,
beside RULES, says which (tests/test_katas.py checks it).

**Spec**: the full text, rules that are details of the level (``DETAILS`` in the suite)
named as such.

A statement still in the first skeleton (``## The interview``, levels with a plain body,
``## Worked example``, ``## Constraints``) parses as well: its level body is both its Ask and
its Spec, and it has no clarifications.
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
ASK, CLARIFICATIONS, SPEC = "Ask", "Clarifications", "Spec"
LAYERS = (ASK, CLARIFICATIONS, SPEC)

_LEVEL_HEADING = re.compile(r"^Level (\d+) — (.+?) \(~(\d+) min\)$")
_LEVEL_SUBHEADING = re.compile(r"^### Level (\d+)\b")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_LIST_ITEM = re.compile(r"^(?:[-*]|\d+[.)])\s+(.*)$")
_LAYER_HEADING = re.compile(r"^### (\S.*?)\s*$")
_CLARIFICATION = re.compile(r"^[-*]\s+\*\*(?P<question>[^*]+?\?)\*\*\s+`(?P<id>[a-z0-9][a-z0-9-]*)`\s*$")
_KEYS = re.compile(r"^Keys:\s*(?P<keys>\S.*)$")


class StatementError(CatalogError):
    """A statement does not follow the skeleton (names the file, the heading and the line)."""


@dataclass(frozen=True)
class Clarification:
    """A question a strong candidate asks at this level, and the interviewer's answer."""

    id: str
    level: int
    question: str
    answer: str  # markdown
    keys: tuple[str, ...]  # the terms `kata ask` matches on, besides the question and answer


@dataclass(frozen=True)
class LevelSection:
    number: int
    name: str
    minutes: int
    ask: str  # what the interviewer says (a first-skeleton statement: the level's whole body)
    clarifications: tuple[Clarification, ...] = ()
    spec: str = ""  # the editorial (a first-skeleton statement: the level's whole body)

    @property
    def heading(self) -> str:
        return f"## Level {self.number} — {self.name} (~{self.minutes} min)"

    @property
    def body(self) -> str:
        """Everything the statement says of this level, every layer."""
        parts = [self.ask, *(f"{c.question} {c.answer}" for c in self.clarifications)]
        if self.spec != self.ask:
            parts.append(self.spec)
        return "\n\n".join(p for p in parts if p)


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
    tagline: str  # the optional line(s) between the title and the first section
    levels: tuple[LevelSection, ...]
    followups: tuple[str, ...]  # the questions, as listed
    # Only a statement in the first skeleton has these (a layered one frames each level in
    # its Ask, and keeps examples and constraints in its Spec).
    interview: str = ""
    worked_example: tuple[Part, ...] = ()
    constraints: tuple[Part, ...] = ()

    @property
    def layered(self) -> bool:
        """Whether the levels come in the three layers (Ask, Clarifications, Spec)."""
        return not self.interview

    def level(self, number: int) -> LevelSection:
        return self.levels[number - 1]

    def clarifications(self, levels: Iterable[int] | None = None) -> tuple[Clarification, ...]:
        """The clarifications of the given levels (all levels: None), in order."""
        wanted = None if levels is None else set(levels)
        return tuple(c for section in self.levels if wanted is None or section.number in wanted
                     for c in section.clarifications)


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
    if sections and sections[0].text == INTERVIEW:  # the first skeleton
        interview = reader.expect(INTERVIEW, after="'# <title>'")
        levels = reader.levels(layered=False)
        worked = reader.expect(WORKED_EXAMPLE, after=f"'{levels[-1].heading}'")
        constraints = reader.expect(CONSTRAINTS, after=f"'## {WORKED_EXAMPLE}'")
        followups = reader.expect(FOLLOWUPS, after=f"'## {CONSTRAINTS}'")
        reader.expect_end()
        return Statement(
            where=where, title=title_heading.text, tagline=tagline, interview=interview, levels=levels,
            worked_example=_parts(worked, len(levels), where, WORKED_EXAMPLE),
            constraints=_parts(constraints, len(levels), where, CONSTRAINTS),
            followups=_questions(followups, where))
    levels = reader.levels(layered=True)
    followups = reader.expect(FOLLOWUPS, after=f"'{levels[-1].heading}'")
    reader.expect_end()
    ids = [c.id for section in levels for c in section.clarifications]
    if repeated := sorted({i for i in ids if ids.count(i) > 1}):
        raise StatementError(f"{where}: the clarification id `{repeated[0]}` is used twice",
                             hint="give every clarification of the kata an id of its own")
    return Statement(where=where, title=title_heading.text, tagline=tagline, levels=levels,
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

    def levels(self, layered: bool) -> tuple[LevelSection, ...]:
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
            name, minutes, body = match.group(2), int(match.group(3)), self._take(heading)
            if layered:
                levels.append(_layered_level(number, name, minutes, body, self.where, heading))
            else:
                levels.append(LevelSection(number, name, minutes, ask=body, spec=body))
        if not levels:
            found = f", found '## {heading.text}' (line {heading.line_no})" if heading else ""
            after = f"'## {INTERVIEW}'" if not layered else "the title"
            raise StatementError(f"{self.where}: the heading '## Level 1 — <name> (~<minutes> min)' is "
                                 f"missing (expected after {after}){found}", hint=_SKELETON_HINT)
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


_SKELETON_HINT = (f"the sections are, in order: '{LEVEL_FORMAT}' for each level (each with "
                  f"'### {ASK}', '### {CLARIFICATIONS}', '### {SPEC}'), then '## {FOLLOWUPS}'")


def _layered_level(number: int, name: str, minutes: int, body: str, where: str,
                   heading: _Heading) -> LevelSection:
    """A level section of the layered skeleton: its three '### ' layers, in order."""
    layers: list[tuple[str, list[str]]] = []
    fence: str | None = None
    for line in body.splitlines():
        if match := _FENCE.match(line):
            marker = match.group(1)
            fence = None if fence == marker else (fence or marker)
        elif fence is None and (sub := _LAYER_HEADING.match(line)):
            layers.append((sub.group(1), []))
            continue
        if not layers:
            if line.strip():
                raise StatementError(f"{where}: '{heading.text}' (line {heading.line_no}) must start with "
                                     f"'### {ASK}'", hint=_SKELETON_HINT)
            continue
        layers[-1][1].append(line)
    names = [layer for layer, _ in layers]
    if names != list(LAYERS):
        raise StatementError(f"{where}: '{heading.text}' (line {heading.line_no}) has the parts "
                             f"{names}, not {list(LAYERS)}", hint=_SKELETON_HINT)
    texts = {layer: "\n".join(lines).strip("\n").rstrip() for layer, lines in layers}
    for layer, text in texts.items():
        if not text:
            raise StatementError(f"{where}: '{heading.text}' has an empty '### {layer}'", hint=_SKELETON_HINT)
    return LevelSection(number, name, minutes, ask=texts[ASK],
                        clarifications=_clarifications(texts[CLARIFICATIONS], number, where),
                        spec=texts[SPEC])


def _clarifications(text: str, level: int, where: str) -> tuple[Clarification, ...]:
    """The items of a '### Clarifications' list (see the module docstring)."""
    items: list[list[str]] = []
    for line in text.splitlines():
        if _LIST_ITEM.match(line):
            items.append([line])
        elif items and (line.startswith((" ", "\t")) or not line.strip()):
            items[-1].append(line)
        else:
            raise StatementError(f"{where}: level {level}'s clarifications must be a list; found "
                                 f"'{line.strip()[:60]}'", hint=_CLARIFICATION_HINT)
    return tuple(_clarification(item, level, where) for item in items)


def _clarification(lines: list[str], level: int, where: str) -> Clarification:
    head = _CLARIFICATION.match(lines[0])
    rest = [line.strip() for line in lines[1:]]
    while rest and not rest[-1]:
        rest.pop()
    keys = _KEYS.match(rest[-1]) if rest else None
    if head is None or keys is None or len(rest) < 2:
        raise StatementError(f"{where}: level {level}: the clarification '{lines[0].strip()[:70]}' is "
                             "not '- **Question?** `id`', its answer, then 'Keys: ...'",
                             hint=_CLARIFICATION_HINT)
    answer = "\n".join(rest[:-1]).strip()
    return Clarification(id=head.group("id"), level=level, question=head.group("question").strip(),
                         answer=answer, keys=tuple(k.strip() for k in keys.group("keys").split(",") if k.strip()))


_CLARIFICATION_HINT = ("write each as '- **The question?** `an-id`', the answer on the indented lines "
                       "below it, and last an indented line 'Keys: word, other words'")


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


def render(kata: Kata, levels_shown: int | Iterable[int] | None = None, *, clarifications: bool = True,
           spec_levels: Iterable[int] = ()) -> str:
    """The statement's markdown with only the given levels: a number n shows levels 1..n, a
    collection shows those levels; None shows them all. Of each level: its Ask; its
    clarifications unless `clarifications` is false (a mock: they come through `kata ask`);
    its Spec only for the levels in `spec_levels` (passed, or asked for). The follow-up
    questions come only with every level, and never in a mock's view (a mock asks them at
    the end)."""
    statement = load_statement(kata)
    shown = _levels_shown(levels_shown, len(statement.levels))
    return render_statement(statement, shown, clarifications=clarifications, spec_levels=frozenset(spec_levels))


def render_statement(statement: Statement, shown: frozenset[int], *, clarifications: bool = True,
                     spec_levels: frozenset[int] = frozenset()) -> str:
    blocks = [f"# {statement.title}"]
    if statement.tagline:
        blocks.append(statement.tagline)
    if not statement.layered:
        blocks += [f"## {INTERVIEW}", statement.interview]
    for section in statement.levels:
        if section.number in shown:
            blocks += render_level_parts(section, clarifications=clarifications and statement.layered,
                                         spec=statement.layered and section.number in spec_levels)
    hidden = [lv.number for lv in statement.levels if lv.number not in shown]
    if hidden:
        blocks.append(f"*The interviewer adds level {hidden[0]} when the levels above pass.*")
    for name, parts in ((WORKED_EXAMPLE, statement.worked_example), (CONSTRAINTS, statement.constraints)):
        texts = [p.text for p in parts if p.level is None or p.level in shown]
        if texts:
            blocks += [f"## {name}", *texts]
    if not hidden and (clarifications or not statement.layered):  # (a mock asks them at the end)
        blocks += [f"## {FOLLOWUPS}", "\n".join(f"- {q}" for q in statement.followups)]
    return "\n\n".join(blocks) + "\n"


def render_level_parts(section: LevelSection, *, clarifications: bool, spec: bool) -> list[str]:
    """One level as markdown blocks: its heading and Ask, then the layers asked for."""
    blocks = [section.heading, section.ask]
    if clarifications and section.clarifications:
        blocks += [f"### {CLARIFICATIONS}", render_clarifications(section.clarifications)]
    if spec:
        blocks += [f"### {SPEC}", section.spec]
    return blocks


def render_clarifications(items: Iterable[Clarification]) -> str:
    """Each question in bold with its answer under it (ids and keys are the matcher's)."""
    return "\n".join(f"- **{c.question}**\n" + "\n".join(f"  {line}" if line else "" for line in c.answer.splitlines())
                     for c in items)


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
