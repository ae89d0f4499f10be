"""The C++ track (`--lang cpp`, grader/cpp): a C++ file is compiled inside the sandbox,
cached, and driven by the same hidden suite; a compile error is a scorecard of its own;
--sanitize turns an out-of-bounds write into a failing test with its line; `kata start
--lang cpp` writes the C++ stub; a homework bundle carries a .cpp. The katas' own C++
references and corpora are in tests/test_cpp_<module>.py."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader.cli.app import app
from grader.cpp import build, sanitizer, toolchain
from grader.engine import sandbox
from grader.mock import cpp_level_blocks, cpp_stub_for_levels
from tests.kata_testing import REPO_ROOT, failed_tests, grade_file, kata

FIXTURE = REPO_ROOT / "tests" / "cpp_fixtures" / "paged_kv.cpp"
NO_TOOLCHAIN = toolchain.missing()
needs_toolchain = pytest.mark.skipif(NO_TOOLCHAIN is not None, reason=f"C++: {NO_TOOLCHAIN}")
needs_bwrap = pytest.mark.skipif(sandbox.bwrap_available() is not None, reason="no bubblewrap sandbox here")
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def solution(tmp_path: Path, text: str, name: str = "paged_kv.cpp") -> Path:
    path = tmp_path / "src" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- building


@needs_toolchain
def test_a_compile_error_fails_every_test_with_the_compilers_line(tmp_path):
    text = FIXTURE.read_text().replace("return (int)free_.size(); }", "return (int)free_.size() }")
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "free_.size() }" in s)
    card = grade_file("paged-kv", solution(tmp_path, text), levels=frozenset({1}))
    assert card.score == 0 and card.tests and all(not t.passed for t in card.tests)
    message = card.tests[0].message
    assert "does not compile" in message and f"the first at line {line}" in message, message
    assert re.search(rf"paged_kv\.cpp:{line}:\d+: error: expected ';'", message), message
    assert "nothing was run" in message


@needs_toolchain
def test_a_built_module_is_cached_by_source_and_flags(tmp_path):
    unique = FIXTURE.read_text() + f"\n// {tmp_path.name} {os.getpid()}\n"  # in no cache yet
    path = solution(tmp_path, unique)
    first = build.build(path, "paged_kv")
    again = build.build(path, "paged_kv")
    assert first.ok and not first.cached and again.ok and again.cached
    assert again.module_path == first.module_path and first.module_path.is_file()
    path.write_text(unique + "// changed\n")
    changed = build.build(path, "paged_kv")
    assert changed.ok and not changed.cached and changed.module_path != first.module_path
    assert build.flags_for("address") != build.flags_for(None)  # a sanitized build is its own entry


@needs_toolchain
@needs_bwrap
def test_the_compiler_sees_only_what_the_sandbox_binds(tmp_path):
    home_file = tmp_path / "secret.h"
    home_file.write_text("int secret = 1;\n")
    for include in ("/etc/passwd", str(home_file)):
        path = solution(tmp_path, f'#include "{include}"\n' + FIXTURE.read_text())
        result = build.build(path, "paged_kv")
        assert not result.ok and result.contained
        assert "No such file or directory" in result.error and "line 1" in result.error, result.error


@needs_toolchain
def test_the_compilers_warnings_are_a_note_on_the_card(tmp_path):
    text = FIXTURE.read_text().replace("int num_free_blocks() const {", "int num_free_blocks() const { int unused_here = 0;")
    card = grade_file("paged-kv", solution(tmp_path, text), levels=frozenset({1}))
    assert card.score == 100
    note = next(n for n in card.notes if n.startswith("the C++ compiler"))
    assert "unused_here" in note and "paged_kv.cpp:" in note


@needs_toolchain
def test_a_level_one_cpp_allocator_passes_level_one(tmp_path):
    card = grade_file("paged-kv", FIXTURE, levels=frozenset({1}))
    assert card.score == 100, failed_tests(card)


def test_diagnostics_point_an_error_in_a_header_at_the_candidates_line():
    output = ("In file included from paged_kv.cpp:40:\n"
              "pybind11/cast.h: In instantiation of 'void f()':\n"
              "paged_kv.cpp:55:12:   required from here\n"
              "pybind11/cast.h:1200:5: error: no matching function for call to 'g()'\n"
              " 1200 |     g();\n      |     ^\n")
    found = build.parse_diagnostics(output, "mine.cpp")
    assert len(found) == 1 and not found[0].in_candidate and found[0].at == (55, 12)
    text = build.compile_error_text(found, output, "mine.cpp", "g++ 12")
    assert "the first at line 55" in text and "(from your line 55)" in text


def test_no_compiler_says_how_to_get_one(monkeypatch):
    monkeypatch.setenv(toolchain.ENV_CXX, "no-such-compiler-here")
    why = toolchain.missing()
    assert why is not None and "KATA_CXX" in why
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv(toolchain.ENV_CXX)
    why = toolchain.missing()
    assert why is not None and "no C++ compiler found" in why and "install" in why


# --------------------------------------------------------------------------- sanitizers


@needs_toolchain
@pytest.mark.skipif(sanitizer.runtime("address", toolchain.compiler_path() or "c++") is None,
                    reason="no AddressSanitizer runtime")
def test_sanitize_reports_an_out_of_bounds_write_with_its_line(tmp_path):
    marker = "    r.tokens += n;\n"
    text = FIXTURE.read_text().replace(marker, marker + "    { int* p = new int[2]; p[2] = 7; delete[] p; }\n")
    line = text.splitlines().index("    { int* p = new int[2]; p[2] = 7; delete[] p; }") + 1
    path = solution(tmp_path, text)
    from grader.grading import grade

    card = grade(kata("paged-kv"), path, seed=1, levels={1}, sanitize="address")
    failed = failed_tests(card)
    assert failed, "the sanitized build passed"
    message = next(iter(failed.values()))
    assert message.startswith(("AddressSanitizer", "UndefinedBehaviorSanitizer")), message
    assert f"paged_kv.cpp:{line} in PagedKVCacheAllocator::allocate" in message, message
    assert not any(t.category == "efficiency" for t in card.tests)  # not timed under sanitizers
    assert any(n.startswith("built with --sanitize address") for n in card.notes)


def test_a_sanitizer_report_becomes_what_and_where():
    report = """==12==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020 at pc 0x7f bp 0x7f
