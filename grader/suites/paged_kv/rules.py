"""The statement's rules in its own words, so that a failure names the rule that decided the
differing field ("num_free_blocks after free('a') - rule: ...") rather than only a headline.

The keys are short names used by paired.py and the tests; the texts follow
katas/paged_kv/README.md, the stub's docstrings and the paged-kv rulings.
"""

from __future__ import annotations

RULE = {
    # level 1
    "sizes": "PagedKVCacheAllocator(num_blocks, block_size) raises ValueError when either is < 1",
    "ceil": "a request holding n tokens owns exactly ceil(n / block_size) blocks",
    "fits": "allocate returns True when the new blocks it needs fit in the free blocks",
    "no_room": "allocate returns False and changes nothing when the free blocks do not suffice "
               "(a new request is not created)",
    "zero": "allocate(r, 0) is allowed and needs no block (a new request then holds no block)",
    "last_block": "tokens that fit in the free slots of the last block need no new block",
    "negative": "allocate with num_new_tokens < 0 raises ValueError and changes nothing "
                "(a new request is not created)",
    "unknown": "free, block_table and num_tokens of an unknown request raise KeyError and change nothing",
    "free": "free releases the request's blocks; the request is unknown afterwards",
    "freed_id": "a freed id is unknown: allocating it again starts a new request from 0 tokens",
    "tokens": "num_tokens counts every token allocated to the request",
    "take": "allocate takes exactly the new blocks that ceil(n / block_size) needs (and one for a copy)",
    "ids": "block ids are ints in range(num_blocks); free blocks + distinct blocks in use == num_blocks",
    "no_sharing": "no block is in two tables unless fork or a cache hit shares it",
    "rejected": "a rejected call (an error, False or None) changes nothing",
    "fresh_list": "block_table returns a new list each call; changing it changes nothing",
    "o1": "every operation is O(1) per block it touches: nothing scans the pool or the free list",
    # level 2
    "fork": "fork: the child starts with the parent's tokens, sharing every block (counts go up); "
            "it uses no free block",
    "fork_unknown": "fork from an unknown parent raises KeyError (checked before the child) and changes nothing",
    "fork_exists": "fork into an existing child id raises ValueError and changes nothing",
    "shared_free": "free drops counts: a shared block is free again only when its last holder frees it",
    "cow": "copy-on-write: allocate(r, k > 0) first copies r's last block when it is partly filled and "
           "shared; full shared blocks stay shared; allocate(r, 0) never copies",
    "cow_count": "the copy drops the old block's count by one: the other holders still share it",
    "cow_room": "the copy needs a free block too: the copy and the new blocks fit, or False and no change",
    "pop_copies": "pop_copies() returns every pending (src, dst) copy, in the order made, and clears them",
    # level 3
    "prompt_exists": "allocate_prompt with an existing request id raises ValueError and changes nothing",
    "prompt_empty": "allocate_prompt with an empty prompt raises ValueError and changes nothing",
    "prompt_room": "allocate_prompt returns None and changes nothing when its fresh blocks do not fit; "
                   "a hit on a free cached block no longer counts as free for them",
    "prompt_tokens": "allocate_prompt creates the request holding len(token_ids) tokens",
    "prompt_take": "allocate_prompt takes ceil(len / block_size) - hits fresh blocks; a hit block "
                   "leaves the free pool",
    "not_modified": "allocate_prompt does not modify token_ids",
    "prompt_return": "allocate_prompt returns the number of prompt tokens served from the cache "
                     "(an int, 0 on a miss) or None when there is no room",
    "multiple": "allocate_prompt returns the cached tokens as whole blocks: a multiple of block_size",
    "cap": "the last prompt token is never served from the cache: at most "
           "(len(token_ids) - 1) // block_size blocks hit",
    "chain": "a block hits only when a cached block holds the same tokens and the same whole prefix "
             "(hash chain); the match stops at the first miss",
    "cached": "full blocks filled by a prompt become cached (a full last block too); a cached block "
              "whose count drops to 0 stays reusable until it is evicted",
    "evict": "a fresh block comes from uncached free blocks first, then evicts the cached free block "
             "freed longest ago (later blocks of one free() first); an evicted block leaves the cache",
    "duplicate": "a full block whose prefix is already cached stays plain and the existing entry "
                 "stays; 'already cached' is judged after the call's fresh blocks are taken",
    "cached_free": "cached free blocks count as free, and any fresh block (allocate, a copy, "
                   "allocate_prompt) evicts one when no uncached block is free",
}


def rule(*names: str) -> str:
    """The texts of the named rules, joined."""
    return "; ".join(RULE[name] for name in names)
