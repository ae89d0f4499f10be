"""How often a stack dump crashes a process that is importing torch: faulthandler's (a C
signal handler walking the frames wherever the interrupted code is) against the worker's
(grader/worker/stacks.py, a Python handler between two bytecodes).

Each run starts a Python that arms the dump on SIGUSR1 and imports torch and a reference
(what a worker does while the judge samples its import), and sends it SIGUSR1 every
--period seconds until the import is done. A run that ends by a signal crashed.

    python scripts/bench_stack_dumps.py --runs 30            # both, 30 runs each
    python scripts/bench_stack_dumps.py --runs 60 --only worker
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import os, signal, sys
sys.path.insert(0, {root!r})
sink = os.open(os.devnull, os.O_WRONLY)
if {mode!r} == "faulthandler":
    import faulthandler
    faulthandler.register(signal.SIGUSR1, file=sink, all_threads=True)
else:
    from grader.worker import stacks
    stacks.arm(sink)
os.write(1, b"armed\\n")
import importlib.util
import torch
spec = importlib.util.spec_from_file_location("ref", {reference!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
os.write(1, b"imported\\n")
"""


def one_run(mode: str, reference: str, period: float) -> tuple[int, int]:
    """(exit code, dumps asked for) of one run."""
    code = _CHILD.format(root=str(ROOT), mode=mode, reference=reference)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    asked = 0
    while not select.select([proc.stdout], [], [], period)[0]:
        os.kill(proc.pid, signal.SIGUSR1)
        asked += 1
    return proc.wait(), asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--period", type=float, default=0.005, help="seconds between two dumps")
    parser.add_argument("--reference", default=str(ROOT / "reference" / "dpo.py"))
    parser.add_argument("--only", choices=("faulthandler", "worker"))
    args = parser.parse_args()
    for mode in [args.only] if args.only else ["faulthandler", "worker"]:
        crashed, asked, t0 = [], 0, time.monotonic()
        for i in range(args.runs):
            code, n = one_run(mode, args.reference, args.period)
            asked += n
            if code != 0:
                crashed.append(f"run {i}: {signal.Signals(-code).name if code < 0 else f'exit {code}'}")
        print(f"{mode:>12}: {len(crashed)} of {args.runs} runs crashed, {asked:,} dumps asked for "
              f"({time.monotonic() - t0:.0f} s)" + "".join(f"\n{'':14}{c}" for c in crashed), flush=True)


if __name__ == "__main__":
    main()
