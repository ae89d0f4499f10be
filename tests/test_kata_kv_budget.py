"""The `kv-budget` kata's hidden suite rejects each realistic buggy ledger of the corpus at the
level its rules break (tests/corpus/kv_budget/corpus.toml) and gives full marks to correct
ledgers written differently. Its parameter-count oracle, Hugging Face's Llama parameter table
written out in plain Python (grading needs no torch), is checked here name by name and shape
by shape against transformers' LlamaForCausalLM built on the meta device, and against a
torch.nn rebuild that runs where transformers is not installed."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from grader.suites.kv_budget.llama_params import llama_param_count, llama_parameters
from grader.suites.kv_budget.strategies import LLAMA3_70B, LLAMA3_8B, counts
from tests.kata_testing import assert_rejected_at_level, assert_scores_full, buggy_params, correct_params

SLUG = "kv-budget"


@pytest.mark.parametrize(("entry", "seed"), buggy_params(SLUG))
def test_buggy_solution_is_rejected_at_its_level(entry, seed):
    assert_rejected_at_level(SLUG, entry, seed)


@pytest.mark.parametrize(("name", "seed"), correct_params(SLUG))
def test_correct_alternative_scores_full(name, seed):
    assert_scores_full(SLUG, name, seed)


# ---------------------------------------------------------------- the oracle


def random_specs(n: int, seed: int, gated_only: bool = False) -> list[dict]:
    rng = random.Random(seed)
    specs = []
    for _ in range(n):
        n_kv_heads = rng.randint(1, 4)
        specs.append(dict(n_layers=rng.randint(1, 3), d_model=rng.randint(1, 48),
                          n_heads=n_kv_heads * rng.randint(1, 4), n_kv_heads=n_kv_heads,
                          head_dim=rng.randint(1, 24), d_ff=rng.randint(1, 96), vocab_size=rng.randint(1, 300),
                          tied_embeddings=rng.random() < 0.5,
                          gated_mlp=True if gated_only else rng.random() < 0.7))
    return specs


class _RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))


class _Layer(nn.Module):
    def __init__(self, s: dict) -> None:
        super().__init__()
        d, hd = s["d_model"], s["head_dim"]
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(d, s["n_heads"] * hd, bias=False)
        self.self_attn.k_proj = nn.Linear(d, s["n_kv_heads"] * hd, bias=False)
        self.self_attn.v_proj = nn.Linear(d, s["n_kv_heads"] * hd, bias=False)
        self.self_attn.o_proj = nn.Linear(s["n_heads"] * hd, d, bias=False)
        self.mlp = nn.Module()
        if s["gated_mlp"]:
            self.mlp.gate_proj = nn.Linear(d, s["d_ff"], bias=False)
        self.mlp.up_proj = nn.Linear(d, s["d_ff"], bias=False)
        self.mlp.down_proj = nn.Linear(s["d_ff"], d, bias=False)
        self.input_layernorm = _RMSNorm(d)
        self.post_attention_layernorm = _RMSNorm(d)


class _Llama(nn.Module):
    """Hugging Face's LlamaForCausalLM structure in torch.nn (parameters only)."""

    def __init__(self, s: dict) -> None:
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(s["vocab_size"], s["d_model"])
        self.model.layers = nn.ModuleList(_Layer(s) for _ in range(s["n_layers"]))
        self.model.norm = _RMSNorm(s["d_model"])
        self.lm_head = nn.Linear(s["d_model"], s["vocab_size"], bias=False)
        if s["tied_embeddings"]:
            self.lm_head.weight = self.model.embed_tokens.weight


def _shapes(module: nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    return [(name, tuple(p.shape)) for name, p in module.named_parameters()]


def test_parameter_table_matches_a_torch_nn_llama_on_meta():
    for spec in random_specs(40, seed=1):
        with torch.device("meta"):
            module = _Llama(spec)
        assert _shapes(module) == list(llama_parameters(spec).items()), spec
        assert sum(p.numel() for p in module.parameters()) == llama_param_count(spec)


def test_parameter_table_matches_transformers_llama_on_meta():
    """The oracle against the real thing: LlamaForCausalLM of transformers (a dev dependency),
    built on the meta device, for random small configs (HF's Llama MLP is always gated)."""
    transformers = pytest.importorskip("transformers")
    for spec in random_specs(25, seed=2, gated_only=True):
        config = transformers.LlamaConfig(
            vocab_size=spec["vocab_size"], hidden_size=spec["d_model"], intermediate_size=spec["d_ff"],
            num_hidden_layers=spec["n_layers"], num_attention_heads=spec["n_heads"],
            num_key_value_heads=spec["n_kv_heads"], head_dim=spec["head_dim"],
            tie_word_embeddings=spec["tied_embeddings"], attention_bias=False, mlp_bias=False)
        with torch.device("meta"):
            model = transformers.LlamaForCausalLM(config)
        assert _shapes(model) == list(llama_parameters(spec).items()), spec
        assert model.num_parameters() == llama_param_count(spec), spec


def test_closed_form_split_equals_the_table():
    for spec in random_specs(60, seed=3):
        replicated, sharded = counts(spec)
        table = llama_parameters(spec)
        assert sharded == sum(torch.Size(s).numel() for n, s in table.items() if n.endswith("_proj.weight"))
        assert replicated + sharded == llama_param_count(spec)


def test_published_llama3_counts():
    assert llama_param_count(LLAMA3_8B) == 8_030_261_248
    assert llama_param_count(LLAMA3_70B) == 70_553_706_496
