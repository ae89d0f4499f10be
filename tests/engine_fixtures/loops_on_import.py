import time


def add(a, b):
    return a + b


started = time.monotonic()
steps = 0
while steps >= 0:  # line 10: never ends
    steps += 1
