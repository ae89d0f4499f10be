"""The candidate's allocator and the reference's, driven with the same calls and compared
after every call: return values, errors, free blocks, token and block counts, which table
slots share a block, the copies, and the KV data every request would read back.

Used by the scripted scenarios of the levels (which force the rare interleavings) and by the
lockstep machine (which draws random ones). Every failure names the field that differs, the
call after which it differs, and the statement rule that decides that field; the input is
the whole call sequence, so it can be replayed by hand.

The ledger: `history[r]` is the token sequence of request r (prompt tokens, then one unique
marker per allocated token) and `data[block][slot]` the token prefix whose KV the model wrote
there. Every request must read back its own history: a block handed out twice, a write into
a shared block, or a cache hit on the wrong prefix shows up there, whatever ids are used.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from grader.protocol import PropertyFailure, call_then_read, read_all
from grader.suites.paged_kv.rules import RULE, rule
from grader.suites.paged_kv.strategies import (ceil_div, raised_text, shared_slots, sharing_classes,
                                               short_prefix)

_RAISED = object()  # what a call returned when both allocators raised the same error

# The rule deciding each field after each kind of call.
_FREE_RULE = {"allocate": "take", "free": "shared_free", "fork": "fork", "prompt": "prompt_take",
              "rejected": "rejected", "pop": "pop_copies"}
_SHARING_RULE = {"allocate": "cow", "free": "no_sharing", "fork": "fork", "prompt": "chain",
                 "rejected": "rejected", "pop": "pop_copies"}
_DATA_RULE = {"allocate": "cow", "free": "shared_free", "fork": "fork", "prompt": "chain",
              "rejected": "rejected", "pop": "pop_copies"}


class Paired:
    """A candidate allocator (`got`) and a reference allocator (`want`) in lockstep."""

    def __init__(self, solution: Any, reference: Any, num_blocks: int, block_size: int) -> None:
        self.reference = reference
        self.num_blocks, self.block_size = num_blocks, block_size
        self.calls = [f"PagedKVCacheAllocator({num_blocks}, {block_size})"]
        self.steps: list[tuple[str, tuple[Any, ...]]] = []  # (method, args): to replay a failure
        self.want = reference.PagedKVCacheAllocator(num_blocks, block_size)
        self.got = self._candidate(self.calls[0], lambda: solution.PagedKVCacheAllocator(num_blocks, block_size),
                                   "the constructor accepts sizes >= 1", "an allocator")
        self.history: dict[str, list[Any]] = {}
        self.data: dict[int, list[Any]] = {}
        self.pending_got: list[tuple[int, int]] = []  # copies seen in the candidate's tables
        self.freed_ids: set[str] = set()
        self.ever_cached: set[int] = set()   # reference hashes that were cached at some point
        self.duplicated: set[int] = set()    # hashes a prompt met as already cached
        self.num_markers = 0
        self.failed = False
        self.got_tables: dict[str, list[int]] = {}
        self.want_tables: dict[str, list[int]] = {}
        # (live request ids, read outcomes) of the candidate's state, read with the last call
        self.prefetched: tuple[list[str], list[tuple[bool, Any]]] | None = None

    # ------------------------------------------------------------------ calls

    def allocate(self, request_id: str, k: int) -> Any:
        """allocate on both; returns the reference's answer (or _RAISED)."""
        self.steps.append(("allocate", (request_id, k)))
        call = f"allocate({request_id!r}, {k})"
        live = request_id in self.history
        got_old, want_old = self.got_tables.get(request_id, []), self.want_tables.get(request_id, [])
        decider = "negative" if k < 0 else self._allocate_rule(request_id, k)
        want, got = self._run_method(call, "allocate", (request_id, k), decider)
        if want is _RAISED:
            self.check(call, "rejected")
            return want
        self._same(call, got, want, decider)
        if want:
            self._record_allocation(call, request_id, k, got_old if live else [], want_old)
        self.check(call, "allocate" if want else "rejected", request_id)
        return want

    def free(self, request_id: str) -> Any:
        self.steps.append(("free", (request_id,)))
        call = f"free({request_id!r})"
        decider = "free" if request_id in self.history else "unknown"
        want, got = self._run_method(call, "free", (request_id,), decider)
        if want is _RAISED:
            self.check(call, "rejected")
            return want
        del self.history[request_id]
        self.freed_ids.add(request_id)
        self.check(call, "free", request_id)
        return None

    def rejected(self, method: str, *args: Any) -> None:
        """A call the statement rejects (block_table/num_tokens of an unknown id, ...): both
        must raise the same error, and nothing may change."""
        self.steps.append(("rejected", (method, *args)))
        call = f"{method}({', '.join(repr(a) for a in args)})"
        decider = {"free": "unknown", "block_table": "unknown", "num_tokens": "unknown",
                   "allocate": "negative", "fork": "fork_unknown" if args[0] not in self.history else "fork_exists",
                   "allocate_prompt": "prompt_exists" if args[0] in self.history else "prompt_empty"}[method]
        want, _ = self._run_method(call, method, args, decider)
        assert want is _RAISED, f"the suite expected {call} to be rejected"
        self.check(call, "rejected")

    def fork(self, parent_id: str, child_id: str) -> Any:
        self.steps.append(("fork", (parent_id, child_id)))
        call = f"fork({parent_id!r}, {child_id!r})"
        decider = ("fork_unknown" if parent_id not in self.history
                   else "fork_exists" if child_id in self.history else "fork")
        want, _ = self._run_method(call, "fork", (parent_id, child_id), decider)
        if want is _RAISED:
            self.check(call, "rejected")
            return want
        self.history[child_id] = list(self.history[parent_id])
        self.check(call, "fork", child_id)
        return None

    def pop_copies(self) -> list[tuple[int, int]]:
        self.steps.append(("pop_copies", ()))
        call = "pop_copies()"
        want, got = self._run_method(call, "pop_copies", (), "pop_copies")
        try:
            got = [tuple(c) for c in got]
        except TypeError:
            self._fail(f"pop_copies() returns a list of (src, dst) pairs — rule: {RULE['pop_copies']}",
                       expected=f"a list of {len(want)} pairs", got=got)
        expected = self.pending_got
        if got != expected or len(got) != len(want):
            if sorted(got) == sorted(expected):
                why = "in the order the copies were made"
            elif len(got) < len(expected):
                why = "every copy is returned, several copies from one source block too"
            else:
                why = "only the copies made since the last pop_copies()"
            self._fail(f"pop_copies() — rule: {RULE['pop_copies']} ({why})",
                       expected=f"{expected} (the copies seen in your block tables, in order)", got=got)
        self.pending_got = []
        self.check(call, "pop")
        return got

    def allocate_prompt(self, request_id: str, token_ids: Sequence[int]) -> Any:
        self.steps.append(("allocate_prompt", (request_id, list(token_ids))))
        tokens = list(token_ids)
        call = f"allocate_prompt({request_id!r}, {tokens})"
        decider = ("prompt_exists" if request_id in self.history
                   else "prompt_empty" if not tokens else "prompt_room")
        context = self._prompt_context(tokens)
        passed = list(tokens)
        want, got = self._run_method(call, "allocate_prompt", (request_id, list(tokens)), decider,
                                     got_args=(request_id, passed))
        if want is _RAISED:
            self.check(call, "rejected")
            return want
        if passed != tokens:
            self._fail(f"token_ids after {call} — rule: {RULE['not_modified']}", expected=tokens, got=passed)
        if got != want or type(got) is not type(want):
            self._fail(f"return value of {call} — rule: {self._prompt_rule(context, got, want)}",
                       expected=_shown(want), got=_shown(got))
        self._note_cache(context, want)
        if want is None:
            self.check(call, "rejected")
            return want
        self.history[request_id] = list(tokens)
        table = self._table_after(call, request_id, "prompt_tokens")
        for position in range(want, len(tokens)):  # hit tokens are read, not written
            self._write(table, request_id, position)
        self.check(call, "prompt", request_id)
        return want

    def free_all(self) -> None:
        """Free every live request (in sorted order): the pool must be whole again."""
        for request_id in sorted(self.history):
            self.free(request_id)

    # ------------------------------------------------------------------ checks

    def check(self, call: str, kind: str, request_id: str | None = None) -> None:
        """Compare everything observable after `call` (of `kind`); name the deciding rule."""
        live = sorted(self.history)
        # One round trip for the whole state: every table, every count, the free blocks
        # (read with the call itself when it left the live requests foreseen).
        prefetched, self.prefetched = self.prefetched, None
        reads = prefetched[1] if prefetched is not None and prefetched[0] == live else read_all(
            self.got, _state_reads(live))
        tables = [self._outcome(call, reads[i], "ceil") for i in range(len(live))]
        counts = {r: reads[len(live) + i] for i, r in enumerate(live)}
        self.got_tables = {r: list(table) if isinstance(table, list) else table for r, table in zip(live, tables)}
        self.want_tables = {r: self.want.block_table(r) for r in self.history}
        got_free = self._outcome(call, reads[-1], "ids")
        if got_free != self.want.num_free_blocks:
            self._fail(f"num_free_blocks after {call} — rule: {RULE[_FREE_RULE[kind]]}",
                       expected=self.want.num_free_blocks, got=got_free)
        for r in sorted(self.history):
            n = self.want.num_tokens(r)
            got_n = self._outcome(call, counts[r], "tokens")
            if got_n != n:
                decider = self._tokens_rule(kind, r == request_id, r)
                self._fail(f"num_tokens({r!r}) after {call} — rule: {RULE[decider]}", expected=n, got=got_n)
            if len(self.got_tables[r]) != ceil_div(n, self.block_size):
                self._fail(f"len(block_table({r!r})) after {call} — rule: {RULE['ceil']}",
                           expected=f"{ceil_div(n, self.block_size)} blocks for {n} tokens",
                           got=self.got_tables[r])
        self._blocks_are_conserved(call, got_free)
        self._sharing_matches(call, kind)
        self._every_request_reads_its_own_data(call, kind)

    def _blocks_are_conserved(self, call: str, got_free: int) -> None:
        in_use = {b for table in self.got_tables.values() for b in table}
        if not all(type(b) is int and 0 <= b < self.num_blocks for b in in_use):
            self._fail(f"block ids after {call} — rule: {RULE['ids']}", got=sorted(in_use, key=repr))
        if got_free + len(in_use) != self.num_blocks:
            self._fail(f"free + in-use blocks after {call} — rule: {RULE['ids']}",
                       expected=self.num_blocks, got=f"{got_free} free + {len(in_use)} in use")

    def _sharing_matches(self, call: str, kind: str) -> None:
        got, want = sharing_classes(self.got_tables), sharing_classes(self.want_tables)
        if got != want:
            self._fail(f"which (request, logical block) slots share a block after {call} — rule: "
                       f"{RULE[_SHARING_RULE[kind]]}",
                       expected=shared_slots(want) or "no shared block", got=shared_slots(got) or "no shared block")

    def _every_request_reads_its_own_data(self, call: str, kind: str) -> None:
        for request_id, history in sorted(self.history.items()):
            table = self.got_tables[request_id]
            for position in range(len(history)):
                block_id = table[position // self.block_size]
                held = self.data.get(block_id, [None] * self.block_size)[position % self.block_size]
                if held == tuple(history[:position + 1]):
                    continue
                self._fail(
                    f"the KV data {request_id!r} reads back after {call} (a block handed out while in "
                    f"use, or written while shared, is overwritten) — rule: {RULE[_DATA_RULE[kind]]}",
                    expected=f"{request_id!r} token {position} sees prefix {short_prefix(history[:position + 1])}",
                    got=f"block {block_id} slot {position % self.block_size} holds "
                        f"{short_prefix(held) if held else 'nothing written'}")

    # ------------------------------------------------------------------ rules deciding a field

    def _allocate_rule(self, request_id: str, k: int) -> str:
        """The rule that decides allocate's answer, from the reference's state before the call."""
        want = self.want
        table = want._block_tables.get(request_id, [])
        num_tokens = want._num_tokens.get(request_id, 0)
        needs_copy = k > 0 and bool(table) and want._last_block_is_shared_and_partial(table, num_tokens)
        num_new = ceil_div(num_tokens + k, self.block_size) - len(table)
        if k == 0:
            return "zero"
        if num_new + needs_copy > want.num_free_blocks:
            return "cow_room" if needs_copy else "no_room"
        if needs_copy:
            return "cow_room"
        if num_new == 0:
            return "last_block"
        if num_new > len(want._free_uncached):
            return "cached_free"
        return "fits"

    def _tokens_rule(self, kind: str, is_target: bool, request_id: str) -> str:
        if not is_target:
            return "rejected" if kind == "rejected" else "tokens"
        if kind == "allocate" and request_id in self.freed_ids:
            return "freed_id"
        return {"fork": "fork", "prompt": "prompt_tokens"}.get(kind, "tokens")

    def _prompt_context(self, tokens: list[int]) -> dict[str, Any]:
        want = self.want
        hashes = self.reference.block_hashes(tokens, self.block_size) if tokens else []
        blocks = [want._hash_to_block.get(h) for h in hashes]
        return {"hashes": hashes, "cap": (len(tokens) - 1) // self.block_size if tokens else 0,
                "cached_before": set(want._hash_to_block),
                "free_before": {h for h, b in zip(hashes, blocks) if b is not None and want._ref_cnt[b] == 0}}

    def _note_cache(self, context: dict[str, Any], want: Any) -> None:
        """Remember the hashes ever cached, and those a fresh block met as already cached."""
        if want is not None:
            fresh = context["hashes"][want // self.block_size:]
            self.duplicated |= {h for h in fresh if h in context["cached_before"]}
        self.ever_cached |= set(self.want._hash_to_block)

    def _prompt_rule(self, context: dict[str, Any], got: Any, want: Any) -> str:
        """Why the reference served `want` cached tokens where the candidate served `got`."""
        if (want is None) != (got is None):
            return rule("prompt_room")
        if type(got) is not int:
            return rule("prompt_return")
        if got % self.block_size:
            return rule("multiple")
        num_got, num_want = got // self.block_size, want // self.block_size
        if num_got > context["cap"]:
            return rule("cap")
        first_differing = context["hashes"][min(num_got, num_want)]
        if first_differing in self.duplicated:
            return rule("duplicate")
        if num_got > num_want:  # the candidate hit a block the reference no longer has, or never had
            return rule("evict") if first_differing in self.ever_cached else rule("chain")
        if first_differing in context["free_before"]:
            return rule("cached", "evict")
        return rule("cached", "chain")

    # ------------------------------------------------------------------ plumbing

    def _run_method(self, call: str, method: str, args: tuple, decider: str, *,
                    got_args: tuple | None = None) -> tuple[Any, Any]:
        """Call `method` on the reference, then on the candidate (with got_args, default the
        same args). When the reference raises, the candidate must raise the same error type:
        then both results are _RAISED. The candidate's state after the call, for the live
        requests the reference then has, is read in the same round trip, for check()."""
        self.calls.append(call)
        self.prefetched = None
        try:
            want = getattr(self.want, method)(*args)
        except (KeyError, ValueError) as exc:
            want_error: BaseException | None = exc
            want = None
        else:
            want_error = None
        live = sorted(self.want._block_tables)
        (ok, got), reads, _ = call_then_read(self.got, method, args if got_args is None else got_args,
                                             _state_reads(live))
        self.prefetched = (live, reads)
        if not ok:
            if isinstance(got, NotImplementedError):
                raise got  # the scorecard says "not implemented yet"
            if want_error is not None and isinstance(got, type(want_error)):
                return _RAISED, _RAISED
            self._fail(f"{call} — rule: {RULE[decider]}",
                       expected=f"raises {type(want_error).__name__}" if want_error else f"returns {want!r}",
                       got=raised_text(got))
        if want_error is not None:
            self._fail(f"{call} — rule: {RULE[decider]}", expected=f"raises {type(want_error).__name__}",
                       got=f"returned {got!r}")
        return want, got

    def _table_after(self, call: str, request_id: str, decider: str) -> list[int]:
        """block_table(request_id) of the candidate's, as read with the last call."""
        prefetched = self.prefetched
        if prefetched is not None and request_id in prefetched[0]:
            return list(self._outcome(call, prefetched[1][prefetched[0].index(request_id)], decider))
        return self._read(call, lambda: list(self.got.block_table(request_id)), decider)

    def _candidate(self, call: str, fn: Callable[[], Any], decider_text: str, expected: Any) -> Any:
        try:
            return fn()
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 - any error of the candidate is the finding
            self._fail(f"{call} — rule: {decider_text}", expected=expected, got=raised_text(exc))

    def _outcome(self, call: str, outcome: tuple[bool, Any], decider: str) -> Any:
        """A read_all outcome: its value, or the failure of reading the state."""
        ok, value = outcome
        if ok:
            return value
        if isinstance(value, NotImplementedError):
            raise value
        self._fail(f"reading the state after {call} — rule: {RULE[decider]}",
                   expected="no error (the request is live)", got=raised_text(value))

    def _read(self, call: str, fn: Callable[[], Any], decider: str) -> Any:
        try:
            return fn()
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 - a read that fails is the finding
            self._fail(f"reading the state after {call} — rule: {RULE[decider]}",
                       expected="no error (the request is live)", got=raised_text(exc))

    def _same(self, call: str, got: Any, want: Any, decider: str) -> None:
        if got != want or type(got) is not type(want):
            self._fail(f"return value of {call} — rule: {RULE[decider]}", expected=_shown(want), got=_shown(got))

    def _fail(self, prop: str, *, expected: Any = None, got: Any = None) -> None:
        self.failed = True  # a teardown must not replace this failure with a later one
        failure = PropertyFailure(prop, input="; ".join(self.calls), expected=expected, got=got)
        # for minimize(): an attribute of this suite's failures only
        failure.replay = (self.num_blocks, self.block_size, list(self.steps))  # type: ignore[attr-defined]
        raise failure

    def _record_allocation(self, call: str, request_id: str, k: int, old: list[int], want_old: list[int]) -> None:
        """Check and replay a successful allocate: copy-on-write, then the k new tokens."""
        new_table = self._table_after(call, request_id, "ceil")
        copied = self._apply_copies(old, new_table)
        want_new = self.want.block_table(request_id)
        want_copied = [i for i, (a, b) in enumerate(zip(want_old, want_new)) if a != b]
        if copied != want_copied:
            self._fail(f"the logical blocks {call} copied — rule: "
                       f"{rule('cow', 'cow_count') if want_copied else RULE['cow']}",
                       expected=f"logical blocks copied: {want_copied}", got=f"logical blocks copied: {copied}")
        history = self.history.setdefault(request_id, [])
        for _ in range(k):
            self.num_markers += 1
            history.append(("generated", self.num_markers))
            self._write(new_table, request_id, len(history) - 1)

    def _apply_copies(self, old: list[int], new_table: list[int]) -> list[int]:
        """Logical blocks whose physical block changed: copy their data, as the model would."""
        copied = []
        for logical_id, (src, dst) in enumerate(zip(old, new_table)):
            if src != dst:
                copied.append(logical_id)
                self.pending_got.append((src, dst))
                self.data[dst] = list(self.data.get(src, [None] * self.block_size))
        return copied

    def _write(self, table: list[int], request_id: str, position: int) -> None:
        logical_id, slot = divmod(position, self.block_size)
        if logical_id >= len(table):
            return  # too few blocks: check() reports it
        block = self.data.setdefault(table[logical_id], [None] * self.block_size)
        block[slot] = tuple(self.history[request_id][:position + 1])


RAISED = _RAISED


def _state_reads(live: list[str]) -> list[tuple[str, tuple | None]]:
    """Everything check() compares: each live request's table and token count, the free blocks."""
    return ([("block_table", (r,)) for r in live] + [("num_tokens", (r,)) for r in live]
            + [("num_free_blocks", None)])


def _shown(value: Any) -> Any:
    """None itself would be read as 'nothing to show' by the scorecard."""
    return "None" if value is None else value


def replay(solution: Any, reference: Any, num_blocks: int, block_size: int,
           steps: list[tuple[str, tuple[Any, ...]]]) -> None:
    """Run the recorded calls again on a fresh pair (raises what they raise)."""
    pair = Paired(solution, reference, num_blocks, block_size)
    for method, args in steps:
        getattr(pair, method)(*args)
