"""The `paged-kv` kata's hidden suite rejects each realistic buggy allocator of the corpus at
the level its rules break, with the property a reader would expect (tests/corpus/paged_kv/
corpus.toml), gives full marks to correct allocators that hand out other block ids, and keeps
the shrunk failures found while building it as named regressions."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest

from tests.kata_testing import (CORPUS_DIR, assert_rejected_at_level, assert_scores_full,
                                buggy_params, correct_params)

SLUG = "paged-kv"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


# ---------------------------------------------------------------- pinned regressions
# Shrunk failures found while building the suite, replayed directly against the corpus
# files so that they stay failures (and the reference stays right) whatever the seed.


def _load(name):
    if name == "reference":
        return importlib.import_module("reference.paged_kv")
    path = CORPUS_DIR / "paged_kv" / name
    spec = importlib.util.spec_from_file_location(f"paged_kv_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _paired(name):
    from grader.suites.paged_kv.paired import Paired

    return Paired(_load(name), _load("reference"), 3, 2)


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


def test_regression_teardown_does_not_mask_the_first_failure():
    """Found while building the package: hypothesis runs a machine's teardown after a failing
    step, and the teardown's free() used to report a later, misleading failure (a leak after
    free) instead of the rejected fork into an id a negative allocate had left behind."""
    from grader.protocol import PropertyFailure

    pair = _paired("buggy_negative_count_creates_request.py")
    pair.allocate("r2", 1)
    pair.rejected("allocate", "r3", -1)
    with pytest.raises(PropertyFailure) as failure:
        pair.fork("r2", "r3")
    assert failure.value.prop.startswith("fork('r2', 'r3')")
    assert pair.failed


def test_regression_same_source_copies_before_one_pop():
    """The audit's escape: two copies of one block before pop_copies(); a dict keyed by the
    source keeps one of them and used to score 100."""
    from grader.protocol import PropertyFailure

    for name, fails in (("reference", False), ("buggy_pending_copies_keyed_by_source.py", True)):
        pair = _paired(name)
        pair.allocate("a", 1)
        pair.fork("a", "b")
        pair.fork("a", "c")
        pair.allocate("b", 1)
        pair.allocate("c", 1)
        try:
            pair.pop_copies()
        except PropertyFailure as failure:
            assert fails and "several copies from one source block" in failure.prop, name
        else:
            assert not fails, name
