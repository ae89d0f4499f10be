def add(a, b):
    while True:
        pass


def scale(xs, k):
    return [k * x for x in xs]
