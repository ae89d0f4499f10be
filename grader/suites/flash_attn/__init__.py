"""Hidden suite for flash-attn: tiled attention with an online softmax, the split-K merge,
and FlashDecoding over a paged KV cache.

Level 1 checks flash_attention's values, lse, causal alignment, empty rows, GQA, numerics,
errors and the memory rule (through new_storages); level 2 counts its FLOPs tile by tile,
checks that GQA copies no K/V per query head, and grades combine_partials; level 3 grades
flash_decode, wrapping the module's combine_partials to see the partials it merges.

    strategies.py    strategies, float64 oracles (dense attention, merge, paged decode), checks
    test_level1.py   RULES map + flash_attention: values, lse, masks, numerics, memory, errors
    test_level2.py   RULES map + FLOPs of the causal tiles, GQA without copies, combine_partials
    test_level3.py   RULES map + flash_decode: paging, splits, the one merge call, vectorisation
"""
