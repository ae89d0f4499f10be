"""Strategies, constants and small helpers shared by the paged-kv levels.

Nothing here depends on which physical block ids a solution hands out: blocks are compared
through the sharing structure (which table slots hold the same block), through a ledger of
the KV data each block holds (see paired.py), and through counts.
"""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import strategies as st

from grader.protocol import PropertyFailure

# "" is a legal request id (ids are strings), and a falsy one: it is always among the ids.
REQUEST_IDS = ("", "a", "b", "c")
block_sizes = st.integers(1, 4)
# Token id 0 is legal and falsy: prompts draw it as often as any other token.
prompts = st.lists(st.integers(0, 2), min_size=1, max_size=9)
# Prompts are prefixes of a few documents, so that prompts share blocks (and hit) often.
DOCUMENTS = ((1, 2, 3, 4, 5, 6, 7, 8), (1, 2, 3, 4, 9, 9, 9, 9), (5, 6, 7, 8, 1, 2, 3, 4),
             (0, 0, 0, 0, 1, 2, 3, 4))
document_prompts = st.builds(lambda doc, n: list(DOCUMENTS[doc][:n]),
                             st.integers(0, len(DOCUMENTS) - 1), st.integers(1, 6))


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def new(module: Any, num_blocks: int, block_size: int) -> Any:
    return module.PagedKVCacheAllocator(num_blocks, block_size)


def copied(value: Any) -> Any:
    """A list the candidate returned, as the suite's own copy: the candidate's list stays
    shared with it (and is the same object when returned again), so a later call could
    change what a test compares with."""
    return list(value) if isinstance(value, list) else value


def snapshot(alloc: Any, request_ids: Any) -> dict[str, Any]:
    """Everything observable about the given live requests: tables, token counts, free blocks.
    (Call by call, not in one read_all: a failure's snippet replays these reads and prints
    what they returned, which is what the verdict was about.)"""
    return {"num_free_blocks": alloc.num_free_blocks,
            "tables": {r: copied(alloc.block_table(r)) for r in sorted(request_ids)},
            "num_tokens": {r: alloc.num_tokens(r) for r in sorted(request_ids)}}


def raised_text(exc: BaseException) -> str:
    """"raised IndexError: pop from an empty deque"."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def expect_raises(exc_type: type[BaseException], fn: Callable[[], Any], prop: str, *, input: Any) -> None:
    """fn() must raise exc_type; anything else is the failure shown."""
    try:
        got = fn()
    except exc_type:
        return
    except Exception as exc:  # noqa: BLE001 - a wrong exception type is the failure shown
        raise PropertyFailure(prop, input=input, expected=f"raises {exc_type.__name__}",
                              got=raised_text(exc)) from None
    raise PropertyFailure(prop, input=input, expected=f"raises {exc_type.__name__}",
                          got=f"returned {got!r}")


def expect_unknown(alloc: Any, request_id: str, prop: str, *, input: Any) -> None:
    """request_id must be unknown: num_tokens and block_table raise KeyError."""
    expect_raises(KeyError, lambda: alloc.num_tokens(request_id), prop + " (num_tokens raises KeyError)",
                  input=input)
    expect_raises(KeyError, lambda: alloc.block_table(request_id),
                  prop + " (block_table raises KeyError)", input=input)


def sharing_classes(tables: dict[str, list[int]]) -> set[frozenset[tuple[str, int]]]:
    """The table slots (request, logical block) grouped by the physical block they hold."""
    groups: dict[int, set[tuple[str, int]]] = {}
    for request_id, table in tables.items():
        for logical_id, block_id in enumerate(table):
            groups.setdefault(block_id, set()).add((request_id, logical_id))
    return {frozenset(g) for g in groups.values()}


def shared_slots(classes: set[frozenset[tuple[str, int]]]) -> list[list[tuple[str, int]]]:
    """The groups of two or more slots, sorted: what a reader needs to see."""
    return sorted(sorted(c) for c in classes if len(c) > 1)


def short_prefix(prefix: Any) -> str:
    """A token prefix for the scorecard: prompt tokens as ints, generated tokens as g<n>."""
    items = ["g" + str(t[1]) if isinstance(t, tuple) else str(t) for t in prefix]
    return "[" + ", ".join(items) + "]"
