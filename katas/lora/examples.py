"""Visible examples for the `lora` kata: `kata check` runs them against your file.

Every number here can be checked by hand; the hidden suite checks the same properties on
many generated inputs.
"""

import torch
from torch import nn

from grader.protocol import expect, kata_test


def identity_base(in_features=2, out_features=2):
    """nn.Linear with weight = I (or its top-left corner) and no bias."""
    base = nn.Linear(in_features, out_features, bias=False)
    with torch.no_grad():
        base.weight.copy_(torch.eye(out_features, in_features))
    return base


def worked_example_layer(solution, **kwargs):
    """The statement's example: r = 1, alpha = 2, A = [[1, 1]], B = [[1], [0]]."""
    layer = solution.LoRALinear(identity_base(), 1, 2.0, **kwargs)
    with torch.no_grad():
        layer.lora_A.copy_(torch.tensor([[1.0, 1.0]]))
        layer.lora_B.copy_(torch.tensor([[1.0], [0.0]]))
    return layer


# ---------------------------------------------------------------------- Level 1


@kata_test(level=1, category="api contract", description="shapes of lora_A and lora_B; base frozen")
def test_parameters(solution):
    layer = solution.LoRALinear(nn.Linear(3, 2), 4, 8.0)
    shapes = {name: tuple(p.shape) for name, p in layer.named_parameters() if p.requires_grad}
    expect(shapes == {"lora_A": (4, 3), "lora_B": (2, 4)},
           "the trainable parameters (requires_grad) and their shapes",
           input="LoRALinear(nn.Linear(3, 2), r=4, alpha=8.0)",
           expected={"lora_A": (4, 3), "lora_B": (2, 4)}, got=shapes)


@kata_test(level=1, category="correctness", description="a fresh layer computes base(x)")
def test_init_equals_base(solution):
    base = nn.Linear(3, 2)
    layer = solution.LoRALinear(base, 2, 16.0)
    x = torch.tensor([[1.0, 2.0, 3.0]])
    with torch.no_grad():
        expected, got = base(x), layer(x)
    expect(torch.allclose(got, expected), "a new layer's forward(x) equals base(x)",
           input="layer = LoRALinear(base=nn.Linear(3, 2), r=2, alpha=16.0); layer(x=[[1., 2., 3.]])",
           expected=expected, got=got)


# How the worked example's layer is shown when an example fails.
WORKED_LAYER = ("layer = LoRALinear(base=nn.Linear(2, 2, bias=False) with weight I, r=1, alpha=2.0{}); "
                "lora_A = [[1., 1.]]; lora_B = [[1.], [0.]]")


@kata_test(level=1, category="correctness",
           description="the worked example: forward of x = [1, 2]")
def test_worked_example_forward(solution):
    layer = worked_example_layer(solution)
    with torch.no_grad():
        got = layer(torch.tensor([1.0, 2.0]))
    expect(torch.allclose(got, torch.tensor([7.0, 2.0])), "the output of layer(x)",
           input=WORKED_LAYER.format("") + "; layer(x=[1., 2.])", expected=[7.0, 2.0], got=got)


@kata_test(level=1, category="correctness", description="eval mode ignores dropout")
def test_eval_ignores_dropout(solution):
    layer = worked_example_layer(solution, dropout=0.9)
    layer.eval()
    with torch.no_grad():
        got = layer(torch.tensor([1.0, 2.0]))
    expect(torch.allclose(got, torch.tensor([7.0, 2.0])), "the output of layer(x) in eval mode",
           input=WORKED_LAYER.format(", dropout=0.9") + "; layer.eval(); layer(x=[1., 2.])",
           expected=[7.0, 2.0], got=got)


# ---------------------------------------------------------------------- Level 2


@kata_test(level=2, category="correctness",
           description="delta_weight and merge on the worked example")
