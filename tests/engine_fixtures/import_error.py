import numpyy_does_not_exist  # noqa: F401


def add(a, b):
    return a + b
