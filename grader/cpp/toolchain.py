"""What the C++ track needs on this machine: a C++17 compiler, pybind11's headers and
Python's own headers. Nothing here runs a compiler but `version` (once per process)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ENV_CXX = "KATA_CXX"  # the compiler to use (default: c++, g++ or clang++ on PATH)
_CANDIDATES = ("c++", "g++", "clang++")


@dataclass(frozen=True)
class Toolchain:
    compiler: str  # resolved path of the compiler's executable
    version: str  # its first --version line
    pybind11_include: str
    python_includes: tuple[str, ...]
    ext_suffix: str  # e.g. .cpython-311-x86_64-linux-gnu.so

    @property
    def name(self) -> str:
        """The compiler as a user names it: "g++ 12.2.0" (from its version line)."""
        first = self.version.split()
        if "clang" in self.version.lower():
            return "clang++ " + next((w for w in first if w[:1].isdigit()), "")
        return "g++ " + (first[-1] if first else "")


def compiler_path() -> str | None:
    chosen = os.environ.get(ENV_CXX, "").strip()
    if chosen:
        return shutil.which(chosen)
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def pybind11_include() -> str | None:
    try:
        import pybind11
    except ImportError:
        return None
    path = pybind11.get_include()
    return path if os.path.isfile(os.path.join(path, "pybind11", "pybind11.h")) else None


def python_includes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = [p for p in dict.fromkeys((paths.get("include"), paths.get("platinclude"))) if p]
    return tuple(found) if any(os.path.isfile(os.path.join(p, "Python.h")) for p in found) else ()


def ext_suffix() -> str:
    return str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


@functools.lru_cache(maxsize=4)
def _version(compiler: str) -> str:
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout.splitlines() or [""])[0].strip()


def missing() -> str | None:
    """Why C++ solutions cannot be built here, with what to do; None when they can."""
    found = find()
    return found if isinstance(found, str) else None


def find() -> Toolchain | str:
    """The toolchain, or why there is none (what is missing and how to get it)."""
    cxx = compiler_path()
    if cxx is None:
        chosen = os.environ.get(ENV_CXX, "").strip()
        if chosen:
            return f"{ENV_CXX}={chosen!r} names no program on PATH: set it to a C++ compiler (g++, clang++) or unset it"
        how = ("xcode-select --install" if sys.platform == "darwin"
               else "sudo apt install g++ (Debian, Ubuntu), sudo dnf install gcc-c++ (Fedora)")
        return f"no C++ compiler found (looked for {', '.join(_CANDIDATES)} on PATH): install one: {how}"
    version = _version(cxx)
    if not version:
        return f"the C++ compiler {cxx} does not run (`{cxx} --version` failed): check the installation"
    pb = pybind11_include()
    if pb is None:
        return ("pybind11 is not installed in this Python: pip install 'pybind11>=2.13,<3.2' "
                "(kata's own install brings it: pip install -e . in a checkout)")
    py = python_includes()
    if not py:
        return (f"Python's headers (Python.h) are missing for {sys.executable}: install them "
                f"(Debian, Ubuntu: sudo apt install python{sys.version_info[0]}.{sys.version_info[1]}-dev)")
    return Toolchain(compiler=os.path.realpath(cxx), version=version, pybind11_include=pb,
                     python_includes=py, ext_suffix=ext_suffix())


def is_cpp(path: Path | str) -> bool:
    return str(path).lower().endswith((".cpp", ".cc", ".cxx"))
