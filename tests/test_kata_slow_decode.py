"""The `slow-decode` kata's hidden suite rejects each realistic buggy solution of the corpus at
the level its rules break (tests/corpus/slow_decode/corpus.toml), a solution that just calls
generate_slow among them, and gives full marks to correct solutions written differently.

The suite's shortcuts are checked here against what they stand for: its oracle (the
reference's tokens confirmed by one full forward pass) against generate_slow itself, and its
counted FLOP budget against FlopCounterMode's count of the reference's generation."""

from __future__ import annotations

import pytest
import torch

from grader.suites.slow_decode import strategies
from grader.worker.measure import measuring
from tests.kata_testing import (assert_rejected_at_level, assert_scores_full, buggy_params,
                                correct_params)

import reference.slow_decode as reference  # registers slow_decode_model  # isort: skip
from slow_decode_model import TinyLM, generate_slow  # isort: skip

SLUG = "slow-decode"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


def test_worked_example_numbers_of_the_statement():
    model = TinyLM(seed=0)
    prompts = [[5, 9, 2], [7]]
    want = [[15, 56, 15, 56, 57, 60], [11, 39, 14, 38, 62, 48]]
    assert generate_slow(model, prompts, 6) == want == reference.generate(model, prompts, 6)
    assert generate_slow(model, prompts, 6, eos_id=56) == [[15, 56], want[1]]
    assert reference.generate(model, prompts, 6, eos_id=56) == [[15, 56], want[1]]
    with measuring("flops", "ops", "syncs") as slow:
        generate_slow(model, prompts, 6)
    with measuring("flops", "syncs") as fast:
        reference.generate(model, prompts, 6)
    # 1,634 ops, as the statement says: measured with the FLOPs in one block, as alone (torch's
    # FlopCounterMode, before the meter left its module tracker out, added the tracker's own
    # 384 torch calls to the count).
    assert (round(slow.flops / 1e6, 2), slow.ops, slow.syncs) == (2.78, 1634, 12)
    assert (round(fast.flops / 1e6, 2), fast.syncs) == (0.86, 6)


def test_the_examples_figure_of_generate_slow_is_what_it_counts():
    """katas/slow_decode/examples.py compares a solution's FLOPs with generate_slow's on one
    call, given as a number: the number is what count_flops counts."""
    import importlib.util

    from grader.catalog import load_catalog

    path = load_catalog().get(SLUG).examples_path
    spec = importlib.util.spec_from_file_location("slow_decode_examples", path)
    assert spec is not None and spec.loader is not None
    examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(examples)
    with measuring("flops") as slow:
        generate_slow(TinyLM(seed=0), [[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]], 10)
    assert examples.SLOW_FLOPS == slow.flops


def _random_inputs(n: int):
    gen = torch.Generator().manual_seed(18)
    for _ in range(n):
        seed = int(torch.randint(0, 32, (1,), generator=gen))
        lengths = torch.randint(1, 9, (int(torch.randint(1, 5, (1,), generator=gen)),), generator=gen).tolist()
        prompts = strategies.random_prompts(int(torch.randint(0, 2**16, (1,), generator=gen)), lengths)
        yield seed, prompts, int(torch.randint(0, 9, (1,), generator=gen))


def test_oracle_gives_generate_slows_tokens():
    """On clear-margin inputs (the only ones the suite uses) the oracle's tokens are
    generate_slow's, with and without an EOS; most random inputs have a clear margin."""
    clear = 0
    for seed, prompts, n in _random_inputs(24):
        if not strategies.clear_margin(seed, prompts, n):
            continue
        clear += 1
        model = strategies.fresh_model(seed)
        assert strategies.slow_tokens(seed, prompts, n) == generate_slow(model, prompts, n)
        generated = [t for out in generate_slow(model, prompts, n) for t in out]
        if generated:
            eos = generated[len(generated) // 2]
            assert strategies.slow_tokens(seed, prompts, n, eos) == generate_slow(model, prompts, n, eos)
    assert clear >= 18


def test_oracle_gives_generate_slows_tokens_on_other_model_shapes():
    """The oracle builds models of other shapes (test_tokens_match_on_other_model_shapes) the
    way generate_slow sees them: the same tokens, prompts filling max_seq_len included."""
    for shape in strategies.OTHER_SHAPES:
        prompts = strategies.random_prompts(100, [shape["max_seq_len"] - 6] * 2, shape["vocab_size"])
        for seed in range(4):
            if strategies.clear_margin(seed, prompts, 6, **shape):
                model = strategies.fresh_model(seed, **shape)
                assert strategies.slow_tokens(seed, prompts, 6, **shape) == generate_slow(model, prompts, 6)
                break
        else:
            raise AssertionError(f"no clear-margin input for {shape}")


def test_oracle_refuses_a_wrong_proposal():
    model = strategies.fresh_model(0)
    prompts = [[5, 9, 2]]
    right = reference.generate(model, prompts, 4)
    assert min(strategies.confirmed_margins(model, prompts, right)) >= strategies.MIN_MARGIN
    wrong = [right[0][:2] + [(right[0][2] + 1) % strategies.VOCAB] + right[0][3:]]
    with pytest.raises(AssertionError):
        strategies.confirmed_margins(model, prompts, wrong)


def test_counted_flop_budget_equals_the_references_count():
    cases = [(s, p, n, None) for s, p, n in _random_inputs(6)]
    for seed in (0, 1):
        for runner in (True, False):
            work = strategies.eos_scenario(seed, runner=runner)
            cases.append((seed, work["prompts"], work["max_new_tokens"], work["eos_id"]))
    for seed, prompts, n, eos in cases:
        with measuring("flops") as counted:
            outputs = reference.generate(strategies.fresh_model(seed), prompts, n, eos)
        assert strategies.cached_flops(prompts, outputs) == counted.flops, (seed, prompts, n, eos)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_eos_scenarios_have_the_shape_the_suite_relies_on(seed):
    for runner in (True, False):
        work = strategies.eos_scenario(seed, runner=runner)
        outputs = generate_slow(strategies.fresh_model(seed), work["prompts"], work["max_new_tokens"],
                                work["eos_id"])
        finished = sorted(len(o) - 1 for o in outputs if o[-1] == work["eos_id"])
        assert finished == work["finish_steps"] and finished[0] == 0 and len(set(finished)) >= 3
        assert finished[-1] <= 6
        if runner:
            assert len(outputs[-1]) == work["max_new_tokens"] and work["eos_id"] not in outputs[-1]
        else:
            assert len(outputs) == len(finished)
            assert work["max_new_tokens"] >= 4 * (finished[-1] + 1)


@pytest.mark.parametrize("seed", [0, 1])
def test_same_step_scenarios_finish_two_requests_per_step(seed):
    work = strategies.same_step_scenario(seed)
    outputs = generate_slow(strategies.fresh_model(seed), work["prompts"], work["max_new_tokens"], work["eos_id"])
    finished = sorted(len(o) - 1 for o in outputs if o[-1] == work["eos_id"])
    assert finished == work["finish_steps"] and finished[0] == 0
    assert all(finished.count(step) == 2 for step in finished)
    assert len(outputs[2]) == work["max_new_tokens"] and work["eos_id"] not in outputs[2]
