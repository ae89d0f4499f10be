"""Hidden suite for paged-kv: a paged KV-cache block allocator.

Focused properties per level, then a RuleBasedStateMachine per level that drives the
candidate and the reference in lockstep. Nothing here depends on which physical block ids a
solution hands out: blocks are compared through the sharing structure (which table slots
hold the same block), through a ledger of the KV data each block holds, and through counts.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from hypothesis import given, settings, strategies as st
from hypothesis.stateful import (Bundle, RuleBasedStateMachine, consumes, initialize, multiple,
                                 precondition, rule, run_state_machine_as_test)

from grader.protocol import PropertyFailure, expect, kata_test

REQUEST_IDS = ("a", "b", "c", "d")
block_sizes = st.integers(1, 4)
prompts = st.lists(st.integers(0, 2), min_size=1, max_size=9)
# Prompts are prefixes of a few documents, so that prompts share blocks (and hit) often.
DOCUMENTS = ((1, 2, 3, 4, 5, 6, 7, 8), (1, 2, 3, 4, 9, 9, 9, 9), (5, 6, 7, 8, 1, 2, 3, 4))


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def new(solution: Any, num_blocks: int, block_size: int) -> Any:
    return solution.PagedKVCacheAllocator(num_blocks, block_size)


def snapshot(alloc: Any, request_ids: Any) -> dict[str, Any]:
    """Everything observable about the live requests: tables, token counts, free blocks."""
    return {"num_free_blocks": alloc.num_free_blocks,
            "tables": {r: alloc.block_table(r) for r in sorted(request_ids)},
            "num_tokens": {r: alloc.num_tokens(r) for r in sorted(request_ids)}}


def expect_raises(exc_type: type, fn: Callable[[], Any], prop: str, *, input: Any) -> None:
    try:
        got = fn()
    except exc_type:
        return
    except Exception as exc:  # noqa: BLE001 - a wrong exception type is the failure shown
        raise PropertyFailure(prop, input=input, expected=f"raises {exc_type.__name__}",
                              got=f"raised {type(exc).__name__}: {exc}") from None
    raise PropertyFailure(prop, input=input, expected=f"raises {exc_type.__name__}",
                          got=f"returned {got!r}")


def expect_unknown(alloc: Any, request_id: str, prop: str, *, input: Any) -> None:
    expect_raises(KeyError, lambda: alloc.num_tokens(request_id), prop, input=input)


def sharing_classes(tables: dict[str, list[int]]) -> set[frozenset[tuple[str, int]]]:
    """The table slots (request, logical block) grouped by the physical block they hold."""
    groups: dict[int, set[tuple[str, int]]] = {}
    for request_id, table in tables.items():
        for logical_id, block_id in enumerate(table):
            groups.setdefault(block_id, set()).add((request_id, logical_id))
    return {frozenset(g) for g in groups.values()}


# ================================================================== level 1: allocate, free


@kata_test(level=1, category="correctness", weight=2,
           description="a request holding n tokens owns exactly ceil(n / block_size) distinct blocks")
@settings(max_examples=40)
@given(block_size=block_sizes, steps=st.lists(st.integers(0, 7), min_size=1, max_size=4))
def test_block_count_is_ceil_of_tokens(solution, block_size, steps):
    num_blocks = 32
    alloc = new(solution, num_blocks, block_size)
    num_tokens = 0
    for k in steps:
        expect(alloc.allocate("a", k) is True, "allocate returns True when the blocks fit",
               input={"block_size": block_size, "allocate('a', k) for k in": steps},
               expected=True, got=False)
        num_tokens += k
        table = alloc.block_table("a")
        shown = {"block_size": block_size, "allocate('a', k) for k in": steps,
                 "after k": k, "num_tokens": num_tokens}
        expect(len(table) == ceil_div(num_tokens, block_size),
               "len(block_table) == ceil(num_tokens / block_size)", input=shown,
               expected=ceil_div(num_tokens, block_size), got=len(table))
        expect(alloc.num_tokens("a") == num_tokens, "num_tokens counts every allocated token",
               input=shown, expected=num_tokens, got=alloc.num_tokens("a"))
        expect(len(set(table)) == len(table) and all(0 <= b < num_blocks for b in table),
               "block ids are distinct and in range(num_blocks)", input=shown, got=table)
        expect(alloc.num_free_blocks == num_blocks - len(table),
               "num_free_blocks == num_blocks - blocks in use", input=shown,
               expected=num_blocks - len(table), got=alloc.num_free_blocks)


@kata_test(level=1, category="edge cases",
           description="an allocate that does not fit returns False and changes nothing")
@settings(max_examples=40)
@given(num_blocks=st.integers(1, 5), block_size=block_sizes, first=st.integers(0, 8),
       extra=st.integers(1, 12))
def test_failed_allocate_changes_nothing(solution, num_blocks, block_size, first, extra):
    alloc = new(solution, num_blocks, block_size)
    shown = {"num_blocks": num_blocks, "block_size": block_size, "allocate('a', first)": first}
    if not alloc.allocate("a", first):
        return
    more = num_blocks * block_size - first + extra  # one token more than the pool holds
    before = snapshot(alloc, ["a"])
    got = alloc.allocate("a", more)
    shown = {**shown, "then allocate('a', k)": more}
    expect(got is False, "allocate returns False when the pool is too small", input=shown,
           expected=False, got=got)
    expect(snapshot(alloc, ["a"]) == before, "a failed allocate changes nothing", input=shown,
           expected=before, got=snapshot(alloc, ["a"]))
    got = alloc.allocate("b", num_blocks * block_size + extra)
    shown = {**shown, "then allocate('b', k)": num_blocks * block_size + extra}
    expect(got is False, "allocate returns False when the pool is too small", input=shown,
           expected=False, got=got)
    expect_unknown(alloc, "b", "a failed allocate does not create the request", input=shown)
    expect(snapshot(alloc, ["a"]) == before, "a failed allocate changes nothing", input=shown,
           expected=before, got=snapshot(alloc, ["a"]))


@kata_test(level=1, category="api contract",
           description="bad sizes and negative counts raise ValueError, unknown ids KeyError")
def test_errors_for_bad_arguments(solution):
    for args in ((0, 4), (4, 0), (-1, 2)):
        expect_raises(ValueError, lambda: solution.PagedKVCacheAllocator(*args),
                      "PagedKVCacheAllocator(num_blocks, block_size) rejects sizes < 1",
                      input={"num_blocks, block_size": args})
    alloc = new(solution, 4, 2)
    expect_raises(ValueError, lambda: alloc.allocate("a", -1),
                  "allocate with a negative num_new_tokens raises ValueError",
                  input="allocate('a', -1)")
    for name in ("free", "block_table", "num_tokens"):
        expect_raises(KeyError, lambda: getattr(alloc, name)("zz"),
                      f"{name} of an unknown request raises KeyError", input=f"{name}('zz')")
    alloc.allocate("a", 3)
    alloc.free("a")
    expect_raises(KeyError, lambda: alloc.free("a"), "freeing a request twice raises KeyError",
                  input="allocate('a', 3); free('a'); free('a')")
    expect(alloc.num_free_blocks == 4, "a rejected free changes nothing",
           input="allocate('a', 3); free('a'); free('a')", expected=4, got=alloc.num_free_blocks)


@kata_test(level=1, category="api contract",
           description="block_table returns a new list; changing it changes nothing")
def test_block_table_is_a_fresh_list(solution):
    alloc = new(solution, 6, 2)
    alloc.allocate("a", 5)
    first = alloc.block_table("a")
    kept = list(first)
    first.clear()
    second = alloc.block_table("a")
    expect(second == kept and second is not first,
           "block_table returns a new list each call (clearing one leaves the allocator as is)",
           input="allocate('a', 5); block_table('a').clear(); block_table('a')",
           expected=kept, got=second)


@kata_test(level=1, category="edge cases",
           description="allocate(r, 0) creates an empty request; freeing everything restores the pool")
@settings(max_examples=30)
@given(block_size=block_sizes, counts=st.lists(st.integers(0, 6), min_size=1, max_size=4))
def test_free_everything_restores_the_pool(solution, block_size, counts):
    num_blocks = 32
    alloc = new(solution, num_blocks, block_size)
    for request_id, k in zip(REQUEST_IDS, counts):
        alloc.allocate(request_id, k)
    shown = {"block_size": block_size, "allocate(r, k) for r, k in": list(zip(REQUEST_IDS, counts))}
    if 0 in counts:
        empty = REQUEST_IDS[counts.index(0)]
        expect(alloc.block_table(empty) == [] and alloc.num_tokens(empty) == 0,
               "allocate(r, 0) on a new request creates it holding no block", input=shown,
               expected=([], 0), got=(alloc.block_table(empty), alloc.num_tokens(empty)))
    for request_id in REQUEST_IDS[:len(counts)]:
        alloc.free(request_id)
    expect(alloc.num_free_blocks == num_blocks, "freeing every request restores the full pool",
           input=shown, expected=num_blocks, got=alloc.num_free_blocks)


@kata_test(level=1, category="correctness", weight=3,
           description="random allocate/free sequences behave like the reference")
def test_allocate_and_free_match_reference(solution, reference):
    run_lockstep(solution, reference, level=1, max_examples=30)


@kata_test(level=1, category="efficiency", weight=2,
           description="allocate, free and num_free_blocks take O(1) time per block, not O(num_blocks)")
def test_allocate_and_free_take_constant_time(solution, reference):
    sizes = (1_000, 10_000, 100_000)
    for num_pinned_free, workload in ((None, "an empty pool"), (16, "a pool with 16 free blocks")):
        for _ in range(3):  # machine noise: a real O(num_blocks) scan fails every time
            ref_slope = _slope(reference, sizes, num_pinned_free)
            got_slope = _slope(solution, sizes, num_pinned_free)
            if got_slope < max(ref_slope, 0.0) + 0.45:
                break
        else:
            raise PropertyFailure(
                "time per allocate/free cycle must not grow with num_blocks (no scan of the "
                "pool or of the free list per call)",
                input={"num_blocks": list(sizes), "block_size": 4,
                       "workload": f"on {workload}: allocate('x', 12), num_free_blocks, free('x'), repeated"},
                expected=f"growth exponent about {ref_slope:.2f} (the reference's)",
                got=f"growth exponent {got_slope:.2f} (1.0: time grows linearly with num_blocks)")


def _slope(module: Any, sizes: tuple[int, ...], num_pinned_free: int | None) -> float:
    """Slope of log(cycle time) against log(num_blocks)."""
    xs, ys = [], []
    for n in sizes:
        xs.append(math.log(n))
        ys.append(math.log(max(_cycle_time_s(module, n, num_pinned_free), 1e-9)))
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
            / sum((x - mean_x) ** 2 for x in xs))


def _cycle_time_s(module: Any, num_blocks: int, num_pinned_free: int | None,
                  block_size: int = 4) -> float:
    """Best-of-5 time of one allocate/num_free_blocks/free cycle. With num_pinned_free, one
    request first takes all but that many blocks (a scan for a free block then walks the pool)."""
    alloc = new(module, num_blocks, block_size)
    if num_pinned_free is not None:
        alloc.allocate("pinned", (num_blocks - num_pinned_free) * block_size)
    best = math.inf
    for _ in range(5):
        loops, t0 = 0, time.perf_counter()
        while True:
            alloc.allocate("x", 3 * block_size)
            alloc.num_free_blocks  # noqa: B018 - timed on purpose
            alloc.free("x")
            loops += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= 0.004:
                break
        best = min(best, elapsed / loops)
    return best


# ================================================================== level 2: fork, copy-on-write


@kata_test(level=2, category="correctness", weight=2,
           description="fork shares every block, uses no free block, and blocks stay until the last holder frees")
@settings(max_examples=30)
@given(block_size=block_sizes, num_tokens=st.integers(0, 9), free_parent_first=st.booleans())
def test_fork_shares_every_block(solution, block_size, num_tokens, free_parent_first):
    num_blocks = 10
    alloc = new(solution, num_blocks, block_size)
    alloc.allocate("a", num_tokens)
    free_before = alloc.num_free_blocks
    alloc.fork("a", "b")
    shown = {"num_blocks": num_blocks, "block_size": block_size,
             "calls": f"allocate('a', {num_tokens}); fork('a', 'b')"}
    expect(alloc.block_table("b") == alloc.block_table("a"),
           "the child shares every block of the parent", input=shown,
           expected=alloc.block_table("a"), got=alloc.block_table("b"))
    expect(alloc.num_tokens("b") == num_tokens, "the child starts with the parent's tokens",
           input=shown, expected=num_tokens, got=alloc.num_tokens("b"))
    expect(alloc.num_free_blocks == free_before, "fork uses no free block", input=shown,
           expected=free_before, got=alloc.num_free_blocks)
    first, second = ("a", "b") if free_parent_first else ("b", "a")
    kept = alloc.block_table(second)
    alloc.free(first)
    shown["calls"] += f"; free({first!r})"
    expect(alloc.num_free_blocks == free_before and alloc.block_table(second) == kept,
           "a shared block stays in use while another request holds it", input=shown,
           expected=free_before, got=alloc.num_free_blocks)
    alloc.free(second)
    shown["calls"] += f"; free({second!r})"
    expect(alloc.num_free_blocks == num_blocks, "a block is free again when its last holder frees it",
           input=shown, expected=num_blocks, got=alloc.num_free_blocks)


@kata_test(level=2, category="correctness", weight=2,
           description="writing into a shared, partly filled last block copies it first (and only then)")
@settings(max_examples=40)
@given(block_size=st.integers(1, 4), num_tokens=st.integers(1, 9), k=st.integers(0, 5),
       writer=st.sampled_from(["a", "b"]))
def test_copy_on_write_of_a_shared_partial_block(solution, block_size, num_tokens, k, writer):
    num_blocks = 20
    alloc = new(solution, num_blocks, block_size)
    alloc.allocate("a", num_tokens)
    alloc.fork("a", "b")
    shared = alloc.block_table("a")
    free_before = alloc.num_free_blocks
    other = "b" if writer == "a" else "a"
    expect(alloc.allocate(writer, k) is True, "allocate returns True when the blocks fit",
           input={"block_size": block_size}, expected=True, got=False)
    copies = [tuple(c) for c in alloc.pop_copies()]
    shown = {"num_blocks": num_blocks, "block_size": block_size,
             "calls": f"allocate('a', {num_tokens}); fork('a', 'b'); allocate({writer!r}, {k}); pop_copies()"}
    table = alloc.block_table(writer)
    must_copy = k > 0 and num_tokens % block_size != 0
    if not must_copy:
        expect(copies == [], "no copy unless a shared, partly filled block is written "
               "(full shared blocks stay shared; allocate(r, 0) never copies)",
               input=shown, expected=[], got=copies)
        expect(table[:len(shared)] == shared, "the written request keeps its shared blocks",
               input=shown, expected=shared, got=table[:len(shared)])
        return
    expect(len(copies) == 1 and copies[0][0] == shared[-1] and copies[0][1] == table[-1 - (len(table) - len(shared))],
           "writing into a shared, partly filled last block copies it: pop_copies() == [(old last block, its copy)]",
           input=shown, expected=f"[({shared[-1]}, <the new block at logical index {len(shared) - 1}>)]",
           got={"pop_copies": copies, "block_table(writer)": table})
    expect(table[:len(shared) - 1] == shared[:-1], "full shared blocks stay shared after the copy",
           input=shown, expected=shared[:-1], got=table[:len(shared) - 1])
    expect(alloc.block_table(other) == shared, "the other request keeps the original block",
           input=shown, expected=shared, got=alloc.block_table(other))
    num_new = ceil_div(num_tokens + k, block_size) - len(shared)
    expect(alloc.num_free_blocks == free_before - 1 - num_new,
           "the copy takes one free block (and new tokens their blocks)", input=shown,
           expected=free_before - 1 - num_new, got=alloc.num_free_blocks)
    again = alloc.allocate(writer, 1) and [tuple(c) for c in alloc.pop_copies()]
    expect(again == [], "a block that is no longer shared is written in place",
           input={**shown, "then": f"allocate({writer!r}, 1); pop_copies()"}, expected=[], got=again)
    alloc.free("a")
    alloc.free("b")
    expect(alloc.num_free_blocks == num_blocks,
           "after copy-on-write, freeing both requests restores the full pool (the old block is not leaked)",
           input={**shown, "then": "free('a'); free('b')"}, expected=num_blocks,
           got=alloc.num_free_blocks)


@kata_test(level=2, category="edge cases",
           description="copy-on-write is atomic: when the copy and the new blocks do not fit, nothing changes")
def test_copy_on_write_is_atomic(solution):
    alloc = new(solution, 2, 2)
    alloc.allocate("a", 3)  # blocks: full + partly filled; pool now empty
    alloc.fork("a", "b")
    before = snapshot(alloc, ["a", "b"])
    got = alloc.allocate("b", 1)
    shown = "PagedKVCacheAllocator(2, 2); allocate('a', 3); fork('a', 'b'); allocate('b', 1)"
    expect(got is False, "the copy needs a free block: allocate returns False", input=shown,
           expected=False, got=got)
    copies = alloc.pop_copies()
    expect(snapshot(alloc, ["a", "b"]) == before and list(copies) == [],
           "a failed allocate records no copy and changes nothing", input=shown,
           expected={**before, "pop_copies": []},
           got={**snapshot(alloc, ["a", "b"]), "pop_copies": copies})


@kata_test(level=2, category="api contract",
           description="fork: KeyError for an unknown parent (checked first), ValueError if the child exists")
def test_fork_errors(solution):
    alloc = new(solution, 4, 2)
    alloc.allocate("a", 3)
    alloc.allocate("b", 1)
    expect_raises(KeyError, lambda: alloc.fork("zz", "b"),
                  "fork from an unknown parent raises KeyError (checked before the child)",
                  input="allocate('a', 3); allocate('b', 1); fork('zz', 'b')")
    expect_raises(ValueError, lambda: alloc.fork("a", "b"),
                  "fork into an existing child id raises ValueError",
                  input="allocate('a', 3); allocate('b', 1); fork('a', 'b')")
    expect_raises(ValueError, lambda: alloc.fork("a", "a"), "fork('a', 'a') raises ValueError",
                  input="allocate('a', 3); fork('a', 'a')")
    expect(alloc.num_free_blocks == 1 and alloc.block_table("b") != alloc.block_table("a"),
           "a rejected fork changes nothing", input="after the rejected forks",
           expected=1, got=alloc.num_free_blocks)


@kata_test(level=2, category="api contract",
           description="pop_copies returns every pending copy in order, then clears them")
def test_pop_copies_in_order_then_clears(solution):
    alloc = new(solution, 8, 2)
    alloc.allocate("a", 1)
    alloc.allocate("x", 3)
    alloc.fork("a", "b")
    alloc.fork("x", "y")
    a_last, x_last = alloc.block_table("a")[-1], alloc.block_table("x")[-1]
    alloc.allocate("b", 1)
    alloc.allocate("y", 1)
    shown = "allocate('a', 1); allocate('x', 3); fork('a', 'b'); fork('x', 'y'); allocate('b', 1); allocate('y', 1)"
    got = [tuple(c) for c in alloc.pop_copies()]
    expected = [(a_last, alloc.block_table("b")[-1]), (x_last, alloc.block_table("y")[-1])]
    expect(got == expected, "pop_copies() lists the copies in the order they were made",
           input=shown, expected=expected, got=got)
    again = alloc.pop_copies()
    expect(list(again) == [], "pop_copies() clears the pending copies", input=shown + "; pop_copies()",
           expected=[], got=again)


@kata_test(level=2, category="correctness", weight=3,
           description="random allocate/fork/free/pop_copies sequences behave like the reference")
def test_fork_and_copy_match_reference(solution, reference):
    run_lockstep(solution, reference, level=2, max_examples=50)


# ================================================================== level 3: prefix caching


@kata_test(level=3, category="correctness", weight=2,
           description="a repeated prompt hits its full blocks, except the block of the last token")
@settings(max_examples=40)
@given(block_size=block_sizes, prompt=prompts)
def test_repeated_prompt_hits_all_but_the_last_token(solution, block_size, prompt):
    alloc = new(solution, 12, block_size)
    shown = {"block_size": block_size, "prompt": prompt}
    got = alloc.allocate_prompt("a", list(prompt))
    expect(got == 0, "the first prompt finds nothing in the cache", input=shown, expected=0, got=got)
    hits = (len(prompt) - 1) // block_size
    passed = list(prompt)
    got = alloc.allocate_prompt("b", passed)
    expect(passed == prompt, "allocate_prompt does not modify token_ids", input=shown,
           expected=prompt, got=passed)
    expect(got == hits * block_size,
           "the same prompt again is served from the cache up to, not including, the last token's block",
           input={**shown, "calls": "allocate_prompt('a', prompt); allocate_prompt('b', prompt)"},
           expected=hits * block_size, got=got)
    table_a, table_b = alloc.block_table("a"), alloc.block_table("b")
    expect(table_b[:hits] == table_a[:hits] and not set(table_b[hits:]) & set(table_a),
           "hit blocks are the cached blocks themselves; the rest are fresh", input=shown,
           expected=f"{table_a[:hits]} + fresh blocks", got=table_b)
    expect(alloc.num_tokens("b") == len(prompt), "the request holds every prompt token",
           input=shown, expected=len(prompt), got=alloc.num_tokens("b"))


@kata_test(level=3, category="correctness", weight=2,
           description="a block hits only when its tokens and its whole prefix match (hash chain)")
@settings(max_examples=60)
@given(block_size=st.integers(1, 3), first=prompts, second=prompts, free_first=st.booleans())
def test_hits_need_the_same_whole_prefix(solution, block_size, first, second, free_first):
    alloc = new(solution, 20, block_size)
    alloc.allocate_prompt("a", first)
    if free_first:
        alloc.free("a")
    common = 0
    while (common < min(len(first), len(second)) // block_size
           and first[:(common + 1) * block_size] == second[:(common + 1) * block_size]):
        common += 1
    hits = min(common, (len(second) - 1) // block_size)
    got = alloc.allocate_prompt("b", second)
    shown = {"block_size": block_size, "calls": f"allocate_prompt('a', {first})"
             + ("; free('a')" if free_first else "") + f"; allocate_prompt('b', {second})"}
    expect(got == hits * block_size,
           "hits = leading full blocks equal to a cached prompt's (tokens and whole prefix), capped",
           input=shown, expected=hits * block_size, got=got)


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
    expect(got == 2, "uncached free blocks are taken before cached ones", input=calls,
           expected=2, got=got)

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
    expect(got == (0, 2), "among cached free blocks, the one freed longest ago is evicted first",
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
    expect(got == 2, "the later block [3, 4] is evicted before the earlier [1, 2]",
           input="PagedKVCacheAllocator(3, 2); allocate_prompt('a', [1, 2, 3, 4]); free('a'); "
                 "allocate_prompt('b', [7, 8, 9]); free('b'); allocate_prompt('c', [1, 2, 3, 4, 5])",
           expected=2, got=got)


@kata_test(level=3, category="correctness", weight=2,
           description="on a small pool, prompt hit counts follow the eviction order (like the reference)")
@settings(max_examples=120)
@given(num_blocks=st.integers(2, 6), block_size=st.integers(1, 2),
       ops=st.lists(st.one_of(st.just("free oldest"),
                              st.tuples(st.integers(0, 2), st.integers(1, 8))), max_size=10))
def test_hit_counts_follow_the_eviction_order(solution, reference, num_blocks, block_size, ops):
    got_alloc, want_alloc = new(solution, num_blocks, block_size), new(reference, num_blocks, block_size)
    live: list[str] = []
    calls = [f"PagedKVCacheAllocator({num_blocks}, {block_size})"]
    for i, op in enumerate(ops):
        if op == "free oldest":
            if live:
                request_id = live.pop(0)
                want_alloc.free(request_id)
                got_alloc.free(request_id)
                calls.append(f"free({request_id!r})")
            continue
        request_id, prompt = f"r{i}", list(DOCUMENTS[op[0]][:op[1]])
        calls.append(f"allocate_prompt({request_id!r}, {prompt})")
        want = want_alloc.allocate_prompt(request_id, prompt)
        got = got_alloc.allocate_prompt(request_id, prompt)
        expect(got == want, "allocate_prompt serves the reference's number of cached tokens "
               "(uncached free blocks go first, then the cached block freed longest ago, later "
               "blocks of one free() before earlier ones)", input="; ".join(calls),
               expected=want, got=got)
        if want is not None:
            live.append(request_id)


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
    expect(got == 2, "the existing cache entry stays; the duplicate block is plain and goes first",
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
    expect(got == 0, "the cache entry stays with the first block; once that block is evicted, "
           "[1, 2] is no longer cached (the duplicate was never cached)",
           input="PagedKVCacheAllocator(3, 2); allocate_prompt('p', [1, 2]); "
                 "allocate_prompt('q', [1, 2]); free('p'); allocate('z', 4); free('z'); "
                 "allocate_prompt('w', [1, 2, 3])", expected=0, got=got)


@kata_test(level=3, category="correctness",
           description="a hit block leaves the free pool: it is never handed out while in use")
@settings(max_examples=30)
@given(block_size=st.integers(1, 3), prompt=st.lists(st.integers(0, 2), min_size=2, max_size=9))
def test_hit_blocks_leave_the_free_pool(solution, block_size, prompt):
    num_blocks = 6
    alloc = new(solution, num_blocks, block_size)
    if alloc.allocate_prompt("a", prompt) is None:
        return
    alloc.free("a")
    hits = alloc.allocate_prompt("b", prompt)
    in_use = len(alloc.block_table("b"))
    calls = f"allocate_prompt('a', {prompt}); free('a'); allocate_prompt('b', {prompt})"
    shown = {"num_blocks": num_blocks, "block_size": block_size, "calls": calls}
    expect(alloc.num_free_blocks == num_blocks - in_use, "hit blocks no longer count as free",
           input=shown, expected=num_blocks - in_use, got=alloc.num_free_blocks)
    if hits and alloc.allocate("c", alloc.num_free_blocks * block_size):
        overlap = set(alloc.block_table("c")) & set(alloc.block_table("b"))
        expect(not overlap, "no block is in two tables unless shared by fork or a cache hit",
               input={**shown, "then": "allocate('c', every free slot)"}, expected=[],
               got=sorted(overlap))


@kata_test(level=3, category="api contract",
           description="allocate_prompt: ValueError for an existing id or an empty prompt; None (no change) without room")
def test_allocate_prompt_errors_and_no_room(solution):
    alloc = new(solution, 3, 2)
    alloc.allocate_prompt("a", [1, 2, 3])
    expect_raises(ValueError, lambda: alloc.allocate_prompt("a", [5]),
                  "allocate_prompt with an existing id raises ValueError",
                  input="allocate_prompt('a', [1, 2, 3]); allocate_prompt('a', [5])")
    expect_raises(ValueError, lambda: alloc.allocate_prompt("e", []),
                  "allocate_prompt with an empty prompt raises ValueError",
                  input="allocate_prompt('e', [])")
    calls = "PagedKVCacheAllocator(3, 2); allocate_prompt('a', [1, 2, 3]); allocate_prompt('b', [1, 2, 4, 5, 6])"
    got = alloc.allocate_prompt("b", [1, 2, 4, 5, 6])  # 1 hit + 2 fresh, only 1 free
    expect(got is None, "allocate_prompt returns None when the fresh blocks do not fit",
           input=calls, expected=None, got=got)
    expect_unknown(alloc, "b", "a prompt without room does not create the request", input=calls)
    expect(alloc.num_free_blocks == 1, "a prompt without room changes nothing", input=calls,
           expected=1, got=alloc.num_free_blocks)
    alloc.free("a")
    got = alloc.allocate_prompt("c", [1, 2, 3])
    expect(got == 2, "a prompt without room leaves the cache as it was",
           input=calls + "; free('a'); allocate_prompt('c', [1, 2, 3])", expected=2, got=got)

    alloc = new(solution, 2, 2)
    alloc.allocate_prompt("a", [1, 2, 3])
    alloc.free("a")  # 2 free blocks: the cached [1, 2] and a plain one
    calls = ("PagedKVCacheAllocator(2, 2); allocate_prompt('a', [1, 2, 3]); free('a'); "
             "allocate_prompt('b', [1, 2, 5, 6, 7])")
    got = alloc.allocate_prompt("b", [1, 2, 5, 6, 7])  # hits [1, 2], needs 2 fresh: 1 left
    expect(got is None, "a free block that is hit is no longer free for the fresh blocks: "
           "allocate_prompt returns None", input=calls, expected=None, got=got)
    expect(alloc.num_free_blocks == 2, "a prompt without room changes nothing", input=calls,
           expected=2, got=alloc.num_free_blocks)


@kata_test(level=3, category="correctness", weight=3,
           description="random sequences with prompts, forks and frees behave like the reference")
def test_prefix_cache_matches_reference(solution, reference):
    run_lockstep(solution, reference, level=3, max_examples=80)


# ================================================================== the lockstep machine

machine_prompts = st.builds(lambda doc, n: list(DOCUMENTS[doc][:n]),
                            st.integers(0, len(DOCUMENTS) - 1), st.integers(1, 6))


def run_lockstep(solution: Any, reference: Any, *, level: int, max_examples: int) -> None:
    machine = make_machine(solution, reference, level)
    run_state_machine_as_test(machine, settings=settings(max_examples=max_examples,
                                                         stateful_step_count=15))


def make_machine(solution: Any, reference: Any, level: int) -> type:
    """The lockstep machine for one level: it only calls that level's API."""

    class Allocator(LockstepMachine):
        LEVEL = level
        SOLUTION = solution
        REFERENCE = reference

    Allocator.__name__ = Allocator.__qualname__ = "state"
    return Allocator


