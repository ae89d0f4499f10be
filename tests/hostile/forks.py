"""Forks a child that would outlive the grading run; it writes its pid to PIDFILE."""
import os
import time


def add(a, b):
    pid = os.fork()
    if pid == 0:
        with open(os.environ.get("KATA_TEST_PIDFILE", "pid.txt"), "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(600)
        os._exit(0)
    return a + b


def scale(xs, k):
    return [k * x for x in xs]
