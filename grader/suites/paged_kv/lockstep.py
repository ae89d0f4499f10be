"""The lockstep machine: random call sequences, one level's API at a time, on the candidate
and the reference together (through paired.Paired, which compares everything after every
call and names the deciding rule).

Besides the plain calls it draws the events that expose leaks and rare interleavings: calls
the statement rejects (each followed by more random calls, which is where a leak shows),
allocations that cannot fit (on a live request or on the id the next request will get),
freed ids used again, and fork-then-write (copy-on-write on a block that may already have
been copied from).
"""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import Phase, settings, strategies as st
from hypothesis.stateful import (Bundle, RuleBasedStateMachine, consumes, initialize, multiple,
                                 precondition, rule, run_state_machine_as_test)

from grader.protocol import PropertyFailure
from grader.suites.paged_kv.minimize import minimize
from grader.suites.paged_kv.paired import RAISED, Paired
from grader.suites.paged_kv.strategies import DOCUMENTS, document_prompts

INVALID_LEVEL1 = ("free unknown", "block_table unknown", "num_tokens unknown", "allocate negative",
                  "allocate negative, next id")
INVALID_LEVEL2 = ("fork unknown parent", "fork existing child", "fork into itself")
INVALID_LEVEL3 = ("prompt existing id", "prompt empty")


def run_lockstep(solution: Any, reference: Any, *, level: int, max_examples: int) -> None:
    """Random call sequences until one fails; that one is shrunk by minimize() (replaying
    the recorded calls), far cheaper than hypothesis's shrinker on a state machine."""
    machine = make_machine(solution, reference, level)
    try:
        run_state_machine_as_test(machine, settings=settings(
            max_examples=max_examples, stateful_step_count=15, report_multiple_bugs=False,
            phases=[Phase.explicit, Phase.generate]))
    except PropertyFailure as failure:
        if getattr(failure, "replay", None) is None:
            raise
        raise minimize(solution, reference, failure) from None


def make_machine(solution: Any, reference: Any, level: int) -> type:
    """The lockstep machine for one level: it only calls that level's API."""

    class Allocator(LockstepMachine):
        LEVEL = level
        SOLUTION = solution
        REFERENCE = reference

    Allocator.__name__ = Allocator.__qualname__ = "state"
    return Allocator


def at_level(n: int) -> Callable[[Any], bool]:
    return lambda self: self.LEVEL >= n


