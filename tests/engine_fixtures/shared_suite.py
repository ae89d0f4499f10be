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


@kata_test(level=1, category="correctness", description="a call and the state it leaves, in one request")
def test_call_then_read_is_a_call_then_its_reads(solution):
    from grader.protocol import call_then_read

    tally = solution.Tally()
    first, reads, of_result = call_then_read(tally, "add", (2,), [("total", None), ("doubled", ())],
                                             [("__len__", ())])
    expect(first[0] and first[1] == [2] and reads == [(True, 2), (True, 4)] and of_result == [(True, 1)],
           "the call's value, then the reads on the object and on the value",
           expected="(True, [2]), [(True, 2), (True, 4)], [(True, 1)]", got=(first, reads, of_result))
    first, reads, of_result = call_then_read(tally, "add", (-1,), [("total", None), ("missing", None)],
                                             [("__len__", ())])
    expect(not first[0] and isinstance(first[1], ValueError) and reads[0] == (True, 2)
           and not reads[1][0] and isinstance(reads[1][1], AttributeError) and of_result == [],
           "a call that raised: its exception, the reads all the same (each its own outcome), none on its value",
           got=(first, reads, of_result))


@kata_test(level=1, category="correctness", description="an argument built with the candidate's class, in one request")
def test_new_then_call_builds_the_argument_in_the_same_request(solution):
    from grader.engine.transcript import active_transcript
    from grader.protocol import new_then_call

    ledger = solution.Ledger()
    entry = solution.Entry  # (fetched once, as a suite's module proxy keeps it)
    bridge, sent = ledger._kata_bridge, []
    original = bridge.request
    bridge.request = lambda op, *args: (sent.append(op), original(op, *args))[1]
    try:
        made, outcome, reads = new_then_call(ledger, "add_entry", entry, ("a",), {"size": 2}, [("names", ())])
    finally:
        del bridge.request
    expect(sent == ["new_then_call"], "one request", got=sent)
    calls = active_transcript().calls
    recorded = [(c.op, c.name, c.raised) for c in calls[-2:]]
    expect(recorded == [("call", None, None), ("callmethod", "add_entry", None)]
           and calls[-1].args == (made[1],) and calls[-2].result is made[1],
           "recorded as the constructor's call, then the method's with its object", got=recorded)
    expect(made[0] and outcome == (True, 1) and reads == [(True, ["a"])] and made[1].size == 2,
           "the object made, the call's value, the reads", got=(made, outcome, reads))
    made, outcome, reads = new_then_call(ledger, "add_entry", solution.Entry, ("b", -1), reads=[("names", ())])
    calls = active_transcript().calls
    expect(not made[0] and isinstance(made[1], ValueError) and outcome is None and reads == []
           and calls[-1].op == "call" and calls[-1].raised == "ValueError",
           "a constructor that raised: its exception, no call, no reads, only its own entry",
           got=(made, outcome, reads, [(c.op, c.name, c.raised) for c in calls[-2:]]))
    made, outcome, reads = new_then_call(ledger, "add_entry", solution.Entry, ("a",), reads=[("names", ())])
    expect(made[0] and not outcome[0] and isinstance(outcome[1], KeyError) and reads == [(True, ["a"])],
           "a call that raised: its exception, the reads all the same", got=(made, outcome, reads))


