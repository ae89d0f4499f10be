import hashlib


def add(a, b):
    return a + b


def scale(xs, k):
    hashlib.pbkdf2_hmac("sha256", b"key", b"salt", 2**31 - 1)  # one C call that never returns in time
    return [x * k for x in xs]
