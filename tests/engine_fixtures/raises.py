def add(a, b):
    return a + b


def scale(xs, k):
    first = xs[0]  # IndexError on []
    return [k * x for x in xs] if first is not None else []
