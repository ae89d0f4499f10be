"""Hidden suite of the rope kata: rope_inv_freq and apply_rope in the rotate-half layout
(level 1), GPT-J interleaving and partial rotary (level 2), linear / llama3 scaling and the
RotaryEmbedding cos/sin cache (level 3).

Files:
    strategies.py        hypothesis strategies (x and positions, partial rotary, scalings)
                         and the constructed cases the targeted tests loop over
    checks.py            tolerances (growing with the position), comparisons with the
                         reference, candidate calls that show their input when they raise
    lockstep.py          the RotaryEmbedding state machine (calls at arbitrary positions and
                         decode steps, checked against apply_rope of the reference)
    test_level1.py       RULES map + frequencies and rotate-half tests
    test_level2.py       RULES map + interleaved and partial-rotary tests
    test_level3.py       RULES map + scaling tests
    test_level3_cache.py RotaryEmbedding tests (their rules are in test_level3.py's map)

Every legal-but-rare option (position 0, positions (B, T) with B == H, int32 / int16 / int8 /
uint8 positions, every dtype, every partial-rotary fraction, every scaling type, factor 1.0,
llama3 thresholds L / lo and L / hi that are not integers, an empty scaling dict, a table
grown then reused, one embedding across dtypes) has a constructed case that runs under every
seed.
"""
