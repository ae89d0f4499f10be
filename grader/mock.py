"""A mock interview: the levels revealed one at a time, two follow-up questions with an
answer key at the end, and the debrief.

The rules a mock keeps:

- Only revealed levels are ever shown: statement, hints, scorecards, follow-up questions.
  A level not reached stays unnamed (its number only), so a later mock of the same kata is
  still a surprise.
- The follow-ups are asked when the coding part ends (every level passed, time ran out, or
  `--stop`), only those of a revealed level; each answer is recorded before its answer key is
  shown, then scored by the key's terms (grader/followups.py); the candidate may mark the
  points they covered instead, which overrides that score.
- In the coding part, a failing test's box leads with the interviewer's nudge, the question
  that settles its rule (grader/nudges.py); nudges of a later level's clarification never
  appear. The debrief (grader/debrief.py) counts the questions asked before each level's
  first grade and the nudges, and `kata mock --debrief [ID]` reprints it with the mock's
  timeline (grader/timeline.py).
- Answers can come from a file (``kata mock --answers FILE``), TOML or JSON::

      [[answers]]                 # one table per question, in the order asked
      answer = "what you would say"
      covered = [1, 3]            # optional: the points you covered (overrides the keys)

- What every other command may do while a mock runs is one table here, COMMAND_POLICY:
  shows the revealed levels only, ends the mock first, or is refused (the reference, the
  walkthrough, the benchmark hold every level). The CLI applies it where it wires its
  commands (grader/cli/app.py), so no command module has to remember it.

Data and rules only: the CLI asks the questions and prints (grader/cli/commands/mock.py).
"""

from __future__ import annotations

import ast
import json
import random
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from grader import pyast
from grader.catalog import Kata
from grader.errors import KataError
from grader.sessions import expire_if_due, running_mock
from grader.statement import CODE_BLOCK, DECLARED, Statement, load_statement, render_level_parts
from grader.store import Session, Store

NUM_FOLLOWUPS = 2
MAX_ANSWER_CHARS = 20_000

ANSWERS_FORMAT = """\
# answers.toml: one [[answers]] table per question, in the order asked
[[answers]]
answer = \"\"\"
What you would say to the interviewer.
\"\"\"
covered = [1, 3]   # optional: the points you covered (overrides the keys)

[[answers]]
answer = "..."
"""


# ----------------------------------------------------------------------------- statement


def render_level(statement: Statement, level: int) -> str:
    """The markdown of one level as the interviewer adds it: its Ask (a statement in the
    first skeleton: its section, then its own parts of the worked example and the
    constraints)."""
    section = statement.level(level)
    if statement.layered:  # a mock shows the Ask; clarifications come through `kata ask`
        return "\n\n".join(render_level_parts(section, clarifications=False, spec=False)) + "\n"
    blocks = [section.heading, section.body]
    for name, parts in (("Worked example", statement.worked_example), ("Constraints", statement.constraints)):
        mine = [p.text.split("\n", 1)[1].strip() if "\n" in p.text else "" for p in parts if p.level == level]
        mine = [text for text in mine if text]
        if mine:
            blocks += [f"### {name} (level {level})", *mine]
    return "\n\n".join(blocks) + "\n"


def mock_stub(kata: Kata, lang: str = "py") -> str:
    """The file a mock starts from. The kata's stub declares every level's API, so a mock
    keeps only its imports and the code it hands over complete (e.g. the scheduler's Request
    and Batch); the candidate writes level 1 from the statement, as in an interview.

    In C++ (`lang` "cpp") it is the C++ stub without what its later levels declare (the
    blocks between `// [level N]` and `// [/level N]`, N > 1): the binding a C++ candidate
    needs is there for level 1 only; `kata mock` prints a level's blocks when it is revealed."""
    if lang == "cpp":
        body = cpp_stub_for_levels(kata.cpp_stub_path.read_text(encoding="utf-8"), {1})
        cpp_lines = body.splitlines()
        start = next((i for i, line in enumerate(cpp_lines) if not line.startswith("//") and line.strip()), 0)
        # The stub's opening comment names every level: a mock's file says what the mock is.
        cpp_header = [f"// Mock interview: {kata.title}, in C++.", "//",
                  "// The statement so far is `kata show`: level 1 now, each later level once the levels",
                  "// before it pass (`kata grade` then prints the declarations and binding lines it adds).",
                  "// Python sees your module through the binding at the end of this file; errors reach",
                  "// it as: ValueError <- std::invalid_argument, IndexError <- std::out_of_range,",
                  "// KeyError <- KeyError (defined below), NotImplementedError <- NotImplemented.", ""]
        return "\n".join(cpp_header + cpp_lines[start:]) + "\n"
    source = kata.stub_path.read_text(encoding="utf-8")
    lines = source.splitlines()
    imports, given = [], []
    for node in pyast.parse(source).body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        text = "\n".join(lines[first - 1:node.end_lineno])
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(text)
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef)) and not any(
                isinstance(n, ast.Raise) and "NotImplementedError" in ast.unparse(n) for n in ast.walk(node)):
            given.append(text)
    header = (f'"""Mock interview: {kata.title}.\n\n'
              "The statement so far is `kata show`: level 1 now, each later level once the levels\n"
              "before it pass. Write your solution here; `kata check` runs the revealed levels'\n"
              'examples and `kata grade` grades them.\n"""')
    blocks = [header, "\n".join(imports), *given, "# Level 1: write it here (its API is in `kata show`)."]
    return "\n\n\n".join(b for b in blocks if b) + "\n"