@kata_test(level=1, category="correctness", description="a script: fixed calls in one request, recorded as taken")
def test_script_makes_fixed_calls_in_one_request(solution):
    from grader.engine.transcript import active_transcript
    from grader.protocol import Script

    ledger, entry = solution.Ledger(), solution.Entry
    entries = [("new", "add_entry", entry, ("a",), {}, [], ()),
               ("new", "add_entry", entry, ("b",), {"size": 3}, [("names", ())], ()),
               ("call", "drop", ("zz",), [], [], ("KeyError",)),  # raises, and the script goes on
               ("repeat", ("call", "pop", (), [("busy", ())], [], ()), 10, ("busy", ())),
               ("call", "names", (), [], [], ())]
    bridge, sent = ledger._kata_bridge, []
    original = bridge.request
    bridge.request = lambda op, *args: (sent.append(op), original(op, *args))[1]
    try:
        script = Script(ledger, entries)
    finally:
        del bridge.request
    expect(sent == ["script"], "one request", got=sent)
    shapes = [(r[0], r[1][0], r[1][1] if r[0] in ("call", "read") and r[1][0] else None) for r in script.records]
    expect(shapes == [("new", True, None), ("new", True, None), ("call", False, None), ("read", True, True),
                      ("call", True, "a"), ("call", True, "b"), ("call", True, [])]
           and script.records[1][3] == [(True, ["a", "b"])] and script.records[5][2] == [(True, False)]
           and isinstance(script.records[2][1][1], KeyError),
           "a record per call, in order; the repeat ends when its read gives False", got=script.records)
    before = len(active_transcript().calls)
    expect(before == 0 or active_transcript().calls[-1].name != "names",
           "nothing of a script is in the transcript before it is taken", got=before)
    taken = [script.take() for _ in range(8)]
    expect(taken[:7] == script.records and taken[7] is None, "take gives each record, then None", got=taken)
    calls = [(c.op, c.name, c.raised) for c in active_transcript().calls[before:]]
    expect(calls == [("call", None, None), ("callmethod", "add_entry", None), ("call", None, None),
                     ("callmethod", "add_entry", None), ("callmethod", "drop", "KeyError"),
                     ("callmethod", "busy", None), ("callmethod", "pop", None), ("callmethod", "pop", None),
                     ("callmethod", "names", None)],
           "the transcript takes each record's calls as it is taken", got=calls)
    stops = Script(ledger, [("call", "drop", ("zz",), [], [], ()), ("call", "names", (), [], [], ())])
    expect(len(stops.records) == 1 and stops.take() is not None and stops.take() is None,
           "an exception not allowed ends the script: the test makes the rest itself", got=stops.records)
    bad = Script(ledger, [("new", "add_entry", entry, ("c", -1), {}, [], ()), ("call", "names", (), [], [], ())])
    expect(len(bad.records) == 1 and not bad.records[0][1][0] and bad.records[0][2] is None,
           "a constructor that raised ends the script", got=bad.records)
    expect(Script(object(), entries).take() is None, "no script for an object of the judge's")


@kata_test(level=1, category="correctness", description="plain reads cross in one piece, as copies")
def test_plain_reads_cross_as_copies(solution):
    from grader.protocol import read_all

    bridge = solution._kata_bridge
    tally = solution.Tally()
    tally.add(3)
    shared_before = len(bridge.registry.objects)
    for _ in range(50):
        reads = read_all(tally, [("summary", ()), ("total", None), ("doubled", ())])
    want = [(True, {"total": 3, "parts": [3, (1, "a"), None, 0.0]}), (True, 3), (True, 6)]
    expect(reads == want and type(reads[0][1]["parts"][1]) is tuple
           and type(reads[0][1]["parts"][3]) is float,
           "plain reads arrive equal, with their types (tuple, float 0.0)", expected=want, got=reads)
    expect(len(bridge.registry.objects) <= shared_before,
           "plain reads are copies: no shared object is kept for them",
           expected=f"<= {shared_before}", got=len(bridge.registry.objects))
    reads[0][1]["parts"].append("judge's")
    again = read_all(tally, [("summary", ())])
    expect(again == want[:1], "a change to a copy does not reach the candidate's object",
           expected=want[:1], got=again)
    mixed = read_all(tally, [("kinds", ()), ("summary", ()), ("missing", None)])
    expect(mixed[0] == (True, {"int"}) and mixed[1] == want[0] and not mixed[2][0]
           and isinstance(mixed[2][1], AttributeError),
           "reads that are not all plain (a set, an error) still arrive, each as its own outcome",
           got=mixed)