def at_level(n: int) -> Callable[[Any], bool]:
    return lambda self: self.LEVEL >= n


class LockstepMachine(RuleBasedStateMachine):
    """Drives the candidate (`got`) and the reference (`want`) with the same calls.

    Beside the reference, it keeps a ledger of the KV data the model would have written
    into the candidate's blocks: `history[r]` is the token sequence of request r (prompt
    tokens, then one unique marker per allocated token) and `data[block][slot]` the token
    prefix whose KV sits there. Every request must read back its own history: a block handed
    out twice, a write into a shared block, or a cache hit on the wrong prefix shows up there.
    The invariants run after every call (not as @invariant, to keep the shrunk example short).
    """

    LEVEL = 3
    SOLUTION: Any = None
    REFERENCE: Any = None
    requests = Bundle("requests")

    @initialize(num_blocks=st.integers(2, 10), block_size=st.integers(1, 3))
    def create(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks, self.block_size = num_blocks, block_size
        self.got = self.SOLUTION.PagedKVCacheAllocator(num_blocks, block_size)
        self.want = self.REFERENCE.PagedKVCacheAllocator(num_blocks, block_size)
        self.history: dict[str, list[Any]] = {}
        self.data: dict[int, list[Any]] = {}
        self.pending_got: list[tuple[int, int]] = []  # copies seen in the candidate's tables
        self.num_markers = 0
        self.num_ids = 0
        self.freed: list[str] = []  # ids freed earlier: unknown now, reusable
        self.last_document: int | None = None
        self.check_all_invariants()

    # ------------------------------------------------------------ rules

    @rule(target=requests, k=st.integers(0, 5), reuse_freed_id=st.booleans())
    def start(self, k: int, reuse_freed_id: bool) -> Any:
        """allocate() on a new id (or one that was freed earlier)."""
        request_id = self.freed.pop(0) if reuse_freed_id and self.freed else self._new_id()
        started = self._allocate(request_id, k)
        self.check_all_invariants()
        return request_id if started else multiple()

    @rule(request_id=requests, k=st.integers(0, 5))
    def grow(self, request_id: str, k: int) -> None:
        """allocate() on a live request."""
        self._allocate(request_id, k)
        self.check_all_invariants()

    @rule(request_id=consumes(requests))
    def free(self, request_id: str) -> None:
        self.want.free(request_id)
        self.got.free(request_id)
        del self.history[request_id]
        self.freed.append(request_id)
        self.check_all_invariants()

    @rule(request_id=requests)
    def invalid_calls_raise(self, request_id: str) -> None:
        """Unknown ids raise KeyError; negative counts, existing ids, empty prompts ValueError."""
        unknown = self.freed[-1] if self.freed else "never-seen"
        for name in ("free", "block_table", "num_tokens"):
            self._both_raise(KeyError, lambda a: getattr(a, name)(unknown), f"{name}({unknown!r})")
        self._both_raise(ValueError, lambda a: a.allocate(request_id, -1), f"allocate({request_id!r}, -1)")
        if self.LEVEL >= 2:
            self._both_raise(KeyError, lambda a: a.fork(unknown, request_id),
                             f"fork({unknown!r}, {request_id!r})")
            self._both_raise(ValueError, lambda a: a.fork(request_id, request_id),
                             f"fork({request_id!r}, {request_id!r})")
        if self.LEVEL >= 3:
            self._both_raise(ValueError, lambda a: a.allocate_prompt(request_id, [1]),
                             f"allocate_prompt({request_id!r}, [1])")
            self._both_raise(ValueError, lambda a: a.allocate_prompt(unknown, []),
                             f"allocate_prompt({unknown!r}, [])")
        self.check_all_invariants()

    @precondition(at_level(2))
    @rule(target=requests, parent_id=requests)
    def fork(self, parent_id: str) -> str:
        child_id = self._new_id()
        self.want.fork(parent_id, child_id)
        self.got.fork(parent_id, child_id)
        self.history[child_id] = list(self.history[parent_id])
        self.check_all_invariants()
        return child_id

    @precondition(at_level(2))
    @rule()
    def pop_copies(self) -> None:
        want = [tuple(c) for c in self.want.pop_copies()]
        got = [tuple(c) for c in self.got.pop_copies()]
        expect(len(got) == len(want) and got == self.pending_got,
               "pop_copies() returns every (src, dst) copy made since the last call, in order",
               input=self._live(), expected=self.pending_got, got=got)
        self.pending_got = []

    @precondition(at_level(3))
    @rule(target=requests, prompt=machine_prompts)
    def allocate_prompt(self, prompt: list[int]) -> Any:
        request_id = self._new_id()
        self.last_document = next(i for i, doc in enumerate(DOCUMENTS) if list(doc[:len(prompt)]) == prompt)
        call = f"allocate_prompt({request_id!r}, {prompt})"
        want = self.want.allocate_prompt(request_id, list(prompt))
        got = self.got.allocate_prompt(request_id, list(prompt))
        self._same(got, want, f"{call} returns the reference's number of cached tokens")
        if want is not None:
            self.history[request_id] = list(prompt)
            table = self.got.block_table(request_id)
            for position in range(want, len(prompt)):  # hit tokens are read, not written
                self._write(table, request_id, position)
        self.check_all_invariants()
        return multiple() if want is None else request_id

    @precondition(lambda self: self.LEVEL >= 3 and self.last_document is not None)
    @rule(target=requests, length=st.integers(1, 8))
    def allocate_prompt_same_document(self, length: int) -> Any:
        """A prompt from the document of the previous prompt: shares its leading blocks."""
        return self.allocate_prompt(list(DOCUMENTS[self.last_document][:length]))

    def teardown(self) -> None:
        if not hasattr(self, "got"):
            return
        for request_id in sorted(self.history):
            self.got.free(request_id)
        expect(self.got.num_free_blocks == self.num_blocks,
               "freeing every request restores the full pool",
               input="free every live request at the end", expected=self.num_blocks,
               got=self.got.num_free_blocks)

    # ------------------------------------------------------------ invariants

    def check_all_invariants(self) -> None:
        # Tables are read once per check: block_table is the candidate's, and may be slow.
        self.got_tables = {r: self.got.block_table(r) for r in self.history}
        self.want_tables = {r: self.want.block_table(r) for r in self.history}
        self.free_blocks_match_the_reference()
        self.tokens_and_block_counts_match()
        self.blocks_are_conserved()
        self.sharing_matches_the_reference()
        self.every_request_reads_its_own_data()

    def free_blocks_match_the_reference(self) -> None:
        """num_free_blocks is fully determined by the calls so far."""
        expect(self.got.num_free_blocks == self.want.num_free_blocks,
               "num_free_blocks matches the reference", input=self._live(),
               expected=self.want.num_free_blocks, got=self.got.num_free_blocks)

    def tokens_and_block_counts_match(self) -> None:
        """Every live request holds the reference's tokens in ceil(n / block_size) blocks."""
        for request_id in sorted(self.history):
            n = self.want.num_tokens(request_id)
            got_n, got_table = self.got.num_tokens(request_id), self.got_tables[request_id]
            expect(got_n == n, f"num_tokens({request_id!r}) matches the reference",
                   input=self._live(), expected=n, got=got_n)
            expect(len(got_table) == ceil_div(n, self.block_size),
                   f"block_table({request_id!r}) holds ceil(num_tokens / block_size) blocks",
                   input=self._live(), expected=ceil_div(n, self.block_size), got=got_table)

    def blocks_are_conserved(self) -> None:
        """free + distinct blocks in live tables == num_blocks: nothing leaked or counted twice."""
        in_use = {b for table in self.got_tables.values() for b in table}
        expect(all(isinstance(b, int) and 0 <= b < self.num_blocks for b in in_use),
               "block ids are ints in range(num_blocks)", input=self._live(), got=sorted(in_use))
        expect(self.got.num_free_blocks + len(in_use) == self.num_blocks,
               "free blocks + distinct blocks in use == num_blocks (nothing leaked or counted twice)",
               input=self._live(), expected=self.num_blocks,
               got=f"{self.got.num_free_blocks} free + {len(in_use)} in use")

    def sharing_matches_the_reference(self) -> None:
        """The same table slots share a physical block as in the reference (ids may differ)."""
        got, want = sharing_classes(self.got_tables), sharing_classes(self.want_tables)
        if got == want:
            return
        shared = lambda classes: sorted(sorted(c) for c in classes if len(c) > 1)  # noqa: E731
        raise PropertyFailure(
            "blocks are shared exactly as fork and cache hits share them (no block in two "
            "tables otherwise)", input=self._live(),
            expected=f"(request, logical block) slots sharing a block: {shared(want)}",
            got=f"(request, logical block) slots sharing a block: {shared(got)}")

    def every_request_reads_its_own_data(self) -> None:
        """Each token slot of a live request holds the KV of that request's own prefix."""
        for request_id, history in sorted(self.history.items()):
            table = self.got_tables[request_id]
            for position in range(len(history)):
                block_id = table[position // self.block_size]
                held = self.data.get(block_id, [None] * self.block_size)[position % self.block_size]
                if held == tuple(history[:position + 1]):
                    continue
                raise PropertyFailure(
                    "every request reads back its own KV data (no block handed out while "
                    "in use, no write into a shared block, cache hits only on equal prefixes)",
                    input=self._live(),
                    expected=f"{request_id!r} token {position} sees prefix {_short(history[:position + 1])}",
                    got=f"block {block_id} slot {position % self.block_size} holds "
                        f"{_short(held) if held else 'nothing written'}")

    # ------------------------------------------------------------ helpers

    def _same(self, got: Any, want: Any, prop: str) -> None:
        expect(got == want and type(got) is type(want), prop, input=self._live(),
               expected=want, got=got)

    def _both_raise(self, exc_type: type, fn: Callable[[Any], Any], call: str) -> bool:
        """Call fn on both; when the reference raises exc_type the candidate must too."""
        try:
            fn(self.want)
        except exc_type:
            expect_raises(exc_type, lambda: fn(self.got), f"{call} raises {exc_type.__name__}",
                          input=self._live())
            return True
        fn(self.got)
        return False

    def _new_id(self) -> str:
        self.num_ids += 1
        return f"r{self.num_ids}"

    def _allocate(self, request_id: str, k: int) -> bool:
        live = request_id in self.history
        old = self.got.block_table(request_id) if live else []
        want_old = self.want.block_table(request_id) if live else []
        want = self.want.allocate(request_id, k)
        got = self.got.allocate(request_id, k)
        self._same(got, want, f"allocate({request_id!r}, {k}) returns the reference's answer")
        if want:
            self._record_allocation(request_id, k, old, want_old)
        return want

    def _record_allocation(self, request_id: str, k: int, old: list[int], want_old: list[int]) -> None:
        """Check and replay a successful allocate: copy-on-write, then the k new tokens."""
        new_table = self.got.block_table(request_id)
        copied = self._apply_copies(old, new_table)
        want_new = self.want.block_table(request_id)
        want_copied = [i for i, (a, b) in enumerate(zip(want_old, want_new)) if a != b]
        expect(copied == want_copied,
               "copy-on-write happens exactly when a shared, partly filled last block is written",
               input={**self._live(), "call": f"allocate({request_id!r}, {k})"},
               expected=f"logical blocks copied: {want_copied}", got=f"logical blocks copied: {copied}")
        history = self.history.setdefault(request_id, [])
        for _ in range(k):
            self.num_markers += 1
            history.append(("generated", self.num_markers))
            self._write(new_table, request_id, len(history) - 1)

    def _apply_copies(self, old: list[int], new_table: list[int]) -> list[int]:
        """Logical blocks whose physical block changed: copy their data, as the model would."""
        copied = []
        for logical_id, (src, dst) in enumerate(zip(old, new_table)):
            if src != dst:
                copied.append(logical_id)
                self.pending_got.append((src, dst))
                self.data[dst] = list(self.data.get(src, [None] * self.block_size))
        return copied

    def _write(self, table: list[int], request_id: str, position: int) -> None:
        logical_id, slot = divmod(position, self.block_size)
        if logical_id >= len(table):
            return  # too few blocks: tokens_and_block_counts_match reports it
        block = self.data.setdefault(table[logical_id], [None] * self.block_size)
        block[slot] = tuple(self.history[request_id][:position + 1])

    def _live(self) -> dict[str, Any]:
        return {"num_blocks": self.num_blocks, "block_size": self.block_size,
                "num_tokens": {r: self.want.num_tokens(r) for r in sorted(self.history)}}


def _short(prefix: Any) -> str:
    """A token prefix for the scorecard: prompt tokens as ints, generated tokens as g<n>."""
    items = ["g" + str(t[1]) if isinstance(t, tuple) else str(t) for t in prefix]
    return "[" + ", ".join(items) + "]"
