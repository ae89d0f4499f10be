def add(a, b):
    with open("written_by_candidate.txt", "w") as fh:
        fh.write("hello")
    return a + b


def scale(xs, k):
    return [k * x for x in xs]
