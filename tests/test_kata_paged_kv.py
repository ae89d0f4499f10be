"""The `paged-kv` kata's hidden suite rejects each realistic buggy allocator with the property a
reader would expect, gives full marks to correct allocators that hand out other block ids,
and keeps the shrunk failures found while building it as named regressions."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.kata_testing import CORPUS_DIR, assert_rejected_by, assert_scores_full

SLUG = "paged-kv"

BUGGY = [
    # level 1
    ("buggy_block_count_floor_plus_one.py", "test_block_count_is_ceil_of_tokens"),
    ("buggy_partial_allocation_leaks.py", "test_failed_allocate_changes_nothing"),
    ("buggy_failed_allocate_creates_request.py", "test_failed_allocate_changes_nothing"),
    ("buggy_double_free_unnoticed.py", "test_errors_for_bad_arguments"),
    ("buggy_free_keeps_request_id.py", "test_errors_for_bad_arguments"),
    ("buggy_block_table_returns_internal_list.py", "test_block_table_is_a_fresh_list"),
    ("buggy_linear_scan_free_list.py", "test_allocate_and_free_take_constant_time"),
    # level 2
    ("buggy_fork_without_ref_counts.py", "test_fork_shares_every_block"),
    ("buggy_free_shared_block_to_pool.py", "test_fork_shares_every_block"),
    ("buggy_no_copy_on_write.py", "test_copy_on_write_of_a_shared_partial_block"),
    ("buggy_copy_on_write_leaks_old_block.py", "test_copy_on_write_of_a_shared_partial_block"),
    ("buggy_copies_full_shared_block.py", "test_copy_on_write_of_a_shared_partial_block"),
    ("buggy_copy_on_allocate_zero.py", "test_copy_on_write_of_a_shared_partial_block"),
    ("buggy_fork_checks_child_first.py", "test_fork_errors"),
    # level 3
    ("buggy_cache_hit_left_in_free_queue.py", "test_hit_blocks_leave_the_free_pool"),
    ("buggy_hash_without_prefix.py", "test_hits_need_the_same_whole_prefix"),
    ("buggy_no_last_token_cap.py", "test_repeated_prompt_hits_all_but_the_last_token"),
    ("buggy_forward_order_eviction.py", "test_eviction_takes_later_blocks_first"),
    ("buggy_newest_cached_evicted_first.py", "test_eviction_prefers_uncached_then_oldest"),
    ("buggy_cached_before_uncached.py", "test_eviction_prefers_uncached_then_oldest"),
    ("buggy_eviction_keeps_stale_hash.py", "test_eviction_prefers_uncached_then_oldest"),
    ("buggy_recaches_duplicate_prefix.py", "test_cached_prefix_is_not_cached_twice"),
    ("buggy_prompt_room_ignores_free_hits.py", "test_allocate_prompt_errors_and_no_room"),
]

CORRECT = ["correct_lifo_free_stack.py", "correct_highest_id_first.py"]


@pytest.mark.parametrize(("name", "expected_test"), BUGGY, ids=[name for name, _ in BUGGY])
def test_buggy_solution_is_rejected_by_expected_property(name, expected_test):
    assert_rejected_by(SLUG, name, expected_test)


@pytest.mark.parametrize("name", CORRECT)
def test_correct_alternative_scores_full(name):
    assert_scores_full(SLUG, name)


def test_corpus_is_listed_completely():
    on_disk = {p.name for p in (CORPUS_DIR / "paged_kv").glob("*.py")}
    assert on_disk == {name for name, _ in BUGGY} | set(CORRECT)


# ---------------------------------------------------------------- pinned regressions
# Shrunk failures found while building the suite, replayed directly against the corpus
# files so that they stay failures (and the reference stays right) whatever the seed.


def _load(name):
    path = CORPUS_DIR / "paged_kv" / name if name != "reference" else None
    if path is None:
        return importlib.import_module("reference.paged_kv")
    spec = importlib.util.spec_from_file_location(f"paged_kv_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_regression_hit_on_a_free_cached_block_leaves_the_pool():
    """Shrunk by the lockstep machine: PagedKVCacheAllocator(2, 1); allocate_prompt([1]);
    free; allocate_prompt([1, 2]) must leave 0 free blocks (the hit block is in use)."""
    for name, expected_free in (("reference", 0), ("buggy_cache_hit_left_in_free_queue.py", 1)):
        alloc = _load(name).PagedKVCacheAllocator(2, 1)
        alloc.allocate_prompt("r1", [1])
        alloc.free("r1")
        assert alloc.allocate_prompt("r2", [1, 2]) == 1
        assert alloc.num_free_blocks == expected_free, name


def test_regression_eviction_keeps_stale_hash_serves_wrong_block():
    """Evicted blocks must leave the cache: after [1, 2] is evicted by a plain allocation, the
    same prompt again finds nothing (the buggy allocator serves the evicted block)."""
    results = {}
    for name in ("reference", "buggy_eviction_keeps_stale_hash.py"):
        alloc = _load(name).PagedKVCacheAllocator(3, 1)
        alloc.allocate_prompt("p", [1, 2])  # blocks [1] and [1, 2] cached
        alloc.free("p")
        alloc.allocate("x", 3)  # the uncached block, then evicts both
        alloc.free("x")
        try:
            results[name] = alloc.allocate_prompt("q", [1, 2, 3])
        except KeyError:
            results[name] = "KeyError"
    assert results["reference"] == 0
    assert results["buggy_eviction_keeps_stale_hash.py"] != 0
