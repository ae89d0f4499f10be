"""Compile a C++ solution into the extension module the worker imports.

The compiler runs inside a bubblewrap sandbox of its own (where the worker's would run):
read-only system folders (/usr and what the dynamic loader needs), pybind11's and Python's
headers at neutral paths, the candidate's file as /kata/src/<module>.cpp, a writable
/kata/out and a private /tmp; no network, no home folder, no checkout, no /etc but the
loader's cache. An `#include "/etc/passwd"` (or of anything of the user's) finds nothing.
Unlike the worker, the compiler may start processes (g++ runs cc1plus, as and ld).

Built modules are cached under $KATA_HOME/cpp-cache (or $KATA_CPP_CACHE) by the hash of the
source, the flags and the toolchain: a second grade of an unchanged file starts at once. A
file that does not compile is cached too (its diagnostics), and its card arrives in the
time the compiler takes to find the first errors (about 2.5 s for a pybind11 file here).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.cpp import toolchain

ENV_CACHE = "KATA_CPP_CACHE"
COMPILE_TIMEOUT_S = 180.0
_MAX_CACHE_ENTRIES = 64
_MAX_ERRORS_SHOWN = 3
_MAX_WARNINGS_SHOWN = 5
_SRC_DIR = "/kata/src"

BASE_FLAGS = ("-std=c++17", "-shared", "-fPIC", "-Wall", "-Wextra", "-fvisibility=hidden",
              "-fdiagnostics-color=never")
OPTIMIZE_FLAGS = ("-O2",)
# --sanitize: a build the sanitizers' runtimes watch (the worker preloads the runtime, see
# sanitizer.py). -O1 and frame pointers keep the report's frames and lines right.
SANITIZE_FLAGS = {
    "address": ("-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                "-fno-sanitize-recover=undefined"),
    "thread": ("-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=thread"),
}


@dataclass
class BuildResult:
    ok: bool
    module_path: Path | None = None  # the extension module (in the cache) when ok
    error: str | None = None  # the scorecard's message when not ok
    warnings: list[str] = field(default_factory=list)  # "file:line:col: warning: ..." of the candidate's file
    seconds: float = 0.0
    cached: bool = False
    contained: bool = True
    compiler: str = ""  # "g++ 12.2.0"

    def note(self) -> str | None:
        """The scorecard's note about the build: its warnings, or None."""
        if not self.warnings:
            return None
        shown = self.warnings[:_MAX_WARNINGS_SHOWN]
        more = len(self.warnings) - len(shown)
        text = (f"{COMPILER_NOTE_START} ({self.compiler}) warned {len(self.warnings)} time"
                f"{'s' if len(self.warnings) != 1 else ''}:\n" + "\n".join(shown))
        return text + (f"\n... and {more} more" if more > 0 else "")


COMPILER_NOTE_START = "the C++ compiler"


def flags_for(sanitize: str | None) -> tuple[str, ...]:
    extra = SANITIZE_FLAGS[sanitize] if sanitize else OPTIMIZE_FLAGS
    return BASE_FLAGS + extra


def cache_root() -> Path:
    chosen = os.environ.get(ENV_CACHE, "").strip()
    if chosen:
        return Path(chosen)
    from grader.store import kata_home

    return kata_home() / "cpp-cache"


