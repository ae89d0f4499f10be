"""What a failure's snippet printed, read against the card: does it show the reported "got"?
Shared by tests/test_snippets.py (via `kata repro`) and tests/test_snippet_matches_card.py."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

_NUMBER = r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+|inf|nan)"


def got_forms(got: str) -> list[str]:
    """The ways a reported "got" can appear in what the snippet prints: as it is, unquoted,
    the value of "returned X"."""
    text = str(got).strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    forms = [text]
    returned = re.fullmatch(r"returned (.*)", text, flags=re.DOTALL)
    if returned:
        forms.append(returned.group(1))
    return forms


def _is_number(text: str) -> bool:
    return re.fullmatch(_NUMBER, text, flags=re.IGNORECASE) is not None


def _numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(_NUMBER, text, flags=re.IGNORECASE)]


def _printed_numbers(stdout: str) -> list[float]:
    """Every number the snippet printed, in order, without those of dtype and device names."""
    text = re.sub(r"dtype=torch\.\w+|device='[^']*'|grad_fn=<\w+>|requires_grad=True", "", stdout)
    return _numbers(re.sub(r"[A-Za-z_]\w*\d\w*", "", text))  # float64, q97: not values


def _contains_close(haystack: list[float], needle: list[float]) -> bool:
    """`needle` appears in `haystack` as a run, each value within rounding: the scorecard
    rounds to 6 significant digits, torch prints 4 decimals."""
    def close(x: float, y: float) -> bool:
        return x == y or abs(x - y) <= 1e-3 + 1e-3 * abs(y)
    n = len(needle)
    return n > 0 and any(all(close(haystack[i + j], needle[j]) for j in range(n))
                         for i in range(len(haystack) - n + 1))


def prints_got(got: str, stdout: str) -> bool:
    """True when the snippet's output shows the reported value: the same line; for a number,
    a line of that number within the scorecard's rounding ("8." for 8.0); for a tensor
    (also inside a sentence: "kept mass 0.5 in tensor([...])"), its values in order; for a
    summary ending in a dict ("3 tokens: {'prefill': {...}, ...}"), each of its values."""
    lines = [line.strip() for line in stdout.splitlines()]
    for form in got_forms(got):
        if form in lines:
            return True
        if _is_number(form):  # "8." as the scorecard shows 8.0
            if any(_is_number(line) and _contains_close([float(line)], [float(form)]) for line in lines):
                return True
            continue
        tensor = re.search(r"(?:torch\.)?tensor\((\[.*\]|[^,\[\]]+)", form, flags=re.DOTALL)
        if tensor:
            if _contains_close(_printed_numbers(stdout), _numbers(tensor.group(1))):
                return True
            continue
        summary = re.search(r"(\{.*\})\s*$", form, flags=re.DOTALL)
        try:
            values = ast.literal_eval(summary.group(1)) if summary else None
        except (ValueError, SyntaxError):
            values = None
        if isinstance(values, dict) and values and all(repr(v) in stdout for v in values.values()):
            return True
    return False


def run_alone(script: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no way to the grader or reference
    return subprocess.run([sys.executable, script.name], cwd=script.parent, capture_output=True, text=True,
                          timeout=300, env=env)
