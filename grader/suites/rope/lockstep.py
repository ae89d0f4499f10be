"""The RotaryEmbedding state machine of rope level 3: one embedding driven through calls at
arbitrary positions and decode steps; every output is checked against the reference's
apply_rope, and the table length against the statement's rules (covers what a call needs,
unchanged by a call inside it, never shrinks)."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from grader.protocol import expect
from grader.suites.rope.checks import cached_positions, close, embed, make_embedding, position_atol, shown
from grader.suites.rope.strategies import bases


def expect_table_rules(before: int, after: Any, needed: int, input: Any) -> None:
    """The statement's rules for cached_positions around one call that needed positions
    0 .. needed - 1 (needed 0 for an empty call)."""
    expect(isinstance(after, int) and after >= 0, "cached_positions is a non-negative int",
           input=input, got=after)
    expect(after >= needed, "after a call, cached_positions covers max(positions) + 1",
           input=input, expected=f">= {needed}", got=after)
    expect(after >= before, "cached_positions never shrinks", input=input, expected=f">= {before}", got=after)
    if needed <= before:
        expect(after == before, "a call inside the table does not change it", input=input,
               expected=before, got=after)


def run_cache_machine(solution: Any, reference: Any, *, max_examples: int, steps: int) -> None:
    class CacheMachine(RuleBasedStateMachine):
        """Drives one RotaryEmbedding through calls at arbitrary positions and decode
        steps, checking every output against the reference apply_rope."""

        def __init__(self) -> None:
            super().__init__()
            self.embedding = None
            self.dim, self.head_dim, self.next_position = 2, 2, 0
            self.table_len = 0

        @initialize(dim=st.sampled_from([2, 4, 6]), extra=st.sampled_from([0, 2]), base=bases)
        def build(self, dim, extra, base):
            self.dim, self.head_dim, self.base = dim, dim + extra, base
            self.embedding = make_embedding(solution, dim, base)
            self.table_len = cached_positions(self.embedding)

        def _check_call(self, positions: torch.Tensor, seed: int) -> None:
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn(1, 2, len(positions), self.head_dim, generator=gen)
            got = embed(self.embedding, x, positions, dim=self.dim)
            expected = reference.apply_rope(x, positions, self.base, rotary_dim=self.dim)
            close(got, expected, "RotaryEmbedding agrees with direct computation after the calls "
                  "before it", input=shown(x, positions, dim=self.dim), atol=position_atol(x, positions), rtol=0.0)
            after = cached_positions(self.embedding)
            expect_table_rules(self.table_len, after, int(positions.max()) + 1,
                               {"positions": positions.tolist(), "cached_positions before": self.table_len})
            self.table_len = after

        @rule(positions=st.lists(st.integers(0, 300), min_size=1, max_size=3), seed=st.integers(0, 2**16))
        def call_at(self, positions, seed):
            self._check_call(torch.tensor(positions), seed)

        @rule(num_tokens=st.integers(1, 3), seed=st.integers(0, 2**16))
        def decode_next(self, num_tokens, seed):
            start = self.next_position
            self._check_call(torch.arange(start, start + num_tokens), seed)
            self.next_position = start + num_tokens

        @invariant()
        def cached_positions_is_an_int(self):
            """cached_positions is a non-negative int at all times."""
            if self.embedding is not None:
                value = cached_positions(self.embedding)
                expect(isinstance(value, int) and value >= 0, "cached_positions is a non-negative int", got=value)

    run_state_machine_as_test(CacheMachine, settings=settings(max_examples=max_examples,
                                                              stateful_step_count=steps))