def build(source_path: Path, module: str, *, sanitize: str | None = None,
          shown_as: str | None = None) -> BuildResult:
    """Compile `source_path` into extension module `module` (cached). Never raises for
    anything in the source: a file that does not compile is a result with `error`."""
    t0 = time.monotonic()
    found = toolchain.find()
    if isinstance(found, str):
        return BuildResult(ok=False, error=f"C++ solutions cannot be compiled here: {found}",
                           seconds=time.monotonic() - t0)
    shown = shown_as or source_path.name
    source = source_path.read_bytes()
    flags = flags_for(sanitize)
    key = _cache_key(source, module, flags, found)
    folder = cache_root() / key
    module_file = folder / f"{module}{found.ext_suffix}"
    result_file = folder / "result.json"
    if result_file.is_file():
        try:
            saved = json.loads(result_file.read_text(encoding="utf-8"))
            if not saved["ok"] or module_file.is_file():
                _touch(folder)
                return _from_saved(saved, module_file, shown, found, t0)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged entry: build again
    with tempfile.TemporaryDirectory(prefix="kata-cpp-") as tmp:
        work = Path(tmp)
        src_dir, out_dir = work / "src", work / "out"
        src_dir.mkdir()
        out_dir.mkdir()
        (src_dir / f"{module}.cpp").write_bytes(source)
        code, output, contained, timed_out = _run_compiler(found, flags, module, src_dir, out_dir)
        built = out_dir / module_file.name
        ok = code == 0 and built.is_file() and not timed_out
        saved = {"ok": ok, "output": output[-200_000:], "timed_out": timed_out, "contained": contained}
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=_ensure(cache_root())))
        try:
            if ok:
                shutil.copyfile(built, staging / module_file.name)
            (staging / "result.json").write_text(json.dumps(saved), encoding="utf-8")
            try:
                os.rename(staging, folder)  # atomic: a parallel grading of the same file may win
            except OSError:
                shutil.rmtree(staging, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    _prune(cache_root())
    result = _from_saved(saved, module_file, shown, found, t0)
    result.cached = False
    return result


def _from_saved(saved: dict, module_file: Path, shown: str, found: toolchain.Toolchain,
                t0: float) -> BuildResult:
    diagnostics = parse_diagnostics(saved["output"], shown)
    warnings = [d.text().splitlines()[0] for d in diagnostics if d.kind == "warning" and d.in_candidate]
    result = BuildResult(ok=bool(saved["ok"]), warnings=warnings, cached=True, compiler=found.name,
                         contained=bool(saved.get("contained", True)), seconds=time.monotonic() - t0)
    if result.ok:
        result.module_path = module_file
    else:
        result.error = compile_error_text(diagnostics, saved["output"], shown, found.name,
                                          timed_out=bool(saved.get("timed_out")))
    return result


def _cache_key(source: bytes, module: str, flags: tuple[str, ...], found: toolchain.Toolchain) -> str:
    digest = hashlib.sha256()
    for part in (source, module.encode(), "\0".join(flags).encode(), found.compiler.encode(),
                 found.version.encode(), found.ext_suffix.encode(), _pybind11_version().encode(),
                 _BUILD_SCHEME.encode()):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()[:40]


_BUILD_SCHEME = "1"  # bump when how a module is built changes in a way the flags do not show


def _pybind11_version() -> str:
    try:
        import pybind11

        return str(pybind11.__version__)
    except ImportError:  # pragma: no cover - toolchain.find() said it is there
        return ""


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _touch(folder: Path) -> None:
    try:
        os.utime(folder)
    except OSError:
        pass


def _prune(root: Path) -> None:
    """Keep the most recently used entries (a module is a few MB)."""
    try:
        entries = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                         key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for stale in entries[_MAX_CACHE_ENTRIES:]:
        shutil.rmtree(stale, ignore_errors=True)


# --------------------------------------------------------------------------- the compiler


def _run_compiler(found: toolchain.Toolchain, flags: tuple[str, ...], module: str, src_dir: Path,
                  out_dir: Path) -> tuple[int, str, bool, bool]:
    """(exit code, what it printed, whether it ran in the sandbox, whether it timed out)."""
    name = f"{module}{found.ext_suffix}"
    pch = _pch(found, flags)
    forced = ["-include", f"{_PCH_DIR}/{_PCH_HEADER}", "-Winvalid-pch"] if pch is not None else []
    binds = [(src_dir, _SRC_DIR, False), (out_dir, "/kata/out", True)]
    if pch is not None:
        binds.append((pch, _PCH_DIR, False))
    return _compile([*flags, *forced, f"{_SRC_DIR}/{module}.cpp", "-o", f"/kata/out/{name}"], found, binds)


_PCH_DIR = "/kata/pch"
_PCH_HEADER = "kata_pch.h"
# What every C++ solution includes: Python's and pybind11's headers (most of a compile error's
# time is spent parsing these) and the standard library's common ones. Precompiled once per
# toolchain and flags; the candidate's file is compiled with -include of it (its own #include
# lines of the same headers then do nothing).
_PCH_TEXT = """#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/functional.h>
#include <pybind11/operators.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>
"""


def _pch(found: toolchain.Toolchain, flags: tuple[str, ...]) -> Path | None:
    """The folder of the precompiled header for these flags (built once, cached), or None
    where there is none (clang, or it did not build: each compile then parses the headers)."""
    if "clang" in found.version.lower() or os.environ.get("KATA_CPP_PCH", "1") == "0":
        return None
    digest = hashlib.sha256("\0".join([*flags, found.compiler, found.version, found.ext_suffix,
                                       _pybind11_version(), _PCH_TEXT]).encode()).hexdigest()[:32]
    folder = cache_root() / f"pch-{digest}"
    if (folder / f"{_PCH_HEADER}.gch").is_file():
        return folder
    if (folder / "failed").is_file():
        return None
    staging = Path(tempfile.mkdtemp(prefix=".pch-", dir=_ensure(cache_root())))
    try:
        (staging / _PCH_HEADER).write_text(_PCH_TEXT, encoding="utf-8")
        code, _output, _contained, _timed_out = _compile(
            [*flags, "-x", "c++-header", f"{_PCH_DIR}/{_PCH_HEADER}", "-o", f"{_PCH_DIR}/{_PCH_HEADER}.gch"],
            found, [(staging, _PCH_DIR, True)])
        if code != 0 or not (staging / f"{_PCH_HEADER}.gch").is_file():
            (staging / "failed").write_text("the precompiled header did not build\n", encoding="utf-8")
        try:
            os.rename(staging, folder)
        except OSError:
            pass  # a parallel build made it first
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder if (folder / f"{_PCH_HEADER}.gch").is_file() else None


def _compile(args: list[str], found: toolchain.Toolchain,
             binds: list[tuple[Path, str, bool]]) -> tuple[int, str, bool, bool]:
    """Run the compiler with `args` (paths as the sandbox shows them: each (host folder, path
    inside, writable) of `binds`), in the sandbox where there is one. (exit code, output,
    contained, timed out)."""
    from grader.engine import sandbox

    wanted = sandbox.mode()
    why_not = sandbox.bwrap_available() if wanted != "none" else "KATA_SANDBOX=none"
    if wanted == "bwrap" and why_not:
        return 1, f"KATA_SANDBOX=bwrap, but {why_not}", False, False
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "HOME": "/tmp", "TMPDIR": "/tmp"}
    includes = ["-I/kata/pybind11"] + [f"-I/kata/python/{i}" for i in range(len(found.python_includes))]
    mounts = [(Path(found.pybind11_include), "/kata/pybind11", False)]
    mounts += [(Path(inc), f"/kata/python/{i}", False) for i, inc in enumerate(found.python_includes)]
    mounts += binds
    if why_not is None:
        opts = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--uid", "65534", "--gid", "65534", "--hostname", "kata-compiler"]
        opts += sandbox.system_binds()
        opts += ["--proc", "/proc", "--dev", "/dev", "--size", str(512 * 1024**2), "--tmpfs", "/tmp"]
        for host, inside, rw in mounts:
            opts += ["--bind" if rw else "--ro-bind", str(host), inside]
        opts += ["--chdir", "/tmp", "--clearenv"]
        for k, v in env.items():
            opts += ["--setenv", k, v]
        command = [shutil.which("bwrap") or "bwrap", *opts, "--", found.compiler, *includes, *args]
        cwd, contained = "/", True
    else:  # the same command with the real paths
        def real(arg: str) -> str:
            for host, inside, _ in sorted(mounts, key=lambda m: -len(m[1])):
                if arg == inside or arg.startswith(inside + "/") or arg.startswith("-I" + inside):
                    return arg.replace(inside, str(host), 1)
            return arg

        command = [found.compiler, *map(real, includes), *map(real, args)]
        scratch = next((h for h, _, rw in binds if rw), None)
        env.update({"HOME": str(scratch or "/tmp"), "TMPDIR": str(scratch or "/tmp"),
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        cwd, contained = str(scratch or "/"), False
    try:
        done = subprocess.run(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=COMPILE_TIMEOUT_S, preexec_fn=_compiler_limits)
    except subprocess.TimeoutExpired as exc:
        text = (exc.output or b"").decode(errors="replace")
        return -9, text, contained, True
    except OSError as exc:
        return 1, f"the compiler could not be started: {exc}", contained, False
    text = done.stdout.decode(errors="replace")
    for host, inside, _ in mounts:  # the paths as the candidate knows them
        prefix = inside if contained else str(host)
        text = text.replace(prefix + "/", "" if inside in (_SRC_DIR, "/kata/out", "/kata/pybind11") else prefix + "/")
    return done.returncode, text, contained, False


def warm(sanitize: str | None = None) -> bool:
    """Build the precompiled header for these flags now (`kata start --lang cpp` runs this in
    the background, so that the first grade's compile error comes as fast as the next)."""
    found = toolchain.find()
    return not isinstance(found, str) and _pch(found, flags_for(sanitize)) is not None


def warm_in_background() -> None:
    """Start `warm()` in a detached process: it outlives the command that started it, prints
    nothing, and a failure costs nothing (the grade builds the header itself)."""
    import sys

    try:
        subprocess.Popen([sys.executable, "-c", "from grader.cpp.build import warm; warm()"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    except OSError:
        pass


def _compiler_limits() -> None:
    import resource

    os.setsid()
    for kind, value in ((resource.RLIMIT_CPU, int(COMPILE_TIMEOUT_S)),
                        (resource.RLIMIT_FSIZE, 512 * 1024**2), (resource.RLIMIT_CORE, 0)):
        soft, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))


# --------------------------------------------------------------------------- diagnostics

_DIAG = re.compile(r"^(?P<file>[^:\n]+?):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<kind>fatal error|error|warning|note): "
                   r"(?P<msg>.*)$")
_REQUIRED = re.compile(r"^(?P<file>[^:\n]+?):(?P<line>\d+):(?:(?P<col>\d+):)?\s+required from here")


@dataclass
class Diagnostic:
    file: str
    line: int
    col: int
    kind: str  # error | warning | note
    msg: str
    in_candidate: bool
    context: list[str] = field(default_factory=list)  # the source line and caret gcc printed
    at: tuple[int, int] | None = None  # for an error in a header: where the candidate's file led there

    def text(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}" if self.col else f"{self.file}:{self.line}"
        head = f"{where}: {self.kind}: {self.msg}"
        if self.at is not None and not self.in_candidate:
            head += f"\n  (from your line {self.at[0]})"
        return "\n".join([head, *self.context])


def parse_diagnostics(output: str, shown: str) -> list[Diagnostic]:
    """gcc's and clang's `file:line:col: kind: message` lines, with the code lines under each
    (the source line and its caret)."""
    found: list[Diagnostic] = []
    last_required: tuple[int, int] | None = None
    current: Diagnostic | None = None
    module_cpp = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.(cpp|cc|cxx)$")
    for raw in output.splitlines():
        line = raw.rstrip()
        req = _REQUIRED.match(line)
        if req and module_cpp.match(req.group("file")):
            last_required = (int(req.group("line")), int(req.group("col") or 0))
            current = None
            continue
        m = _DIAG.match(line)
        if m:
            kind = "error" if m.group("kind") == "fatal error" else m.group("kind")
            file = m.group("file")
            mine = bool(module_cpp.match(file))
            current = Diagnostic(file=shown if mine else file, line=int(m.group("line")),
                                 col=int(m.group("col") or 0), kind=kind, msg=m.group("msg")[:300],
                                 in_candidate=mine, at=last_required)
            if kind != "note":
                found.append(current)
                last_required = None
            continue
        if current is not None and current.kind != "note" and re.match(r"^\s*\d*\s*\|", line) and len(current.context) < 2:
            current.context.append(line)
        elif not line.startswith(" "):
            current = None
    for diagnostic in found:
        diagnostic.context = _window(diagnostic.context, diagnostic.col)
    return found


def _window(context: list[str], col: int, width: int = 72) -> list[str]:
    """gcc's code line and caret line, cut to `width` columns around the caret (a long line
    would otherwise wrap at 80 columns and the caret point nowhere)."""
    if len(context) != 2 or "|" not in context[0] or "|" not in context[1]:
        return [line[:width] for line in context]
    (gutter, code), (_, caret) = (line.split("|", 1) for line in context)
    start = max(0, col - width // 2) if len(gutter) + 1 + len(code) > width and col else 0
    keep = width - len(gutter) - 1
    cut = "…" if start else ""
    return [f"{gutter}|{cut}{code[start:start + keep]}", f"{' ' * len(gutter)}|{' ' * len(cut)}{caret[start:start + keep]}".rstrip()]


def compile_error_text(diagnostics: list[Diagnostic], output: str, shown: str, compiler: str, *,
                       timed_out: bool = False) -> str:
    """What, where (file, line, the compiler's message with its code line) and what next."""
    if timed_out:
        return (f"{shown} did not compile within {COMPILE_TIMEOUT_S:.0f} s ({compiler}): a template "
                "or constexpr computation that never ends?\nnothing was run: simplify it and grade again")
    errors = [d for d in diagnostics if d.kind == "error"]
    if not errors:
        tail = "\n".join(line[:160] for line in output.strip().splitlines()[-8:])
        return (f"{shown} did not build ({compiler}):\n{tail or '(the compiler printed nothing)'}\n"
                "nothing was run: fix it and grade again")
    first_mine = next((d for d in errors if d.in_candidate), None)
    where = (f"line {first_mine.line}" if first_mine is not None
             else f"line {errors[0].at[0]}" if errors[0].at else "a header it includes")
    count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
    shown_errors = [d.text() for d in errors[:_MAX_ERRORS_SHOWN]]
    more = len(errors) - len(shown_errors)
    text = (f"your file does not compile ({compiler}, {count}; the first at {where}):\n"
            + "\n".join(shown_errors))
    if more > 0:
        text += f"\n... and {more} more"
    return text + "\nnothing was run: fix the first error and grade again"
