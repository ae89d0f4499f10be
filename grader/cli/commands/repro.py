"""kata repro: write the reproduction snippet of a failure of the last grade or check to a file
next to the solution, ready to run."""

from __future__ import annotations

import difflib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from grader import textsafe
from grader.cli import last_run, output
from grader.cli.common import OptionalSlugArg, catalog
from grader.errors import KataError
from grader.workspace import backup

TestOpt = Annotated[Optional[str], typer.Option(
    "--test", "-t", help="The failing test to reproduce (its name, as the scorecard shows it); "
                         "default: the first failure that has a snippet.", show_default=False)]
OutOpt = Annotated[Optional[Path], typer.Option(
    "--output", "-o", help="Write the snippet here ('-' prints it); default: "
                           "repro_<test>.py next to the graded file.", show_default=False)]


def repro(slug: OptionalSlugArg = None, test: TestOpt = None, out: OutOpt = None) -> None:
    """Write the snippet that replays a failing test of your last `grade` or `check`."""
    run = _find_run(slug, test)
    card = run.card
    failure = _pick_failure(run, test)
    kata = catalog().get(card["kata"])
    snippet = failure["details"]["snippet"]
    solution = run.solution_path
    if out is not None and str(out) == "-":
        text = _with_loader(runnable(snippet), kata.module, solution, None)
        # The file exactly into a pipe; on a terminal, values the candidate's code returned
        # (the comments' "got") cannot act on it.
        sys.stdout.write(textsafe.clean(text) if output.console.is_terminal else text)
        return
    dest = out if out is not None else solution.parent / f"repro_{_short(failure['name'])}.py"
    _refuse_to_replace_a_solution(dest, solution, kata.module)
    text = _with_loader(runnable(snippet), kata.module, solution, dest)
    saved = _write(dest, text)
    output.console.print(f"wrote [bold]{escape(output.shown_path(dest))}[/]: the calls of the failing example of "
                         f"{textsafe.markup(failure['name'])} (last {run.kind} of {kata.slug}, seed {card['seed']})")
    if saved is not None:
        output.console.print(f"your earlier {escape(dest.name)} is backed up as {escape(output.shown_path(saved))}")
    output.console.print(f"run it: [bold]{escape(_python())} {escape(output.shown_path(dest))}[/]")
    reported = [f"{key} {str(failure['details'][key])[:200]}" for key in ("expected", "got")
                if failure["details"].get(key)]
    if reported:
        output.console.print(f"the test reported: {textsafe.markup(', '.join(reported))}")
    others = [t["name"] for t in _failures_with_snippets(card) if t["name"] != failure["name"]]
    if others:
        listed = ", ".join(others[:3]) + (f", and {len(others) - 3} more" if len(others) > 3 else "")
        output.console.print(f"[dim]other failures with a snippet: {textsafe.markup(listed)} "
                             f"(`kata repro {kata.slug} --test NAME`)[/]")


def _find_run(slug: str | None, test: str | None) -> last_run.LastRun:
    if slug:
        kata = catalog().get(slug)
        run = last_run.load(kata.slug)
        if run is None:
            raise KataError(f"no grade or check of {kata.slug} is recorded yet, so there is nothing to reproduce",
                            hint=f"`kata check {kata.slug}` or `kata grade {kata.slug}`, then `kata repro {kata.slug}`")
        return run
    runs = last_run.all_runs()
    if not runs:
        raise KataError("no grade or check is recorded yet, so there is nothing to reproduce",
                        hint="`kata check` or `kata grade` first, then `kata repro`")
    if test:  # the most recent run in which this test failed
        for run in runs:
            found = _match(run.card, test)
            if found is not None and not found["passed"]:
                return run
    return runs[0]


def _pick_failure(run: last_run.LastRun, test: str | None) -> dict[str, Any]:
    card, slug = run.card, run.card["kata"]
    failing = [t for t in card["tests"] if not t["passed"]]
    if not failing:
        raise KataError(f"the last {run.kind} of {slug} failed no test: there is nothing to reproduce",
                        hint=f"`kata grade {slug}` runs the hidden suite" if run.kind == "check"
                        else "nothing to do; `kata history` shows your attempts")
    if test is None:
        with_snippet = _failures_with_snippets(card)
        if not with_snippet:
            raise KataError(f"none of the {len(failing)} failures of the last {run.kind} of {slug} has a snippet "
                            f"({_why_no_snippet(failing[0], card)})",
                            hint="the scorecard's input and shrunk example show what was called")
        return with_snippet[0]
    found = _match(card, test)
    if found is None:
        names = [t["name"] for t in failing]
        close = difflib.get_close_matches(test.lower(), names, n=3, cutoff=0.5)
        suggestion = f"did you mean {', '.join(close)}? " if close else ""
        raise KataError(f"no failing test named '{test}' in the last {run.kind} of {slug}",
                        hint=suggestion + f"the failing tests: {', '.join(names[:8])}"
                             + (", ..." if len(names) > 8 else ""))
    if found["passed"]:
        raise KataError(f"{found['name']} passed in the last {run.kind} of {slug}: there is nothing to reproduce",
                        hint=f"`kata repro {slug}` picks the first failure")
    if not found["details"].get("snippet"):
        raise KataError(f"{found['name']} has no snippet ({_why_no_snippet(found, card)})",
                        hint="its box in the scorecard shows the input and what was expected")
    return found


