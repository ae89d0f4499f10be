def add(a, b):
    return a + b


print("setting up the table")
TABLE = [add(i, i) for i in range(3)]
LIMIT = undefined_limit + 1  # line 7: a NameError at module level
