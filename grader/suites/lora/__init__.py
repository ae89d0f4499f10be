"""Hidden suite for the `lora` kata: LoRALinear (PEFT semantics), merge/unmerge, rsLoRA, and
MultiLoRALinear (one frozen base, many adapters, one vectorised batch).

Files:
    strategies.py    Case / MultiCase setups, hypothesis strategies, the builders that copy
                     the same weights into the candidate's and the reference's layers, and the
                     dropout probe that reads a dropout mask back out of an output
    lockstep.py      state machines: merge/unmerge/training against the reference (level 2),
                     add/remove/forward, rejected calls included, against a model (level 3)
    test_level1.py   LoRALinear: frozen base, init, scaling, forward, dropout (train and eval)
    test_level2.py   delta_weight, merge, unmerge, merged, rsLoRA
    test_level3.py   MultiLoRALinear: mixed batches, -1 rows, dtypes and shapes, efficiency
    test_level3_slots.py   MultiLoRALinear: slots, errors, and what the next call sees after one

Each test_level*.py starts with a RULES map: every exact rule and error of the statement at
that level, and the test that builds the situation where the rule decides the outcome.
"""
