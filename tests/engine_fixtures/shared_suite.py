"""A suite that changes the candidate's objects in place through temporaries it drops at
once (`layer.weight.copy_(w)`, `box.items.append(x)`): the change must reach the worker."""

import torch

from grader.protocol import expect, kata_test


@kata_test(level=1, category="correctness", description="a parameter written through a temporary")
def test_parameter_written_through_a_temporary(solution):
    layer = solution.Scale(2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([3.0, 4.0]))
    got = layer(torch.ones(2))
    expect(torch.equal(got, torch.tensor([3.0, 4.0])), "the copied weight is used",
           expected=[3.0, 4.0], got=got)


@kata_test(level=1, category="correctness", description="a list appended to through a temporary")
def test_list_appended_through_a_temporary(solution):
    box = solution.Box()
    box.items.append(5)
    box.items.append(7)
    expect(box.total() == 12, "both appended items are counted", expected=12, got=box.total())


@kata_test(level=1, category="correctness", description="the candidate writes through .data")
def test_candidate_writes_through_data(solution):
    base = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        base.weight.copy_(torch.tensor([[1.0, 2.0]]))
    solution.double_weight(base)
    expect(torch.equal(base.weight.detach(), torch.tensor([[2.0, 4.0]])),
           "the judge sees the doubled weight", expected=[[2.0, 4.0]], got=base.weight)


@kata_test(level=1, category="correctness", description="the judge writes through .data")
def test_judge_writes_through_data(solution):
    layer = solution.Scale(2)
    layer.weight.data.copy_(torch.tensor([5.0, 6.0]))
    got = layer(torch.ones(2))
    expect(torch.equal(got.detach(), torch.tensor([5.0, 6.0])), "the worker sees the new weight",
           expected=[5.0, 6.0], got=got)
