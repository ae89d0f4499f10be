"""Level 3, slots and errors: which slot add_adapter hands out, what remove_adapter frees,
which calls raise, and what the next calls see after a rejected one (the rule map is in
test_level3.py).

After every rejected call the tests look forward: the next add_adapter, remove_adapter and
forward must behave exactly as if the rejected call had never been made.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from grader.protocol import PropertyFailure, expect, kata_test
from grader.suites._common import check_close
from grader.suites.lora.strategies import (DTYPES, Adapter, add, adapters, ints, make_base,
                                           multi_forward, ones_adapter, per_row_expected, raises,
                                           showing)

BASE_WEIGHT = torch.tensor([[1.0, -1.0], [0.0, 2.0], [2.0, 1.0]])  # (3, 2): in 2, out 3


def _loaded(solution: Any, max_rank: int, adapters: list[Adapter], calls: list[str],
            weight: torch.Tensor = BASE_WEIGHT) -> tuple[nn.Module, dict[str, int]]:
    """A fresh MultiLoRALinear with `adapters` loaded; name -> slot."""
    with showing({"calls": calls}):
        layer = solution.MultiLoRALinear(make_base(weight, None), max_rank)
        slots = {}
        for a in adapters:
            slots[a.name] = add(layer, a)
            calls.append(f"add_adapter({a.name!r}, r={a.r}, alpha={a.alpha!r}) "
                         f"-> {slots[a.name]!r}")
    return layer, slots


def _check_rows(layer: nn.Module, reference: Any, by_slot: dict[int, Adapter], calls: list[str],
                prop: str, weight: torch.Tensor = BASE_WEIGHT) -> None:
    """forward over every loaded slot and -1 matches each row's own LoRALinear."""
    ids = [*sorted(by_slot), -1]
    in_f = weight.shape[1]
    x = torch.arange(1.0, 1.0 + in_f * len(ids)).reshape(len(ids), in_f) % 5 - 2
    shown = {"calls": calls, "x": x, "adapter_ids": ids}
    expected = per_row_expected(reference, weight, None, [by_slot.get(i) for i in ids], x)
    try:
        with showing(shown):
            got = multi_forward(layer, x, torch.tensor(ids))
    except ValueError as exc:  # a loaded slot was refused: say which rule, not only the error
        raise PropertyFailure(prop, input=shown, expected=expected,
                              got=f"ValueError: {exc}") from exc
    check_close(got, expected, prop, input=shown)


def _check_new_slot(slot: Any, taken: list[int], peak: int, calls: list[str], prop: str) -> None:
    expect(isinstance(slot, int) and not isinstance(slot, bool) and slot not in taken
           and 0 <= slot < peak, prop, input={"calls": calls},
           expected=f"an int slot in [0, {peak}) other than {sorted(taken)}", got=slot)


@kata_test(level=3, category="edge cases",
           description="a lower-rank adapter in a reused slot sees none of the previous "
                       "adapter's weights")
@settings(max_examples=12)
@given(data=st.data(), max_rank=st.integers(2, 4), in_f=st.integers(1, 3), out_f=st.integers(1, 3),
       dtype=st.sampled_from(DTYPES))
def test_slot_reused_by_lower_rank_adapter(solution, reference, data, max_rank, in_f, out_f, dtype):
    weight = data.draw(ints((out_f, in_f), dtype), label="base.weight")
    big = Adapter("big", torch.full((max_rank, in_f), 2.0, dtype=dtype),
                  torch.full((out_f, max_rank), 2.0, dtype=dtype), 8.0)
    small = data.draw(adapters("small", in_f, out_f, dtype, (1, max_rank - 1)), label="small")
    layer = solution.MultiLoRALinear(make_base(weight, None), max_rank)
    add(layer, big)
    layer.remove_adapter("big")
    slot = int(add(layer, small))
    x = data.draw(ints((2, in_f), dtype, -3, 3), label="x")
    ids = torch.tensor([slot, -1])
    shown = {"max_rank": max_rank, "base.weight": weight,
             "calls": [f"add_adapter('big', r={max_rank}, all weights 2, alpha=8)",
                       "remove_adapter('big')",
                       f"add_adapter('small', r={small.r}, alpha={small.alpha}) -> {slot}"],
             "small.lora_A": small.lora_A, "small.lora_B": small.lora_B, "x": x,
             "adapter_ids": ids.tolist()}
    check_close(multi_forward(layer, x, ids),
                per_row_expected(reference, weight, None, [small, None], x),
                "after the slot is reused, the smaller adapter's padding is zero: its rows "
                "match its own LoRALinear", input=shown)


