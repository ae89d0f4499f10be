"""A file that cannot load is a verdict before the suite starts (issue 37, item 7).

A syntax error, an empty file, or a file that defines none of the stub's names is found by a
compile check in the parent: every test is listed and failed at once, no judge started. An
exception at import needs the sandboxed worker: the judge fails every test at once, none
runs. A loop at module level is cut with its line, well before the flat limit; a slow
import of a library is not a loop. A file missing only some names is graded, with a note.
How fast all this is, is measured by scripts/bench_load_errors.py, not asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader import grading
from grader.catalog import Kata, Level, load_catalog
from grader.cli.app import app
from grader.engine import import_watch
from grader.engine.config import JudgeConfig
from grader.engine.precheck import check_source
from grader.engine.runner import run_suite
from grader.engine.suite_listing import list_tests
from tests.kata_testing import REPO_ROOT

FIXTURES = Path(__file__).parent / "engine_fixtures"
SUITE = FIXTURES / "toy_suite.py"
TOY_STUB = '''"""Toy: add and scale."""


def add(a, b):
    raise NotImplementedError


def scale(xs, k):
    raise NotImplementedError
'''


@pytest.fixture
def toy(tmp_path) -> Kata:
    """A kata whose stub declares add and scale, graded with the engine's toy suite."""
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "stub.py").write_text(TOY_STUB)
    levels = tuple(Level(level=n, name=f"Level {n}", minutes=10, hints=()) for n in (1, 2))
    return Kata(slug="toy", module="toy", title="Toy", minutes=20, difficulty="easy", tags=(),
                summary="", levels=levels, followups=(), folder=folder)


def grade_source(kata: Kata, tmp_path: Path, source: str, **kwargs):
    path = tmp_path / "toy.py"
    path.write_text(source)
    return grading.grade(kata, path, seed=1, suite=SUITE, test_timeout_s=30.0, **kwargs)


def no_judge(*args, **kwargs):
    raise AssertionError("a judge was started for a file the compile check rejects")


# ---------------------------------------------------------------------------- the compile check


def test_a_syntax_error_names_its_line_column_and_the_next_step():
    error = check_source("import torch\n\ndef f(x:\n    return x\n", slug="toy", path=Path("toy.py")).error
    assert error.startswith("your file has a syntax error at line 3, column 6")
    assert "    def f(x:\n         ^" in error  # the line itself, a caret under the column
    assert "py_compile toy.py" in error and "nothing was run" in error


def test_indentation_errors_compiler_errors_and_nul_bytes_say_what_and_where():
    assert "indentation error at line 3" in check_source("if True:\n\tx = 1\n        y = 2\n", slug="toy").error
    # Found by the compiler, not the parser: the line is shown all the same.
    assert "line 2, column 1: 'return' outside function\n    return 1" in check_source("x = 1\nreturn 1\n", slug="t").error
    assert "NUL byte at line 2" in check_source("x = 1\ny = \x002\n", slug="toy").error


@pytest.mark.parametrize("source", ["", "\n\n  \n", "# not yet\n# soon\n", '"""My solution."""\n# TODO\n'])
def test_a_file_with_nothing_but_comments_or_a_docstring_is_empty(toy, source):
    error = check_source(source, slug="toy", stub=toy.stub_path).error
    assert error.startswith("your file is empty") and "add, scale" in error and "kata reset toy" in error


def test_none_of_the_stubs_names_cannot_load_some_missing_is_a_note(toy):
    nothing = check_source("import math\nTAU = 2 * math.pi\n", slug="toy", stub=toy.stub_path)
    assert nothing.error.startswith("your file defines none of toy's API: add, scale")
    some = check_source("def add(a, b):\n    return a + b\n", slug="toy", stub=toy.stub_path)
    assert some.error is None and some.missing == ("scale",)
    assert some.note.startswith("your file does not define scale")


@pytest.mark.parametrize("source", [
    "from operator import add\nscale = lambda xs, k: [k * x for x in xs]\n",
    "try:\n    from fast import add, scale\nexcept ImportError:\n    def add(a, b): ...\n    scale = None\n",
    "if True:\n    add, scale = max, min\n",
    "def _init():\n    global add, scale\n_init()\n",
    "for add in [max]:\n    pass\nclass scale: ...\n",
])
def test_names_bound_any_way_count_as_defined(toy, source):
    check = check_source(source, slug="toy", stub=toy.stub_path)
    assert check.error is None and check.missing == ()


