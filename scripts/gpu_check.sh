#!/usr/bin/env bash
# GPU check for the reference kernels (issue 9). Run from anywhere on a machine with an NVIDIA GPU
# and a CUDA build of torch:
#
#     bash scripts/gpu_check.sh            # 5 minutes on an H200 (2026-12-04), most of it compiling
#
# On a machine that reaches no package index, run it with PIP_NO_INDEX=1: the install step
# then fails at once and the checkout goes on PYTHONPATH.
#
# 1. installs the project with the kernels extra (nothing else),
# 2. runs the kernel tests compiled on the GPU (Triton + the CUDA C++ paged decode kernel) and
#    the references on CUDA against the CPU (tests/test_reference_devices.py), then the kernel
#    tests once more through the Triton interpreter on CPU (what CI runs; Triton >= 3.9 only),
# 3. benchmarks attention prefill and paged decode with `kata bench`'s engine and prints
#    achieved TFLOP/s (prefill) or GB/s (decode) against the device's peak, and the time ratio
#    to torch's scaled_dot_product_attention. Peaks are known for H200/H100/A100; override with
#    PEAK_TFLOPS / PEAK_GBPS. With $OUT set, the rows are also written to $OUT/gpu_bench.json.
#
# Exit status: 0 when every step passed, 1 otherwise (every step runs regardless).

set -uo pipefail
cd "$(dirname "$0")/.."
status=0
# A CUDA image may have python3 and no plain python; $PYTHON overrides both.
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
python() { "$PYTHON" "$@"; }
step() { echo; echo "=== $*"; }

step "install: pip install -e .[kernels]"
if ! python -m pip install -q -e ".[kernels]"; then
    echo "pip install failed (offline?); continuing with the checkout on PYTHONPATH"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

step "environment"
python - <<'EOF' || status=1
import shutil, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(), "capability", torch.cuda.get_device_capability())
try:
    import triton
    print("triton", triton.__version__)
except Exception as exc:
    print("triton missing:", exc)
print("nvcc", shutil.which("nvcc"))
from reference.kernels.cuda import cuda_skip_reason
print("CUDA C++ kernel:", cuda_skip_reason() or "can be built")
EOF

step "kernel tests, compiled on the GPU (TRITON_INTERPRET=0), and the references on CUDA"
TRITON_INTERPRET=0 python -m pytest tests/kernels tests/test_kernels.py tests/test_reference_devices.py -q -rs -p no:cacheprovider || status=1

step "kernel tests, Triton interpreter on CPU (TRITON_INTERPRET=1)"
# The kernels' loops with run-time bounds need the interpreter of Triton 3.9 (pyproject's
# kernels extra, what CI runs): the H200 image's Triton 3.6 compiles them fine but its
# interpreter fails every one ("only 0-dimensional arrays can be converted"), so an older
# Triton skips this step.
if python -c 'import sys, triton; sys.exit(tuple(map(int, triton.__version__.split(".")[:2])) < (3, 9))' 2>/dev/null; then
    TRITON_INTERPRET=1 python -m pytest tests/kernels -q -rs -p no:cacheprovider || status=1
else
    echo "skipped: Triton $(python -c 'import triton; print(triton.__version__)' 2>/dev/null || echo '(missing)')" \
         "is older than 3.9, whose interpreter this project needs (CI runs this step)"
fi

step "benchmarks: attention prefill and paged decode (median of 10)"
python - <<'EOF' || status=1
import json, os
import torch
from grader.bench import run_bench

PEAKS = {"H200": (989.4, 4800.0), "H100": (989.4, 3350.0), "A100": (312.0, 2039.0)}  # dense fp16 TFLOP/s, HBM GB/s
name = torch.cuda.get_device_name()
peak_tflops, peak_gbps = next((peak for key, peak in PEAKS.items() if key in name), (None, None))
peak_tflops = float(os.environ.get("PEAK_TFLOPS", peak_tflops or 0)) or None
peak_gbps = float(os.environ.get("PEAK_GBPS", peak_gbps or 0)) or None
print(f"device {name}: peak {peak_tflops} TFLOP/s fp16 dense, {peak_gbps} GB/s HBM")


def figure(row):
    for key, unit, peak in (("tflops", "TFLOP/s", peak_tflops), ("gbps", "GB/s", peak_gbps)):
        if row.get(key):
            share = f" ({100 * row[key] / peak:.1f}% of peak)" if peak else ""
            return f"{row[key]:9.1f} {unit}{share}"
    return "-"


all_rows = []
for slug in ("mha", "rope", "lora"):
    rows = run_bench(slug, None, "cuda", repeats=10)
    all_rows += [dict(row, kata=slug) for row in rows]
    for workload in dict.fromkeys(row["workload"] for row in rows):
        print(f"\n{slug}: {workload}")
        for row in rows:
            if row["workload"] != workload or row["impl"] == "yours":
                continue
            label = row["impl"] + (f" [{row['variant']}]" if row.get("variant") else "")
            if row["median_ms"] is None:
                print(f"  {label:58s} skipped: {row['note']}")
                continue
            vs_sdpa = f"  x{row['ratio_to_builtin']:.2f} of SDPA time" if row.get("ratio_to_builtin") else ""
            print(f"  {label:58s} {row['median_ms']:9.3f} ms  {figure(row)}{vs_sdpa}")

if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "gpu_bench.json"), "w") as fh:
        json.dump({"device": name, "peak_tflops": peak_tflops, "peak_gbps": peak_gbps, "rows": all_rows}, fh, indent=1)
EOF

step "done: status $status"
exit "$status"
