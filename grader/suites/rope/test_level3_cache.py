"""Level 3 of rope, the RotaryEmbedding cos/sin cache: it equals apply_rope with
rotary_dim=dim, grows on demand, is reused across calls of any dtype and shape, and is left
as it was by a rejected call. Their rules are in test_level3.py's RULES map."""

from __future__ import annotations

import torch
from hypothesis import given, settings, strategies as st

from grader.protocol import expect, kata_test
from grader.suites._common import tensors
from grader.suites.rope.checks import (cached_positions, close, embed, expect_rotated,
                                       expect_value_error, make_embedding, position_atol, shown)
from grader.suites.rope.lockstep import expect_table_rules, run_cache_machine
from grader.suites.rope.strategies import (bases, head_dims, partial_cases, rope_cases, scalings,
                                           seeded_x)


@kata_test(level=3, category="correctness", weight=2,
           description="RotaryEmbedding(dim)(x, positions) equals apply_rope(x, positions, rotary_dim=dim)")
@settings(max_examples=20)
@given(case=partial_cases(), base=bases, scaling=scalings, batched=st.booleans(), data=st.data())
def test_rotary_embedding_matches_apply_rope(solution, reference, case, base, scaling, batched, data):
    x, positions, dim = case
    if batched:
        x, positions = data.draw(rope_cases(batched_positions=True, min_head_dim=dim))
    embedding = make_embedding(solution, dim, base, scaling)
    expect_rotated(embed(embedding, x, positions, dim=dim), reference, x, positions,
                   "RotaryEmbedding equals apply_rope with rotary_dim=dim",
                   shown_input=shown(x, positions, dim=dim, base=base, scaling=scaling),
                   base=base, rotary_dim=dim, scaling=scaling)


@kata_test(level=3, category="correctness", weight=2,
           description="the cos/sin cache grows on demand, never shrinks, and agrees with direct computation")
def test_cache_grows_and_agrees(solution, reference):
    run_cache_machine(solution, reference, max_examples=12, steps=8)


# Calls of one embedding: a prompt, a jump, calls inside the table, a jump far past the table
# (2000) and calls back inside it. (An empty call is not graded: the statement is silent on T = 0
# for RotaryEmbedding.)
GROW_THEN_REUSE = ([0, 1, 2], [10], [3, 4], [40, 7], [5], [2000], [1999, 0], [41, 42])


@kata_test(level=3, category="correctness", weight=2,
           description="a table grown by later positions, then reused inside")
def test_cache_grown_then_reused(solution, reference):
    for dim, head_dim in ((4, 4), (4, 6)):
        embedding = make_embedding(solution, dim)
        table = cached_positions(embedding)
        for i, values in enumerate(GROW_THEN_REUSE):
            positions = torch.tensor(values, dtype=torch.int64)
            x = seeded_x(90 + i, (1, 2, len(values), head_dim))
            history = [p for p in GROW_THEN_REUSE[: i + 1]]
            expect_rotated(embed(embedding, x, positions, dim=dim), reference, x, positions,
                           f"call {i + 1} of one RotaryEmbedding({dim}): the rows of a table grown by "
                           "earlier calls are those of positions 0 .. cached_positions - 1",
                           shown_input={**shown(x, positions, dim=dim), "calls so far": history},
                           rotary_dim=dim)
            after = cached_positions(embedding)
            expect_table_rules(table, after, max(values) + 1,
                               {"dim": dim, "calls so far": history, "cached_positions before": table})
            table = after
        # The last row of the table is inside it: a call there must not grow it.
        positions = torch.tensor([table - 1, 0])
        x = seeded_x(99, (1, 2, 2, head_dim))
        expect_rotated(embed(embedding, x, positions, dim=dim), reference, x, positions,
                       f"a call at the table's last position ({table - 1}) uses that row",
                       rotary_dim=dim)
        expect_table_rules(table, cached_positions(embedding), table,
                           {"dim": dim, "positions": positions.tolist(), "cached_positions before": table})


@kata_test(level=3, category="correctness", weight=1,
           description="one RotaryEmbedding called with bf16, float32, float64 and fp16 x of several shapes in turn")
def test_embedding_reused_across_dtypes_and_shapes(solution, reference):
    calls = ((torch.bfloat16, (3, 8), torch.tensor([0, 300, 4000])),
             (torch.float32, (1, 2, 3, 8), torch.tensor([1, 2, 3000])),
             (torch.float64, (2, 3, 10), torch.tensor([[0, 5, 9], [100, 200, 3999]])),
             (torch.float16, (2, 1, 3, 8), torch.tensor([[7, 8, 9], [4000, 10, 11]])),
             (torch.float32, (1, 3, 12), torch.tensor([4001, 4002, 9])))
    embedding = make_embedding(solution, 8)
    for i, (dtype, shape, positions) in enumerate(calls):
        x = seeded_x(100 + i, shape, dtype)
        expect_rotated(embed(embedding, x, positions, dim=8), reference, x, positions,
                       f"call {i + 1} ({str(dtype)[6:]}, x {shape}) of one RotaryEmbedding(8): the same "
                       "result as a fresh apply_rope (the cached cos/sin stay float32 whatever the "
                       "earlier calls' dtypes and shapes)", rotary_dim=8)


