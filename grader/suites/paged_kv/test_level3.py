"""Level 3 — prefix caching: the hash chain, the last-token cap, what is cached, rejected
prompts, and the lockstep run. The eviction order (cached free blocks, which one goes first)
is in test_level3_eviction.py; its rules are mapped here too.

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome.
"""

from __future__ import annotations

from hypothesis import example, given, settings, strategies as st

from grader.protocol import expect, kata_test
from grader.suites.paged_kv.lockstep import run_lockstep
from grader.suites.paged_kv.paired import Paired
from grader.suites.paged_kv.rules import RULE, rule
from grader.suites.paged_kv.strategies import (block_sizes, expect_raises, expect_unknown, new, prompts,
                                               snapshot)

RULES = {
    "ValueError: allocate_prompt with an existing request id": "test_allocate_prompt_errors_and_no_room",
    "ValueError: allocate_prompt with an empty prompt": "test_allocate_prompt_errors_and_no_room",
    "None when the fresh blocks do not fit (nothing changes); a hit on a free cached block no "
    "longer counts as free": "test_allocate_prompt_errors_and_no_room",
    "a prompt whose fresh blocks take exactly the free blocks left fits":
        "test_prompt_that_exactly_fits",
    "a rejected prompt (ValueError or None) leaves no trace: the next prompts, allocations and "
    "num_free_blocks are as if it never happened": "test_rejected_prompt_leaves_no_trace",
    "the request holds len(token_ids) tokens; token_ids is not modified; a cold cache serves 0":
        "test_repeated_prompt_hits_all_but_the_last_token",
    "the last prompt token is never served from the cache: at most (len - 1) // block_size blocks hit":
        "test_repeated_prompt_hits_all_but_the_last_token",
    "a block hits only with the same tokens and the same whole prefix (hash chain); the match "
    "stops at the first miss": "test_hits_need_the_same_whole_prefix",
    "full blocks filled by a prompt become cached, a full last block too":
        "test_full_last_block_is_cached",
    "cached blocks hit whatever their id (block 0 too)": "test_cached_blocks_hit_whatever_their_id",
    "a hit block's count goes up and a free one leaves the free pool": "test_hit_blocks_leave_the_free_pool",
    "hit blocks leave the free pool before the fresh blocks are taken: a prompt never evicts its own hit":
        "test_hit_block_is_never_evicted_by_its_own_prompt",
    "a full block whose prefix is already cached stays plain; the existing entry stays":
        "test_cached_prefix_is_not_cached_twice",
    "'already cached' is judged after the call's fresh blocks are taken":
        "test_duplicate_is_cached_when_its_entry_was_evicted",
    "cached free blocks count as free; any fresh block (allocate, a copy, a prompt) evicts one "
    "when no uncached block is free": "test_allocate_evicts_cached_free_blocks",
    "uncached free blocks go first, then the cached block freed longest ago":
        "test_eviction_prefers_uncached_then_oldest",
    "when one free() releases several cached blocks, the later ones are evicted first":
        "test_eviction_takes_later_blocks_first",
    "a block hit again and freed again is evicted after the blocks freed before it":
        "test_re_hit_block_is_evicted_last",
    "an evicted block leaves the cache": "test_evicted_block_leaves_the_cache",
    "hit counts on a small pool follow the eviction order": "test_hit_counts_follow_the_eviction_order",
    "random prompt/fork/allocate/free sequences match the reference": "test_prefix_cache_matches_reference",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'ValueError: allocate_prompt with an existing request id':
        'ask',
    'ValueError: allocate_prompt with an empty prompt':
        'ask',
    'None when the fresh blocks do not fit (nothing changes); a hit on a free cached '
    'block no longer counts as free':
        ('ask', 'prompt-room'),
    'a prompt whose fresh blocks take exactly the free blocks left fits':
        'prompt-room',
    'a rejected prompt (ValueError or None) leaves no trace: the next prompts, '
    'allocations and num_free_blocks are as if it never happened':
        ('ask', 'atomic'),
    'the request holds len(token_ids) tokens; token_ids is not modified; a cold cache '
    'serves 0':
        'ask',
    'the last prompt token is never served from the cache: at most (len - 1) // '
    'block_size blocks hit':
        'last-token',
    'a block hits only with the same tokens and the same whole prefix (hash chain); the '
    'match stops at the first miss':
        'prefix-match',
    'full blocks filled by a prompt become cached, a full last block too':
        'what-cached',
    'cached blocks hit whatever their id (block 0 too)':
        ('ask', 'prefix-match'),
    "a hit block's count goes up and a free one leaves the free pool":
        ('prefix-match', 'cached-free'),
    'hit blocks leave the free pool before the fresh blocks are taken: a prompt never '
    'evicts its own hit':
        'prompt-room',
    'a full block whose prefix is already cached stays plain; the existing entry stays':
        'duplicate',
    "'already cached' is judged after the call's fresh blocks are taken":
        'duplicate',
    'cached free blocks count as free; any fresh block (allocate, a copy, a prompt) '
    'evicts one when no uncached block is free':
        ('cached-free', 'eviction'),
    'uncached free blocks go first, then the cached block freed longest ago':
        'eviction',
    'when one free() releases several cached blocks, the later ones are evicted first':
        'free-order',
    'a block hit again and freed again is evicted after the blocks freed before it':
        'eviction',
    'an evicted block leaves the cache':
        'eviction',
    'hit counts on a small pool follow the eviction order':
        ('eviction', 'free-order'),
    'random prompt/fork/allocate/free sequences match the reference':
        ('ask', 'prefix-match', 'last-token', 'what-cached', 'cached-free', 'eviction'),
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# Only 'already cached' judged after the fresh blocks are taken (rulings.md). The order
# within one free() and a block cached twice are tie-breaks too, but the core
# test_hit_counts_follow_the_eviction_order and the lockstep run catch them
# (buggy_forward_order_eviction.py, buggy_recaches_duplicate_prefix.py under several seeds).
DETAILS = {
    "'already cached' is judged after the call's fresh blocks are taken",
}


@kata_test(level=3, category="correctness", weight=2,
           description="a repeated prompt hits its full blocks, except the block of the last token")
@settings(max_examples=40)
@example(block_size=2, prompt=[0, 0, 0, 0])
@example(block_size=1, prompt=[0])
@given(block_size=block_sizes, prompt=prompts)
def test_repeated_prompt_hits_all_but_the_last_token(solution, block_size, prompt):
    alloc = new(solution, 12, block_size)
    shown = {"block_size": block_size, "prompt": prompt}
    got = alloc.allocate_prompt("a", list(prompt))
    expect(got == 0 and type(got) is int, RULE["prompt_return"] + " (the first prompt finds nothing)",
           input=shown, expected=0, got=got)
    hits = (len(prompt) - 1) // block_size
    passed = list(prompt)
    got = alloc.allocate_prompt("b", passed)
    expect(passed == prompt, RULE["not_modified"], input=shown, expected=prompt, got=passed)
    expect(got == hits * block_size, RULE["cap"],
           input={**shown, "calls": "allocate_prompt('a', prompt); allocate_prompt('b', prompt)"},
           expected=hits * block_size, got=got)
    state = snapshot(alloc, ["a", "b"])
    table_a, table_b = state["tables"]["a"], state["tables"]["b"]
    expect(table_b[:hits] == table_a[:hits] and not set(table_b[hits:]) & set(table_a),
           "hit blocks are the cached blocks themselves; the rest are fresh", input=shown,
           expected=f"{table_a[:hits]} + fresh blocks", got=table_b)
    expect(state["num_tokens"]["b"] == len(prompt), RULE["prompt_tokens"],
           input=shown, expected=len(prompt), got=state["num_tokens"]["b"])


@kata_test(level=3, category="correctness", weight=2,
           description="a block hits only when its tokens and its whole prefix match (hash chain)")
@settings(max_examples=60)
@example(block_size=2, first=[1, 2, 0, 0, 5], second=[2, 1, 0, 0, 5], free_first=False)
@given(block_size=st.integers(1, 3), first=prompts, second=prompts, free_first=st.booleans())
def test_hits_need_the_same_whole_prefix(solution, block_size, first, second, free_first):
    alloc = new(solution, 20, block_size)
    alloc.allocate_prompt("a", list(first))  # a copy: the expected hits are read off `first` below
    if free_first:
        alloc.free("a")
    common = 0
    while (common < min(len(first), len(second)) // block_size
           and first[:(common + 1) * block_size] == second[:(common + 1) * block_size]):
        common += 1
    hits = min(common, (len(second) - 1) // block_size)
    got = alloc.allocate_prompt("b", list(second))
    shown = {"block_size": block_size, "calls": f"allocate_prompt('a', {first})"
             + ("; free('a')" if free_first else "") + f"; allocate_prompt('b', {second})"}
    expect(got == hits * block_size, rule("chain", "cap"), input=shown, expected=hits * block_size, got=got)


@kata_test(level=3, category="correctness",
           description="every full block of a prompt is cached, the full last block too")
@settings(max_examples=10)
@example(block_size=2, num_full=1, token=0)
@given(block_size=st.integers(1, 3), num_full=st.integers(1, 3), token=st.integers(0, 2))
def test_full_last_block_is_cached(solution, reference, block_size, num_full, token):
    pair = Paired(solution, reference, 8, block_size)
    prompt = [token] * (num_full * block_size)  # only full blocks: the last one is full too
    pair.allocate_prompt("a", prompt)
    pair.allocate_prompt("b", prompt + [7])  # hits every block of 'a'
    pair.free("a")
    pair.free("b")
    pair.allocate_prompt("c", prompt + [8])  # cached free blocks hit too


@kata_test(level=3, category="correctness",
           description="a cached block hits whatever its id (block 0 too)")
@settings(max_examples=8)
@example(num_blocks=3)
@given(num_blocks=st.integers(2, 5))
def test_cached_blocks_hit_whatever_their_id(solution, reference, num_blocks):
    pair = Paired(solution, reference, num_blocks, 1)
    for i in range(num_blocks - 1):  # every block but one holds a cached one-token prompt
        pair.allocate_prompt(f"r{i}", [i])
    for i in range(num_blocks - 1):
        _hit_and_free(pair, f"r{i}", i)
    never_held = next(b for b in range(num_blocks) if b not in {t[0] for t in pair.got_tables.values()})
    pair.free("r0")
    pair.allocate_prompt("t", [50])
    holder, token = "t", 50
    if pair.got_tables["t"][0] != never_held:
        pair.allocate_prompt("u", [51])
        pair.free("t")
        holder, token = "u", 51
    _hit_and_free(pair, holder, token)
    pair.free_all()


def _hit_and_free(pair: Paired, holder: str, token: int) -> None:
    pair.allocate_prompt("s", [token, 99])  # hits holder's block, one fresh block
    pair.free("s")


@kata_test(level=3, category="correctness",
           description="a hit block leaves the free pool: it is never handed out while in use")
@settings(max_examples=30)
@given(block_size=st.integers(1, 3), prompt=st.lists(st.integers(0, 2), min_size=2, max_size=9))
def test_hit_blocks_leave_the_free_pool(solution, block_size, prompt):
    num_blocks = 6
    alloc = new(solution, num_blocks, block_size)
    if alloc.allocate_prompt("a", list(prompt)) is None:  # copies: the same prompt twice
        return
    alloc.free("a")
    hits = alloc.allocate_prompt("b", list(prompt))
    in_use = len(alloc.block_table("b"))
    calls = f"allocate_prompt('a', {prompt}); free('a'); allocate_prompt('b', {prompt})"
    shown = {"num_blocks": num_blocks, "block_size": block_size, "calls": calls}
    expect(alloc.num_free_blocks == num_blocks - in_use, RULE["prompt_take"],
           input=shown, expected=num_blocks - in_use, got=alloc.num_free_blocks)
    if hits and alloc.allocate("c", alloc.num_free_blocks * block_size):
        overlap = set(alloc.block_table("c")) & set(alloc.block_table("b"))
        expect(not overlap, RULE["no_sharing"], input={**shown, "then": "allocate('c', every free slot)"},
               expected=[], got=sorted(overlap))


@kata_test(level=3, category="correctness",
           description="a prompt's hit blocks leave the free pool before its fresh blocks are taken (never evicted by them)")
def test_hit_block_is_never_evicted_by_its_own_prompt(solution, reference):
    pair = Paired(solution, reference, 3, 2)
    pair.allocate_prompt("p", [1, 2])        # [1, 2] cached
    pair.allocate_prompt("q", [3, 4, 5, 6])  # [3, 4], [5, 6] cached
    pair.free("p")
    pair.free("q")                           # cached free, oldest first: [1, 2], [5, 6], [3, 4]
    pair.allocate_prompt("r", [1, 2, 7])     # hits the oldest; its fresh block evicts [5, 6]
    pair.allocate_prompt("s", [3, 4, 8])     # [3, 4] is still cached
    pair.free_all()


@kata_test(level=3, category="edge cases",
           description="a cached prefix keeps its entry: a second copy of it is a plain block")
def test_cached_prefix_is_not_cached_twice(solution):
    alloc = new(solution, 2, 2)
    alloc.allocate_prompt("p", [1, 2])  # cached
    alloc.allocate_prompt("q", [1, 2])  # capped: no hit, and [1, 2] is already cached
    alloc.free("p")
    alloc.free("q")
    alloc.allocate("z", 1)  # takes q's plain block, not the cached one
    alloc.free("z")
    got = alloc.allocate_prompt("w", [1, 2, 3])
    expect(got == 2, RULE["duplicate"],
           input="PagedKVCacheAllocator(2, 2); allocate_prompt('p', [1, 2]); "
                 "allocate_prompt('q', [1, 2]); free('p'); free('q'); allocate('z', 1); free('z'); "
                 "allocate_prompt('w', [1, 2, 3])", expected=2, got=got)

    alloc = new(solution, 3, 2)
    alloc.allocate_prompt("p", [1, 2])  # cached
    alloc.allocate_prompt("q", [1, 2])  # a plain duplicate, still in use
    alloc.free("p")  # the cached entry's block is free now
    alloc.allocate("z", 4)  # the never-used block, then evicts p's cached block
    alloc.free("z")
    got = alloc.allocate_prompt("w", [1, 2, 3])
    expect(got == 0, RULE["duplicate"] + " (once the entry's block is evicted, [1, 2] is no longer cached)",
           input="PagedKVCacheAllocator(3, 2); allocate_prompt('p', [1, 2]); "
                 "allocate_prompt('q', [1, 2]); free('p'); allocate('z', 4); free('z'); "
                 "allocate_prompt('w', [1, 2, 3])", expected=0, got=got)


@kata_test(level=3, category="edge cases",
           description="a duplicate prompt block becomes cached when taking its own blocks evicted the entry")
def test_duplicate_is_cached_when_its_entry_was_evicted(solution, reference):
    pair = Paired(solution, reference, 2, 2)
    pair.allocate_prompt("p", [1, 2])  # [1, 2] cached
    pair.allocate("pad", 2)            # the other block
    pair.free("p")                     # the cached block is the only free one
    pair.allocate_prompt("q", [1, 2])  # its fresh block evicts the entry: q's block is cached now
    pair.free("q")
    pair.free("pad")
    pair.allocate_prompt("w", [1, 2, 3])  # hits q's block


@kata_test(level=3, category="api contract",
           description="allocate_prompt: ValueError for an existing id or an empty prompt; None (no change) without room")
def test_allocate_prompt_errors_and_no_room(solution):
    alloc = new(solution, 3, 2)
    alloc.allocate_prompt("a", [1, 2, 3])
    expect_raises(ValueError, lambda: alloc.allocate_prompt("a", [5]), RULE["prompt_exists"],
                  input="allocate_prompt('a', [1, 2, 3]); allocate_prompt('a', [5])")
    expect_raises(ValueError, lambda: alloc.allocate_prompt("e", []), RULE["prompt_empty"],
                  input="allocate_prompt('e', [])")
    calls = "PagedKVCacheAllocator(3, 2); allocate_prompt('a', [1, 2, 3]); allocate_prompt('b', [1, 2, 4, 5, 6])"
    got = alloc.allocate_prompt("b", [1, 2, 4, 5, 6])  # 1 hit + 2 fresh, only 1 free
    expect(got is None, RULE["prompt_room"], input=calls, expected=None, got=got)
    expect_unknown(alloc, "b", RULE["prompt_room"], input=calls)
    expect(alloc.num_free_blocks == 1, RULE["prompt_room"], input=calls, expected=1, got=alloc.num_free_blocks)

    alloc = new(solution, 2, 2)
    alloc.allocate_prompt("a", [1, 2, 3])
    alloc.free("a")  # 2 free blocks: the cached [1, 2] and a plain one
    calls = ("PagedKVCacheAllocator(2, 2); allocate_prompt('a', [1, 2, 3]); free('a'); "
             "allocate_prompt('b', [1, 2, 5, 6, 7])")
    got = alloc.allocate_prompt("b", [1, 2, 5, 6, 7])  # hits [1, 2], needs 2 fresh: 1 left
    expect(got is None, RULE["prompt_room"], input=calls, expected=None, got=got)
    expect(alloc.num_free_blocks == 2, RULE["prompt_room"], input=calls, expected=2, got=alloc.num_free_blocks)


@kata_test(level=3, category="edge cases",
           description="a prompt whose fresh blocks take exactly the free blocks left (after its hits) fits")
def test_prompt_that_exactly_fits(solution, reference):
    pair = Paired(solution, reference, 3, 2)
    pair.allocate_prompt("a", [1, 2, 3])
    pair.free("a")                              # 3 free, one of them the cached [1, 2]
    pair.allocate_prompt("b", [1, 2, 5, 6, 7])  # the hit + 2 fresh: every block
    pair.allocate_prompt("c", [1, 2, 3])        # the hit is in use; 1 fresh, 0 free: None
    pair.free("b")
    pair.allocate_prompt("c", [1, 2, 3])        # 1 fresh of 2 free
    pair.allocate_prompt("d", [1, 2, 9])        # 1 fresh of 1 free
    pair.free_all()


@kata_test(level=3, category="api contract",
           description="a rejected prompt (ValueError or None) leaves no trace in the next calls")
def test_rejected_prompt_leaves_no_trace(solution, reference):
    pair = Paired(solution, reference, 3, 2)
    pair.allocate_prompt("a", [1, 2, 3])
    pair.free("a")                                 # the cached [1, 2] is free
    pair.allocate_prompt("b", [1, 2, 5, 6, 7, 8, 9])  # 1 hit + 3 fresh > 2 left: None
    pair.allocate_prompt("c", [1, 2, 3])           # the hit is still cached and free
    pair.rejected("allocate_prompt", "c", [4, 4, 4])  # an existing id: nothing is cached
    pair.rejected("allocate_prompt", "d", [])
    pair.rejected("num_tokens", "d")
    pair.free("c")
    pair.allocate_prompt("d", [4, 4, 4])           # [4, 4] was not cached by the rejected call
    pair.allocate_prompt("f", [4, 4, 5])           # but it is now
    pair.free_all()
    pair.allocate("e", 6)                          # every block: nothing leaked
    pair.free_all()


@kata_test(level=3, category="correctness", weight=3,
           description="random sequences with prompts, forks and frees behave like the reference")
def test_prefix_cache_matches_reference(solution, reference):
    run_lockstep(solution, reference, level=3, max_examples=80)