def _match(card: dict[str, Any], name: str) -> dict[str, Any] | None:
    wanted = name.strip().lower()
    for t in card["tests"]:
        if wanted in (t["name"].lower(), t["nodeid"].lower()) or t["nodeid"].lower().endswith("::" + wanted):
            return t
    return None


def _failures_with_snippets(card: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in card["tests"] if not t["passed"] and (t.get("details") or {}).get("snippet")]


def _why_no_snippet(test: dict[str, Any], card: dict[str, Any]) -> str:
    if card.get("import_error"):
        return "your file could not be imported"
    if test["category"] == "efficiency":
        return "an efficiency test measures your code rather than checking a value"
    return "the test made no call into your code before it failed"


_RAISING_CALL = re.compile(r"^(?P<expr>\S.*?)  # raises (?P<name>[\w.]+)$", re.MULTILINE)


_LAST_ASSIGNED = re.compile(r"^(?P<name>[A-Za-z_]\w*) = \S.*\n(?=\n# The test then reported)", re.MULTILINE)


def runnable(snippet: str) -> str:
    """The snippet made to run through as the test did: each call that raised when graded
    (`expr  # raises KeyError`) inside a try block that prints the exception, and the object
    the last call returned printed (the test went on to inspect it)."""
    text = _RAISING_CALL.sub(lambda m: (f"try:  # raised {m['name']} when graded\n"
                                        f"    {m['expr']}\n"
                                        "except Exception as exc:\n"
                                        "    print('raised', repr(exc))"), snippet)
    return _LAST_ASSIGNED.sub(lambda m: f"{m.group(0)}print({m['name']})  # what the last call returned\n", text)


def _with_loader(snippet: str, module: str, solution: Path, dest: Path | None) -> str:
    """The snippet, made to import the graded file under the kata's module name when a plain
    `import <module>` next to it would not find it: the file is named otherwise, or the
    snippet is written to another folder."""
    if solution.name == f"{module}.py" and (dest is None or _same_dir(dest, solution)):
        return snippet
    if dest is not None and _same_dir(dest, solution):
        where = f"Path(__file__).resolve().parent / {solution.name!r}"
    else:
        where = f"Path({str(solution.resolve())!r})"
    loader = (f"# Imports {solution.name} as `{module}`, the name the kata's tests use.\n"
              "import importlib.util\n"
              "import sys\n"
              "from pathlib import Path\n"
              f"_spec = importlib.util.spec_from_file_location({module!r}, {where})\n"
              f"sys.modules[{module!r}] = importlib.util.module_from_spec(_spec)\n"
              f"_spec.loader.exec_module(sys.modules[{module!r}])\n")
    marker = f"import {module}\n"
    head, found, tail = snippet.partition(marker)
    return head + loader + marker + tail if found else loader + snippet


def _same_dir(a: Path, b: Path) -> bool:
    return a.resolve().parent == b.resolve().parent


def _refuse_to_replace_a_solution(dest: Path, solution: Path, module: str) -> None:
    if dest.resolve() == solution.resolve() or dest.name == f"{module}.py":
        raise KataError(f"{dest} is (or would shadow) your solution; the snippet must go to another file",
                        hint="leave out -o to write repro_<test>.py next to it, or `-o repro.py`")


def _write(dest: Path, text: str) -> Path | None:
    """Write `text` to `dest`, backing up a different file that is already there."""
    saved = None
    try:
        if dest.is_dir():
            raise KataError(f"{dest} is a folder", hint="give -o a file name, e.g. `-o repro.py`")
        if dest.exists() and dest.read_text(encoding="utf-8", errors="replace") != text:
            saved = backup(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise KataError(f"could not write {dest}: {exc}",
                        hint="`-o FILE` writes it elsewhere, `-o -` prints it") from exc
    return saved


def _short(test_name: str) -> str:
    return test_name.removeprefix("test_")[:80]


def _python() -> str:
    """The command that runs the interpreter kata runs on (torch is there): `python` when
    that finds this very environment, else the interpreter's path. Two virtual environments
    link one binary but not one set of packages, so the same binary is not enough: `python`
    must be found in the folder of this interpreter (another venv activated, it is not)."""
    found = shutil.which("python")
    if (found and os.path.realpath(os.path.dirname(found)) == os.path.realpath(os.path.dirname(sys.executable))
            and os.path.realpath(found) == os.path.realpath(sys.executable)):
        return "python"
    return sys.executable