class LockstepMachine(RuleBasedStateMachine):
    """Drives the candidate and the reference with the same random calls."""

    LEVEL = 3
    SOLUTION: Any = None
    REFERENCE: Any = None
    requests = Bundle("requests")

    @initialize(num_blocks=st.integers(2, 10), block_size=st.integers(1, 3))
    def create(self, num_blocks: int, block_size: int) -> None:
        self.pair = Paired(self.SOLUTION, self.REFERENCE, num_blocks, block_size)
        self.num_ids = 0
        self.freed: list[str] = []  # ids freed earlier: unknown now, reusable
        self.last_document: int | None = None
        self.pair.check("PagedKVCacheAllocator(...)", "rejected")

    # ------------------------------------------------------------ level 1

    @rule(target=requests, k=st.integers(0, 5), reuse_freed_id=st.booleans())
    def start(self, k: int, reuse_freed_id: bool) -> Any:
        """allocate() on a new id (or one that was freed earlier)."""
        request_id = self.freed.pop(0) if reuse_freed_id and self.freed else self._new_id()
        started = self.pair.allocate(request_id, k)
        return request_id if started is True else multiple()

    @rule(request_id=requests, k=st.integers(0, 5))
    def grow(self, request_id: str, k: int) -> None:
        """allocate() on a live request."""
        self.pair.allocate(request_id, k)

    @rule(request_id=requests, on_next_id=st.booleans())
    def overflow(self, request_id: str, on_next_id: bool) -> None:
        """An allocate that cannot fit: False, and the next calls see no trace of it."""
        target = self._peek_id() if on_next_id else request_id
        self.pair.allocate(target, (self.pair.num_blocks + 1) * self.pair.block_size)

    @rule(request_id=consumes(requests))
    def free(self, request_id: str) -> None:
        self.pair.free(request_id)
        self.freed.append(request_id)

    @rule(request_id=requests, kind=st.sampled_from(INVALID_LEVEL1))
    def invalid_call(self, request_id: str, kind: str) -> None:
        """A call the statement rejects; the random calls after it show any leak."""
        unknown = self.freed[-1] if self.freed else "never-seen"
        if kind == "allocate negative":
            self.pair.rejected("allocate", request_id, -1)
        elif kind == "allocate negative, next id":
            self.pair.rejected("allocate", self._peek_id(), -1)
        else:
            self.pair.rejected(kind.split()[0], unknown)

    # ------------------------------------------------------------ level 2

    @precondition(at_level(2))
    @rule(target=requests, parent_id=requests)
    def fork(self, parent_id: str) -> str:
        child_id = self._new_id()
        self.pair.fork(parent_id, child_id)
        return child_id

    @precondition(at_level(2))
    @rule(target=requests, parent_id=requests, k=st.integers(1, 3), writer=st.sampled_from(["child", "parent"]))
    def fork_and_write(self, parent_id: str, k: int, writer: str) -> str:
        """fork, then write into one of the two at once: copy-on-write, often from a block
        that an earlier fork already had copied."""
        child_id = self._new_id()
        self.pair.fork(parent_id, child_id)
        self.pair.allocate(child_id if writer == "child" else parent_id, k)
        return child_id

    @precondition(at_level(2))
    @rule(request_id=requests, kind=st.sampled_from(INVALID_LEVEL2))
    def invalid_fork(self, request_id: str, kind: str) -> None:
        unknown = self.freed[-1] if self.freed else "never-seen"
        if kind == "fork unknown parent":
            self.pair.rejected("fork", unknown, request_id)
        elif kind == "fork existing child":
            other = sorted(self.pair.history)[0]
            self.pair.rejected("fork", request_id, other)
        else:
            self.pair.rejected("fork", request_id, request_id)

    @precondition(at_level(2))
    @rule()
    def pop_copies(self) -> None:
        self.pair.pop_copies()

    # ------------------------------------------------------------ level 3

    @precondition(at_level(3))
    @rule(target=requests, prompt=document_prompts, reuse_freed_id=st.booleans())
    def allocate_prompt(self, prompt: list[int], reuse_freed_id: bool = False) -> Any:
        self.last_document = next(i for i, doc in enumerate(DOCUMENTS) if list(doc[:len(prompt)]) == prompt)
        request_id = self.freed.pop(0) if reuse_freed_id and self.freed else self._new_id()
        want = self.pair.allocate_prompt(request_id, prompt)
        return multiple() if want is None or want is RAISED else request_id

    @precondition(lambda self: self.LEVEL >= 3 and self.last_document is not None)
    @rule(target=requests, length=st.integers(1, 8))
    def allocate_prompt_same_document(self, length: int) -> Any:
        """A prompt from the document of the previous prompt: shares its leading blocks."""
        assert self.last_document is not None  # the precondition
        return self.allocate_prompt(list(DOCUMENTS[self.last_document][:length]))

    @precondition(at_level(3))
    @rule(request_id=requests, kind=st.sampled_from(INVALID_LEVEL3))
    def invalid_prompt(self, request_id: str, kind: str) -> None:
        if kind == "prompt existing id":
            self.pair.rejected("allocate_prompt", request_id, [1])
        else:
            self.pair.rejected("allocate_prompt", self._peek_id(), [])

    def teardown(self) -> None:
        """Free everything: the pool must be whole again. (Hypothesis runs teardown after a
        failing step too; a failure already raised must stay the one reported.)"""
        if hasattr(self, "pair") and not self.pair.failed:
            self.pair.free_all()

    # ------------------------------------------------------------ helpers

    def _new_id(self) -> str:
        self.num_ids += 1
        return f"r{self.num_ids}"

    def _peek_id(self) -> str:
        """The id the next new request will get: a rejected call on it must leave no trace."""
        return f"r{self.num_ids + 1}"
