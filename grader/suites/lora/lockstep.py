"""State machines of the lora suite: random call sequences, checked after every step.

* merge_machine (level 2): the candidate's LoRALinear and the reference's, driven in lockstep
  through merge, unmerge, training steps (while unmerged), train/eval switches and forwards.
* multi_machine (level 3): the candidate's MultiLoRALinear against a plain dict of loaded
  adapters, through adds, removes, forwards and the calls that must be rejected (duplicate
  name, rank above max_rank, wrong shapes, unknown name, unknown slot). A rejected call must
  change nothing, so every later step also checks that nothing leaked.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from grader.protocol import expect
from grader.suites._common import check_close
from grader.suites.lora.strategies import (ALPHAS, Adapter, Case, build, forward, ints,
                                           make_base, multi_forward, param, per_row_expected,
                                           raises)


def merge_machine(solution: Any, reference: Any) -> type:
    class MergeMachine(RuleBasedStateMachine):
        """The candidate's layer and the reference's, driven in lockstep."""

        def __init__(self) -> None:
            super().__init__()
            gen = torch.Generator().manual_seed(0)

            def randint(*shape: int) -> torch.Tensor:
                return torch.randint(-2, 3, shape, generator=gen).double()

            case = Case(r=2, alpha=3.0, weight=randint(3, 4), bias=torch.ones(3).double(),
                        lora_A=randint(2, 4), lora_B=randint(3, 2), x=torch.zeros(1, 4).double())
            self.layer, self.model = build(solution, case), build(reference, case)
            self.calls: list[str] = []

        @rule()
        def merge(self) -> None:
            self.calls.append("merge()")
            self.layer.merge()
            self.model.merge()

        @rule()
        def unmerge(self) -> None:
            self.calls.append("unmerge()")
            self.layer.unmerge()
            self.model.unmerge()

        @rule(mode=st.sampled_from(("train", "eval")))
        def switch_mode(self, mode: str) -> None:
            self.calls.append(f"{mode}()")
            getattr(self.layer, mode)()
            getattr(self.model, mode)()

        @precondition(lambda self: not self.model.merged)
        @rule(name=st.sampled_from(("lora_A", "lora_B")), seed=st.integers(0, 100))
        def training_step(self, name: str, seed: int) -> None:
            """A training step changes the adapter while it is unmerged."""
            step = torch.randint(-1, 2, param(self.model, name).shape,
                                 generator=torch.Generator().manual_seed(seed)).double()
            self.calls.append(f"{name} += {step.tolist()}")
            with torch.no_grad():
                param(self.layer, name).add_(step)
                param(self.model, name).add_(step)

        @rule(x=ints((2, 4), torch.float64, -3, 3))
        def forward_agrees(self, x: torch.Tensor) -> None:
            check_close(forward(self.layer, x), forward(self.model, x),
                        "forward(x) after these calls matches the reference",
                        input={"calls": self.calls, "x": x})

        @invariant()
        def base_weight_agrees(self) -> None:
            """base.weight holds W0 + delta exactly when merged."""
            check_close(param(self.layer, "base.weight").detach(),
                        param(self.model, "base.weight").detach(),
                        "base.weight after these calls matches the reference",
                        input={"calls": self.calls})

    return MergeMachine


MULTI_IN, MULTI_OUT, MULTI_MAX_RANK = 3, 2, 3
BAD_ADDS = ("rank above max_rank", "lora_A in_features mismatch", "lora_B out_features mismatch")


def multi_machine(solution: Any, reference: Any) -> type:
    in_f, out_f, max_rank = MULTI_IN, MULTI_OUT, MULTI_MAX_RANK
    gen = torch.Generator().manual_seed(1)
    weight = torch.randint(-2, 3, (out_f, in_f), generator=gen).double()
    bias = torch.randint(-2, 3, (out_f,), generator=gen).double()

    class MultiMachine(RuleBasedStateMachine):
        """The candidate's MultiLoRALinear against a dict of loaded adapters."""

        def __init__(self) -> None:
            super().__init__()
            self.layer = solution.MultiLoRALinear(make_base(weight, bias), max_rank)
            self.loaded: dict[str, tuple[int, Adapter]] = {}
            self.calls: list[str] = []
            self.peak = 0  # the most adapters loaded at once

        def _shown(self, **extra: Any) -> dict[str, Any]:
            return {"base.weight": weight, "base.bias": bias, "max_rank": max_rank,
                    "calls": self.calls, **extra}

        @rule(name=st.sampled_from(("a", "b", "c", "d")), r=st.integers(1, max_rank),
              alpha=st.sampled_from((0.0, *ALPHAS)), seed=st.integers(0, 100))
        def add_adapter(self, name: str, r: int, alpha: float, seed: int) -> None:
            g = torch.Generator().manual_seed(seed)
            A = torch.randint(-2, 3, (r, in_f), generator=g).double()
            B = torch.randint(-2, 3, (out_f, r), generator=g).double()
            call = f"add_adapter({name!r}, A={A.tolist()}, B={B.tolist()}, alpha={alpha!r})"
            self.calls.append(call)
            if name in self.loaded:
                rejected = raises(ValueError, lambda: self.layer.add_adapter(name, A, B, alpha))
                expect(rejected is not None, "add_adapter with a loaded name raises ValueError",
                       input=self._shown(), expected="ValueError", got="no exception")
                self.calls[-1] += " -> ValueError"
                return
            slot = self.layer.add_adapter(name, A.clone(), B.clone(), alpha)
            self.calls[-1] += f" -> {slot!r}"
            self.peak = max(self.peak, len(self.loaded) + 1)
            taken = sorted(s for s, _ in self.loaded.values())
            expect(isinstance(slot, int) and not isinstance(slot, bool) and slot not in taken
                   and 0 <= slot < self.peak, "add_adapter returns an int slot that no loaded "
                   "adapter holds, below the most adapters loaded at once (freed slots first)",
                   input=self._shown(), expected=f"an int in [0, {self.peak}) not in {taken}",
                   got=slot)
            self.loaded[name] = (slot, Adapter(name, A, B, alpha))

        @rule(kind=st.sampled_from(BAD_ADDS), name=st.sampled_from(("a", "e")))
        def add_bad_adapter(self, kind: str, name: str) -> None:
            if name in self.loaded:
                return  # the duplicate case is add_adapter's
            r = max_rank + 1 if kind == "rank above max_rank" else 1
            A = torch.ones(r, in_f + (kind == "lora_A in_features mismatch")).double()
            B = torch.ones(out_f + (kind == "lora_B out_features mismatch"), r).double()
            self.calls.append(f"add_adapter({name!r}, A of shape {tuple(A.shape)}, B of shape "
                              f"{tuple(B.shape)}, alpha=1.0) -> ValueError")
            rejected = raises(ValueError, lambda: self.layer.add_adapter(name, A, B, 1.0))
            expect(rejected is not None, f"add_adapter raises ValueError ({kind})",
                   input=self._shown(), expected="ValueError", got="no exception")

        @precondition(lambda self: bool(self.loaded))
        @rule(data=st.data())
        def remove_adapter(self, data: Any) -> None:
            name = data.draw(st.sampled_from(sorted(self.loaded)), label="name")
            self.calls.append(f"remove_adapter({name!r})")
            self.layer.remove_adapter(name)
            del self.loaded[name]

        @rule(name=st.sampled_from(("a", "b", "zz")))
        def remove_unknown_adapter(self, name: str) -> None:
            if name in self.loaded:
                return
            self.calls.append(f"remove_adapter({name!r}) -> KeyError")
            rejected = raises(KeyError, lambda: self.layer.remove_adapter(name))
            expect(rejected is not None, "remove_adapter of a name that is not loaded raises "
                   "KeyError", input=self._shown(), expected="KeyError", got="no exception")

        @rule(data=st.data(), tokens=st.sampled_from((None, 2)))
        def forward_matches_per_row(self, data: Any, tokens: int | None) -> None:
            by_slot = {slot: adapter for slot, adapter in self.loaded.values()}
            ids = data.draw(st.lists(st.sampled_from([-1, *sorted(by_slot)]), min_size=0,
                                     max_size=4), label="adapter_ids")
            shape = (len(ids), in_f) if tokens is None else (len(ids), tokens, in_f)
            x = data.draw(ints(shape, torch.float64, -3, 3), label="x")
            got = multi_forward(self.layer, x, torch.tensor(ids, dtype=torch.int64))
            expected = per_row_expected(reference, weight, bias, [by_slot.get(i) for i in ids], x)
            check_close(got, expected, "after these calls, each row matches its adapter's "
                        "own LoRALinear (-1: base)", input=self._shown(x=x, adapter_ids=ids))

        @rule(kind=st.sampled_from(("unloaded slot", "id below -1")), k=st.integers(0, 2))
        def forward_rejects_bad_ids(self, kind: str, k: int) -> None:
            taken = {slot for slot, _ in self.loaded.values()}
            unloaded = [s for s in range(self.peak + 1) if s not in taken]  # freed or never used
            ids = [unloaded[k % len(unloaded)] if kind == "unloaded slot" else -2 - k, -1]
            rejected = raises(ValueError, lambda: multi_forward(
                self.layer, torch.ones(2, in_f).double(), torch.tensor(ids)))
            expect(rejected is not None, "forward raises ValueError for a slot that holds no "
                   f"adapter (never returned, or freed) and for ids below -1 ({kind})",
                   input=self._shown(adapter_ids=ids), expected="ValueError",
                   got="no exception")

        @invariant()
        def loaded_slots_are_distinct(self) -> None:
            slots = [slot for slot, _ in self.loaded.values()]
            expect(len(set(slots)) == len(slots), "loaded adapters have distinct slots",
                   input={"calls": self.calls}, got=slots)

    return MultiMachine


__all__ = ["BAD_ADDS", "merge_machine", "multi_machine"]
