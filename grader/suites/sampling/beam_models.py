"""Step functions and cases for the beam-search tests (level 2).

`TinyModel` is the `step_fn` passed to the candidate: a callable (the only kind of
suite-defined object a suite may hand to a solution), whose next-token log-probabilities are
a pseudo-random function of the whole sequence, or read from a table of probabilities per
generated prefix. It records every call, so the suite sees what beam_search asked for.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import strategies as st

from grader.protocol import PropertyFailure, call, expect

DEFAULT_TABLE_ROW = [0.4, 0.3, 0.2, 0.1]  # next-token probabilities for prefixes not in a table


class TinyModel:
    """A step_fn: (N, T) LongTensor -> (N, V) log-probabilities of `dtype`."""

    def __init__(self, vocab_size: int, seed: int, *, scale: float = 1.5, eos_token_id: int = 0,
                 eos_bias: float = 0.0, prompt: list[int] | None = None,
                 table: dict[tuple[int, ...], list[float]] | None = None,
                 dtype: torch.dtype = torch.float64) -> None:
        self.vocab_size, self.seed, self.scale = vocab_size, seed, scale
        self.eos_token_id, self.eos_bias = eos_token_id, eos_bias
        self.prompt = list(prompt or [])
        self.table = table
        self.dtype = dtype
        self.calls: list[torch.Tensor] = []
        self._cache: dict[tuple[int, ...], torch.Tensor] = {}

    def log_probs(self, sequence: tuple[int, ...]) -> torch.Tensor:
        """(V,) log-probabilities of the next token after `sequence`, as step_fn returns them."""
        if sequence not in self._cache:
            if self.table is not None:
                generated = sequence[len(self.prompt):]
                row = self.table.get(generated, DEFAULT_TABLE_ROW[: self.vocab_size])
                logp = torch.tensor(row, dtype=torch.float64).log()
            else:
                key = hash((self.seed,) + sequence) & 0x7FFFFFFF
                g = torch.Generator().manual_seed(key)
                logits = torch.randn(self.vocab_size, generator=g, dtype=torch.float64) * self.scale
                logits[self.eos_token_id] += self.eos_bias
                logp = logits.log_softmax(-1)
            self._cache[sequence] = logp.to(self.dtype)
        return self._cache[sequence]

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        self.calls.append(tokens.detach().clone() if isinstance(tokens, torch.Tensor) else tokens)
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
            raise PropertyFailure("step_fn is called with a LongTensor of shape (N, T)",
                                  got=tokens if isinstance(tokens, torch.Tensor) else type(tokens).__name__)
        rows = [tuple(int(t) for t in row) for row in tokens.tolist()]
        return torch.stack([self.log_probs(row) for row in rows])

    def sequence_score(self, generated: list[int], length_penalty: float) -> float:
        total = sum(float(self.log_probs(tuple(self.prompt + generated[:i]))[tok])
                    for i, tok in enumerate(generated))
        return total / len(generated) ** length_penalty


@st.composite
def beam_cases(draw: Any, *, max_vocab: int = 4, max_steps: int = 4) -> dict:
    vocab = draw(st.integers(2, max_vocab))
    eos = draw(st.integers(0, vocab - 1))
    prompt = draw(st.lists(st.integers(0, vocab - 1), min_size=0, max_size=3))
    return {"vocab_size": vocab, "eos_token_id": eos, "prompt": prompt,
            "num_beams": draw(st.integers(1, 4)), "max_new_tokens": draw(st.integers(1, max_steps)),
            "length_penalty": draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0])),
            "seed": draw(st.integers(0, 2**16)), "eos_bias": draw(st.sampled_from([-1.0, 0.0, 1.5]))}


def make_model(case: dict, dtype: torch.dtype = torch.float64) -> TinyModel:
    if "table" in case:
        return TinyModel(case["vocab_size"], 0, prompt=case["prompt"], table=case["table"], dtype=dtype)
    return TinyModel(case["vocab_size"], case["seed"], eos_token_id=case["eos_token_id"],
                     eos_bias=case.get("eos_bias", 0.0), prompt=case["prompt"], dtype=dtype)


def run_beam(solution: Any, model: TinyModel, case: dict) -> list:
    prompt = list(case["prompt"])
    got = call(solution.beam_search, model, prompt, case["num_beams"], case["max_new_tokens"],
               case["eos_token_id"], case["length_penalty"], what="beam_search")
    shape_ok = isinstance(got, list) and all(
        isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], list)
        and all(isinstance(t, int) for t in h[0]) and isinstance(h[1], float) for h in got)
    expect(shape_ok, "beam_search returns a list of (list of int tokens, float score)",
           input=case_input(case), got=got)
    # A copy: the lists the candidate returned stay shared with it, and a test compares a
    # first result with a later one.
    return [(list(tokens), score) for tokens, score in got]


def reference_beam(reference: Any, case: dict, dtype: torch.dtype = torch.float64) -> list:
    return reference.beam_search(make_model(case, dtype), list(case["prompt"]), case["num_beams"],
                                 case["max_new_tokens"], case["eos_token_id"], case["length_penalty"])


def case_input(case: dict) -> dict:
    shown = {k: v for k, v in case.items() if k not in ("seed", "eos_bias", "table")}
    if "table" in case:
        shown["next-token probabilities after each generated prefix"] = case["table"]
        shown["any other prefix"] = DEFAULT_TABLE_ROW[: case["vocab_size"]]
    else:
        shown["model"] = f"TinyModel(seed={case['seed']}, eos_bias={case.get('eos_bias', 0.0)})"
    return shown


def same_hypotheses(got: list, expected: list) -> bool:
    if [tokens for tokens, _ in got] != [tokens for tokens, _ in expected]:
        return False
    return all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) for (_, a), (_, b) in zip(got, expected))


def same_hypothesis_set(got: list, expected: list) -> bool:
    """Like same_hypotheses, but in any order: for results whose scores all tie (the order of
    equal scores is the candidate's choice)."""
    return same_hypotheses(sorted(got, key=lambda h: h[0]), sorted(expected, key=lambda h: h[0]))


def shown_hypotheses(hyps: list) -> list:
    return [(tokens, round(score, 6)) for tokens, score in hyps]


def all_sequences(vocab: int, eos: int, max_new_tokens: int) -> list[list[int]]:
    """Every sequence beam search could return: ends with EOS, or has max_new_tokens tokens."""
    done: list[list[int]] = []
    frontier: list[list[int]] = [[]]
    while frontier:
        prefix = frontier.pop()
        for token in range(vocab):
            seq = prefix + [token]
            (done if token == eos or len(seq) == max_new_tokens else frontier).append(seq)
    return done


def table_case(table: dict, **settings_: Any) -> dict:
    base = {"vocab_size": 4, "eos_token_id": 0, "prompt": [], "length_penalty": 0.0, "seed": 0}
    return {**base, **settings_, "table": table}


def run_table_case(solution: Any, reference: Any, case: dict, prop: str,
                   dtypes: tuple[torch.dtype, ...] = (torch.float64, torch.float32)) -> None:
    """Compare with the reference on a table model, for step_fn outputs of each dtype."""
    for dtype in dtypes:
        got = run_beam(solution, make_model(case, dtype), case)
        expected = reference_beam(reference, case, dtype)
        shown = case_input(case) if dtype == torch.float64 else {**case_input(case), "step_fn returns": str(dtype)}
        expect(same_hypotheses(got, expected), prop, input=shown,
               expected=shown_hypotheses(expected), got=shown_hypotheses(got))
