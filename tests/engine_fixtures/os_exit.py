import os


def add(a, b):
    return a + b


def scale(xs, k):
    os._exit(7)
