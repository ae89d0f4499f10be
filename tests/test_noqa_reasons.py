"""Every `# noqa` in the linted code names its codes and says why (house style, point 13).

ruff keeps a `noqa` honest (PGH004: it names codes; RUF100: something still needs it); no rule
checks that it carries a reason, so this test does. The folders ruff leaves out (pyproject.toml,
`extend-exclude`: candidates' files written as candidates write) are left out here too.
"""

from __future__ import annotations

import io
import re
import tokenize
import tomllib
from pathlib import Path

# the marker, its codes (E402,F401) and what follows them on the line, up to another comment
NOQA = re.compile(r"#\s*noqa\b(?P<codes>:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?(?P<rest>[^#]*)")
# a reason has a word of at least three letters: "- timed on purpose", "(for your solution)"
REASON = re.compile(r"[A-Za-z]{3,}")
REPO_ROOT = Path(__file__).resolve().parent.parent
SKIPPED_FOLDERS = {".git", ".venv", "__pycache__", "build", "dist", "kata-practice"}


def _linted_files() -> list[Path]:
    excluded = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["extend-exclude"]
    excluded_paths = [REPO_ROOT / p for p in excluded]
    files = []
    for path in sorted(REPO_ROOT.rglob("*.py")):
        rel_parts = path.relative_to(REPO_ROOT).parts
        if SKIPPED_FOLDERS.intersection(rel_parts) or rel_parts[0].startswith(".venv"):
            continue
        if any(path.is_relative_to(p) for p in excluded_paths):
            continue
        files.append(path)
    return files


def test_the_linted_files_are_found():
    files = _linted_files()
    assert REPO_ROOT / "grader" / "engine" / "plugin.py" in files
    assert not [f for f in files if "corpus" in f.relative_to(REPO_ROOT).parts]


def test_every_noqa_names_its_codes_and_says_why():
    bare = []
    for path in _linted_files():
        source = path.read_text(encoding="utf-8")
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.COMMENT:  # comments only: a string may quote the marker
                continue
            for match in NOQA.finditer(token.string):
                if not match["codes"] or not REASON.search(match["rest"]):
                    bare.append(f"{path.relative_to(REPO_ROOT)}:{token.start[0]}: {token.line.strip()}")
    assert not bare, ("a `# noqa` needs its codes and a reason after them, "
                      "`# noqa: BLE001 - any exception of candidate code is the verdict`:\n" + "\n".join(bare))
