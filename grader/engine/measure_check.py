"""What the judge accepts of the worker's share of a measurement, and what it decides itself.

The worker measures the candidate's calls where they run (grader/worker/measure.py): torch
operations, FLOPs, host syncs, new storages, peak live bytes and the calling thread's CPU time, with the
transport left out. All of that is reported by the process that runs the candidate's code,
so none of it decides a verdict unchecked (design.md):

* **time** is at least what the judge reads from outside: the worker's CPU time by the
  kernel's account, its main thread's less the transport's cost of the measurement's
  messages (calibrated per worker, per message and per byte, on calls that run nothing of
  the candidate's), and every other thread's in full. A helper thread, or a rewritten
  report, cannot hide work from it.
* **counts** are made on the calling thread (torch's modes are per thread): work done on
  another thread of the worker during a measured call would escape them, so a measurement
  in which other threads worked fails the test that asked for it.
* **impossible figures** fail the test that asked for them: a count that is not a
  non-negative whole number, a time that is negative, not finite, or more than the worker
  used in all.

Without the kernel's accounts (not Linux), or where the judge could not keep the worker on
its own CPU while measuring (then a reading may lag), the worker's figures stand as they
are; the scorecard's notes say when a grading ran that way.
"""

from __future__ import annotations

import math
from typing import Any

from grader.engine.worker_cpu import CpuSample
from grader.protocol import PropertyFailure

COUNT_KINDS = ("ops", "flops", "syncs", "peak_bytes")
# Other threads of the worker may use this much CPU during a measured call before its
# counts are refused. Measured on every reference's efficiency tests: none at all (the
# worker's own threads sleep while a call runs; the suites' torch runs one thread); a
# helper thread running mha's smallest per-head loop used 260 µs and more.
OTHER_THREADS_SLACK_S = 0.00005
OTHER_THREADS_SLACK_SHARE = 0.01
# A reported time may exceed the outside figure by this much (clock granularity).
TIME_SLACK_S = 0.0002
TIME_SLACK_SHARE = 0.02
# The calibration's transport is an estimate: a real call's arguments and result cost the
# worker more than a call that does nothing (paged-kv's cycle of three calls about 28 µs
# more than three empty ones). Up to this much more is taken as transport.
TRANSPORT_ALLOWANCE_SHARE = 0.5
TIME_ALLOWANCE_S = 0.00005
MAX_COUNT = 10**18
MAX_STORAGES = 100_000


class MeasurementRejected(PropertyFailure):
    """The worker's share of a measurement cannot be used for a verdict."""


def add_share(total: dict[str, Any], share: Any) -> None:
    """Add one reply's share to the measurement's total; a malformed share is remembered
    (`total["malformed"]`) and refused when the measurement ends."""
    if type(share) is not dict:
        total["malformed"] = "a share that is not a table of figures"
        return
    for key in COUNT_KINDS:
        if key in share:
            value = share[key]
            if type(value) is not int or not 0 <= value <= MAX_COUNT:
                total["malformed"] = f"{key} = {_shown(value)}"
                continue
            total[key] = total.get(key, 0) + value
    if "time_s" in share:
        value = share["time_s"]
        if type(value) is not float or not math.isfinite(value) or value < 0:
            total["malformed"] = f"time_s = {_shown(value)}"
        else:
            total["time_s"] = total.get("time_s", 0.0) + value
    if "storages" in share:
        storages = share["storages"]
        kept = total.setdefault("storages", [])
        if type(storages) is not list or len(kept) + len(storages) > MAX_STORAGES \
                or not all(map(_storage_shape, storages)):
            total["malformed"] = "a list of storages that is not (numel, shape, dtype) triples"
        else:
            kept.extend(storages)


def _storage_shape(item: Any) -> bool:
    return (type(item) is list and len(item) == 3 and type(item[0]) is int and item[0] >= 0
            and type(item[1]) in (list, tuple) and all(type(d) is int and d >= 0 for d in item[1])
            and type(item[2]) is str and len(item[2]) < 40)


def _shown(value: Any) -> str:
    return repr(value)[:60]


def decide(share: dict[str, Any], kinds: tuple[str, ...], start: CpuSample | None,
           end: CpuSample | None, transport_s: float) -> dict[str, Any]:
    """The share the verdict uses: checked against the outside readings `start` and `end`
    (None where there are none, or they may lag), with the time at least what the outside
    figure shows. `transport_s` is what the measurement's messages cost the worker by the
    judge's calibration (grader/engine/judge_bridge.py). Raises MeasurementRejected for
    what no honest worker reports."""
    if "malformed" in share:
        raise MeasurementRejected(
            "the measurement of your code's calls came back impossible",
            got=share["malformed"],
            note="the grader's worker reports these figures; code that changes the worker's "
                 "own modules or reports is rejected")
    decided = {k: v for k, v in share.items() if k != "malformed"}
    if start is None or end is None:
        return decided
    used_s = max(end.process_s - start.process_s, 0.0)
    main_s = min(max(end.main_s - start.main_s, 0.0), used_s)
    other_s = used_s - main_s
    reported_s = float(share.get("time_s", 0.0))
    if reported_s > used_s * (1 + TIME_SLACK_SHARE) + TIME_SLACK_S:
        raise MeasurementRejected(
            "the measurement of your code's calls came back impossible",
            expected=f"at most the {used_s * 1e3:.3f} ms of CPU the worker used in all",
            got=f"{reported_s * 1e3:.3f} ms reported by the worker",
            note="the grader's worker reports this figure; code that changes the worker's "
                 "own modules or reports is rejected")
    counted = [k for k in kinds if k in COUNT_KINDS or k == "storages"]
    if counted and other_s > max(OTHER_THREADS_SLACK_S, OTHER_THREADS_SLACK_SHARE * used_s):
        raise MeasurementRejected(
            f"a measured call does its work on the thread that calls it (its {', '.join(counted)} "
            "are counted there)",
            expected="no work on other threads of your process during the call",
            got=f"{other_s * 1e3:.1f} ms of CPU on other threads, of {used_s * 1e3:.1f} ms in all",
            note="run the work in the calling thread: helper threads hide it from the count")
    if "time" in kinds:
        # The worker's own figure (its calling thread, the transport left out) stands while
        # the main thread's outside figure, less the transport, confirms it; what it does
        # not show, behind a rewritten report, is counted from outside, and so is every
        # other thread's work.
        unexplained_s = main_s - transport_s * (1 + TRANSPORT_ALLOWANCE_SHARE) - TIME_ALLOWANCE_S
        decided["time_s"] = max(reported_s, unexplained_s, 0.0) + other_s
    return decided
