"""BUGGY corpus solution for paged-kv: the uncached free blocks are a list used as a queue the
other way round: taken with pop() from the end, given back with insert(0, ...), which moves
every id in the list, O(num_blocks) per block freed.

(A copy of reference/paged_kv.py with this one change; the original docstring follows.)

A paged KV-cache block allocator with copy-on-write forks and prefix caching.

An LLM server keeps, for every running request, the keys and values of every token it has
seen. Reserving one contiguous slab per request for its *maximum* length wastes most of the
memory (requests end early, lengths vary). PagedAttention instead cuts the cache into
fixed-size blocks of `block_size` tokens and gives each request a *block table*: logical
block i of the request lives in physical block block_table[i], anywhere in the pool. Only the
last block of a request can be partly filled, so at most block_size - 1 slots per request
are wasted.

Two requests may point at the same physical block: a forked sample (parallel sampling, beam
search) shares its parent's blocks until it writes into a shared, partly filled block, which
is then copied first (copy-on-write); and a new prompt whose leading full blocks hold exactly
the tokens of an earlier prompt (same tokens, same whole prefix) reuses those blocks instead of
recomputing them (prefix caching).

References:
    Kwon et al., "Efficient Memory Management for Large Language Model Serving with
        PagedAttention", SOSP 2023, arXiv:2309.06180 (block tables, copy-on-write).
    vLLM v1 core, vllm/v1/core/block_pool.py and kv_cache_manager.py (ref_cnt,
        free_block_queue, block hashes chained through the parent block's hash).
    Zheng et al., "SGLang: Efficient Execution of Structured Language Model Programs",
        arXiv:2312.07104 (RadixAttention: prefix reuse with LRU eviction).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Hashable, Sequence

# The hash of a full block: hash((hash of the block before it, tokens of this block)), so
# equal hashes mean equal tokens *and* an equal whole prefix. (Python's hash; a production
# system uses a cryptographic hash so that collisions are out of the question.)
BlockHash = int
_ROOT_HASH: Hashable = "root"


def num_blocks_for(num_tokens: int, block_size: int) -> int:
    """Blocks needed to hold num_tokens tokens: ceil(num_tokens / block_size)."""
    return -(-num_tokens // block_size)


def block_hashes(token_ids: Sequence[int], block_size: int) -> list[BlockHash]:
    """The chained hash of every *full* block of token_ids, in logical order."""
    hashes: list[BlockHash] = []
    parent: Hashable = _ROOT_HASH
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start:start + block_size])))
        hashes.append(parent)
    return hashes


class PagedKVCacheAllocator:
    """Hands out fixed-size KV-cache blocks to requests; shares them on fork and on prefix hits.

    Layout (num_blocks = 8, block_size = 4; request "b" was forked from "a", then "b" wrote
    its 11th token, which copied the shared partly filled block 7 into block 3)::

        request  tokens  block_table (logical block 0, 1, 2 ...)
        "a"      10      [5, 2, 7]        block 7: t8 t9 _ _
        "b"      11      [5, 2, 3]        block 3: t8 t9 t10 _   (copy 7 -> 3 pending)

        physical block   0  1  2  3  4  5  6  7
        ref_cnt          0  0  2  1  0  2  0  1
        free queue       uncached (any order) | cached, evicted first ... evicted last
                         [0 4 6]                [ ]

    Free blocks wait in two queues. Uncached ones hold nothing worth keeping and go first.
    Cached ones (a full prompt block whose count dropped to 0) still hold reusable KV data:
    they count as free, a prefix hit takes them back, and a fresh allocation evicts the one
    that became free longest ago; one free() appends a request's blocks last to first, so
    its later blocks (the least likely to be shared) are evicted before its earlier ones.

    Invariants (after every public call):
        * num_tokens(r) of a live request r is held by exactly ceil(num_tokens / block_size)
          blocks, listed in block_table(r).
        * _ref_cnt[b] is the number of live block-table slots that hold b; a block is in
          exactly one of: some live table (ref_cnt > 0), the uncached free queue, the cached
          free queue.
        * num_free_blocks + (distinct blocks in live tables) == num_blocks.
        * _hash_to_block and _block_to_hash are inverse maps; every cached block is full;
          a block in the uncached free queue has no hash.
        * A block held by two requests (ref_cnt > 1) is never written: allocate() copies a
          shared, partly filled last block before writing into it.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"num_blocks and block_size must be >= 1, got {num_blocks} "
                             f"and {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size  # tokens per block
        self._ref_cnt = [0] * num_blocks
        self._free_uncached: list[int] = list(reversed(range(num_blocks)))
        # Insertion order is eviction order: the first key is evicted first.
        self._free_cached: OrderedDict[int, None] = OrderedDict()
        self._block_tables: dict[str, list[int]] = {}
        self._num_tokens: dict[str, int] = {}
        self._pending_copies: list[tuple[int, int]] = []
        self._hash_to_block: dict[BlockHash, int] = {}
        self._block_to_hash: dict[int, BlockHash] = {}

    # ------------------------------------------------------------------ level 1

    @property
    def num_free_blocks(self) -> int:
        return len(self._free_uncached) + len(self._free_cached)

    def allocate(self, request_id: str, num_new_tokens: int) -> bool:
        """Make room for num_new_tokens more tokens; False (and no change) if they do not fit."""
        if num_new_tokens < 0:
            raise ValueError(f"num_new_tokens must be >= 0, got {num_new_tokens}")
        table = self._block_tables.get(request_id, [])
        num_tokens = self._num_tokens.get(request_id, 0)
        needs_copy = num_new_tokens > 0 and self._last_block_is_shared_and_partial(table, num_tokens)
        num_new_blocks = num_blocks_for(num_tokens + num_new_tokens, self.block_size) - len(table)
        if num_new_blocks + needs_copy > self.num_free_blocks:
            return False  # atomic: checked before anything changes
        if needs_copy:
            self._copy_last_block(table)
        table.extend(self._take_free_block() for _ in range(num_new_blocks))
        self._block_tables[request_id] = table
        self._num_tokens[request_id] = num_tokens + num_new_tokens
        return True

    def free(self, request_id: str) -> None:
        """Release every block of request_id; KeyError if it is unknown."""
        table = self._table(request_id)
        del self._block_tables[request_id], self._num_tokens[request_id]
        for block_id in reversed(table):  # later blocks enter the eviction queue first
            self._release(block_id)

    def block_table(self, request_id: str) -> list[int]:
        """Physical block ids of request_id in logical order (a new list)."""
        return list(self._table(request_id))

    def num_tokens(self, request_id: str) -> int:
        self._table(request_id)
        return self._num_tokens[request_id]

    # ------------------------------------------------------------------ level 2

    def fork(self, parent_id: str, child_id: str) -> None:
        """child_id starts with parent_id's tokens, sharing all of its blocks."""
        parent_table = self._table(parent_id)
        if child_id in self._block_tables:
            raise ValueError(f"request {child_id!r} already exists")
        for block_id in parent_table:
            self._ref_cnt[block_id] += 1
        self._block_tables[child_id] = list(parent_table)
        self._num_tokens[child_id] = self._num_tokens[parent_id]

    def pop_copies(self) -> list[tuple[int, int]]:
        """Pending (src, dst) block copies in the order they were made; clears them."""
        copies, self._pending_copies = self._pending_copies, []
        return copies

    # ------------------------------------------------------------------ level 3

    def allocate_prompt(self, request_id: str, token_ids: Sequence[int]) -> int | None:
        """Start request_id with a prompt, reusing cached full blocks of the same prefix.

        Returns the number of prompt tokens served from the cache, or None if there is no room.
        """
        if request_id in self._block_tables:
            raise ValueError(f"request {request_id!r} already exists")
        if len(token_ids) == 0:
            raise ValueError("the prompt is empty")
        hashes = block_hashes(token_ids, self.block_size)
        # The last prompt token is always computed: the model needs its logits.
        max_hits = (len(token_ids) - 1) // self.block_size
        hit_blocks = self._cached_prefix(hashes[:max_hits])
        num_fresh = num_blocks_for(len(token_ids), self.block_size) - len(hit_blocks)
        num_hits_now_free = sum(1 for b in hit_blocks if self._ref_cnt[b] == 0)
        if num_fresh > self.num_free_blocks - num_hits_now_free:
            return None
        for block_id in hit_blocks:  # before taking fresh blocks, so none of them is evicted
            self._touch(block_id)
        table = hit_blocks + [self._take_free_block() for _ in range(num_fresh)]
        for logical_id in range(len(hit_blocks), len(hashes)):
            # A prefix that is still cached keeps its entry; the new block stays plain.
            if hashes[logical_id] not in self._hash_to_block:
                self._cache(table[logical_id], hashes[logical_id])
        self._block_tables[request_id] = table
        self._num_tokens[request_id] = len(token_ids)
        return len(hit_blocks) * self.block_size

    # ------------------------------------------------------------------ helpers

    def _table(self, request_id: str) -> list[int]:
        try:
            return self._block_tables[request_id]
        except KeyError:
            raise KeyError(f"unknown request {request_id!r}") from None

    def _last_block_is_shared_and_partial(self, table: list[int], num_tokens: int) -> bool:
        return num_tokens % self.block_size != 0 and self._ref_cnt[table[-1]] > 1

    def _copy_last_block(self, table: list[int]) -> None:
        src = table[-1]
        dst = self._take_free_block()
        self._ref_cnt[src] -= 1  # still > 0: another request holds it
        table[-1] = dst
        self._pending_copies.append((src, dst))

    def _cached_prefix(self, hashes: Sequence[BlockHash]) -> list[int]:
        """The cached blocks of the longest run of leading hashes that are all cached."""
        blocks: list[int] = []
        for block_hash in hashes:
            block_id = self._hash_to_block.get(block_hash)
            if block_id is None:
                break
            blocks.append(block_id)
        return blocks

    def _take_free_block(self) -> int:
        """A block with ref_cnt 1: an uncached one if any, else evict the oldest cached one."""
        if self._free_uncached:
            block_id = self._free_uncached.pop()
        else:
            block_id, _ = self._free_cached.popitem(last=False)
            del self._hash_to_block[self._block_to_hash.pop(block_id)]
        self._ref_cnt[block_id] = 1
        return block_id

    def _touch(self, block_id: int) -> None:
        if self._ref_cnt[block_id] == 0:
            del self._free_cached[block_id]  # O(1): OrderedDict unlinks by key
        self._ref_cnt[block_id] += 1

    def _release(self, block_id: int) -> None:
        self._ref_cnt[block_id] -= 1
        if self._ref_cnt[block_id] > 0:
            return
        if block_id in self._block_to_hash:
            self._free_cached[block_id] = None
        else:
            self._free_uncached.insert(0, block_id)

    def _cache(self, block_id: int, block_hash: BlockHash) -> None:
        self._hash_to_block[block_hash] = block_id
        self._block_to_hash[block_id] = block_hash