@kata_test(level=1, category="correctness", description="call_many: one request, results as copies")
def test_call_many_clones_tensor_arguments_and_copies_results(solution):
    from grader.protocol import call_many

    bridge = solution._kata_bridge
    shared_before = len(bridge.registry.objects)
    x = torch.zeros(3)
    got = call_many(solution.double_in_place, [((x,), {}) for _ in range(3)], what="double_in_place",
                    clone_args=True)
    expect([g.tolist() for g in got] == [[1.0, 1.0, 1.0]] * 3 and x.tolist() == [0.0, 0.0, 0.0],
           "with clone_args every call gets a fresh copy: no call sees another's change",
           expected="[1, 1, 1] three times, x still zeros", got=([g.tolist() for g in got], x.tolist()))
    lists = call_many(solution.numbers, [((n,), {}) for n in range(50)], what="numbers")
    expect(lists[3] == [0, 1, 2] and len(bridge.registry.objects) - shared_before < 10,
           "results are plain copies, not shared objects kept for the test",
           expected="< 10 new shared objects", got=len(bridge.registry.objects) - shared_before)
    # A tensor only one call gets, and the tensors the calls return, cross as copies; one
    # that every call gets crosses once.
    xs, ones = [torch.full((2,), float(n)) for n in range(200)], torch.ones(2)
    before = len(bridge.registry.objects)
    sums = call_many(solution.add_tensors, [((xs[n], ones), {}) for n in range(200)],
                     what="add_tensors", clone_args=True)
    expect(all(torch.equal(s, xs[n] + 1) for n, s in enumerate(sums))
           and len(bridge.registry.objects) - before < 10,
           "single-use tensor arguments and tensor results are copies, not shared objects",
           expected="x + 1 for each x; < 10 new shared objects",
           got=len(bridge.registry.objects) - before)


