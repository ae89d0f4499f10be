"""kata bench: time your solution against the reference, the kernels and torch built-ins."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from grader import textsafe
from grader.cli import output
from grader.cli.common import JsonOpt, LangOpt, SlugArg, catalog, check_lang
from grader.errors import KataError
from grader.workspace import solution_path

DeviceOpt = Annotated[str, typer.Option("--device", help="cpu or cuda.")]
FileOpt = Annotated[Optional[Path], typer.Option("--file", "-f", help="Time this file instead of your solution.")]
RepeatsOpt = Annotated[int, typer.Option("--repeats", min=1, max=100, help="Timed repetitions (median reported).")]


def bench(slug: SlugArg, file: FileOpt = None, device: DeviceOpt = "cpu", repeats: RepeatsOpt = 5,
          lang: LangOpt = "py", as_json: JsonOpt = False) -> None:
    """Time a fixed workload: yours, the reference, the GPU kernel and the PyTorch built-in.

    --lang cpp (or a .cpp --file): your C++ solution, built as `kata grade` builds it, against
    the Python reference and the C++ reference."""
    from grader.bench import run_bench

    if device not in ("cpu", "cuda"):
        raise KataError(f"--device must be cpu or cuda, not '{device}'", hint="`--device cpu` or `--device cuda`")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise KataError("--device cuda needs a CUDA GPU, and torch sees none", hint="use --device cpu")
    kata = catalog().get(slug)
    if file is not None and str(file).endswith(".cpp"):
        lang = "cpp"
    lang = check_lang(kata, lang)
    path = file if file is not None else solution_path(kata, lang)
    if file is not None and not path.is_file():
        raise KataError(f"{path} does not exist" if not path.exists() else f"{path} is not a file",
                        hint=f"pass the file you wrote, or leave out --file to bench {solution_path(kata, lang)}")
    timed: Path | str | None = path if path.is_file() else None
    cpp_reference: Path | str | None = None
    if lang == "cpp":
        timed = _built(kata.module, path, "yours") if path.is_file() else None
        cpp_reference = _built_reference(kata.module, kata.cpp_reference_path)
    rows = run_bench(kata.slug, timed if isinstance(timed, Path) else None, device, repeats=repeats,
                     cpp_reference=cpp_reference)
    if isinstance(timed, str):
        for row in rows:
            if row.get("impl") == "yours":
                row["note"] = timed
    if as_json:
        output.print_json({"kata": kata.slug, "device": device, "rows": rows})
        return
    table = Table(title=f"{kata.slug} on {device}")
    columns = ["impl", "workload", "median_ms", "throughput", "vs reference", "note"]
    for col in columns:
        table.add_column(col)
    for r in rows:
        table.add_row(str(r.get("impl", "")), str(r.get("workload", "")), _num(r.get("median_ms")),
                      _throughput(r), _num(r.get("ratio_to_reference"), "x"),
                      textsafe.text(r.get("note", "") or ""))  # "raised ...": the candidate's message
    output.console.print(table)
    if not path.is_file():
        output.console.print(f"[dim]no solution at {escape(str(path))}; `kata start {kata.slug}` or --file to time yours[/]")


def _built(module: str, source: Path, whose: str) -> Path | str:
    """The built module of a C++ file (as `kata grade` builds it, cached), or why not."""
    from grader.cpp import build

    if not source.is_file():
        return f"{whose}: {source} does not exist"
    result = build.build(source, module)
    if result.module_path is None:
        first = (result.error or "").splitlines()
        return f"{whose} did not build: {' '.join(first[:2])[:200]}"
    return result.module_path


def _built_reference(module: str, source: Path) -> Path | str:
    """The C++ reference built as module <module>_cpp_reference, its classes module-local: one
    process cannot hold two extension modules of one name (Python keeps the first), nor two
    pybind11 classes of one C++ name registered globally, and yours is <module>."""
    import re
    import tempfile

    if not source.is_file():
        return f"the C++ reference: {source} does not exist"
    renamed = re.sub(rf"PYBIND11_MODULE\(\s*{module}\s*,", f"PYBIND11_MODULE({module}_cpp_reference,",
                     source.read_text(encoding="utf-8"))
    renamed = re.sub(r'(py::class_<[^;{]*?>\s*\w*\s*\(\s*m\s*,\s*"[^"]*")', r"\1, py::module_local()", renamed)
    with tempfile.TemporaryDirectory(prefix="kata-bench-") as tmp:
        copy = Path(tmp) / f"{module}_cpp_reference.cpp"
        copy.write_text(renamed, encoding="utf-8")
        return _built(f"{module}_cpp_reference", copy, "the C++ reference")


def _num(value: object, suffix: str = "") -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.3g}{suffix}"


def _throughput(row: dict) -> str:
    for key, unit in (("tflops", "TFLOP/s"), ("gbps", "GB/s"), ("ops_per_s", "ops/s"), ("steps_per_s", "steps/s")):
        if isinstance(row.get(key), (int, float)):
            return f"{row[key]:.3g} {unit}"
    return "-"
