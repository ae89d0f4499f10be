"""What the judge accepts of a worker's measurement (grader/engine/measure_check.py): the
time is at least the kernel's outside figure, counts made while other threads worked are
refused, and impossible figures fail the test that asked for them. Then, end to end, the
kernel's account of a live process as the judge reads it (grader/engine/worker_cpu.py)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import pytest

from grader.engine.measure_check import MeasurementRejected, add_share, decide
from grader.engine.worker_cpu import CpuSample, WorkerCpu

START = CpuSample(process_s=10.0, main_s=8.0)


def after(used_s: float, on_main_s: float | None = None) -> CpuSample:
    return CpuSample(START.process_s + used_s, START.main_s + (used_s if on_main_s is None else on_main_s))


def share_of(**figures) -> dict:
    total: dict = {}
    add_share(total, figures)
    return total


@pytest.mark.parametrize("figures", [
    {"time_s": -1e-6}, {"time_s": math.nan}, {"time_s": math.inf}, {"time_s": 3},
    {"ops": -1}, {"ops": 1.5}, {"ops": True}, {"flops": "12"}, {"syncs": 10**19},
    {"storages": [[4, [2, 2]]]}, {"storages": [[-4, [2, 2], "float32"]]}, {"storages": "none"},
])
def test_an_impossible_figure_fails_the_measurement(figures):
    with pytest.raises(MeasurementRejected, match="impossible"):
        decide(share_of(**figures), tuple(k.removesuffix("_s") for k in figures), START, after(1e-3), 1e-5)


def test_a_share_that_is_not_a_table_fails_the_measurement():
    total: dict = {}
    add_share(total, ["time_s", 1.0])
    with pytest.raises(MeasurementRejected):
        decide(total, ("time",), None, None, 0.0)  # refused even without outside readings


def test_more_time_than_the_worker_used_is_impossible():
    with pytest.raises(MeasurementRejected, match="impossible") as caught:
        decide(share_of(time_s=0.010), ("time",), START, after(0.005), 1e-5)
    assert "5.000 ms" in caught.value.expected


def test_the_workers_time_stands_when_the_outside_reading_confirms_it():
    # 100 µs reported, 130 µs used in all, 20 µs of it the transport by the calibration.
    decided = decide(share_of(time_s=100e-6), ("time",), START, after(130e-6), 20e-6)
    assert decided["time_s"] == pytest.approx(100e-6)


def test_work_a_rewritten_report_hides_is_counted_from_outside():
    # 1 µs reported of 5 ms used on the main thread, 60 µs of it the transport.
    decided = decide(share_of(time_s=1e-6), ("time",), START, after(5e-3), 60e-6)
    assert decided["time_s"] == pytest.approx(5e-3 - 60e-6 * 1.5 - 50e-6)


def test_work_on_another_thread_counts_in_full():
    # A helper thread did 4.9 ms; the calling thread waited (2 µs of its own work).
    decided = decide(share_of(time_s=2e-6), ("time",), START, after(5e-3, on_main_s=0.1e-3), 60e-6)
    assert decided["time_s"] == pytest.approx(2e-6 + 4.9e-3)


def test_counts_made_while_another_thread_worked_are_refused():
    with pytest.raises(MeasurementRejected, match="thread") as caught:
        decide(share_of(ops=12), ("ops",), START, after(2e-3, on_main_s=1.5e-3), 0.0)
    assert "0.5 ms of CPU on other threads" in caught.value.got


def test_counts_of_the_calling_thread_alone_stand():
    decided = decide(share_of(ops=12, flops=300), ("ops", "flops"), START, after(2e-3), 0.0)
    assert decided == {"ops": 12, "flops": 300}


def test_without_outside_readings_the_workers_figures_stand():
    decided = decide(share_of(time_s=2e-6, ops=3), ("time", "ops"), None, None, 0.0)
    assert decided == {"time_s": 2e-6, "ops": 3}


def _burn_on_a_thread(seconds: float) -> str:
    return ("import threading, time\n"
            "def burn():\n"
            f"    end = time.thread_time() + {seconds}\n"
            "    while time.thread_time() < end: pass\n"
            "t = threading.Thread(target=burn); t.start(); t.join()\n"
            "print('done', flush=True)\n"
            "time.sleep(30)\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's accounts are read on Linux")
def test_the_kernel_counts_an_ended_thread_of_another_process():
    """The process clock keeps what a thread that has ended used; its main thread's account
    does not have it: what the judge reads as work on other threads."""
    proc = subprocess.Popen([sys.executable, "-c", _burn_on_a_thread(0.2)], stdout=subprocess.PIPE, text=True)
    try:
        cpu = WorkerCpu(proc.pid)
        assert cpu.available
        assert proc.stdout.readline().strip() == "done"
        time.sleep(0.05)  # asleep now: its accounts are exact
        sample = cpu.sample()
        assert sample.process_s >= 0.2
        assert sample.process_s - sample.main_s >= 0.19
    finally:
        proc.kill()
        proc.wait()
    assert WorkerCpu(proc.pid).sample() is None  # a process that is gone reads as None
    assert os.path.exists("/proc/self/task")
