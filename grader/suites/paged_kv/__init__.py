"""Hidden suite for paged-kv: a vLLM-style paged KV-cache block allocator.

Level 1 allocates and frees blocks (block arithmetic, atomic failure, errors, an O(1) free
list); level 2 forks with copy-on-write; level 3 adds prefix caching with a hash chain and an
eviction order. Nothing depends on which physical block ids a solution hands out.

    rules.py                the statement's rules in words, named by every failure
    strategies.py           hypothesis strategies, documents, small helpers
    paired.py               candidate and reference driven together, compared after each call
    lockstep.py             the RuleBasedStateMachine drawing random call sequences
    minimize.py             shrinks a failing lockstep run by replaying its recorded calls
    test_level1.py          RULES map + allocate/free tests (+ the efficiency test)
    test_level2.py          RULES map + fork / copy-on-write / pop_copies tests
    test_level3.py          RULES map + prefix-caching tests
    test_level3_eviction.py the eviction-order tests of level 3
"""