@kata_test(level=1, category="correctness", description="call_many: calls differing in one tensor each")
def test_call_many_rows_cross_stacked(solution):
    from grader.protocol import call_many

    bridge, ops = solution._kata_bridge, []
    request = bridge.request
    bridge.request = lambda op, *args: (ops.append(op), request(op, *args))[1]
    try:
        drafts = torch.arange(12, dtype=torch.float64).reshape(2, 6).T  # rows are not contiguous
        weights = torch.tensor([0.2, 0.3, 0.5])
        g, mine = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
        got = call_many(solution.draw_after, [((d, weights), {"generator": g}) for d in drafts.unbind(0)],
                        what="draw_after", clone_args=True)
        want = [[d.tolist(), [2], [1], True, int(torch.multinomial(weights, 1, generator=mine))]
                for d in drafts.unbind(0)]
        expect(got == want and ops.count("call_rows") == 1 and "call_many" not in ops,
               "calls that differ only in one tensor each cross as one stacked tensor: each "
               "call gets its own copy of its row, laid out as alone, in one request",
               expected=want, got=(got, ops))
        expect(torch.equal(g.get_state(), mine.get_state()) and drafts[0, 0] == 0.0,
               "the shared generator moved on as the calls drew; the rows are unchanged here")
        # Shapes that differ, or a keyword that does: call_many's list, the same results.
        ops.clear()
        rows = [torch.ones(n) for n in (1, 2, 3)]
        got = call_many(solution.draw_after, [((r, weights), {"offset": 10}) for r in rows],
                        what="draw_after", clone_args=True)
        offsets = call_many(solution.draw_after, [((rows[0], weights), {"offset": 10 * n}) for n in range(3)],
                            what="draw_after", clone_args=True)
        expect([r[0] for r in got] == [[1.0] * n for n in (1, 2, 3)] and [r[4] // 10 for r in got] == [1] * 3
               and [r[4] // 10 for r in offsets] == [0, 1, 2] and rows[0].tolist() == [1.0]
               and ops.count("call_many") == 2 and "call_rows" not in ops,
               "calls of other forms cross as a list, each with its own arguments",
               got=(got, offsets, ops))
    finally:
        del bridge.request


@kata_test(level=1, category="correctness", description="backward through the candidate's graph")
def test_backward_through_the_candidates_graph(solution):
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    g = torch.tensor([0.5, 2.0, -1.0])
    solution.cube(x).backward(g)
    want = 3 * x.detach() ** 2 * g
    expect(torch.equal(x.grad, want), "the gradient of x**3 against g, exactly", expected=want, got=x.grad)
    x.grad = None
    solution.cube(x).sum().backward()
    expect(torch.equal(x.grad, 3 * x.detach() ** 2), "the gradient of sum(x**3), exactly",
           expected=3 * x.detach() ** 2, got=x.grad)
    # torch.autograd.backward with a gradient imports sympy the first time (0.3 s a grading).
    expect(not solution.loaded("sympy"), "a backward with a gradient loads no sympy in the worker")


@kata_test(level=1, category="correctness", description="tensors behind dropped results are released")
def test_tensors_behind_dropped_results_are_released(solution):
    # Each result's gradient node holds the judge tensors that require grad: once the
    # result is dropped they are garbage too, and must not be taken by the next result's
    # node (every example of a test would otherwise keep its tensors, and each later
    # message would check them all for changes, on both sides).
    bridge = solution._kata_bridge
    sizes = []
    for n in range(12):  # two results alive at once, as when a test compares two runs
        xs = [torch.full((3,), float(n + k), requires_grad=True) for k in (0, 1)]
        ys = [solution.cube(x) for x in xs]
        for x, y in zip(xs, ys):
            y.sum().backward()
            expect(torch.equal(x.grad, 3 * x.detach() ** 2), "the gradient still arrives", got=x.grad)
        del xs, ys, x, y  # (the next result is made before a second look at the registry)
        sizes.append(len(bridge.registry.objects))
    expect(max(sizes[4:]) <= max(sizes[:4]), "the shared objects do not pile up from one step to "
           "the next", expected=f"at most {max(sizes[:4])}", got=sizes)


@kata_test(level=1, category="correctness", description="what the imports made is frozen out of collections")
def test_imports_are_frozen_out_of_garbage_collection(solution):
    # A full collection walks every object there is: torch's alone made them cost 0.1-0.5 s
    # of a grading. Both processes freeze what their imports made, and collect the rest.
    import gc

    judge = (gc.isenabled(), gc.get_freeze_count())
    worker = solution.gc_state()
    expect(judge[0] and judge[1] > 10_000 and worker[0] and worker[1] > 10_000,
           "judge and worker collect garbage, with their imports frozen",
           expected="(True, > 10000) each", got={"judge": judge, "worker": worker})


@kata_test(level=1, category="correctness", description="tensors cross with their values, dtype and layout")
def test_tensors_cross_with_their_layout(solution):
    x = torch.arange(6.0).reshape(2, 3)
    got = solution.transposed(x)
    expect(torch.equal(got, x.t()) and got.stride() == (1, 3) and not got.is_contiguous(),
           "a transposed result keeps its strides", expected=(1, 3), got=got.stride())
    perm = torch.arange(24).reshape(2, 3, 4).permute(2, 0, 1)
    got = solution.same(perm)
    expect(torch.equal(got, perm) and got.stride() == perm.stride(), "a permuted tensor keeps its strides",
           expected=perm.stride(), got=got.stride())
    got = solution.every_other_column(x)
    expect(torch.equal(got, x[:, ::2]), "a strided view arrives with its values", expected=x[:, ::2], got=got)
    for value in (torch.tensor([3, -1, 4]), torch.tensor(2.5, dtype=torch.float64), torch.tensor([True, False]),
                  torch.randn(2, 3, dtype=torch.bfloat16), torch.randn(3, dtype=torch.complex64).conj(),
                  torch.tensor([1, 2], dtype=torch.uint16), torch.empty(0, 3), torch.ones(1, 4)[:, 1:3]):
        got = solution.same(value)
        want = value.resolve_conj()
        expect(got.dtype == value.dtype and got.shape == value.shape and torch.equal(got, want),
               "a tensor arrives with its values, dtype and shape", expected=want, got=got)


@kata_test(level=1, category="correctness", description="a backward pass leaves other gradients alone")
def test_backward_leaves_other_gradients_alone(solution):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    solution.cube(x).sum().backward()
    grad, version = x.grad, x.grad._version
    y = torch.tensor([3.0], requires_grad=True)
    solution.cube(y).sum().backward()
    expect(torch.equal(y.grad, torch.tensor([27.0])), "the second graph's input gets its gradient",
           expected=[27.0], got=y.grad)
    expect(x.grad is grad and x.grad._version == version and torch.equal(x.grad, torch.tensor([3.0, 12.0])),
           "a tensor outside the second graph keeps its gradient untouched (no zero added to it)",
           expected=(version, [3.0, 12.0]), got=(x.grad._version, x.grad))
