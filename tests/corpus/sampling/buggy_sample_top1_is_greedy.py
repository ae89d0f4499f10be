"""BUGGY (sample_top1_is_greedy): sample treats top_k == 1 as greedy (argmax): tokens tied at the top are kept by top-k but only the lowest id is ever drawn.

Otherwise a copy of the reference.

Decoding: temperature, top-k and top-p (nucleus) sampling, beam search, and the
verification step of speculative decoding.

Shapes: B batch, V vocabulary, T tokens, N live sequences, K drafted tokens.

References
- Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration" (top-p / nucleus).
- Fan et al. 2018, "Hierarchical Neural Story Generation" (top-k sampling).
- Wu et al. 2016, "Google's Neural Machine Translation System" (length penalty);
  Hugging Face `BeamSearchScorer` / `BeamHypotheses` (the finished-set rules used here).
- Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding";
  Chen et al. 2023, "Accelerating Large Language Model Decoding with Speculative Sampling".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor

NEG_INF = float("-inf")


# ----------------------------------------------------------------------------- level 1


def top_k_top_p_filter(logits: Tensor, top_k: int = 0, top_p: float = 1.0,
                       min_tokens_to_keep: int = 1) -> Tensor:
    """Mask all but the top-k, then all but the top-p nucleus, of each row of `logits`.

    logits: (B, V) float. Returns a new (B, V) tensor of the same dtype: kept entries
    unchanged, removed entries -inf; `logits` is not modified. Same result as Hugging Face's
    TopKLogitsWarper followed by TopPLogitsWarper, except that top_k <= 0 disables top-k.
    Raises ValueError when top_p is outside (0, 1] or min_tokens_to_keep < 1.
    """
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if min_tokens_to_keep < 1:
        raise ValueError(f"min_tokens_to_keep must be >= 1, got {min_tokens_to_keep}")
    filtered = logits.clone()
    vocab_size = logits.size(-1)
    if top_k > 0:
        k = min(max(top_k, min_tokens_to_keep), vocab_size)
        kth_value = torch.topk(filtered, k, dim=-1).values[..., -1:]  # (B, 1)
        # `<`, not `<=`: every token tied with the k-th value survives.
        filtered = filtered.masked_fill(filtered < kth_value, NEG_INF)
    if top_p < 1.0:
        # Ascending order: the tokens whose cumulative mass (from the least probable) stays
        # <= 1 - top_p are exactly the ones outside the smallest nucleus of mass >= top_p.
        sorted_logits, sorted_ids = torch.sort(filtered, dim=-1)  # (B, V) each
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)  # (B, V)
        remove_sorted = cumulative <= 1.0 - top_p
        remove_sorted[..., -min_tokens_to_keep:] = False  # the most probable always stay
        remove = remove_sorted.scatter(-1, sorted_ids, remove_sorted)  # back to vocab order
        filtered = filtered.masked_fill(remove, NEG_INF)
    return filtered


def sample(logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
           generator: torch.Generator | None = None) -> Tensor:
    """One token per row: (B, V) float logits -> (B,) int64 token ids.

    temperature == 0 is greedy (argmax, lowest id on ties); otherwise the logits are divided
    by the temperature, filtered by top_k_top_p_filter, turned into probabilities and sampled
    with torch.multinomial(generator=generator). ValueError when temperature < 0.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0 or top_k == 1:
        return logits.argmax(dim=-1)  # torch returns the first maximum: the lowest id
    filtered = top_k_top_p_filter(logits / temperature, top_k=top_k, top_p=top_p)
    probs = filtered.float().softmax(dim=-1)  # (B, V)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


# ----------------------------------------------------------------------------- level 2


@dataclass
class FinishedHypotheses:
    """The best finished sequences seen so far.

    Invariants: at most `num_beams` items; an offered item enters a full set only when its
    score is strictly better than the worst, which it then replaces.
    """

    num_beams: int
    items: list[tuple[list[int], float]] = field(default_factory=list)

    @property
    def is_full(self) -> bool:
        return len(self.items) >= self.num_beams

    def worst_score(self) -> float:
        return min(score for _, score in self.items)

    def offer(self, tokens: list[int], score: float) -> None:
        if not self.is_full:
            self.items.append((tokens, score))
        elif score > self.worst_score():
            worst_id = min(range(len(self.items)), key=lambda i: self.items[i][1])
            self.items[worst_id] = (tokens, score)

    def best_first(self) -> list[tuple[list[int], float]]:
        return sorted(self.items, key=lambda item: -item[1])