@kata_test(level=3, category="correctness", weight=1,
           description="a prompt then token-by-token decoding equals one pass over all positions")
@settings(max_examples=15)
@given(num_prompt=st.integers(1, 3), num_decode=st.integers(1, 3), dim=head_dims, x_full=st.data())
def test_decode_steps_equal_full_pass(solution, reference, num_prompt, num_decode, dim, x_full):
    total = num_prompt + num_decode
    x = x_full.draw(tensors((1, 2, total, dim), low=-3, high=3, integers=True), label="x")
    full = reference.apply_rope(x, torch.arange(total), rotary_dim=dim)
    embedding = make_embedding(solution, dim)
    pieces = [embed(embedding, x[..., :num_prompt, :], torch.arange(num_prompt), dim=dim)]
    for position in range(num_prompt, total):
        pieces.append(embed(embedding, x[..., position:position + 1, :], torch.tensor([position]), dim=dim))
    expect(all(isinstance(p, torch.Tensor) for p in pieces), "RotaryEmbedding returns tensors",
           got=[type(p).__name__ for p in pieces])
    close(torch.cat(pieces, dim=-2), full, "the prompt at positions 0..P-1, then each new token at its "
          "own position, equals rotating the whole sequence at once",
          input={"x": x, "prompt length": num_prompt, "decode steps": num_decode},
          atol=position_atol(x, torch.arange(total)), rtol=0.0)


@kata_test(level=3, category="edge cases", weight=0.5,
           description="RotaryEmbedding with int64, int32, int16, int8 and uint8 positions, (T,) and (B, T)")
def test_rotary_embedding_integer_position_dtypes(solution, reference):
    for i, dtype in enumerate((torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)):
        embedding = make_embedding(solution, 4)
        for j, values in enumerate(([0, 5, 127], [[1, 0, 1], [3, 2, 100]])):
            positions = torch.tensor(values, dtype=dtype)
            x = seeded_x(130 + 2 * i + j, (2, 1, 3, 6))
            expect_rotated(embed(embedding, x, positions, dim=4), reference, x, positions,
                           f"RotaryEmbedding(4) with {str(dtype)[6:]} positions {tuple(positions.shape)}: "
                           "positions of any integer dtype, as in apply_rope (table rows by position, "
                           "not a mask)", rotary_dim=4)


@kata_test(level=3, category="api contract", weight=0.5,
           description="RotaryEmbedding(dim) on x with D < dim raises ValueError")
def test_rotary_embedding_rejects_dim_larger_than_input(solution):
    for dim, head_dim in ((4, 2), (8, 6), (8, 2)):
        embedding = make_embedding(solution, dim)
        x, positions = seeded_x(110, (2, 3, head_dim)), torch.tensor([0, 1, 2])
        expect_value_error(lambda: embedding(x.clone(), positions.clone()), "RotaryEmbedding with dim > D",
                           shown(x, positions, dim=dim))


@kata_test(level=3, category="api contract", weight=0.5,
           description="after a rejected call (D < dim, positions not matching T), the table and the next call are as before")
def test_rotary_embedding_after_rejected_call(solution):
    embedding = make_embedding(solution, 4)
    x, positions = seeded_x(120, (2, 3, 6)), torch.tensor([0, 50, 9])
    before = embed(embedding, x, positions, dim=4)  # compared below with itself: only a leak fails here
    expect(isinstance(before, torch.Tensor), "RotaryEmbedding returns a tensor", got=type(before).__name__)
    rejected = {"x with D = 2 < dim = 4": (seeded_x(121, (2, 3, 2)), torch.tensor([0, 1, 2])),
                "positions (2,) for T = 3": (x, torch.tensor([4, 5])),
                "positions (2, 4) for x (2, 3, 6)": (x, torch.zeros(2, 4, dtype=torch.int64))}
    for what, (bad_x, bad_positions) in rejected.items():
        table = cached_positions(embedding)
        expect_value_error(lambda: embedding(bad_x.clone(), bad_positions.clone()),
                           f"RotaryEmbedding with {what}", shown(bad_x, bad_positions, dim=4))
        after = cached_positions(embedding)
        expect(after == table, f"a rejected call ({what}) at positions inside the table leaves it "
               "unchanged", input={"positions": bad_positions.tolist()}, expected=table, got=after)
        close(embed(embedding, x, positions, dim=4), before.detach().clone(), f"after a call with {what} "
              "was rejected, the next call gives the same result as before it",
              input=shown(x, positions, dim=4), atol=0.0, rtol=0.0)