@kata_test(level=3, category="edge cases",
           description="add_adapter returns an int slot, distinct among loaded adapters, and "
                       "reuses freed slots")
@settings(max_examples=15)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 4)), min_size=1, max_size=12))
def test_freed_slots_are_reused(solution, ops):
    layer = solution.MultiLoRALinear(nn.Linear(2, 2), 2)
    loaded: dict[str, int] = {}
    calls: list[str] = []
    peak = 0
    for is_add, k in ops:
        name = f"t{k}"
        if not is_add:
            if name in loaded:
                layer.remove_adapter(name)
                calls.append(f"remove_adapter({name!r})")
                del loaded[name]
            continue
        if name in loaded:
            continue
        slot = layer.add_adapter(name, torch.ones(1, 2), torch.ones(2, 1), 1.0)
        calls.append(f"add_adapter({name!r}, ...) -> {slot!r}")
        peak = max(peak, len(loaded) + 1)
        expect(isinstance(slot, int) and not isinstance(slot, bool),
               "add_adapter returns the slot as an int", input={"calls": calls},
               expected="int", got=type(slot).__name__)
        expect(slot not in loaded.values(), "a loaded adapter's slot is not handed out again",
               input={"calls": calls}, expected=f"a slot not in {sorted(loaded.values())}",
               got=slot)
        expect(0 <= slot < peak, "freed slots are reused before new ones open: every slot is "
               "below the peak number of adapters loaded at once", input={"calls": calls},
               expected=f"0 <= slot < {peak}", got=slot)
        loaded[name] = slot


BAD_ADAPTERS = ("duplicate name", "rank above max_rank", "lora_A in_features mismatch",
                "lora_B out_features mismatch", "ranks of lora_A and lora_B differ")


def _bad_adapter(kind: str, max_rank: int, in_f: int, out_f: int) -> tuple[str, torch.Tensor,
                                                                           torch.Tensor]:
    r = max_rank
    return {"duplicate name": ("a", torch.ones(r, in_f), torch.ones(out_f, r)),
            "rank above max_rank": ("b", torch.ones(r + 1, in_f), torch.ones(out_f, r + 1)),
            "lora_A in_features mismatch": ("b", torch.ones(r, in_f + 1), torch.ones(out_f, r)),
            "lora_B out_features mismatch": ("b", torch.ones(r, in_f), torch.ones(out_f + 1, r)),
            "ranks of lora_A and lora_B differ": ("b", torch.ones(r, in_f),
                                                  torch.ones(out_f, r + 1))}[kind]


@kata_test(level=3, category="edge cases",
           description="add_adapter raises ValueError for a duplicate name, r > max_rank, or "
                       "mismatched shapes, and the loaded adapters stay as they were")
@settings(max_examples=4)
@given(max_rank=st.integers(1, 3), in_f=st.integers(1, 3), out_f=st.integers(1, 3))
def test_add_adapter_rejects_bad_adapters(solution, reference, max_rank, in_f, out_f):
    weight = torch.arange(out_f * in_f, dtype=torch.float32).reshape(out_f, in_f)
    good = Adapter("a", torch.ones(1, in_f), torch.ones(out_f, 1), 2.0)
    for kind in BAD_ADAPTERS:  # every kind on every example
        name, A, B = _bad_adapter(kind, max_rank, in_f, out_f)
        calls = [f"MultiLoRALinear(base ({out_f}, {in_f}), max_rank={max_rank})"]
        layer, slots = _loaded(solution, max_rank, [good], calls, weight)
        calls.append(f"add_adapter({name!r}, A {tuple(A.shape)}, B {tuple(B.shape)}, alpha=1.0)")
        rejected = raises(ValueError, lambda: layer.add_adapter(name, A, B, 1.0))
        expect(rejected is not None, f"add_adapter raises ValueError ({kind})",
               input={"calls": calls}, expected="ValueError", got="no exception")
        _check_rows(layer, reference, {slots["a"]: good}, calls, "a rejected add_adapter leaves "
                    f"the loaded adapters as they were ({kind})", weight)


@kata_test(level=3, category="edge cases",
           description="a rejected add_adapter takes no slot and registers no name: the next "
                       "add_adapter, remove_adapter and forward behave as if it never happened",
           weight=2)
