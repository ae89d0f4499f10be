import ctypes


def add(a, b):
    return a + b


def scale(xs, k):
    ctypes.string_at(0)  # reads address 0: SIGSEGV
