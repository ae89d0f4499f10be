"""Kata `sampling`: top-k / top-p sampling, beam search, speculative-decoding verification.

Shapes: B batch, V vocabulary, N live sequences, T tokens, K drafted tokens.

Level 1  top_k_top_p_filter and sample.
Level 2  beam_search.
Level 3  speculative_verify.

Example (level 1): logits = log([.5, .25, .25]). top_p = .5 keeps only token 0:
[-0.693, -inf, -inf]. top_p = .8 keeps all three. Logits [1., 2., 2.] with top_k = 1 keep
both 2s (ties survive).

Constraints: PyTorch only; top_k_top_p_filter handles the whole batch without a Python loop
over rows. Sampling is graded by its distribution (chi-square tests), not seed for seed.
The full statement, with the beam-search rules and an example, is in README.md.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor


def top_k_top_p_filter(logits: Tensor, top_k: int = 0, top_p: float = 1.0,
                       min_tokens_to_keep: int = 1) -> Tensor:
    """Mask all but the top-k tokens, then all but the top-p nucleus, of each row.

    Args:
        logits: (B, V) float tensor. Not modified.
        top_k: keep the tokens whose logit is >= the k-th largest logit of the row (every
            token tied with the k-th value is kept). top_k <= 0 disables top-k; top_k >= V
            keeps everything; k is raised to min_tokens_to_keep when it is smaller.
        top_p: in (0, 1]; 1.0 disables top-p. On the distribution left after top-k
            (softmax over the survivors), keep the smallest set of most probable tokens whose
            total probability is >= top_p: the token that crosses the threshold is kept.
        min_tokens_to_keep: >= 1; at least this many tokens (the most probable) survive.

    Returns:
        A new (B, V) tensor of logits' dtype: kept entries equal to the input, removed
        entries -inf. Same result as Hugging Face's TopKLogitsWarper then TopPLogitsWarper.

    Raises:
        ValueError: top_p outside (0, 1], or min_tokens_to_keep < 1.
    """
    # TODO: top-k (keep ties), then top-p on what is left, then min_tokens_to_keep.
    raise NotImplementedError


def sample(logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
           generator: torch.Generator | None = None) -> Tensor:
    """Draw one token per row.

    Args:
        logits: (B, V) float tensor.
        temperature: >= 0. 0 means greedy: argmax of each row (the lowest id on ties).
            Any temperature > 0, however tiny, samples: the tempered logits, filtered by
            top_k_top_p_filter(top_k, top_p), give the distribution to draw from.
        generator: the random generator to draw from (None: torch's global one).

    Returns:
        (B,) int64 token ids.

    Raises:
        ValueError: temperature < 0.
    """
    # TODO: greedy when temperature == 0; else temper, filter, draw.
    raise NotImplementedError


def beam_search(step_fn: Callable[[Tensor], Tensor], prompt: list[int], num_beams: int,
                max_new_tokens: int, eos_token_id: int,
                length_penalty: float = 1.0) -> list[tuple[list[int], float]]:
    """Beam search with a length penalty.

    Args:
        step_fn: called with a LongTensor (N, T): N sequences, each the prompt followed by the
            tokens generated so far; returns (N, V) float log-probabilities of the next token.
        prompt: the prompt's token ids (may be empty).
        num_beams: >= 1 beams.
        max_new_tokens: >= 1; at most this many tokens are generated.
        eos_token_id: the end-of-sequence token.
        length_penalty: a hypothesis scores its sum of log-probs divided by its generated
            length (EOS included, never the prompt) raised to length_penalty.

    Rules:
        Start with one live beam (the prompt, sum 0). Each step, every live beam x every
        token is a candidate; rank all candidates by sum of log-probs, highest first (ties:
        lower beam index, then lower token id). A candidate ending in eos_token_id becomes a
        finished hypothesis only if its rank is < num_beams; other candidates become the next
        live beams (in rank order) until there are num_beams. Keep at most num_beams finished
        hypotheses, the best by score (a tie with the worst of a full set does not enter).
        Stop after max_new_tokens steps, or earlier once the set is full and no live beam
        could still beat its worst (judged optimistically: the beam's current sum over the
        most favourable length from now to max_new_tokens). At the end, live beams are scored
        and offered to the set.

    Returns:
        The set, best first, as (generated tokens without the prompt, score) pairs: a list
        of (list[int], float), fewer than num_beams when fewer sequences exist.

    Raises:
        ValueError: num_beams < 1 or max_new_tokens < 1.
    """
    # TODO: validate; loop over steps: score candidates, walk the ranking, check stopping.
    # TODO: offer the remaining live beams, return the finished set best first.
    raise NotImplementedError


def speculative_verify(draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor,
                       generator: torch.Generator | None = None) -> list[int]:
    """Verify K drafted tokens against the target model (speculative sampling).

    Args:
        draft_tokens: (K,) int64, proposed by the draft model.
        draft_probs: (K, V) float, the draft model's distribution at each drafted position.
        target_probs: (K + 1, V) float, the target model's distributions from one pass (row
            i is the next-token distribution after draft_tokens[:i]).
        generator: the random generator for every draw (None: torch's global one).

    Rules:
        In order, accept each drafted token as often as exactness allows (always when the
        target gives it at least the draft's probability, never when it gives 0). At the
        first rejection, emit one corrected token and stop. If all K are accepted, emit a
        bonus token drawn from target_probs[K]; K = 0 emits one token from target_probs[0].

    Returns:
        The emitted token ids, a list of 1 to K + 1 Python ints. They follow the target
        model's distribution exactly.
    """
    # TODO: accept / reject each draft token; a corrected token on rejection; bonus token.
    raise NotImplementedError
