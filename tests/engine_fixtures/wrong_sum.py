def add(a, b):
    return a + b if a < 2 else a - b


def scale(xs, k):
    return [k * x for x in xs]
