"""A solution that reports where it runs."""

import os


def cpus():
    return sorted(os.sched_getaffinity(0))