def _rank_candidates(sums: Tensor) -> list[int]:
    """Flat ids (beam_id * V + token_id) of (N, V) candidate sums, highest sum first; a
    stable sort keeps ties in flat order, i.e. lower beam index, then lower token id."""
    return torch.sort(sums.flatten(), descending=True, stable=True).indices.tolist()


def _can_still_win(live_sums: list[float], finished: FinishedHypotheses, cur_len: int,
                   max_new_tokens: int, length_penalty: float) -> bool:
    """Whether some live beam could still enter the (full) finished set."""
    best_len = max_new_tokens if length_penalty > 0 else cur_len
    worst = finished.worst_score()
    return any(s / best_len ** length_penalty > worst for s in live_sums)


def beam_search(step_fn: Callable[[Tensor], Tensor], prompt: list[int], num_beams: int,
                max_new_tokens: int, eos_token_id: int,
                length_penalty: float = 1.0) -> list[tuple[list[int], float]]:
    """Beam search over `step_fn` (LongTensor (N, T) -> log-probs (N, V)).

    Returns up to num_beams (generated tokens, score) pairs, best first, where
    score = sum of log-probs / len(generated tokens) ** length_penalty.
    ValueError when num_beams < 1 or max_new_tokens < 1.
    """
    if num_beams < 1:
        raise ValueError(f"num_beams must be >= 1, got {num_beams}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    finished = FinishedHypotheses(num_beams)
    live: list[tuple[list[int], float]] = [([], 0.0)]  # (generated tokens, sum of log-probs)
    for cur_len in range(1, max_new_tokens + 1):
        batch = torch.tensor([prompt + tokens for tokens, _ in live], dtype=torch.long)  # (N, T)
        log_probs = step_fn(batch).double()  # (N, V)
        vocab_size = log_probs.size(-1)
        sums = torch.tensor([s for _, s in live], dtype=torch.float64, device=log_probs.device)[:, None] + log_probs
        next_live: list[tuple[list[int], float]] = []
        for rank, flat_id in enumerate(_rank_candidates(sums)):
            beam_id, token_id = divmod(flat_id, vocab_size)
            tokens, total = live[beam_id][0] + [token_id], float(sums[beam_id, token_id])
            if token_id == eos_token_id:
                # Only an EOS that would have made the beam cut counts as a hypothesis.
                if rank < num_beams:
                    finished.offer(tokens, total / cur_len ** length_penalty)
                continue
            next_live.append((tokens, total))
            if len(next_live) == num_beams:
                break
        live = next_live
        if not live or (finished.is_full and not _can_still_win(
                [s for _, s in live], finished, cur_len, max_new_tokens, length_penalty)):
            break
    for tokens, total in live:
        finished.offer(tokens, total / len(tokens) ** length_penalty)
    return finished.best_first()


# ----------------------------------------------------------------------------- level 3


def speculative_verify(draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor,
                       generator: torch.Generator | None = None) -> list[int]:
    """Accept or reject K drafted tokens so that the emitted tokens follow the target model.

    draft_tokens: (K,) int64; draft_probs: (K, V); target_probs: (K + 1, V).
    Returns 1 to K + 1 emitted token ids: the accepted prefix of the draft, then either the
    replacement for the first rejected token or, when all K are accepted, a bonus token.
    """
    num_draft = draft_tokens.numel()
    emitted: list[int] = []
    for i in range(num_draft):
        token_id = int(draft_tokens[i])
        p_target = float(target_probs[i, token_id])
        p_draft = float(draft_probs[i, token_id])
        u = float(torch.rand((), generator=generator))
        # Accept with probability min(1, p_target / p_draft); written without the division.
        if u * p_draft < p_target:
            emitted.append(token_id)
            continue
        residual = (target_probs[i] - draft_probs[i]).clamp(min=0)  # (V,)
        if float(residual.sum()) <= 0:  # only reachable through rounding
            residual = target_probs[i]
        emitted.append(_draw(residual / residual.sum(), generator))
        return emitted
    emitted.append(_draw(target_probs[num_draft], generator))  # every draft accepted: bonus
    return emitted


def _draw(probs: Tensor, generator: torch.Generator | None) -> int:
    """One token id from a (V,) probability vector."""
    return int(torch.multinomial(probs.float(), num_samples=1, generator=generator))
