"""The visible examples (katas/<module>/examples.py) give the call, the expected value and
what the code returned, never the formula or algorithm the level tests: `kata check` shows
their names and failure messages, in a mock too, where the statement's Ask withholds them.

The giveaways are the project's own list per kata (tests/interview/<module>.toml): none may
appear in any text of an examples file, that is its names, docstrings, string literals
(descriptions, messages, the calls shown as input) and comments. Code is not text: an
expected value written as a number (0.3133) may equal a figure of the Spec, since the value
is what the example checks."""

from __future__ import annotations

import ast
import io
import sys
import tokenize

import pytest

from grader.catalog import load_catalog
from tests.kata_testing import REPO_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

KATAS = sorted(load_catalog().katas.values(), key=lambda k: k.slug)
IDS = [k.slug for k in KATAS]


def _plain(text: str) -> str:
    """As tests/test_katas.py compares giveaways: backticks dropped, whitespace collapsed."""
    return " ".join(text.replace("`", "").split())


def example_texts(source: str) -> list[str]:
    """Every text of an examples file: names of functions and classes, string literals
    (docstrings and the constant parts of f-strings included) and comments."""
    tree = ast.parse(source)
    names = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    comments = [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type == tokenize.COMMENT]
    return names + strings + comments


def giveaways_in(source: str, giveaways: list[str]) -> list[tuple[str, str]]:
    """(giveaway, the text holding it) for each giveaway some text of `source` contains."""
    texts = [_plain(text) for text in example_texts(source)]
    return [(g, text) for g in giveaways for text in texts if _plain(g) in text]


def _giveaways(kata) -> list[str]:
    path = REPO_ROOT / "tests" / "interview" / f"{kata.module}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [g for strings in data["giveaways"].values() for g in strings]


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_no_giveaway_appears_in_the_examples(kata):
    """No giveaway of any level of the kata is in a name, docstring, string or comment of
    its examples.py (an example's failure shows its description, message and input)."""
    found = giveaways_in(kata.examples_path.read_text(encoding="utf-8"), _giveaways(kata))
    assert not found, f"{kata.examples_path} gives away: " + "; ".join(f"{g!r} in {t!r}" for g, t in found)


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_every_example_check_shows_the_call_the_expected_value_and_what_came_back(kata):
    """Each expect() of an examples file passes input (the call), expected and got; each
    check_close() its input (expected and got are its arguments)."""
    tree = ast.parse(kata.examples_path.read_text(encoding="utf-8"))
    needed = {"expect": {"input", "expected", "got"}, "check_close": {"input"}}
    missing = [(node.lineno, node.func.id, sorted(needed[node.func.id] - {k.arg for k in node.keywords}))
               for node in ast.walk(tree)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in needed
               and needed[node.func.id] - {k.arg for k in node.keywords}]
    assert not missing, f"{kata.examples_path}: calls without " + ", ".join(
        f"line {line} {name}() lacks {keys}" for line, name, keys in missing)


def test_the_scan_finds_a_formula_in_a_message_a_description_and_a_comment():
    source = '''
@kata_test(level=1, category="correctness", description="default scale is 1 / sqrt(D)")
def test_scale(solution):
    got = torch.cat([solution.attention(q, k, v)])  # j <= i + (Tk - Tq)
    expect(close(got, 0.3133), "-logsigmoid(0.5 * 2)", input="attention(q, k, v)",
           expected=0.3133, got=got)
'''
    found = {g for g, _ in giveaways_in(source, ["1 / sqrt(D)", "j <= i + (Tk - Tq)", "-logsigmoid(0.5 * 2)",
                                                 "0.3133", "torch.cat"])}
    # code is not text: the expected value 0.3133 and the call torch.cat are not found
    assert found == {"1 / sqrt(D)", "j <= i + (Tk - Tq)", "-logsigmoid(0.5 * 2)"}
