"""Kata `sampling`: top-k / top-p sampling, beam search, speculative-decoding verification.

Shapes: B batch, V vocabulary, N live sequences, T tokens, K drafted tokens.

Level 1  top_k_top_p_filter and sample.
Level 2  beam_search.
Level 3  speculative_verify.

Example (level 1): logits = log([.5, .25, .25]). top_p = .5 keeps only token 0 (its mass .5
already reaches top_p): [-0.693, -inf, -inf]. top_p = .8 keeps all three (.75 < .8).
top_k = 1 keeps token 0; logits [1., 2., 2.] with top_k = 1 keep both 2s (ties survive).

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
            Otherwise the logits are divided by the temperature, filtered with
            top_k_top_p_filter(top_k, top_p), turned into probabilities with softmax and
            sampled with torch.multinomial(..., generator=generator).
        generator: the random generator to draw from (None: torch's global one).

    Returns:
        (B,) int64 token ids.

    Raises:
        ValueError: temperature < 0.
    """
    # TODO: greedy when temperature == 0; else scale, filter, softmax, multinomial.
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
        length_penalty: score = sum of log-probs / gen_len ** length_penalty, gen_len the
            number of generated tokens including EOS, never the prompt.

    Rules:
        Start with one live beam (the prompt, sum 0). Each step, every live beam x every
        token is a candidate with sum + logp; rank all candidates by sum, highest first (ties:
        lower beam index, then lower token id). Walk the ranking: a candidate ending in
        eos_token_id becomes a finished hypothesis only if its rank is < num_beams; other
        candidates become the next live beams (in rank order) until there are num_beams.
        Finished hypotheses are kept in a set of at most num_beams, the best by score; an
        offered one that is not better than the worst of a full set is dropped.
        Stop after max_new_tokens steps, or earlier once the set is full and no live beam can
        still beat its worst: a live beam with sum s can at best score
        s / max_new_tokens ** length_penalty when length_penalty > 0, and
        s / cur_len ** length_penalty otherwise (cur_len = tokens generated so far).
        At the end, live beams are scored the same way and offered to the set.

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
        In order, token x_i is accepted with probability
        min(1, target_probs[i, x_i] / draft_probs[i, x_i]). At the first rejection, a
        replacement is drawn from normalize(max(0, target_probs[i] - draft_probs[i])) and
        the result ends. If all K are accepted, a bonus token is drawn from target_probs[K].

    Returns:
        The emitted token ids, a list of 1 to K + 1 Python ints. They follow the target
        model's distribution exactly.
    """
    # TODO: accept / reject each draft token; residual sample on rejection; bonus token.
    raise NotImplementedError
