import sys


def add(a, b):
    print("debug " * 200, file=sys.stderr)
    print("x" * 5000)
    return a + b


def scale(xs, k):
    return [k * x for x in xs]
