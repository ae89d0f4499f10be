"""The floor under a call into the candidate's code: a bare request/answer between two
processes over a socketpair, pickled, as the judge and the worker exchange one (see
grader/worker/wire.py), once with the receiver polling (the "spin" mode of
grader/engine/cpus.py) and once sleeping in recv.

A grading's own cost per call is its extra time over the suite in one process divided by
its calls (scheduler, issue 42: 1.06 s over 13,338 calls, about 80 us a call); what this
floor does not account for is the per-call Python of the two sides (encoding, the call's
context, the transcript, the checks).

    python scripts/bench_crossing.py          # 20,000 round trips a mode
    python scripts/bench_crossing.py -n 5000
"""

from __future__ import annotations

import argparse
import os
import pickle
import socket
import sys
import time


def _recv(sock: socket.socket, spin: bool) -> bytes:
    if not spin:
        return sock.recv(65536)
    while True:
        try:
            return sock.recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass


def round_trip_us(n: int, spin: bool) -> float:
    """Microseconds per request/answer between this process and a forked one."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the answering side, as a worker would
        ours.close()
        try:
            for _ in range(n):
                request = pickle.loads(_recv(theirs, spin))
                theirs.sendall(pickle.dumps(("ret", request[1], sum(request[3]))))
        finally:
            os._exit(0)
    theirs.close()
    t0 = time.perf_counter()
    for i in range(n):
        ours.sendall(pickle.dumps(("call", i, "add", [1, 2], {})))
        pickle.loads(_recv(ours, spin))
    took = time.perf_counter() - t0
    os.waitpid(pid, 0)
    ours.close()
    return took / n * 1e6


def main() -> int:
    if not hasattr(os, "fork"):
        print("needs os.fork (Linux or macOS)", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--round-trips", type=int, default=20_000)
    args = parser.parse_args()
    if args.round_trips < 1:
        parser.error("-n must be at least 1")
    for spin in (True, False):
        mode = "spinning" if spin else "sleeping"
        print(f"{mode}: {round_trip_us(args.round_trips, spin):.1f} us a round trip "
              f"({args.round_trips:,} round trips)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
