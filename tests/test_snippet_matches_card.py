"""The snippet is the card: for a failure of every kata — a @given test and, where the kata
has one, a state machine — the snippet replays the example the card shows (the calls and
arguments of the card's input, nothing of another example) and, run next to the buggy file,
prints the card's "got".

Regressions this holds: paged-kv's copy-on-write card showed its reported explicit example
while the snippet replayed the last one that ran (`PagedKVCacheAllocator(20, 3)` for
`(20, 2)`); its lockstep snippet replayed every run of the suite's own shrinker (200 lines,
35 allocators) for a card of four calls.

How "the same example" is judged, robustly across katas whose cards word their input
differently: (1) each call the card's input names (`allocate(`, `Request(`, `add_adapter(`)
is made as many times in the snippet; (2) each number of the card's input is taken by a
call of the snippet (within the card's rounding, one number of the snippet for each), after the case's
`ignore` patterns drop what the card shows but no call takes (a weight seed, a derived
scaling). One grading per kata (two where one bug fails no state machine), with only the
tests needed.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections import Counter
from dataclasses import dataclass

import pytest

from tests.kata_testing import corpus_file, grade_file, kata
from tests.snippet_output import _numbers, prints_got, run_alone


@dataclass(frozen=True)
class Case:
    slug: str
    buggy: str
    tests: tuple[str, ...]          # each must fail; the first a @given test where the kata has one
    ignore: tuple[str, ...] = ()    # patterns of the card's input no call takes
    derived_got: tuple[str, ...] = ()  # tests whose "got" is a description, not a printed value


CASES = [
    # an explicit @example reported among several failing ones; the lockstep run shrunk by
    # minimize.py's own replays
    Case("paged-kv", "buggy_no_copy_on_write.py",
         ("test_copy_on_write_of_a_shared_partial_block", "test_fork_and_copy_match_reference"),
         derived_got=("test_fork_and_copy_match_reference",)),  # "logical blocks copied: []"
    # a lockstep failure whose "got" is the state read after the last call
    Case("paged-kv", "buggy_block_count_floor_plus_one.py", ("test_allocate_and_free_match_reference",)),
    Case("scheduler", "buggy_inverted_priority.py",
         ("test_urgency_orders_priority_then_arrival_then_id", "test_batches_match_reference"),
         ignore=(r"#\d+",)),  # "step() #1" numbers the step
    Case("lora", "buggy_multi_scaling_alpha.py",
         ("test_mixed_batch_matches_per_row_lora_linear", "test_adapters_added_and_removed_between_calls"),
         ignore=(r"->\s*-?\d+",  # what add_adapter returned
                 r"'slot': \d+,?", r"'r': \d+,?")),  # the card's own notes: no call takes them
    Case("mha", "buggy_empty_cache_is_falsy.py", ("test_cached_decoding_matches_full_pass",),
         ignore=(r"'seed': \d+", r"'chunk sizes': \[[\d, ]*\],?", r"'batch': \d+,?")),
    Case("mha", "buggy_scale_zero_means_default.py", ("test_scale_argument_multiplies_scores",)),
    Case("rope", "buggy_positions_restart_each_step.py",
         ("test_decode_steps_equal_full_pass", "test_cache_grows_and_agrees"),
         ignore=(r"'(?:dim|prompt length|decode steps)': \d+,?",)),  # the test's sizes
    Case("dpo", "buggy_no_shift.py", ("test_logprobs_match_oracle",)),
    Case("flash-attn", "buggy_accumulator_not_rescaled.py", ("test_out_matches_dense_attention",)),
    Case("kv-budget", "buggy_kv_bytes_forget_values.py", ("test_kv_bytes_per_token",)),
    Case("ppo", "buggy_ratio_inverted.py", ("test_policy_loss_matches_reference",)),
    Case("sampling", "buggy_top_k_exactly_k.py", ("test_top_k_keeps_every_token_at_least_kth_value",)),
    Case("slow-decode", "buggy_no_attention_scale.py", ("test_tokens_match_generate_slow",),
         ignore=(r"'model': '[^']*',?",)),  # the model is rebuilt from its seed
]


@pytest.fixture(autouse=True)
def judges_from_the_zygote(monkeypatch):
    """Forked judges, as the corpus checks use: these are gradings of corpus files too."""
    from grader.engine.zygote import ENV_ZYGOTE

    monkeypatch.setenv(ENV_ZYGOTE, "1")


@pytest.mark.parametrize("case", CASES, ids=[f"{c.slug}-{c.buggy[6:-3]}" for c in CASES])
def test_the_snippet_replays_the_cards_example_and_prints_its_got(case, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    solution = folder / f"{kata(case.slug).module}.py"
    shutil.copy(corpus_file(case.slug, case.buggy), solution)
    for support in kata(case.slug).support_paths:
        shutil.copy(support, folder / support.name)
    card = grade_file(case.slug, solution, tests=frozenset(case.tests))
    results = {t.name: t for t in card.tests}
    for name in case.tests:
        failure = results[name]
        assert not failure.passed, f"{case.buggy} passes {name}"
        details = failure.details
        snippet = details.get("snippet")
        assert snippet, f"{name}: no snippet ({failure.message})"
        shown = _card_input(details.get("input"), case.ignore)
        assert_same_calls(shown, snippet, name)
        if name in case.derived_got or "got" not in details:
            continue
        script = folder / f"repro_{name}.py"
        script.write_text(snippet)
        ran = run_alone(script)
        assert ran.returncode == 0, f"{name}: the snippet failed:\n{ran.stderr[-2000:]}\n{snippet}"
        assert prints_got(str(details["got"]), ran.stdout), (
            f"{name}: got {details['got']!r} is not in what the snippet printed:\n"
            f"{ran.stdout[-2000:]}\n{snippet}")


def assert_same_calls(shown: str, snippet: str, test: str) -> None:
    """The snippet makes the calls the card's input names, as many times each, and takes the
    numbers the card shows."""
    made = _calls_made(snippet)
    named = Counter(re.findall(r"\b([A-Za-z_]\w*)\(", shown)) - Counter(_NOT_CALLS)
    made_of_named = Counter({name: made[name] for name in named})
    assert made_of_named == named, (
        f"{test}: the card's input names the calls {dict(named)}, the snippet makes {dict(made_of_named)}"
        f"\ncard: {shown}\n--- snippet ---\n{snippet}")
    wanted, taken = _numbers_shown(shown), _numbers_in_calls(snippet)
    missing = _first_missing(wanted, taken)
    assert missing is None, (
        f"{test}: the card's input shows {missing[1]} (its number {missing[0] + 1} of {len(wanted)}), "
        f"which no call of the snippet takes\ncard: {shown}\n--- snippet ---\n{snippet}")


# Names the cards use for values, not calls of the candidate's code.
_NOT_CALLS = {name: 10**6 for name in ("tensor", "empty", "zeros", "float", "data", "Case")}


def _card_input(value: object, ignore: tuple[str, ...]) -> str:
    text = "" if value is None else str(value)
    for pattern in ignore:
        text = re.sub(pattern, "", text)
    return text


def _calls_made(snippet: str) -> Counter:
    """How often the snippet calls each name (a method, function or class), print aside."""
    names: Counter = Counter()
    for node in ast.walk(ast.parse(snippet)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name and name != "print":
                names[name] += 1
    return names


def _numbers_shown(text: str) -> list[float]:
    text = re.sub(r"shape=\([\d, ]*\)|dtype=(?:torch\.)?\w+|device='[^']*'", "", text)
    return _numbers(re.sub(r"[A-Za-z_]\w*\d\w*", "", text))  # q15, float32: names, not values


def _numbers_in_calls(snippet: str) -> list[float]:
    """The numbers of the snippet's calls, in order (not its comments, not the random seeds)."""
    lines = [line.split("  #")[0] for line in snippet.splitlines()
             if line.strip() and not line.startswith("#") and "manual_seed(" not in line]
    return _numbers_shown("\n".join(lines))


