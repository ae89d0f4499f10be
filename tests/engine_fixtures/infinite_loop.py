def add(a, b):
    return a + b


def scale(xs, k):
    while True:
        pass
