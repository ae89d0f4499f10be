"""The wheel carries every kata and works outside the checkout; the lock pins what the bounds allow.

.ci/run does the same from a fresh venv with `pip install` of the wheel; these tests keep it
quick to check on a contributor's machine (hatchling comes with the `dev` extra).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.kata_testing import REPO_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
KATA_MODULES = sorted(p.parent.name for p in (REPO_ROOT / "katas").glob("*/kata.toml"))


def _requirements() -> list[Requirement]:
    project = PYPROJECT["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    return reqs


def _pins(path: Path) -> dict[str, Version]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate():
                (spec,) = req.specifier
                pins[req.name.lower().replace("_", "-")] = Version(spec.version)
    return pins


# ---------------------------------------------------------------------------- bounds and locks


def test_every_dependency_has_a_lower_and_an_upper_bound():
    for req in _requirements() + [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]:
        ops = {spec.operator for spec in req.specifier}
        assert ">=" in ops and "<" in ops, f"{req} needs a tested lower (>=) and upper (<) bound"


def test_the_lock_pins_every_dependency_within_its_bounds():
    pins = _pins(REPO_ROOT / "requirements" / "lock.txt")
    pins.update(_pins(REPO_ROOT / "requirements" / "torch.txt"))
    for req in _requirements():
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        assert req.name in pins, f"requirements/lock.txt does not pin {req.name}: regenerate it (README)"
        assert req.specifier.contains(pins[req.name], prereleases=True), \
            f"the lock pins {req.name}=={pins[req.name]}, outside {req}: regenerate it (README)"


def test_the_lowest_set_pins_every_direct_dependency_at_its_lower_bound():
    pins = _pins(REPO_ROOT / "requirements" / "lowest.txt")
    for req in _requirements():
        if req.name in ("torch", "triton"):  # installed beside it by hand (README, "Dependencies")
            continue
        lower = next(Version(s.version) for s in req.specifier if s.operator == ">=")
        assert pins.get(req.name) == lower, f"requirements/lowest.txt: {req.name} should be {lower}"


# ---------------------------------------------------------------------------- the wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling", reason="the dev extra brings hatchling, which builds the wheel")
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                             "-q", "-w", str(out), str(REPO_ROOT)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = out.glob("kata-*.whl")
    return path


def test_the_wheel_carries_every_kata_walkthrough_reference_and_suite(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in KATA_MODULES:
        for part in ("README.md", "kata.toml", "stub.py", "examples.py"):
            assert f"grader/katas/{module}/{part}" in names, f"{module}/{part} is not in the wheel"
        assert f"grader/notebooks/{module}.py" in names
        assert f"reference/{module}.py" in names
        assert f"grader/suites/{module}.py" in names or f"grader/suites/{module}/__init__.py" in names
        if (REPO_ROOT / "katas" / module / "stub.cpp").is_file():  # the C++ track (--lang cpp)
            assert f"grader/katas/{module}/stub.cpp" in names and f"reference/cpp/{module}.cpp" in names
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"grader", "reference"}, tops
    junk = [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".ipynb"))]
    assert junk == [] and not any(n.startswith(("tests/", "solutions/", "katas/")) for n in names)


def test_the_installed_wheel_works_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                    "--target", str(site), str(wheel)], check=True, capture_output=True, timeout=300)
    work = tmp_path / "anywhere"
    work.mkdir()
    # Only the wheel's copy of kata is importable: the checkout is on no path, -P keeps the
    # working directory off sys.path as the `kata` script does.
    env = {k: v for k, v in os.environ.items() if k not in ("KATA_WORKSPACE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)

    def kata(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-P", "-c", "from grader.cli.app import main; main()", *args],
                              cwd=work, env=env, capture_output=True, text=True, timeout=300)

    where = subprocess.run([sys.executable, "-P", "-c", "import grader.catalog as c; print(c.KATAS_DIR, c.checkout_root())"],
                           env=env, cwd=work, capture_output=True, text=True, check=True).stdout.split()
    assert where == [str(site / "grader" / "katas"), "None"]
    listed = json.loads(kata("list", "--json").stdout)["katas"]
    assert sorted(k["slug"].replace("-", "_") for k in listed) == KATA_MODULES
    started = kata("start", "paged-kv", "-q")
    assert started.returncode == 2 and "kata init" in started.stderr
    assert kata("init", "practice", "--notebooks").returncode == 0
    work = work / "practice"
    started = kata("start", "paged-kv", "-q")
    assert started.returncode == 0, started.stderr
    assert (work / "solutions" / "paged_kv.py").read_bytes() == \
        (site / "grader" / "katas" / "paged_kv" / "stub.py").read_bytes()
    mine = work / "mine.py"
    shutil.copyfile(REPO_ROOT / "reference" / "paged_kv.py", mine)
    checked = kata("check", "paged-kv", "--file", str(mine), "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["passed"], checked.stderr
    opened = kata("notebook", "paged-kv")
    assert opened.returncode == 0, opened.stderr
    assert (work / "notebooks" / "paged_kv.ipynb").is_file()