def test_worked_example_merge(solution):
    layer = worked_example_layer(solution)
    calls = WORKED_LAYER.format("")
    with torch.no_grad():
        delta = layer.delta_weight()
    expect(torch.allclose(delta, torch.tensor([[2.0, 2.0], [0.0, 0.0]])),
           "the matrix layer.delta_weight() returns", input=calls + "; layer.delta_weight()",
           expected=[[2.0, 2.0], [0.0, 0.0]], got=delta)
    calls += "; layer.merge()"
    layer.merge()
    expect(layer.merged, "layer.merged after merge()", input=calls, expected=True, got=layer.merged)
    expect(torch.allclose(layer.base.weight, torch.tensor([[3.0, 2.0], [0.0, 1.0]])),
           "layer.base.weight after merge()", input=calls, expected=[[3.0, 2.0], [0.0, 1.0]],
           got=layer.base.weight)
    with torch.no_grad():
        got = layer(torch.tensor([1.0, 2.0]))
    expect(torch.allclose(got, torch.tensor([7.0, 2.0])), "the output of layer(x) after merge()",
           input=calls + "; layer(x=[1., 2.])", expected=[7.0, 2.0], got=got)
    layer.unmerge()
    expect(torch.allclose(layer.base.weight, torch.eye(2)), "layer.base.weight after unmerge()",
           input=calls + "; layer(x=[1., 2.]); layer.unmerge()", expected=[[1.0, 0.0], [0.0, 1.0]],
           got=layer.base.weight)


@kata_test(level=2, category="correctness", description="rsLoRA: delta_weight with use_rslora=True")
def test_rslora(solution):
    layer = solution.LoRALinear(identity_base(), 4, 2.0, use_rslora=True)
    with torch.no_grad():
        layer.lora_A.copy_(torch.ones(4, 2))
        layer.lora_B.copy_(torch.ones(2, 4))
        delta = layer.delta_weight()
    expect(torch.allclose(delta, torch.full((2, 2), 4.0)),
           "the matrix layer.delta_weight() returns with use_rslora=True",
           input="layer = LoRALinear(base=nn.Linear(2, 2, bias=False) with weight I, r=4, alpha=2.0, "
                 "use_rslora=True); lora_A = ones(4, 2); lora_B = ones(2, 4); layer.delta_weight()",
           expected=[[4.0, 4.0], [4.0, 4.0]], got=delta)


# ---------------------------------------------------------------------- Level 3


@kata_test(level=3, category="correctness",
           description="a mixed batch: adapter 'a', base only, adapter 'b'")
def test_mixed_batch(solution):
    layer = solution.MultiLoRALinear(identity_base(), 2)
    slot_a = layer.add_adapter("a", torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0], [0.0]]), 2.0)
    slot_b = layer.add_adapter("b", torch.eye(2), torch.tensor([[0.0, 1.0], [1.0, 0.0]]), 2.0)
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]])
    with torch.no_grad():
        got = layer(x, torch.tensor([slot_a, -1, slot_b]))
    expected = torch.tensor([[7.0, 2.0], [1.0, 2.0], [3.0, 3.0]])
    expect(torch.allclose(got, expected), "the output of layer(x, adapter_ids)",
           input="layer = MultiLoRALinear(base=nn.Linear(2, 2, bias=False) with weight I, max_rank=2); "
                 f"slot_a = add_adapter('a', lora_A=[[1., 1.]], lora_B=[[1.], [0.]], alpha=2.0) -> {slot_a}; "
                 f"slot_b = add_adapter('b', lora_A=I, lora_B=[[0., 1.], [1., 0.]], alpha=2.0) -> {slot_b}; "
                 f"layer(x=[[1., 2.]] * 3, adapter_ids=[{slot_a}, -1, {slot_b}])",
           expected=expected, got=got)


@kata_test(level=3, category="edge cases",
           description="removed adapters' slots are unknown; unknown names raise")
def test_remove(solution):
    layer = solution.MultiLoRALinear(identity_base(), 2)
    slot = layer.add_adapter("a", torch.ones(1, 2), torch.ones(2, 1), 1.0)
    layer.remove_adapter("a")
    calls = (f"layer = MultiLoRALinear(base=nn.Linear(2, 2, bias=False) with weight I, max_rank=2); "
             f"add_adapter('a', lora_A=ones(1, 2), lora_B=ones(2, 1), alpha=1.0) -> {slot}; "
             "remove_adapter('a')")
    try:
        layer(torch.ones(1, 2), torch.tensor([slot]))
    except ValueError:
        pass
    else:
        expect(False, "forward with a freed slot raises ValueError",
               input=calls + f"; layer(x=ones(1, 2), adapter_ids=[{slot}])", expected="ValueError",
               got="no exception")
    try:
        layer.remove_adapter("a")
    except KeyError:
        return
    expect(False, "remove_adapter of an unknown name raises KeyError",
           input=calls + "; remove_adapter('a')", expected="KeyError", got="no exception")
