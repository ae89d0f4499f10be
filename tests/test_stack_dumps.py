"""The worker's stack dumps (grader/worker/stacks.py) and the judge's side of them
(worker_process.DumpFilter): a Python signal handler instead of faulthandler's, which
crashed the worker about once in 15,000 dumps taken while torch imported
(scripts/bench_stack_dumps.py measures both)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from grader.engine import import_watch
from grader.engine.worker_process import DumpFilter
from grader.worker.stacks import BEGIN, END, MAX_FRAMES, format_stacks

DUMP = BEGIN + b'Current thread 0x1 (most recent call first):\n  File "/s.py", line 3 in f\n' + END


@pytest.mark.parametrize("cut", range(1, len(DUMP) + 40, 3))
def test_a_dump_is_taken_out_of_the_output_however_the_reads_cut_it(cut):
    stream = b"before\n" + DUMP + b"between\x1f\n" + DUMP + b"after"
    dumps = DumpFilter()
    out = b"".join(dumps.feed(stream[i:i + cut]) for i in range(0, len(stream), cut)) + dumps.feed(b"")
    assert out == b"before\nbetween\x1f\nafter"
    assert dumps.made == 2 and dumps.last == DUMP[len(BEGIN):-len(END)].decode()


def test_what_looked_like_a_marker_at_the_end_is_output_after_all():
    dumps = DumpFilter()
    assert dumps.feed(b"tail" + BEGIN[:5]) == b"tail"
    assert dumps.feed(b"") == BEGIN[:5] and dumps.made == 0


def test_a_dump_that_never_ends_is_kept_to_a_cap_and_never_shown():
    dumps = DumpFilter()
    assert dumps.feed(BEGIN + b"x" * 1_000_000) == b"" and dumps.feed(b"y" * 10) == b""
    assert dumps.feed(END + b"z") == b"z" and len(dumps.last) == 256_000


def test_the_text_is_faulthandlers_and_stops_at_its_depth():
    def deep(n):
        return sys._getframe() if n == 0 else deep(n - 1)

    text = format_stacks(deep(150), 7, {7: sys._getframe(), 9: sys._getframe()})
    blocks = text.split("\n\n")
    assert blocks[0].startswith("Thread 0x0000000000000009 (most recent call first):")
    assert blocks[1].startswith("Current thread 0x0000000000000007 (most recent call first):")
    assert blocks[1].count(" in deep\n") == MAX_FRAMES and blocks[1].endswith("  ...\n")
    frames = import_watch._FRAME.findall(blocks[1])
    assert frames[0] == (__file__, frames[0][1], "deep")


_LOOPING = textwrap.dedent("""
    import hashlib, os, sys, threading
    sys.path.insert(0, {root!r})
    from grader.worker import stacks
    stacks.arm(2)
    def spin_here():
        while True:
            pass
    def in_c():
        hashlib.pbkdf2_hmac("sha256", b"k", b"s", {rounds})  # one C call, no bytecode
        os.write(1, b"c call done\\n")
        spin_here()
    threading.Thread(target=lambda: threading.Event().wait(), name="idle", daemon=True).start()
    os.write(1, b"ready\\n")
    in_c()
""")


def _run_looping(rounds: int) -> subprocess.Popen:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", _LOOPING.format(root=root, rounds=rounds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def test_the_worker_dumps_every_thread_where_its_code_is():
    proc = _run_looping(rounds=1)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"c call done\n"
        time.sleep(0.1)
        os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(0.5)
    finally:
        proc.kill()
    dumps = DumpFilter()
    assert proc.stderr is not None and dumps.feed(proc.stderr.read()) == b""
    assert dumps.made == 1
    current = dumps.last.split("\n\n")[-1]
    assert current.startswith("Current thread") and import_watch._FRAME.findall(current)[0][2] == "spin_here"
    assert " in wait\n" in dumps.last  # the idle thread's block


def test_a_dump_asked_for_inside_a_long_c_call_comes_after_it_and_never_as_output():
    proc = _run_looping(rounds=3_000_000)  # about a second of C
    try:
        time.sleep(0.1)
        os.kill(proc.pid, signal.SIGUSR1)
        assert proc.stdout is not None and proc.stdout.readline() == b"c call done\n"
        time.sleep(0.3)
    finally:
        proc.kill()
    dumps = DumpFilter()
    assert proc.stderr is not None and dumps.feed(proc.stderr.read()) == b""
    assert dumps.made == 1 and "in in_c" in dumps.last