@pytest.mark.parametrize("source", ["from helpers import *\n", "globals()['add'] = max\n",
                                    "import sys\nsetattr(sys.modules[__name__], 'add', max)\n",
                                    "def __getattr__(name):\n    return max\n"])
def test_a_file_that_may_bind_names_unseen_is_not_judged_by_its_names(toy, source):
    check = check_source(source, slug="toy", stub=toy.stub_path)
    assert check.error is None and check.missing == ()


# ---------------------------------------------------------------------------- the suite's tests


def _collected(paths: list[Path], rootdir: Path, *options: str) -> list[dict]:
    """What the judge's plugin reports it collected (no solution: nothing runs)."""
    katas = list(load_catalog().katas.values())
    with tempfile.TemporaryFile("w+") as results:
        judge = JudgeConfig(results_fd=results.fileno(),
                            support=tuple(str(p) for k in katas for p in k.support_paths))
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **judge.to_env()}
        done = subprocess.run([sys.executable, "-m", "pytest", *map(str, paths), "-p", "grader.engine.plugin",
                               "--collect-only", "-q", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull,
                               "--rootdir", str(rootdir), "--assert=plain", *options],
                              env=env, pass_fds=(results.fileno(),), capture_output=True, text=True)
        results.seek(0)
        events = [json.loads(line) for line in results if line.strip()]
    collected = [e["tests"] for e in events if e.get("event") == "collected"]
    assert collected, done.stdout[-3000:] + done.stderr[-3000:]
    return collected[0]


def test_every_katas_tests_are_listed_from_source_exactly_as_the_judge_collects_them():
    """The unloadable card lists the suite's tests without importing it: the same tests, in
    the same order, with the same levels, categories, weights and descriptions."""
    katas = list(load_catalog().katas.values())
    unlisted = [str(path) for k in katas for path in (k.suite_path, k.examples_path) if list_tests(path) is None]
    assert not unlisted, ("cannot be listed from source (a decorator suite_listing.py does not know?); a file "
                          f"that cannot load would wait for a judge there: {unlisted}")
    hidden = _collected([k.suite_path for k in katas], katas[0].suite_path.parent)
    assert hidden == [t for k in katas for t in list_tests(k.suite_path)]
    examples = _collected([k.examples_path for k in katas], katas[0].folder.parent, "--import-mode=importlib")
    assert examples == [{**t, "nodeid": f"{k.folder.name}/{t['nodeid']}"}
                        for k in katas for t in list_tests(k.examples_path)]


@pytest.mark.parametrize("decorator", ["@pytest.mark.parametrize('x', [1, 2])", "@my_own_decorator",
                                       "@kata_test(level=LEVEL, category='correctness', description='d')"])
def test_a_suite_the_source_cannot_tell_is_not_listed(tmp_path, decorator):
    suite = tmp_path / "suite.py"
    suite.write_text(f"import pytest\n\n{decorator}\ndef test_x(solution, x=1):\n    pass\n")
    assert list_tests(suite) is None


def test_a_test_class_or_a_test_bound_by_assignment_is_not_listed(tmp_path):
    for body in ("class TestThings:\n    def test_a(self): ...\n", "from elsewhere import test_shared\n",
                 "def check(solution): ...\ntest_alias = check\n"):
        (tmp_path / "suite.py").write_text(body)
        assert list_tests(tmp_path / "suite.py") is None


# ---------------------------------------------------------------------------- grading


def test_a_syntax_error_fails_every_test_at_once_with_no_judge(toy, tmp_path, monkeypatch):
    monkeypatch.setattr(grading, "run_suite", no_judge)
    events = []
    card = grade_source(toy, tmp_path, "def add(a, b):\n    return a +\n",
                        on_event=lambda kind, data: events.append(kind))
    data = card.to_dict()
    assert [t["name"] for t in data["tests"]] == ["test_add", "test_scale", "test_zero"]
    assert data["score"] == 0 and [lv["level"] for lv in data["levels"]] == [1, 2]
    assert data["import_error"].startswith("your file has a syntax error at line 2")
    assert all(t["message"] == data["import_error"] and not t["passed"] for t in data["tests"])
    assert events == ["collected"] + ["result"] * 3  # as a judge reports them, for the progress display


