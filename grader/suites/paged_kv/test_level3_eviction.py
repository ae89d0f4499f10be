"""Level 3 — prefix caching, the eviction order: cached free blocks count as free and stay
reusable until evicted; uncached free blocks go first, then the cached block freed longest
ago, the later blocks of one free() before its earlier ones. The rules are mapped in
test_level3.py's RULES.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from grader.protocol import expect, kata_test
from grader.suites.paged_kv.paired import Paired
from grader.suites.paged_kv.rules import RULE
from grader.suites.paged_kv.strategies import DOCUMENTS, new


@kata_test(level=3, category="correctness", weight=2,
           description="a fresh block comes from uncached free blocks first, then the cached block freed longest ago")
def test_eviction_prefers_uncached_then_oldest(solution):
    alloc = new(solution, 2, 2)
    alloc.allocate_prompt("x", [1, 2])  # one full block, cached
    alloc.allocate("y", 2)              # one plain block
    alloc.free("x")
    alloc.free("y")
    alloc.allocate("z", 1)  # must take y's plain block
    alloc.free("z")
    calls = ("PagedKVCacheAllocator(2, 2); allocate_prompt('x', [1, 2]); allocate('y', 2); "
             "free('x'); free('y'); allocate('z', 1); free('z'); allocate_prompt('w', [1, 2, 3])")
    got = alloc.allocate_prompt("w", [1, 2, 3])
    expect(got == 2, RULE["evict"] + " (uncached free blocks go first)", input=calls, expected=2, got=got)

    alloc = new(solution, 4, 2)
    alloc.allocate_prompt("p", [1, 2, 9])
    alloc.allocate_prompt("q", [3, 4, 9])
    alloc.free("p")
    alloc.free("q")
    alloc.allocate("r", 6)  # two uncached blocks, then one eviction
    alloc.free("r")
    calls = ("PagedKVCacheAllocator(4, 2); allocate_prompt('p', [1, 2, 9]); "
             "allocate_prompt('q', [3, 4, 9]); free('p'); free('q'); allocate('r', 6); free('r'); ")
    got = (alloc.allocate_prompt("s", [1, 2, 5]), alloc.allocate_prompt("t", [3, 4, 5]))
    expect(got == (0, 2), RULE["evict"] + " (the cached block freed longest ago goes first)",
           input=calls + "allocate_prompt('s', [1, 2, 5]); allocate_prompt('t', [3, 4, 5])",
           expected=(0, 2), got=got)


@kata_test(level=3, category="correctness", weight=2,
           description="when one free releases several cached blocks, the later ones are evicted first")
def test_eviction_takes_later_blocks_first(solution):
    alloc = new(solution, 3, 2)
    alloc.allocate_prompt("a", [1, 2, 3, 4])  # two full blocks, both cached
    alloc.free("a")
    alloc.allocate_prompt("b", [7, 8, 9])  # the uncached block, then one eviction
    alloc.free("b")
    got = alloc.allocate_prompt("c", [1, 2, 3, 4, 5])
    expect(got == 2, RULE["evict"] + " (the later block [3, 4] goes before the earlier [1, 2])",
           input="PagedKVCacheAllocator(3, 2); allocate_prompt('a', [1, 2, 3, 4]); free('a'); "
                 "allocate_prompt('b', [7, 8, 9]); free('b'); allocate_prompt('c', [1, 2, 3, 4, 5])",
           expected=2, got=got)


@kata_test(level=3, category="correctness", weight=2,
           description="a cached block hit again and freed again is evicted after the blocks freed before it")
def test_re_hit_block_is_evicted_last(solution, reference):
    pair = Paired(solution, reference, 4, 2)
    pair.allocate_prompt("p", [1, 2, 9])
    pair.allocate_prompt("q", [3, 4, 9])
    pair.free("p")
    pair.free("q")                        # cached free, oldest first: [1, 2], [3, 4]
    pair.allocate_prompt("r", [1, 2, 7])  # hits [1, 2]: it leaves the free pool
    pair.free("r")                        # and comes back last: [3, 4], [1, 2]
    pair.allocate("x", 6)                 # two uncached blocks, then evicts [3, 4]
    pair.free("x")
    pair.allocate_prompt("s", [1, 2, 5])  # [1, 2] is still cached
    pair.allocate_prompt("t", [3, 4, 5])  # [3, 4] is not
    pair.free_all()


@kata_test(level=3, category="correctness",
           description="an evicted block leaves the cache: the same prefix later misses")
def test_evicted_block_leaves_the_cache(solution, reference):
    pair = Paired(solution, reference, 3, 1)
    pair.allocate_prompt("p", [1, 2])     # blocks [1] and [1, 2] cached
    pair.free("p")
    pair.allocate("x", 3)                 # the uncached block, then evicts both cached ones
    pair.free("x")
    pair.allocate_prompt("q", [1, 2, 3])  # nothing cached: 0
    pair.allocate_prompt("r", [1, 2, 4])  # q's blocks are: 2
    pair.free_all()


@kata_test(level=3, category="correctness", weight=2,
           description="cached free blocks count as free: allocate, a copy and a prompt evict them when needed")
def test_allocate_evicts_cached_free_blocks(solution, reference):
    pair = Paired(solution, reference, 3, 2)
    pair.allocate_prompt("a", [1, 2, 3, 4, 5, 6])  # three full blocks, all cached
    pair.free("a")                                 # all free, all cached
    pair.allocate("x", 6)                          # evicts all three
    pair.free("x")
    pair.allocate_prompt("b", [1, 2, 3])           # nothing left cached: 0

    pair.free_all()
    pair.allocate_prompt("p", [5, 6, 7])           # [5, 6] cached, [7] plain
    pair.fork("p", "q")
    pair.allocate_prompt("r", [8, 8])              # the last block, cached
    pair.free("r")                                 # the only free block is a cached one
    pair.allocate("q", 1)                          # the copy evicts it
    pair.pop_copies()
    pair.free("q")
    pair.allocate_prompt("s", [8, 8, 1])           # [8, 8] was evicted: 0, and no room: None
    pair.free_all()
    pair.allocate_prompt("t", [5, 6, 1, 1])        # [5, 6] still cached: 2
    pair.free_all()


@kata_test(level=3, category="correctness", weight=2,
           description="on a small pool, prompt hit counts follow the eviction order (like the reference)")
@settings(max_examples=100)
@given(num_blocks=st.integers(2, 6), block_size=st.integers(1, 2),
       ops=st.lists(st.one_of(st.just("free oldest"),
                              st.tuples(st.integers(0, len(DOCUMENTS) - 1), st.integers(1, 8))), max_size=10))
def test_hit_counts_follow_the_eviction_order(solution, reference, num_blocks, block_size, ops):
    pair = Paired(solution, reference, num_blocks, block_size)
    live: list[str] = []
    for i, op in enumerate(ops):
        if op == "free oldest":
            if live:
                pair.free(live.pop(0))
            continue
        request_id = f"r{i}"
        if pair.allocate_prompt(request_id, list(DOCUMENTS[op[0]][:op[1]])) is not None:
            live.append(request_id)
