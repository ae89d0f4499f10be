"""Paged KV-cache block allocator (vLLM style).

The KV cache is a pool of `num_blocks` physical blocks of `block_size` tokens each. Every
request has a block table: logical block i of the request lives in physical block
block_table[i]. A request holding n tokens owns exactly ceil(n / block_size) blocks.

Worked example (num_blocks=4, block_size=4):

    alloc = PagedKVCacheAllocator(4, 4)
    alloc.allocate("a", 6)       # True: 6 tokens -> 2 blocks, say [0, 1]; 2 blocks free
    alloc.allocate("a", 2)       # True: 8 tokens still fit in 2 blocks
    alloc.allocate("a", 9)       # False: 17 tokens need 5 blocks; nothing changes
    alloc.fork("a", "b")         # "b" shares [0, 1]; still 2 blocks free
    alloc.free("a")              # blocks stay: "b" holds them; 2 blocks free
    alloc.free("b")              # 4 blocks free

Levels:
    1. allocate / free / block_table / num_tokens / num_free_blocks
    2. fork with copy-on-write, pop_copies
    3. allocate_prompt with prefix caching

Which physical ids you hand out is your choice: the grader never depends on them.
"""

from __future__ import annotations

from typing import Sequence


class PagedKVCacheAllocator:
    """Hands out fixed-size KV-cache blocks to requests.

    Args:
        num_blocks: number of physical blocks in the pool (>= 1).
        block_size: tokens per block (>= 1).

    Raises:
        ValueError: num_blocks < 1 or block_size < 1.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        # TODO: validate, then set up the free blocks and the per-request state.
        raise NotImplementedError

    # ------------------------------------------------------------------ level 1

    @property
    def num_free_blocks(self) -> int:
        """Number of blocks not held by any request (cached free blocks included, level 3)."""
        # TODO
        raise NotImplementedError

    def allocate(self, request_id: str, num_new_tokens: int) -> bool:
        """Make room for num_new_tokens more tokens of request_id (new or existing).

        Afterwards the request holds n = old + num_new_tokens tokens in exactly
        ceil(n / block_size) blocks. num_new_tokens == 0 is allowed (a new request then
        holds no block).

        Level 2: if num_new_tokens > 0 and the request's last block is partly filled and
        shared (reference count > 1), that block is first copied: a fresh block replaces it
        in this request's table, the old block's count drops by one, and (src, dst) is
        recorded for pop_copies(). Full shared blocks stay shared.

        Returns:
            True on success. False when the free blocks (including the one a copy needs)
            do not suffice; then nothing changes (a new request is not created).

        Raises:
            ValueError: num_new_tokens < 0.
        """
        # TODO: room check first, then take blocks (atomic: all or nothing).
        raise NotImplementedError

    def free(self, request_id: str) -> None:
        """Release all blocks of request_id; the id is unknown afterwards.

        A block returns to the free pool when no request holds it any more (level 2).

        Raises:
            KeyError: request_id is unknown.
        """
        # TODO
        raise NotImplementedError

    def block_table(self, request_id: str) -> list[int]:
        """Physical block ids of request_id in logical order, as a new list each call
        (changing it changes nothing in the allocator).

        Raises:
            KeyError: request_id is unknown.
        """
        # TODO
        raise NotImplementedError

    def num_tokens(self, request_id: str) -> int:
        """Number of tokens request_id holds.

        Raises:
            KeyError: request_id is unknown.
        """
        # TODO
        raise NotImplementedError

    # ------------------------------------------------------------------ level 2

    def fork(self, parent_id: str, child_id: str) -> None:
        """Create child_id holding parent_id's tokens, sharing every one of its blocks
        (their reference counts go up); uses no free block.

        Raises:
            KeyError: parent_id is unknown (checked first).
            ValueError: child_id already exists.
        """
        # TODO
        raise NotImplementedError

    def pop_copies(self) -> list[tuple[int, int]]:
        """The pending (src_block_id, dst_block_id) copies made by copy-on-write since the
        last call, in the order they were made; clears them."""
        # TODO
        raise NotImplementedError

    # ------------------------------------------------------------------ level 3

    def allocate_prompt(self, request_id: str, token_ids: Sequence[int]) -> int | None:
        """Create request_id holding len(token_ids) tokens, reusing cached blocks.

        A full block of the prompt is reused when a cached block holds the same tokens AND
        the same whole prefix before it (hash chain: hash((parent hash, block tokens))). The
        match stops at the first miss, and the last prompt token is never served from the
        cache, so at most (len(token_ids) - 1) // block_size blocks hit. A hit block's count
        goes up (it leaves the free pool if it was there).

        Full blocks filled by a prompt become cached (a full last block too), unless a block
        with that hash is already cached: the existing entry stays, the new block is plain.
        A cached block whose count drops to 0 counts as free and stays reusable until it is
        evicted. A fresh block is taken from free blocks holding no cached content first;
        otherwise the cached free block that became free longest ago is evicted, and when one
        free() released several cached blocks, the later blocks of that request go first.

        Returns:
            The number of prompt tokens served from the cache (a multiple of block_size),
            or None when the fresh blocks do not fit (nothing changes).

        Raises:
            ValueError: request_id already exists, or token_ids is empty.
        """
        # TODO
        raise NotImplementedError