def test_rejected_add_adapter_changes_nothing(solution, reference):
    good = ones_adapter("a", 2, 3, r=1, alpha=2.0)
    for kind in BAD_ADAPTERS:
        name, A, B = _bad_adapter(kind, 2, 2, 3)
        calls = ["MultiLoRALinear(base (3, 2), max_rank=2)"]
        layer, slots = _loaded(solution, 2, [good], calls)
        calls.append(f"add_adapter({name!r}, A {tuple(A.shape)}, B {tuple(B.shape)}) -> ValueError")
        if raises(ValueError, lambda: layer.add_adapter(name, A, B, 1.0)) is None:
            continue  # test_add_adapter_rejects_bad_adapters reports it
        # Only one adapter was ever loaded, so the only slot a leak could have taken is the
        # other one below 2: forward must not know it.
        leaked = 1 - slots["a"] if slots["a"] in (0, 1) else 1
        calls.append(f"forward(x, adapter_ids=[{leaked}, -1])")
        with showing({"calls": calls}):
            unknown = raises(ValueError, lambda: multi_forward(layer, torch.ones(2, 2),
                                                               torch.tensor([leaked, -1])))
        expect(unknown is not None, "a rejected add_adapter leaves no adapter behind: forward "
               f"raises ValueError for slot {leaked}", input={"calls": calls},
               expected="ValueError", got="no exception")
        calls[-1] += " -> ValueError"
        if kind != "duplicate name":
            calls.append(f"remove_adapter({name!r})")
            with showing({"calls": calls}):
                missing = raises(KeyError, lambda: layer.remove_adapter(name))
            expect(missing is not None, "a rejected add_adapter registers no name: "
                   "remove_adapter of that name raises KeyError", input={"calls": calls},
                   expected="KeyError", got="no exception (the name was loaded)")
            calls[-1] += " -> KeyError"
        retry = ones_adapter(name if kind != "duplicate name" else "c", 2, 3, r=2, alpha=1.0)
        calls.append(f"add_adapter({retry.name!r}, r=2, alpha=1.0)")
        with showing({"calls": calls}):
            slot = add(layer, retry)
        calls[-1] += f" -> {slot!r}"
        _check_new_slot(slot, [slots["a"]], 2, calls, "a rejected add_adapter takes no slot: "
                        "the next add_adapter gets the other slot below 2 (two adapters loaded)")
        _check_rows(layer, reference, {slots["a"]: good, slot: retry}, calls,
                    "after a rejected add_adapter, every loaded adapter works as usual")


@kata_test(level=3, category="edge cases",
           description="remove_adapter raises KeyError for an unknown or already removed name, "
                       "and frees nothing: the next adds and forwards are as usual")
def test_remove_unknown_adapter_raises_key_error(solution, reference):
    a, b = ones_adapter("a", 2, 3, alpha=1.0), ones_adapter("b", 2, 3, r=2, alpha=4.0)
    calls = ["MultiLoRALinear(base (3, 2), max_rank=2)"]
    layer, slots = _loaded(solution, 2, [a, b], calls)
    for name in ("zz", "a", "a", "b", "b"):
        expect_error = name == "zz" or calls.count(f"remove_adapter({name!r})") > 0
        calls.append(f"remove_adapter({name!r})")
        if not expect_error:
            with showing({"calls": calls}):
                layer.remove_adapter(name)
            if name == "a":  # b must still work, untouched by the failed remove before
                _check_rows(layer, reference, {slots["b"]: b}, calls, "after a KeyError and a "
                            "removal, the other adapter still works")
            continue
        missing = raises(KeyError, lambda: layer.remove_adapter(name))
        expect(missing is not None, "remove_adapter of a name that is not loaded (never added, "
               "or already removed) raises KeyError", input={"calls": calls},
               expected="KeyError", got="no exception")
        calls[-1] += " -> KeyError"
    # Looking forward: nothing was freed twice, so two adds get two distinct slots below 2.
    new = [ones_adapter("c", 2, 3, alpha=2.0), ones_adapter("d", 2, 3, r=2, alpha=1.0)]
    taken: list[int] = []
    for adapter in new:
        calls.append(f"add_adapter({adapter.name!r}, ...)")
        with showing({"calls": calls}):
            slot = add(layer, adapter)
        calls[-1] += f" -> {slot!r}"
        _check_new_slot(slot, taken, 2, calls, "after failed removes, the next adds get distinct "
                        "slots below 2 (a failed remove frees nothing, not even twice)")
        taken.append(slot)
    _check_rows(layer, reference, dict(zip(taken, new)), calls,
                "after failed removes and new adds, every loaded adapter works")


