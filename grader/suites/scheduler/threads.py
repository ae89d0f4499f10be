"""Level 3's thread trial, run in the process of the code under test (a harness: see
grader.protocol.run_in_one_process): producer threads add and abort requests while the
calling thread steps, as a server's front end and its engine loop do.

Calls from the judge's threads reach the candidate's code one message at a time, between
its steps, and would never land inside one; here the threads are real threads of the
candidate's process. Thread switches are made dense (every 10 µs, not Python's 5 ms) for
the trial, so an add that can be lost inside step() is lost on every run.

This module's source runs in the candidate's process: the standard library only.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

SWITCH_INTERVAL_S = 1e-5
MAX_STEPS = 20_000


def under_thread_sanitizer(mod: Any) -> bool:
    """Whether the process of `mod` runs under ThreadSanitizer (`kata grade --sanitize
    thread` preloads its runtime)."""
    del mod  # only says which process this runs in
    return "libtsan" in os.environ.get("LD_PRELOAD", "")


def concurrent_trial(mod: Any, config: dict, num_producers: int, num_adds: int,
                     abort_every: int, backlog: int = 0) -> dict:
    """Producers each add `num_adds` requests (and abort one of theirs every `abort_every`
    adds) while this thread steps until they are done and nothing is left. Returns what
    happened, as plain data: the ids added, the successful aborts, the ids in every
    Batch.finished, the errors of each side, the number of steps.

    `backlog` requests that never finish (b0, b1, ...) are added first and aborted by this
    thread once the producers are done: while they run, every step() is long and holds the
    scheduler's lock for most of the trial, so the producers' calls queue up inside the
    scheduler and run in turn between steps. ThreadSanitizer sees a race only between two
    calls that overlap this way (a thread's later call is ordered after its earlier one by
    the GIL it takes in between): a backlog makes overlaps the rule, not luck."""
    sched = mod.Scheduler(**config)
    added: list[str] = []
    aborted: list[str] = []
    for i in range(backlog):
        sched.add_request(mod.Request(f"b{i}", 1, 10**5, 0, 0.0))
        added.append(f"b{i}")
    finished: list[str] = []
    errors: list[list[str]] = []
    start = threading.Barrier(num_producers + 1)

    def produce(who: int) -> None:
        mine: list[str] = []
        try:
            start.wait(timeout=10)
            for j in range(num_adds):
                rid = f"t{who}-{j}"
                sched.add_request(mod.Request(rid, 1 + (j * 7 + who) % 5, 1 + j % 3,
                                              (j + who) % 3, float(j // abort_every)))
                added.append(rid)
                mine.append(rid)
                if j % abort_every == abort_every - 1:
                    victim = mine[(j * 7 + who) % len(mine)]
                    try:
                        sched.abort(victim)
                        aborted.append(victim)
                    except KeyError:
                        pass  # already finished or aborted: not live any more
                time.sleep(0)  # the others' turn: adds spread over many steps
        except BaseException as exc:  # noqa: BLE001 - reported to the judge
            errors.append(["add_request/abort", f"{type(exc).__name__}: {exc}"[:300]])

    threads = [threading.Thread(target=produce, args=(who,), daemon=True) for who in range(num_producers)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    steps = 0
    try:
        for thread in threads:
            thread.start()
        start.wait(timeout=10)
        while steps < MAX_STEPS:
            finished.extend(str(rid) for rid in sched.step().finished)
            steps += 1
            if any(thread.is_alive() for thread in threads):
                continue
            for i in range(backlog):
                try:
                    sched.abort(f"b{i}")
                    aborted.append(f"b{i}")
                except KeyError:
                    pass  # lost by the scheduler: the count says so
            backlog = 0
            if not sched.has_unfinished():
                break
    except BaseException as exc:  # noqa: BLE001 - reported to the judge
        errors.append(["step", f"{type(exc).__name__}: {exc}"[:300]])
        start.abort()
    finally:
        sys.setswitchinterval(interval)
        for thread in threads:
            thread.join(timeout=5)
    return {"added": added, "aborted": aborted, "finished": finished, "errors": errors, "steps": steps}
