"""The parameter-count oracle: the parameters of Hugging Face's LlamaForCausalLM with given
settings, by name and shape, in the order `model.named_parameters()` lists them — written
out in plain Python, so that grading needs no torch. tests/test_kata_kv_budget.py checks the
table name by name and shape by shape against transformers' model built on the meta device
(and against a torch.nn rebuild that runs without transformers).

Structure: model.embed_tokens (V, d); per layer self_attn.{q,k,v,o}_proj without bias,
mlp.{gate,up,down}_proj (gate only when gated), input_layernorm and post_attention_layernorm
(RMSNorm weights of d); model.norm (d); lm_head (V, d) unless tied to the embedding, which
named_parameters() then lists once. nn.Linear stores its weight as (out_features, in_features).
"""

from __future__ import annotations

import math


def llama_parameters(spec: dict) -> dict[str, tuple[int, ...]]:
    """name -> shape of every distinct parameter; `spec` holds ModelSpec's fields."""
    d, vocab, d_ff = spec["d_model"], spec["vocab_size"], spec["d_ff"]
    q_out, kv_out = spec["n_heads"] * spec["head_dim"], spec["n_kv_heads"] * spec["head_dim"]
    params: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, d)}
    for i in range(spec["n_layers"]):
        layer = f"model.layers.{i}."
        params[layer + "self_attn.q_proj.weight"] = (q_out, d)
        params[layer + "self_attn.k_proj.weight"] = (kv_out, d)
        params[layer + "self_attn.v_proj.weight"] = (kv_out, d)
        params[layer + "self_attn.o_proj.weight"] = (d, q_out)
        if spec.get("gated_mlp", True):
            params[layer + "mlp.gate_proj.weight"] = (d_ff, d)
        params[layer + "mlp.up_proj.weight"] = (d_ff, d)
        params[layer + "mlp.down_proj.weight"] = (d, d_ff)
        params[layer + "input_layernorm.weight"] = (d,)
        params[layer + "post_attention_layernorm.weight"] = (d,)
    params["model.norm.weight"] = (d,)
    if not spec.get("tied_embeddings", False):
        params["lm_head.weight"] = (vocab, d)
    return params


def llama_param_count(spec: dict) -> int:
    return sum(math.prod(shape) for shape in llama_parameters(spec).values())
