"""Returns generate_slow's result: the right tokens, at the full cost of recomputing every
prefix (correct tokens are necessary, not sufficient)."""

from __future__ import annotations

from slow_decode_model import TinyLM, generate_slow


def generate(model: TinyLM, prompts: list[list[int]], max_new_tokens: int,
             eos_id: int | None = None) -> list[list[int]]:
    """Greedy decoding: exactly generate_slow's tokens."""
    return generate_slow(model, prompts, max_new_tokens, eos_id)
