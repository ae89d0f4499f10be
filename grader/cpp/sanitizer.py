"""`kata grade --sanitize`: the worker runs a module built with AddressSanitizer and
UndefinedBehaviorSanitizer (or ThreadSanitizer, `--sanitize thread`), the runtime preloaded
into Python (an instrumented module cannot load otherwise), and a report ends the process at
the first error. The report, read from the worker's output, becomes the failing test's
message: what the sanitizer found and the top frames in the candidate's file, with lines.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess

KINDS = ("address", "thread")
_RUNTIME = {"address": "libasan.so", "thread": "libtsan.so", "c++": "libstdc++.so"}
_MAX_FRAMES = 4
_HEAD = re.compile(r"(?:==\d+==)?ERROR: (AddressSanitizer|LeakSanitizer): (.*)$|"
                   r"^WARNING: ThreadSanitizer: (.*?)(?: \(pid=\d+\))?$|"
                   r"^(?P<ubloc>\S+?):(?P<ubline>\d+):(?P<ubcol>\d+): runtime error: (?P<ubmsg>.*)$", re.M)
# ASan/UBSan: "#1 0x7f.. in func file:line:col"; TSan: "#0 func file:line (module+0x..)".
_FRAME = re.compile(r"^\s*#(\d+) (?:0x[0-9a-f]+ )?(?:in )?(.+?) (\S+?):(\d+)(?::\d+)?(?: \(\S+\))?\s*$", re.M)


@functools.lru_cache(maxsize=4)
def runtime(kind: str, compiler: str) -> str | None:
    """The sanitizer's shared runtime for `compiler` (what the worker preloads), or None."""
    try:
        out = subprocess.run([compiler, f"-print-file-name={_RUNTIME[kind]}"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = out.stdout.strip()
    return os.path.realpath(path) if path.startswith("/") and os.path.exists(path) else None


def worker_env(kind: str, compiler: str) -> dict[str, str] | str:
    """The worker's extra environment for `kind`, or why it cannot run."""
    lib = runtime(kind, compiler)
    # The C++ runtime is preloaded as well: Python does not link it, and the sanitizer's
    # interceptor of `throw` must find it at start (an exception thrown otherwise aborts).
    cxx = runtime("c++", compiler)
    if lib is None or cxx is None:
        return (f"{compiler} has no {_RUNTIME[kind]} (the {kind} sanitizer's runtime): install it "
                "(Debian, Ubuntu: the compiler's libasan / libtsan package), or grade without --sanitize")
    common = "symbolize=1:print_summary=1:halt_on_error=1:strip_path_prefix=/kata/src/"
    return {
        "LD_PRELOAD": f"{lib}:{cxx}",
        # Python's own allocations are not leaks the candidate made.
        "ASAN_OPTIONS": f"{common}:detect_leaks=0:abort_on_error=0:exitcode=86:allocator_may_return_null=1",
        "UBSAN_OPTIONS": f"{common}:print_stacktrace=1",
        "TSAN_OPTIONS": f"{common}:exitcode=66:report_signal_unsafe=0",
    }


def report(output: str, candidate: str) -> str | None:
    """The failing test's message for a sanitizer report in `output` (None when there is
    none): what was found and the top frames in the candidate's file (`candidate`, the name
    a user knows), each with its line."""
    head = _HEAD.search(output)
    if head is None:
        return None
    if head.group("ubmsg"):
        what = f"UndefinedBehaviorSanitizer: {head.group('ubmsg').strip()}"
    elif head.group(3):
        what = f"ThreadSanitizer: {head.group(3).strip()}"
    else:
        what = f"{head.group(1)}: {head.group(2).strip()}"
    body = output[head.start():]
    frames: list[str] = []
    for match in _FRAME.finditer(body):
        function, file, line = match.group(2), match.group(3), match.group(4)
        name = file.rsplit("/", 1)[-1]
        # The candidate's file only: the module is built from <module>.cpp, and the runtime's
        # own frames (tsan_interceptors_posix.cpp, ...) are other .cpp files.
        if name != candidate.rsplit("/", 1)[-1] or file.startswith(("../", "/usr/")):
            continue
        shown = f"  {candidate}:{line} in {_short(function)}"
        if shown not in frames:
            frames.append(shown)
        if len(frames) >= _MAX_FRAMES:
            break
    if not frames and head.group("ubloc"):
        frames.append(f"  {candidate}:{head.group('ubline')}")
    where = ("\nin your code (innermost first):\n" + "\n".join(frames)) if frames else \
        "\n(no frame of your file in the report: built with --sanitize, it has line numbers)"
    return f"{what[:300]}{where}"


def _short(function: str) -> str:
    """A C++ function as a reader names it: without its argument list's types."""
    depth, out = 0, []
    for ch in function:
        if ch == "(":
            depth += 1
            if depth == 1:
                out.append("(...)")
            continue
        if ch == ")":
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out)[:120]