_CPP_LEVEL = re.compile(r"^[ \t]*// \[level (\d+)\][^\n]*\n(.*?)^[ \t]*// \[/level \1\][^\n]*\n", re.M | re.S)


def cpp_stub_for_levels(source: str, levels: set[int]) -> str:
    """The C++ stub with the blocks of the levels not in `levels` taken out (the markers of
    those kept too)."""
    return _CPP_LEVEL.sub(lambda m: m.group(2) if int(m.group(1)) in levels else "", source)


def cpp_level_blocks(source: str, level: int) -> list[str]:
    """The blocks a C++ stub declares for `level` (declarations, then the binding's lines)."""
    return [m.group(2).rstrip() for m in _CPP_LEVEL.finditer(source) if int(m.group(1)) == level]


# ----------------------------------------------------------------------------- follow-ups

_WORD = re.compile(r"[a-z][a-z-]{3,}")


def hidden_terms(statement: Statement, revealed: set[int]) -> set[str]:
    """Lower-case terms that would give away a level not revealed: its name, the stems of the
    words of its name (interleav-ing/-ed), and the functions and classes its code declares,
    less what the framing and the revealed levels already say."""
    shown_text = " ".join([statement.interview] + [statement.level(n).body for n in revealed]).lower()
    terms: set[str] = set()
    for section in statement.levels:
        if section.number in revealed:
            continue
        name = section.name.lower()
        terms.add(name)
        terms |= {stem for stem in map(_stem, _WORD.findall(name)) if stem not in shown_text}
        for block in CODE_BLOCK.findall(section.body):
            terms |= {n.lower() for n in DECLARED.findall(block)
                      if not n.startswith("__") and n.lower() not in shown_text}
    return terms


