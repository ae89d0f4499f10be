import time


def add(a, b):
    time.sleep(3600)


def scale(xs, k):
    return [k * x for x in xs]
