"""Forks a child that would outlive the grading run; the parent writes the child's pid to
PIDFILE before returning, so the file is there however late the child is scheduled."""
import os
import time


def add(a, b):
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    with open(os.environ.get("KATA_TEST_PIDFILE", "pid.txt"), "w") as fh:
        fh.write(str(pid))
    return a + b


def scale(xs, k):
    return [k * x for x in xs]
