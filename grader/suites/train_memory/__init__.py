"""Hidden suite for train-memory: why this fine-tune runs out of memory, and the fixes.

Level 1 checks `training_state_bytes` (the 16-bytes-a-parameter ledger with master weights
and ZeRO) against the reference, and a `finetune` whose losses and weights are those of
`finetune_leaky` (the kata's support file, train_memory_model.py, run here on a model of the
same seed) and whose peak live tensor bytes do not grow with the number of steps. Level 2
runs micro-batches with the whole batch's update and a peak that follows the micro-batch
size; level 3 checkpoints every block (frozen embeddings catch the reentrant variant), with a
per-layer activation budget and a FLOP budget. Memory is the `peak_bytes` measurement (see
strategies.py).

    strategies.py    models, batches, the finetune_leaky oracle, the checks every level shares
    test_level1.py   RULES map + the ledger, losses, weights, no growth with steps
    test_level2.py   RULES map + micro-batches: token weighting, padding-only micro-batches, memory
    test_level3.py   RULES map + checkpointing: updates, frozen embeddings, memory per layer, FLOPs
"""