def _stem(word: str) -> str:
    for suffix in ("ing", "ion", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def gives_away(text: str, terms: set[str]) -> bool:
    """Whether `text` mentions a term: a word starting with it (a stem), or the phrase."""
    text = text.lower()
    return any(re.search(rf"(?<![\w-]){re.escape(t)}", text) for t in terms)


def choose_followups(kata: Kata, store: Store, session: Session, revealed: set[int]) -> list[dict[str, Any]]:
    """The questions to ask: the kata's follow-ups of a revealed level (at most the highest
    revealed) that give away no hidden level either, asked least often in earlier mocks first
    (ties drawn, seeded by the session so a rerun asks the same)."""
    statement = load_statement(kata)
    terms = hidden_terms(statement, revealed)
    reached = max(revealed, default=1)
    fitting = [i for i, f in enumerate(kata.followups)
               if f.level <= reached and not gives_away(" ".join((f.question, *f.points)), terms)]
    asked: Counter[int] = Counter()
    for other in store.mock_sessions(kata.slug):
        record = store.mock(other.id)
        if other.id != session.id and record and record.followups:
            asked.update(q["index"] for q in record.followups)
    draw = random.Random(session.id)
    order = sorted(fitting, key=lambda i: (asked[i], draw.random()))
    return [{"index": i, "question": f.question, "points": list(f.points), "level": f.level,
             "keys": [[list(group) for group in point] for point in f.keys]}
            for i in order[:NUM_FOLLOWUPS] for f in [kata.followups[i]]]


@dataclass(frozen=True)
class AnswersFile:
    answers: tuple[str, ...]
    # Per answer its self-mark (None: the keys' score stands); None when the file marks none.
    covered: tuple[tuple[int, ...] | None, ...] | None


def read_answers(path: Path, questions: list[dict[str, Any]]) -> AnswersFile:
    """Parse an answers file for these questions; KataError naming the file and the field."""
    where = str(path)
    hint = f"write it as TOML (or the same as JSON):\n{ANSWERS_FORMAT}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KataError(f"cannot read the answers file {where}: {exc}", hint=hint) from exc
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise KataError(f"{where} is not valid {'JSON' if path.suffix.lower() == '.json' else 'TOML'}: {exc}",
                        hint=hint) from exc
    items = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != len(questions):
        raise KataError(f"{where}: expected {len(questions)} [[answers]] tables (one per question asked), "
                        f"found {len(items) if isinstance(items, list) else 'none'}", hint=hint)
    answers, covered = [], []
    for i, (item, question) in enumerate(zip(items, questions), start=1):
        answer = item.get("answer") if isinstance(item, dict) else None
        if not isinstance(answer, str) or not answer.strip():
            raise KataError(f"{where}: answers[{i}]: field 'answer' must be non-empty text", hint=hint)
        if len(answer) > MAX_ANSWER_CHARS:
            raise KataError(f"{where}: answers[{i}] is longer than {MAX_ANSWER_CHARS} characters")
        answers.append(answer.strip())
        covered.append(None if "covered" not in item else
                       parse_marks(item["covered"], len(question["points"]), f"{where}: answers[{i}]: covered"))
    marked = any(c is not None for c in covered)
    return AnswersFile(tuple(answers), tuple(covered) if marked else None)


def parse_marks(value: Any, num_points: int, where: str) -> tuple[int, ...]:
    """Point numbers 1..num_points, as a list or a text like "1, 3" (blank: none)."""
    if isinstance(value, str):
        words = [w for w in re.split(r"[\s,]+", value.strip()) if w]
        if not all(w.isdigit() for w in words):
            raise KataError(f"{where}: '{value}' is not a list of point numbers",
                            hint=f"numbers between 1 and {num_points}, e.g. 1, 3 (blank for none)")
        value = [int(w) for w in words]
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise KataError(f"{where} must be a list of point numbers, e.g. [1, 3]")
    if bad := [v for v in value if not 1 <= v <= num_points]:
        raise KataError(f"{where}: {bad} not among the points 1..{num_points}")
    return tuple(sorted(set(value)))



# ----------------------------------------------------------------------------- what commands may do


class DuringMock(Enum):
    """What a command may do while a mock of its kata runs."""

    ALLOWED = "allowed"              # shows nothing of a level the mock hides
    REVEALED_ONLY = "revealed only"  # shows the revealed levels alone (sessions.revealed_levels)
    ENDS_MOCK = "ends the mock"      # ends the mock first, then shows what it shows
    REFUSED = "refused"              # would show every level: refused until the mock ends


@dataclass(frozen=True)
class CommandPolicy:
    during_mock: DuringMock
    would_show: str = ""  # what a refused command would show, for its error ("the reference")


_ALLOWED, _REVEALED = CommandPolicy(DuringMock.ALLOWED), CommandPolicy(DuringMock.REVEALED_ONLY)
_ENDS = CommandPolicy(DuringMock.ENDS_MOCK)

# Every command of `kata`, as typed after `kata`. The CLI applies this table where it wires
# its commands (grader/cli/app.py), so a command without an entry does not load; a test
# enumerates the registered commands against it (tests/test_command_policy.py).
COMMAND_POLICY: dict[str, CommandPolicy] = {
    "init": _ALLOWED,
    "list": _ALLOWED,
    "show": _REVEALED,       # the revealed levels' Asks; the Spec once the mock is over
    "start": _ENDS,          # says the mock runs; --force abandons it for a timed session
    "mock": _REVEALED,
    "status": _REVEALED,     # the clocks of the revealed levels
    "check": _REVEALED,      # the revealed levels' examples
    "watch": _REVEALED,
    "grade": _REVEALED,      # the revealed levels' tests; a later level is a number only
    "repro": _REVEALED,      # a test of the last run, and a mock's runs hold revealed levels only
    "hint": _REVEALED,
    "ask": _REVEALED,
    "stop": _ENDS,           # as `kata mock --stop`: follow-ups, then the debrief
    "reveal": CommandPolicy(DuringMock.REFUSED, "the reference"),  # it holds every level
    "reset": _REVEALED,      # during a mock, writes the mock's starting file, not the full stub
    "history": _ALLOWED,
    "progress": _ALLOWED,
    "notebook": CommandPolicy(DuringMock.REFUSED, "the walkthrough"),
    "bench": CommandPolicy(DuringMock.REFUSED, "the benchmark's workloads"),
    "warm": _ALLOWED,        # starts or ends the warm grader; shows nothing of a kata
    "homework new": _ALLOWED,        # the coach's side, and bundles of finished work
    "homework invite": _ALLOWED,
    "homework start": _ENDS,         # a new session of a kata abandons its running mock
    "homework status": _ALLOWED,
    "homework submit": _ALLOWED,
    "homework review": _ALLOWED,
    "homework grade-one": _ALLOWED,
    "homework assemble": _ALLOWED,
}


def command_policy(command: str) -> CommandPolicy:
    """The policy of `command` ("grade", "homework review"); LookupError names the table."""
    try:
        return COMMAND_POLICY[command]
    except KeyError:
        raise LookupError(f"`kata {command}` has no entry in grader.mock.COMMAND_POLICY: "
                          "say there what it may do while a mock runs") from None


def refuse_during_mock(store: Store, slug: str, what: str) -> None:
    """KataError when a mock of `slug` is running: `what` would show its later levels. A mock
    whose time ran out ends here (the mock ends at the candidate's next command)."""
    running = running_mock(store, slug)
    running = expire_if_due(store, running) if running else None
    if running is not None and running.status == "active":
        raise KataError(f"a mock of {slug} is running: {what} would show its later levels",
                        hint="`kata mock --stop` ends the mock first, then run it again")