def test_an_empty_file_and_a_file_without_the_names_likewise(toy, tmp_path, monkeypatch):
    monkeypatch.setattr(grading, "run_suite", no_judge)
    empty = grade_source(toy, tmp_path, '"""Toy."""\n# later\n')
    assert empty.import_error.startswith("your file is empty") and len(empty.tests) == 3 and empty.score == 0
    nameless = grade_source(toy, tmp_path, "import os\n", levels={2})
    assert nameless.import_error.startswith("your file defines none of toy's API")
    assert [t.name for t in nameless.tests] == ["test_scale", "test_zero"]  # the level filter holds


def test_a_suite_that_cannot_be_listed_gets_the_verdict_from_a_judge_without_a_worker():
    outcome = run_suite(SUITE, FIXTURES / "good.py", "toy", 1, load_error="your file is empty")
    assert outcome.import_error == "your file is empty" and outcome.contained is None  # no worker
    assert len(outcome.tests) == 3 and all(t.message == "your file is empty" for t in outcome.tests)


def test_a_file_missing_some_names_is_graded_with_a_note(toy, tmp_path):
    card = grade_source(toy, tmp_path, (FIXTURES / "missing_name.py").read_text())
    tests = {t.name: t for t in card.tests}
    assert tests["test_add"].passed and not tests["test_scale"].passed and card.import_error is None
    assert card.notes[0].startswith("your file does not define scale (the stub declares it)")


# ---------------------------------------------------------------------------- the worker's import


def test_an_exception_at_import_fails_every_test_at_once_none_runs():
    events = []
    outcome = run_suite(SUITE, FIXTURES / "raises_at_import.py", "toy", 1, test_timeout_s=30.0,
                        on_event=lambda kind, data: events.append(kind))
    assert "start" not in events  # no test ran only to say it again
    assert "raised NameError" in outcome.import_error and "line 7, in <module>" in outcome.import_error
    assert all(t.message == outcome.import_error for t in outcome.tests) and len(outcome.tests) == 3
    assert "setting up the table" in outcome.tests[0].details["output"]  # what it printed first


def test_a_split_grading_stops_every_judge_at_the_first_import_error():
    """The judges' workers import the same file: the first judge to report the error decides
    every test, those of the judges it stopped included, whether they had collected or not."""
    outcome = run_suite(SUITE, FIXTURES / "raises_at_import.py", "toy", 1, test_timeout_s=30.0,
                        shards=[["test_add"], ["test_scale", "test_zero"]])
    assert [t.name for t in outcome.tests] == ["test_add", "test_scale", "test_zero"]
    assert all("raised NameError" in t.message and not t.passed for t in outcome.tests)
    assert "raised NameError" in outcome.import_error


def test_a_loop_at_import_is_cut_by_the_watch_and_shows_its_line():
    outcome = run_suite(SUITE, FIXTURES / "loops_on_import.py", "toy", 1, test_timeout_s=60.0)
    error = outcome.import_error
    # "ran for at least": the watch cut it, not the 60 s flat limit ("did not finish in time").
    assert error.startswith("importing your file did not finish: your code at module level ran for at least")
    assert "line 10, in <module>: while steps >= 0:" in error or "line 11, in <module>: steps += 1" in error
    assert all(t.message == error for t in outcome.tests)


LOOP_DUMP = """Current thread 0x00007f0000000001 (most recent call first):
  File "/kata/solution/toy.py", line 11 in <module>
  File "<frozen importlib._bootstrap>", line 241 in _call_with_frames_removed
  File "<frozen importlib._bootstrap_external>", line 940 in exec_module
  File "/kata/worker/kata_worker/main.py", line 49 in import_candidate
  File "<string>", line 1 in <module>
"""
TORCH_IMPORT_DUMP = """Current thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3/site-packages/torch/_tensor.py", line 10 in <module>
  File "<frozen importlib._bootstrap>", line 241 in _call_with_frames_removed
  File "/usr/lib/python3/site-packages/torch/__init__.py", line 1200 in <module>
  File "<frozen importlib._bootstrap>", line 241 in _call_with_frames_removed
  File "/kata/solution/toy.py", line 1 in <module>
  File "<frozen importlib._bootstrap_external>", line 940 in exec_module
  File "/kata/worker/kata_worker/main.py", line 49 in import_candidate
"""


