"""kata bench's engine: every kata's workload runs on CPU and gives well-formed rows."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from grader.bench import BENCH_SLUGS, BenchError, run_bench

REPO_ROOT = Path(__file__).resolve().parents[1]
THROUGHPUT_KEYS = ("tflops", "gbps", "ops_per_s", "steps_per_s")


def _reference_or_skip(slug: str) -> Path:
    module = slug.replace("-", "_")
    try:
        importlib.import_module(f"reference.{module}")
    except Exception as exc:  # noqa: BLE001 - a reference still being written
        pytest.skip(f"reference/{module}.py is not importable yet: {exc}")
    return REPO_ROOT / "reference" / f"{module}.py"


def _check_row_shape(row: dict) -> None:
    assert row["impl"] in ("yours", "reference", "kernel", "torch builtin")
    assert isinstance(row["workload"], str) and row["workload"]
    assert row["median_ms"] is None or row["median_ms"] > 0
    assert isinstance(row.get("note", ""), str)
    if row["median_ms"] is None:
        assert row["note"], f"a row that did not run must say why: {row}"
    else:
        assert any(isinstance(row.get(key), float) and row[key] > 0 for key in THROUGHPUT_KEYS), row


@pytest.mark.parametrize("slug", BENCH_SLUGS)
def test_reference_as_yours_runs_every_workload(slug):
    """With the reference given as the solution, yours and reference both run and compare at ~1x."""
    reference_path = _reference_or_skip(slug)
    rows = run_bench(slug, reference_path, "cpu", repeats=1, quick=True)
    assert rows
    for row in rows:
        _check_row_shape(row)
    workloads = {row["workload"] for row in rows}
    for workload in workloads:
        timed = {row["impl"]: row for row in rows if row["workload"] == workload and row["median_ms"]}
        assert {"yours", "reference"} <= set(timed), f"{workload}: {rows}"
        assert timed["reference"]["ratio_to_reference"] == pytest.approx(1.0)
        assert timed["yours"]["ratio_to_reference"] > 0
    kernel_rows = [row for row in rows if row["impl"] == "kernel"]
    assert all(row["median_ms"] is None and "needs cuda" in row["note"] for row in kernel_rows)


def test_attention_rows_include_sdpa_and_kernel_note():
    _reference_or_skip("mha")
    rows = run_bench("mha", None, "cpu", repeats=1, quick=True)
    impls = {(row["impl"], row.get("variant")) for row in rows}
    assert ("torch builtin", "scaled_dot_product_attention") in impls
    assert ("kernel", "triton") in impls and ("kernel", "cuda c++") in impls
    yours = [row for row in rows if row["impl"] == "yours"]
    assert yours and all(row["median_ms"] is None and "no solution" in row["note"] for row in yours)


def test_broken_solutions_are_rows_not_crashes(tmp_path):
    """A syntax error, and a stub that raises NotImplementedError, each become a note."""
    _reference_or_skip("ppo")
    broken = tmp_path / "ppo.py"
    broken.write_text("def ppo_loss(:\n")
    rows = run_bench("ppo", broken, "cpu", repeats=1, quick=True)
    assert "importing" in rows[0]["note"] and rows[0]["median_ms"] is None
    stub = tmp_path / "stub_ppo.py"
    stub.write_text("def ppo_loss(*args, **kwargs):\n    raise NotImplementedError\n")
    rows = run_bench("ppo", stub, "cpu", repeats=1, quick=True)
    assert "not implemented" in rows[0]["note"]


def test_bad_requests_raise_bench_error():
    with pytest.raises(BenchError, match="no benchmark"):
        run_bench("nope", None, "cpu")
    with pytest.raises(BenchError, match="cpu or cuda"):
        run_bench("ppo", None, "tpu")


def test_flash_attn_rows_compare_sdpa_and_the_triton_kernels():
    """kata bench flash-attn: the tiled prefill against SDPA and the Triton FlashAttention kernel,
    the split-K decode against the Triton paged-decode kernel (both kernels need a GPU)."""
    reference_path = _reference_or_skip("flash-attn")
    rows = run_bench("flash-attn", reference_path, "cpu", repeats=1, quick=True)
    prefill = [row for row in rows if row["workload"].startswith("causal flash_attention")]
    decode = [row for row in rows if row["workload"].startswith("flash_decode")]
    assert {row["impl"] for row in prefill} == {"yours", "reference", "kernel", "torch builtin"}
    assert {row["impl"] for row in decode} == {"yours", "reference", "kernel"}
    builtin = next(row for row in prefill if row["impl"] == "torch builtin")
    assert builtin["variant"] == "scaled_dot_product_attention" and builtin["median_ms"] > 0
    yours = next(row for row in prefill if row["impl"] == "yours")
    assert yours["ratio_to_builtin"] > 0 and yours["tflops"] > 0
    assert all(row["median_ms"] is None and "needs cuda" in row["note"] for row in rows if row["impl"] == "kernel")
