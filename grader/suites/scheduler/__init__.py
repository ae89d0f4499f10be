"""Hidden suite for the `scheduler` kata: a priority continuous-batching scheduler with
chunked prefill, KV-block preemption by recompute, abort, aging and thread safety.

Files:
    strategies.py   configs, random workloads, the constructed multi-victim cases, readable text
    lockstep.py     the solution and the reference driven together (`Pair`, `compare_script`,
                    the random state machine); a differing Batch names the statement rule
                    that decides the differing field
    trace.py        a plain-Python model of the rules replayed on the solution's own Batches
                    (properties that need no reference: budget, seats, blocks, victims, ...)
    test_level1.py  priorities, token budget, chunked prefill, decodes first, argument checks
    test_level2.py  KV blocks, preemption by recompute, refunds, admission after preemption
    test_level3.py  abort, aging, threads, the cost of a step

Each test_level<N>.py opens with RULES: every rule and error of the statement at that level,
mapped to the test that builds the situation where the rule decides the outcome.
"""