def _first_missing(wanted: list[float], taken: list[float]) -> tuple[int, float] | None:
    """(index, value) of the first of `wanted` for which `taken` holds no number of its own
    (each number of the snippet stands for one of the card's), or None. Within the card's
    rounding: 6 significant digits, or 5 decimals for a tensor. (Not in order: a card lists
    an adapter's alpha before its matrices, the call takes it after.)"""
    left = list(taken)
    for i, value in enumerate(wanted):
        match = next((j for j, x in enumerate(left) if abs(x - value) <= 1e-5 + 1e-5 * abs(value)), None)
        if match is None:
            return i, value
        del left[match]
    return None


def test_the_number_check_tells_another_example():
    """The old paged-kv snippet (the last explicit example) fails the check; the right one passes."""
    card = "PagedKVCacheAllocator(20, 2); allocate('a', 3); fork('a', 'b'); allocate('a', 1); pop_copies()"
    right = ("a = paged_kv.PagedKVCacheAllocator(20, 2)\nprint(a.allocate('a', 3))\nprint(a.fork('a', 'b'))\n"
             "print(a.block_table('a'))\nprint(a.allocate('a', 1))\nprint(a.pop_copies())\n")
    assert_same_calls(card, right, "t")
    wrong = right.replace("(20, 2)", "(20, 3)").replace("('a', 3)", "('a', 4)")
    with pytest.raises(AssertionError, match="shows 2.0"):
        assert_same_calls(card, wrong, "t")
    twice = right + "b = paged_kv.PagedKVCacheAllocator(20, 2)\n"
    with pytest.raises(AssertionError, match="names the calls"):
        assert_same_calls(card, twice, "t")
    assert prints_got("8.", "True\n8.0\n") and not prints_got("8.", "8.5\n")  # show()'s floats
