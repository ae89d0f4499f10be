def _spin():
    while True:
        pass


def add(a, b):
    return _spin()


def scale(xs, k):
    return _spin()
