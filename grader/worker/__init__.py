"""The code that runs inside the worker process, next to the candidate's module.

Everything in this package is visible to the candidate's code (it is the only part of the
grader the sandbox shows, as the package ``kata_worker``), so it holds nothing secret and
imports nothing from the rest of ``grader``: the wire format, the codec of values and
shared objects, the worker's side of the bridge, and the measurement meters.
"""
