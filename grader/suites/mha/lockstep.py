"""The cached-decoding state machine of mha level 3: the candidate's module decodes a
sequence chunk by chunk with its own KVCache while the reference runs one causal forward
over everything fed so far; after every chunk the two must agree."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from grader.protocol import call, expect
from grader.suites.mha.checks import close, forward, module_pair
from grader.suites.mha.strategies import mha_configs, mha_input, seeds


def run_cached_decoding(solution: Any, reference: Any, *, max_examples: int, steps: int) -> None:
    class CachedDecoding(RuleBasedStateMachine):
        """The candidate decodes with its cache; the reference runs the whole sequence."""

        def __init__(self) -> None:
            super().__init__()
            self.inputs: list[torch.Tensor] = []
            self.outputs: list[torch.Tensor] = []

        @initialize(config=mha_configs(), batch=st.integers(1, 2))
        def build(self, config: dict, batch: int) -> None:
            self.config, self.batch = config, batch
            self.module, self.ref = module_pair(solution, reference, **config)
            self.cache = call(solution.KVCache, what="KVCache()")

        @rule(num_tokens=st.integers(1, 3), seed=seeds)
        def feed_tokens(self, num_tokens: int, seed: int) -> None:
            x = mha_input(self.config, self.batch, num_tokens, seed, torch.float64)
            out = forward(self.module, x, what="forward(x, is_causal=True, kv_cache=cache)",
                          is_causal=True, kv_cache=self.cache)
            expect(isinstance(out, torch.Tensor), "forward returns a tensor", got=type(out).__name__)
            self.inputs.append(x)
            self.outputs.append(out.detach())

        @invariant()
        @precondition(lambda self: bool(self.inputs))
        def seq_len_counts_every_token(self) -> None:
            """The cache holds one entry per token fed so far."""
            total = sum(x.shape[1] for x in self.inputs)
            seq_len = call(lambda: self.cache.seq_len, what="KVCache.seq_len")
            expect(seq_len == total, "seq_len equals the number of tokens fed",
                   input=self._shown(), expected=total, got=seq_len)

        @invariant()
        @precondition(lambda self: bool(self.inputs))
        def outputs_equal_full_causal_pass(self) -> None:
            """Concatenated cached outputs equal one causal forward over the whole sequence."""
            with torch.no_grad():
                expected = self.ref(torch.cat(self.inputs, dim=1), is_causal=True)
            close(torch.cat(self.outputs, dim=1), expected,
                  "cached decoding equals one causal forward over the whole sequence",
                  input=self._shown())

        def _shown(self) -> dict:
            return {"module": self.config, "chunk sizes": [x.shape[1] for x in self.inputs],
                    "x": torch.cat(self.inputs, dim=1)}

    run_state_machine_as_test(CachedDecoding, settings=settings(max_examples=max_examples,
                                                                stateful_step_count=steps))
