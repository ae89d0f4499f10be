"""kata bench: time your solution against the reference, the kernels and torch built-ins."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from grader import textsafe
from grader.cli import output
from grader.cli.common import JsonOpt, SlugArg, catalog
from grader.errors import KataError
from grader.workspace import solution_path

DeviceOpt = Annotated[str, typer.Option("--device", help="cpu or cuda.")]
FileOpt = Annotated[Optional[Path], typer.Option("--file", "-f", help="Time this file instead of your solution.")]
RepeatsOpt = Annotated[int, typer.Option("--repeats", min=1, max=100, help="Timed repetitions (median reported).")]


def bench(slug: SlugArg, file: FileOpt = None, device: DeviceOpt = "cpu", repeats: RepeatsOpt = 5,
          as_json: JsonOpt = False) -> None:
    """Time a fixed workload: yours, the reference, the GPU kernel and the PyTorch built-in."""
    from grader.bench import run_bench

    if device not in ("cpu", "cuda"):
        raise KataError(f"--device must be cpu or cuda, not '{device}'", hint="`--device cpu` or `--device cuda`")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise KataError("--device cuda needs a CUDA GPU, and torch sees none", hint="use --device cpu")
    kata = catalog().get(slug)
    path = file if file is not None else solution_path(kata)
    if file is not None and not path.is_file():
        raise KataError(f"{path} does not exist" if not path.exists() else f"{path} is not a file",
                        hint=f"pass the .py file you wrote, or leave out --file to bench {solution_path(kata)}")
    rows = run_bench(kata.slug, path if path.is_file() else None, device, repeats=repeats)
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


def _num(value: object, suffix: str = "") -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.3g}{suffix}"


def _throughput(row: dict) -> str:
    for key, unit in (("tflops", "TFLOP/s"), ("gbps", "GB/s"), ("ops_per_s", "ops/s"), ("steps_per_s", "steps/s")):
        if isinstance(row.get(key), (int, float)):
            return f"{row[key]:.3g} {unit}"
    return "-"