BAD_IDS = ("slot never returned", "freed slot", "id below -1", "too few ids", "too many ids",
           "2-D adapter_ids")


@kata_test(level=3, category="edge cases",
           description="forward raises ValueError for unknown or freed slots, ids below -1, "
                       "and adapter_ids of the wrong shape, and changes nothing")
@settings(max_examples=4)
@given(num_adapters=st.integers(1, 3), k=st.integers(0, 3), tokens=st.sampled_from((None, 2)))
def test_forward_rejects_unknown_slots_and_wrong_length(solution, reference, num_adapters, k,
                                                        tokens):
    loaded = [ones_adapter(f"t{j}", 2, 3, r=1 + j % 2, alpha=float(j + 1))
              for j in range(num_adapters)]
    for kind in BAD_IDS:  # every kind on every example
        calls = ["MultiLoRALinear(base (3, 2), max_rank=2)"]
        layer, slots = _loaded(solution, 2, loaded, calls)
        by_slot = {slots[a.name]: a for a in loaded}
        order = [slots[a.name] for a in loaded]
        victim = k % num_adapters  # any slot may be the freed one, not only the first
        if kind == "freed slot":
            layer.remove_adapter(f"t{victim}")
            calls.append(f"remove_adapter('t{victim}')")
            del by_slot[order[victim]]
        x = torch.ones((3, 2) if tokens is None else (3, tokens, 2))
        ids = {"slot never returned": [order[-1], max(order) + 1 + k, -1],
               "freed slot": [order[victim], -1, order[(victim + 1) % num_adapters]],
               "id below -1": [order[0], -2 - k, -1],
               "too few ids": [order[0]] * (2 - min(k, 1)),
               "too many ids": [order[0]] * (4 + k),
               "2-D adapter_ids": [[order[0]]] * 3}[kind]
        ids_tensor = torch.tensor(ids, dtype=torch.int64)
        x_before, ids_before = x.clone(), ids_tensor.clone()
        calls.append(f"forward(x of shape {tuple(x.shape)}, adapter_ids={ids})")
        # x and ids_tensor themselves: the test checks below that the call left them as they were.
        call = lambda: multi_forward(layer, x, ids_tensor, share_inputs=True)  # noqa: E731 - the call, named to pass to raises()
        if raises(ValueError, call) is None:
            raise PropertyFailure(f"forward raises ValueError ({kind})", input={"calls": calls},
                                  expected="ValueError", got="no exception")
        calls[-1] += " -> ValueError"
        expect(torch.equal(x, x_before) and torch.equal(ids_tensor, ids_before),
               "a rejected forward modifies neither x nor adapter_ids", input={"calls": calls},
               expected={"x": x_before, "adapter_ids": ids_before},
               got={"x": x, "adapter_ids": ids_tensor})
        _check_rows(layer, reference, by_slot, calls, "after a rejected forward, the next "
                    f"forward works as usual ({kind})")


@kata_test(level=3, category="edge cases",
           description="adapter_ids of the wrong shape raise ValueError before anything else: "
                       "0-d ids, no ids, all -1 but too few, too many or 2-D")
def test_forward_checks_ids_shape_first(solution, reference):
    # A base-only shortcut (all ids -1) or len() on a 0-d tensor must not run before the
    # shape check: every one of these is a ValueError, whatever the ids' values.
    adapter = ones_adapter("a", 2, 3, alpha=2.0)
    calls = ["MultiLoRALinear(base (3, 2), max_rank=2)"]
    layer, slots = _loaded(solution, 2, [adapter], calls)
    a = slots["a"]
    bad = {"0-d adapter_ids (a slot)": (1, torch.tensor(a)),
           "0-d adapter_ids (-1)": (1, torch.tensor(-1)),
           "no ids for 3 rows": (3, torch.zeros(0, dtype=torch.int64)),
           "all -1, too few ids": (3, torch.tensor([-1, -1])),
           "all -1, too many ids": (2, torch.tensor([-1, -1, -1])),
           "all -1, 2-D adapter_ids": (3, torch.full((3, 1), -1))}
    for kind, (num_rows, ids) in bad.items():
        calls.append(f"forward(x of shape ({num_rows}, 2), adapter_ids of shape "
                     f"{tuple(ids.shape)} = {ids.tolist()})")
        try:
            multi_forward(layer, torch.ones(num_rows, 2), ids)
        except ValueError:
            calls[-1] += " -> ValueError"
            continue
        except Exception as exc:  # noqa: BLE001 - the wrong error type is the finding
            got = f"{type(exc).__name__}: {exc}"
        else:
            got = "no exception"
        raise PropertyFailure(f"forward raises ValueError when adapter_ids is not of shape "
                              f"(N,) ({kind})", input={"calls": calls}, expected="ValueError",
                              got=got)
    _check_rows(layer, reference, {a: adapter}, calls, "after rejected forwards, the next "
                "forward works as usual")


