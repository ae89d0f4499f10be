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


@kata_test(level=1, category="correctness", description="new types met on several threads at once")
def test_new_types_met_on_several_threads_at_once(solution):
    """Each thread has its own channel to the worker, and replies on different channels are
    read in no fixed order: every channel must carry its own declaration of a type."""
    import threading

    bridge = solution._kata_bridge
    errors: list[str] = []
    barrier = threading.Barrier(4)

    def work() -> None:
        order = list(range(200))  # the same order on every thread: all race for each new type
        try:
            barrier.wait()
            for i in order:
                got = solution.make(i).value()
                if got != i:
                    errors.append(f"make({i}).value() gave {got}")
        except Exception as exc:  # noqa: BLE001 - the verdict reports it
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expect(not errors, "every object made on every thread is usable", expected=[], got=errors[:3])
    # Work done on extra channels does not pin the judge's shared objects: once the threads
    # are done, one more request collects what they left.
    for i in range(200):
        solution.make(i).value()
    kept = len(bridge.registry.objects)
    expect(kept < 20, "the judge's shared objects are released after threaded work",
           expected="< 20", got=kept)