WRITE of size 4 at 0x6020 thread T0
    #0 0x7f01 in Pool::release(int) /kata/src/paged_kv.cpp:31
    #1 0x7f02 in PagedKVCacheAllocator::free(std::string const&) paged_kv.cpp:77
    #2 0x7f03 in pybind11::cpp_function::dispatcher(_object*) /kata/pybind11/pybind11/pybind11.h:990
SUMMARY: AddressSanitizer: heap-use-after-free paged_kv.cpp:31 in Pool::release(int)
"""
    text = sanitizer.report("noise before\n" + report, "paged_kv.cpp")
    assert text.startswith("AddressSanitizer: heap-use-after-free")
    assert "paged_kv.cpp:31 in Pool::release(...)" in text and "paged_kv.cpp:77 in PagedKVCacheAllocator::free(...)" in text
    assert "pybind11" not in text
    race = ("WARNING: ThreadSanitizer: data race (pid=5)\n  Write of size 8 at 0x1 by thread T2:\n"
            "    #0 operator new(unsigned long) ../../../../src/libsanitizer/tsan/tsan_new_delete.cpp:64 (libtsan.so.2+0x1)\n"
            "    #1 Scheduler::add_request(Request const&) scheduler.cpp:88 (x.so+0x1)\n"
            "    #2 pthread_create ../../../../src/libsanitizer/tsan/tsan_interceptors_posix.cpp:1001 (libtsan.so.2+0x2)\n")
    assert sanitizer.report(race, "scheduler.cpp") == \
        "ThreadSanitizer: data race\nin your code (innermost first):\n  scheduler.cpp:88 in Scheduler::add_request(...)"
    assert sanitizer.report("all fine\n", "x.cpp") is None


def test_sanitize_is_for_cpp_files_only():
    result = invoke("grade", "paged-kv", "--file", str(REPO_ROOT / "reference" / "paged_kv.py"), "--sanitize")
    assert result.exit_code == 2 and "--sanitize is for C++ solutions" in result.output


# --------------------------------------------------------------------------- the CLI


cpp_katas = [k for k in ("paged-kv", "scheduler", "tensor-lib") if kata(k).cpp_stub_path.is_file()]


@pytest.mark.skipif(not cpp_katas, reason="no kata ships a C++ stub yet")
def test_start_lang_cpp_writes_the_cpp_stub_and_backs_up_with_force():
    slug = cpp_katas[0]
    k = kata(slug)
    result = invoke("start", slug, "--lang", "cpp", "-q")
    assert result.exit_code == 0, result.output
    path = Path(os.environ["KATA_WORKSPACE"]) / f"{k.module}.cpp"
    assert path.read_bytes() == k.cpp_stub_path.read_bytes()
    assert "C++" in result.output
    path.write_text(path.read_text() + "\n// mine\n")
    assert invoke("start", slug, "--lang", "cpp", "-q", "--force").exit_code == 0
    backups = list((path.parent / ".backups").glob(f"{k.module}.*.cpp"))
    assert len(backups) == 1 and backups[0].read_text().endswith("// mine\n")


def test_start_lang_cpp_of_a_kata_without_cpp_is_a_usage_error():
    result = invoke("start", "mha", "--lang", "cpp", "-q")
    assert result.exit_code == 2 and "has no C++ version" in result.output
    result = invoke("start", "paged-kv", "--lang", "rust", "-q")
    assert result.exit_code == 2 and "not a language" in result.output


@pytest.mark.skipif(not cpp_katas, reason="no kata ships a C++ stub yet")
def test_start_lang_cpp_without_a_compiler_says_how_to_get_one(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    result = invoke("start", cpp_katas[0], "--lang", "cpp", "-q")
    assert result.exit_code == 0 and "no C++ compiler found" in result.output and "install" in result.output


def test_a_cpp_mock_starts_without_the_later_levels():
    source = ("#include <x>\n// [level 1]\nint a();\n// [/level 1]\n// [level 2]\nint b();\n// [/level 2]\n"
              "PYBIND11_MODULE(m, m) {\n  // [level 2]\n  m.def(\"b\", &b);\n  // [/level 2]\n}\n")
    shown = cpp_stub_for_levels(source, {1})
    assert "int a();" in shown and "int b()" not in shown and '"b"' not in shown and "[level" not in shown
    assert cpp_level_blocks(source, 2) == ["int b();", '  m.def("b", &b);']
    for slug in cpp_katas:
        stub = kata(slug).cpp_stub_path.read_text()
        first = cpp_stub_for_levels(stub, {1})
        later = [b for lv in (2, 3) for b in cpp_level_blocks(stub, lv)]
        assert later, f"{slug}'s C++ stub marks no later level"
        assert all(block.strip() not in first for block in later)


def test_a_homework_manifest_takes_a_cpp_file():
    from grader.homework.manifest import ManifestError, _kata

    base = {"slug": "paged-kv", "module": "paged_kv", "sha256": "0" * 64}
    with pytest.raises(ManifestError, match=r"\.file: must be solutions/paged_kv\.py \(or \.cpp"):
        _kata({**base, "file": "solutions/paged_kv.rs"}, "katas[0]", 1)
    try:
        _kata({**base, "file": "solutions/paged_kv.cpp"}, "katas[0]", 1)
    except ManifestError as exc:  # (a field this minimal entry leaves out, never the file)
        assert ".file" not in str(exc), exc


@needs_toolchain
@pytest.mark.skipif(not kata("paged-kv").cpp_reference_path.is_file(), reason="no C++ reference yet")
def test_bench_times_a_cpp_solution_beside_both_references(tmp_path):
    mine = tmp_path / "paged_kv.cpp"
    mine.write_text(kata("paged-kv").cpp_reference_path.read_text())
    result = invoke("bench", "paged-kv", "--file", str(mine), "--repeats", "1", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["impl"]: r for r in json.loads(result.output)["rows"]}
    assert set(rows) == {"yours", "reference", "reference c++"}
    assert all(isinstance(r["median_ms"], float) for r in rows.values()), rows


@pytest.mark.parametrize("slug", cpp_katas)
def test_a_cpp_mock_file_gives_nothing_away(slug):
    """The file a C++ mock starts from names no later level, none of the API a later level
    introduces and none of the kata's giveaways (as the mock's screen: test_katas.py)."""
    import tomllib

    from grader.mock import mock_stub
    from grader.statement import load_statement
    from tests.test_katas import _declared_api, _plain

    k = kata(slug)
    statement = load_statement(k)
    text = mock_stub(k, "cpp")
    introduced: dict[int, set[str]] = {}
    seen: set[str] = set()
    for level in statement.levels:
        introduced[level.number] = _declared_api(level.body) - seen
        seen |= _declared_api(level.body, with_every_parameter=True)
    generic = {"dim"}  # the word level 1's own comments use (transpose's dims), not level 2's argument
    for level in statement.levels[1:]:
        assert level.name.lower() not in text.lower(), level.name
        leaked = sorted(n for n in introduced[level.number] - generic if re.search(rf"(?<![.\w]){n}\b", text))
        assert not leaked, f"a C++ mock of {slug} starts with {leaked}, which level {level.number} introduces"
    data = tomllib.loads((REPO_ROOT / "tests" / "interview" / f"{k.module}.toml").read_text())
    every = [g for strings in data["giveaways"].values() for g in strings]
    assert not [g for g in every if _plain(g) in _plain(text)]


@pytest.mark.parametrize("slug", cpp_katas)
def test_a_review_flags_a_cpp_copy_of_the_cpp_reference(slug):
    """similarity.measure_cpp: the C++ reference with its names changed and with padding is a
    copy; a C++ solution written apart from it (the engine's fixture, for paged-kv) is not."""
    from grader.homework.similarity import COPY_THRESHOLD, RESEMBLES_THRESHOLD, measure_cpp

    reference = kata(slug).cpp_reference_path.read_text()
    own, binding = reference.split("// ---- bindings:", 1)
    names = sorted(set(re.findall(r"\b([a-z]\w*_)\b", own)))  # members, e.g. free_blocks_
    renamed = own
    for i, name in enumerate(names):
        renamed = re.sub(rf"\b{name}\b", f"m{i}", renamed)
    assert measure_cpp(renamed + "// ---- bindings:" + binding, reference).value >= COPY_THRESHOLD
    padded = own + "\n".join(f"static int pad{i}() {{ return {i}; }}" for i in range(300)) + "\n// ---- bindings:" + binding
    assert measure_cpp(padded, reference).copy
    if slug == "paged-kv":
        assert measure_cpp(FIXTURE.read_text(), reference).value < RESEMBLES_THRESHOLD