@kata_test(level=3, category="edge cases",
           description="after a removal exactly the loaded slots are accepted, and -1 always "
                       "is; a re-added slot is accepted again")
def test_only_loaded_slots_are_accepted(solution, reference):
    # Found by mutation testing: a validity check reading the live flag of a neighbouring slot
    # passed the random tests. Remove either of two adapters; the other must still work.
    for removed in (0, 1):
        pair = [ones_adapter("t0", 2, 3, alpha=1.0), ones_adapter("t1", 2, 3, alpha=2.0)]
        calls = ["MultiLoRALinear(base (3, 2), max_rank=2)"]
        layer, slots = _loaded(solution, 2, pair, calls)
        layer.remove_adapter(f"t{removed}")
        calls.append(f"remove_adapter('t{removed}')")
        kept = pair[1 - removed]
        _check_rows(layer, reference, {slots[kept.name]: kept}, calls,
                    "forward accepts a loaded slot and -1 after another adapter is removed")
        freed_ids = [slots[f"t{removed}"], -1]
        if raises(ValueError, lambda: multi_forward(layer, torch.ones(2, 2),
                                                    torch.tensor(freed_ids))) is None:
            raise PropertyFailure("forward raises ValueError for a freed slot",
                                  input={"calls": calls, "adapter_ids": freed_ids},
                                  expected="ValueError", got="no exception")
        again = ones_adapter("again", 2, 3, r=2, alpha=0.5)
        with showing({"calls": calls}):
            slot = add(layer, again)
        calls.append(f"add_adapter('again', r=2, alpha=0.5) -> {slot!r}")
        _check_rows(layer, reference, {slots[kept.name]: kept, slot: again}, calls,
                    "a slot add_adapter returns again is accepted again, with the new adapter")


@kata_test(level=3, category="edge cases",
           description="falsy but valid: an adapter with alpha = 0.0 in slot 0 is loaded, "
                       "used (rows equal base), removed and its slot reused")
def test_zero_alpha_adapter_in_slot_zero(solution, reference):
    zero, other = ones_adapter("zero", 2, 3, alpha=0.0), ones_adapter("other", 2, 3, r=2, alpha=2.0)
    calls = ["MultiLoRALinear(base (3, 2), max_rank=2)"]
    layer, slots = _loaded(solution, 2, [zero, other], calls)
    ids = [slots["zero"], slots["other"], -1, slots["zero"]]
    error = raises(ValueError, lambda: multi_forward(layer, torch.ones(4, 2), torch.tensor(ids)))
    expect(error is None, "forward accepts every loaded slot: slot 0 and an adapter with "
           "alpha = 0.0 are valid", input={"calls": calls, "adapter_ids": ids},
           expected="no error", got=f"ValueError: {error}")
    _check_rows(layer, reference, {slots["zero"]: zero, slots["other"]: other}, calls,
                "an adapter with alpha = 0.0 has scaling 0: its rows equal base(x)")
    calls.append("remove_adapter('zero')")
    missing = raises(KeyError, lambda: layer.remove_adapter("zero"))
    expect(missing is None, "remove_adapter removes the adapter in slot 0 (a falsy but valid "
           "slot)", input={"calls": calls}, expected="no error", got=f"KeyError: {missing}")
    again = ones_adapter("again", 2, 3, alpha=0.5)
    calls.append("add_adapter('again', r=1, alpha=0.5)")
    with showing({"calls": calls}):
        slot = add(layer, again)
    calls[-1] += f" -> {slot!r}"
    _check_new_slot(slot, [slots["other"]], 2, calls, "the freed slot is reused: the next "
                    "add_adapter gets the other slot below 2")
    _check_rows(layer, reference, {slot: again, slots["other"]: other}, calls,
                "after the adapter in slot 0 is removed and replaced, every row matches")
