"""Visible examples for paged-kv: `kata check` runs these against your solution.

They pin the worked examples of the statement; the hidden suite checks much more.
"""

from grader.protocol import expect, kata_test


def _expect_raises(exc_type, fn, prop, input):
    try:
        got = fn()
    except exc_type:
        return
    expect(False, prop, input=input, expected=f"raises {exc_type.__name__}", got=f"returned {got!r}")


@kata_test(level=1, category="correctness", description="6 then 2 tokens fit in 2 blocks of 4; 9 more do not")
def test_allocate_worked_example(solution):
    alloc = solution.PagedKVCacheAllocator(4, 4)
    calls = "PagedKVCacheAllocator(4, 4); allocate('a', 6)"
    expect(alloc.allocate("a", 6) is True, "allocate returns True", input=calls)
    expect(len(alloc.block_table("a")) == 2, "6 tokens use ceil(6 / 4) = 2 blocks", input=calls,
           expected=2, got=len(alloc.block_table("a")))
    expect(alloc.num_free_blocks == 2, "2 blocks stay free", input=calls, expected=2,
           got=alloc.num_free_blocks)
    calls += "; allocate('a', 2)"
    expect(alloc.allocate("a", 2) is True and len(alloc.block_table("a")) == 2,
           "8 tokens still fit in 2 blocks", input=calls, expected=2, got=len(alloc.block_table("a")))
    calls += "; allocate('a', 9)"
    before = alloc.block_table("a")
    expect(alloc.allocate("a", 9) is False, "17 tokens would need 5 blocks: False", input=calls)
    expect(alloc.block_table("a") == before and alloc.num_tokens("a") == 8
           and alloc.num_free_blocks == 2, "a failed allocate changes nothing", input=calls,
           expected=(before, 8, 2),
           got=(alloc.block_table("a"), alloc.num_tokens("a"), alloc.num_free_blocks))
    alloc.free("a")
    expect(alloc.num_free_blocks == 4, "free returns every block", input=calls + "; free('a')",
           expected=4, got=alloc.num_free_blocks)


@kata_test(level=1, category="api contract", description="unknown ids raise KeyError, negative counts ValueError")
def test_errors(solution):
    alloc = solution.PagedKVCacheAllocator(4, 4)
    _expect_raises(KeyError, lambda: alloc.free("zz"), "free of an unknown id raises KeyError", "free('zz')")
    _expect_raises(KeyError, lambda: alloc.block_table("zz"), "block_table of an unknown id raises KeyError",
                   "block_table('zz')")
    _expect_raises(ValueError, lambda: alloc.allocate("a", -1), "a negative count raises ValueError",
                   "allocate('a', -1)")
    _expect_raises(ValueError, lambda: solution.PagedKVCacheAllocator(0, 4),
                   "num_blocks < 1 raises ValueError", "PagedKVCacheAllocator(0, 4)")


@kata_test(level=2, category="correctness", description="fork shares blocks; writing a shared partial block copies it")
def test_fork_and_copy_on_write(solution):
    alloc = solution.PagedKVCacheAllocator(4, 4)
    alloc.allocate("a", 6)
    parent = alloc.block_table("a")
    alloc.fork("a", "b")
    calls = "PagedKVCacheAllocator(4, 4); allocate('a', 6); fork('a', 'b')"
    expect(alloc.block_table("b") == parent and alloc.num_free_blocks == 2,
           "the child shares the parent's blocks and uses no free block", input=calls,
           expected=(parent, 2), got=(alloc.block_table("b"), alloc.num_free_blocks))
    calls += "; allocate('b', 1)"
    expect(alloc.allocate("b", 1) is True, "allocate returns True", input=calls)
    child = alloc.block_table("b")
    copies = [tuple(c) for c in alloc.pop_copies()]
    expect(child[0] == parent[0] and child[1] != parent[1],
           "the full block stays shared; the partly filled one is replaced by a copy",
           input=calls, expected=f"[{parent[0]}, <new block>]", got=child)
    expect(copies == [(parent[1], child[1])], "pop_copies() == [(old block, new block)]",
           input=calls + "; pop_copies()", expected=[(parent[1], child[1])], got=copies)
    expect(alloc.pop_copies() == [], "pop_copies() clears the pending copies",
           input=calls + "; pop_copies(); pop_copies()", expected=[])
    alloc.free("a")
    alloc.free("b")
    expect(alloc.num_free_blocks == 4, "freeing both requests restores the pool",
           input=calls + "; free('a'); free('b')", expected=4, got=alloc.num_free_blocks)


@kata_test(level=3, category="correctness", description="a repeated prompt hits its cached full blocks, capped before the last token")
def test_prefix_cache_hits(solution):
    alloc = solution.PagedKVCacheAllocator(8, 2)
    calls = "PagedKVCacheAllocator(8, 2); allocate_prompt('a', [1, 2, 3, 4, 5])"
    got = alloc.allocate_prompt("a", [1, 2, 3, 4, 5])
    expect(got == 0, "a cold cache serves nothing", input=calls, expected=0, got=got)
    calls += "; allocate_prompt('b', [1, 2, 3, 4, 9])"
    got = alloc.allocate_prompt("b", [1, 2, 3, 4, 9])
    expect(got == 4, "blocks [1, 2] and [3, 4] are served from the cache", input=calls,
           expected=4, got=got)
    expect(alloc.block_table("b")[:2] == alloc.block_table("a")[:2],
           "hit blocks are the cached blocks themselves", input=calls,
           expected=alloc.block_table("a")[:2], got=alloc.block_table("b")[:2])
    calls += "; allocate_prompt('c', [1, 2, 3, 4])"
    got = alloc.allocate_prompt("c", [1, 2, 3, 4])
    expect(got == 2, "the block of the last token is never served from the cache", input=calls,
           expected=2, got=got)
    calls += "; allocate_prompt('d', [9, 9, 3, 4, 5])"
    got = alloc.allocate_prompt("d", [9, 9, 3, 4, 5])
    expect(got == 0, "[3, 4] after a different prefix is not a hit", input=calls, expected=0, got=got)
