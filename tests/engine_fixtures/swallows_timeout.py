import time


def add(a, b):
    return a + b


def scale(xs, k):
    while True:
        try:
            time.sleep(10)
        except BaseException:  # a candidate's catch-all swallows even the grader's alarm
            pass