class FakeWorker:
    """A worker whose hello comes after `probes` stack samples, each showing `dump`; every
    sample finds it 0.5 s of CPU further on."""

    candidate_path = "/kata/solution/toy.py"

    def __init__(self, dump: str, probes: int) -> None:
        self.dump, self.probes, self.cpu_s, self.dumping = dump, probes, 0.0, False

    def hello_ready(self, wait_s: float) -> bool:
        return self.probes <= 0

    def python_pid(self) -> int:
        return os.getpid()

    def stack_dump(self) -> str:
        self.probes -= 1
        self.cpu_s += 0.5
        return self.dump

    def hello(self):
        return True, "the module", None


@pytest.fixture
def fake_clocks(monkeypatch):
    monkeypatch.setattr(import_watch, "_dumps_on_sigusr1", lambda pid: True)
    workers: list[FakeWorker] = []
    monkeypatch.setattr(import_watch, "cpu_seconds", lambda pid: workers[0].cpu_s)
    return workers


def test_the_watch_cuts_the_candidates_own_code_but_never_a_slow_library_import(fake_clocks):
    fake_clocks.append(FakeWorker(TORCH_IMPORT_DUMP, probes=20))  # 10 s of CPU importing torch
    assert import_watch.wait_for_hello(fake_clocks[0], probe_s=0) == (True, "the module", None)
    fake_clocks[0] = FakeWorker(LOOP_DUMP, probes=20)
    with pytest.raises(import_watch.ImportStuck) as stuck:
        import_watch.wait_for_hello(fake_clocks[0], probe_s=0)
    assert stuck.value.frames == [(11, "<module>")] and fake_clocks[0].probes > 0
    assert not fake_clocks[0].dumping  # later output is the code's again


# ---------------------------------------------------------------------------- the CLI


def test_grade_and_check_of_a_file_that_cannot_load(monkeypatch):
    monkeypatch.setattr(grading, "run_suite", no_judge)
    runner = CliRunner()
    assert runner.invoke(app, ["start", "paged-kv", "-q"], catch_exceptions=False).exit_code == 0
    (Path(os.environ["KATA_WORKSPACE"]) / "paged_kv.py").write_text("class PagedKVCacheAllocator:\n    def (self):\n")
    graded = runner.invoke(app, ["grade", "--json", "--seed", "3"], catch_exceptions=False)
    assert graded.exit_code == 1
    data = json.loads(graded.output)
    kata = load_catalog().get("paged-kv")
    assert len(data["tests"]) == len(list_tests(kata.suite_path)) and data["score"] == 0
    assert "syntax error at line 2, column 9" in data["import_error"]
    assert [lv["passed"] for lv in data["levels"]] == [False, False, False]
    history = json.loads(runner.invoke(app, ["history", "--json"]).output)["attempts"]
    assert len(history) == 1 and history[0]["score"] == 0 and history[0]["seed"] == 3  # recorded
    checked = runner.invoke(app, ["check", "--json"], catch_exceptions=False)
    assert checked.exit_code == 1
    card = json.loads(checked.output)
    assert card["import_error"] == data["import_error"]
    assert len(card["tests"]) == len(list_tests(kata.examples_path))
    text = runner.invoke(app, ["grade"], catch_exceptions=False).output
    assert "your file could not be loaded" in text and "def (self):" in text


def test_a_graded_subset_of_levels_names_none_of_the_other_levels_api(tmp_path):
    """A mock at level 1 grades level 1 alone: its messages about missing names must not
    name what a later level declares (mha's KVCache and MultiHeadAttention)."""
    mha = load_catalog().get("mha")
    empty = tmp_path / "mha.py"
    empty.write_text("import torch\n")
    card = grading.grade(mha, empty, seed=1, levels={1})
    assert "attention" in card.import_error
    assert "KVCache" not in card.import_error and "MultiHeadAttention" not in card.import_error
    partial = check_source("def attention(q, k, v):\n    return q\n", slug="mha", stub=mha.stub_path,
                           unshown=grading._unshown_names(mha, {1}))
    assert partial.error is None and partial.missing == ()  # level 2's names are not "missing"
    every = check_source("def attention(q, k, v):\n    return q\n", slug="mha", stub=mha.stub_path)
    assert set(every.missing) == {"KVCache", "MultiHeadAttention"}  # a whole grading names them
