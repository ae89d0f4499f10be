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
    got = alloc.allocate("a", 6)
    expect(got is True, "return value of allocate('a', 6)", input=calls, expected=True, got=got)
    expect(len(alloc.block_table("a")) == 2, "len(block_table('a'))", input=calls,
           expected=2, got=len(alloc.block_table("a")))
    expect(alloc.num_free_blocks == 2, "num_free_blocks", input=calls, expected=2,
           got=alloc.num_free_blocks)
    calls += "; allocate('a', 2)"
    got = alloc.allocate("a", 2)
    expect(got is True and len(alloc.block_table("a")) == 2,
           "return value of allocate('a', 2), then len(block_table('a'))", input=calls, expected=(True, 2),
           got=(got, len(alloc.block_table("a"))))
    calls += "; allocate('a', 9)"
    before = alloc.block_table("a")
    got = alloc.allocate("a", 9)
    expect(got is False, "return value of allocate('a', 9)", input=calls, expected=False, got=got)
    expect(alloc.block_table("a") == before and alloc.num_tokens("a") == 8
           and alloc.num_free_blocks == 2, "(block_table('a'), num_tokens('a'), num_free_blocks) after "
           "allocate('a', 9) returned False", input=calls,
           expected=(before, 8, 2),
           got=(alloc.block_table("a"), alloc.num_tokens("a"), alloc.num_free_blocks))
    alloc.free("a")
    expect(alloc.num_free_blocks == 4, "num_free_blocks after free('a')", input=calls + "; free('a')",
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


@kata_test(level=2, category="correctness", description="fork, then the child appends one token")
def test_fork_and_copy_on_write(solution):
    alloc = solution.PagedKVCacheAllocator(4, 4)
    alloc.allocate("a", 6)
    parent = alloc.block_table("a")
    alloc.fork("a", "b")
    calls = "PagedKVCacheAllocator(4, 4); allocate('a', 6); fork('a', 'b')"
    expect(alloc.block_table("b") == parent and alloc.num_free_blocks == 2,
           "(block_table('b'), num_free_blocks) after fork('a', 'b')", input=calls,
           expected=(parent, 2), got=(alloc.block_table("b"), alloc.num_free_blocks))
    calls += "; allocate('b', 1)"
    got = alloc.allocate("b", 1)
    expect(got is True, "return value of allocate('b', 1)", input=calls, expected=True, got=got)
    child = alloc.block_table("b")
    copies = [tuple(c) for c in alloc.pop_copies()]
    expect(child[0] == parent[0] and child[1] != parent[1],
           "block_table('b') after allocate('b', 1)",
           input=calls + f" (block_table('a') is {parent})",
           expected=f"[{parent[0]}, <a block other than {parent[1]}>]", got=child)
    expect(copies == [(parent[1], child[1])], "return value of pop_copies()",
           input=calls + "; pop_copies()", expected=[(parent[1], child[1])], got=copies)
    got = alloc.pop_copies()
    expect(got == [], "return value of a second pop_copies()",
           input=calls + "; pop_copies(); pop_copies()", expected=[], got=got)
    alloc.free("a")
    alloc.free("b")
    expect(alloc.num_free_blocks == 4, "num_free_blocks after free('a') and free('b')",
           input=calls + "; free('a'); free('b')", expected=4, got=alloc.num_free_blocks)


@kata_test(level=3, category="correctness", description="allocate_prompt with prompts that share a prefix")
def test_prefix_cache_hits(solution):
    alloc = solution.PagedKVCacheAllocator(8, 2)
    calls = "PagedKVCacheAllocator(8, 2); allocate_prompt('a', [1, 2, 3, 4, 5])"
    got = alloc.allocate_prompt("a", [1, 2, 3, 4, 5])
    expect(got == 0, "return value of allocate_prompt('a', [1, 2, 3, 4, 5])", input=calls, expected=0, got=got)
    calls += "; allocate_prompt('b', [1, 2, 3, 4, 9])"
    got = alloc.allocate_prompt("b", [1, 2, 3, 4, 9])
    expect(got == 4, "return value of allocate_prompt('b', [1, 2, 3, 4, 9])", input=calls,
           expected=4, got=got)
    expect(alloc.block_table("b")[:2] == alloc.block_table("a")[:2],
           "block_table('b')[:2] against block_table('a')[:2]", input=calls,
           expected=alloc.block_table("a")[:2], got=alloc.block_table("b")[:2])
    calls += "; allocate_prompt('c', [1, 2, 3, 4])"
    got = alloc.allocate_prompt("c", [1, 2, 3, 4])
    expect(got == 2, "return value of allocate_prompt('c', [1, 2, 3, 4])", input=calls,
           expected=2, got=got)
    calls += "; allocate_prompt('d', [9, 9, 3, 4, 5])"
    got = alloc.allocate_prompt("d", [9, 9, 3, 4, 5])
    expect(got == 0, "return value of allocate_prompt('d', [9, 9, 3, 4, 5])", input=calls, expected=0,
           got=got)
