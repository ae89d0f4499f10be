def add(a, b):
    return a + b


def scale(xs, k):
    return [k * x for x in xs]
