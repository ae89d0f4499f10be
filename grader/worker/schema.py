"""The bridge's wire protocol, written down once: every message, value tag and operation.

Both sides import this module (it ships to the worker: standard library only). A frame
(``wire.py``) carries one **message**, a tuple whose first item names its layout:

    ======  =========  =================================================================
    tag     direction  fields after the tag
    ======  =========  =================================================================
    call    both       id, op, args, context, updates, releases  -> the peer runs `op`
    ret     both       id, value, updates, extra                 <- its result
    err     both       id, exception, updates, extra             <- or what it raised
    hello   w -> j     ok, module or why, extra                  once, before any call
    ======  =========  =================================================================

* ``id``: the caller's request number; an answer names the call it answers.
* ``op``: an operation of ``OPS`` (judge to worker), or ``callback`` (worker to judge).
* ``args``: a list of encoded values; ``value``: one encoded value; ``exception``: an
  ``EXCEPTION`` record.
* ``context`` (judge to worker; None the other way): a dict, all keys optional:
  ``grad`` (bool, torch's grad mode), ``rng`` (bytes, the state of torch's global generator
  the call must start from), ``measure`` (meter names: the call is measured).
* ``updates``: every shared object changed in place since the last message, re-encoded.
* ``releases`` (judge to worker): ``[sids, handles]`` the judge no longer holds.
* ``extra`` (worker to judge; None the other way): a dict, all keys optional: ``out``
  (printed text), ``dropped`` (characters not kept), ``measure`` (the worker's share).
* ``hello`` (``grader/worker/main.py``, read by ``grader/engine/worker_process.py``): ok is
  True with the candidate module's HANDLE, or False with a dict saying why its import failed.

While a side waits for its answer it serves the peer's nested calls on the same channel
(the worker calling a judge callback, the judge's callback calling back into the
candidate). A channel is a connected socket used by one thread at a time.

An encoded **value** is a plain scalar (None, bool, int, float, str, bytes), which crosses
as it is, or a tuple whose first item is one of the value tags below (``VALUES``). Case or
length of a tag says nothing: its row says the direction and the fields. The layout of
every tagged tuple is checked in one place (``check``, and ``Endpoint.decode``), before a
handler reads a field.

As execnet's ``opcode`` table and ``Message._types``: to add a value type, add its tag and
``Layout`` row here and its row to the value table (``values.py``: how it is recognised,
encoded, decoded, shown and rebuilt in a snippet); ``tests/test_wire_schema.py`` round-trips
every tag and ``tests/test_value_table.py`` every row (README, "Adding a value type").
"""

from __future__ import annotations

from typing import Any, NamedTuple

JUDGE_TO_WORKER = "judge -> worker"
WORKER_TO_JUDGE = "worker -> judge"
BOTH = "both ways"


class ProtocolError(Exception):
    """A message that does not fit its layout. (``wire.WireError`` is its subclass the
    endpoints raise: the schema itself needs nothing of the transport.)"""


class BridgeError(Exception):
    """Something crossed (or tried to) that the bridge cannot carry (codec.py re-exports it)."""


class Layout(NamedTuple):
    """One row of the protocol: a tuple ``(code, *fields)`` (or ``fields`` alone for an
    untagged record, where ``code`` is None)."""

    name: str
    code: str | None
    direction: str
    fields: tuple[str, ...]
    doc: str

    @property
    def size(self) -> int:
        return len(self.fields) + (self.code is not None)


def check(message: Any, layout: Layout, error: type[Exception] = ProtocolError) -> tuple:
    """`message` if it is a tuple of `layout`'s size (and tag), else `error` naming the layout."""
    if type(message) is not tuple or len(message) != layout.size \
            or (layout.code is not None and message[0] != layout.code):
        raise error(f"malformed {layout.name}")
    return message


def _rows(*rows: Layout) -> dict[str, Layout]:
    table = {row.code: row for row in rows if row.code is not None}
    assert len(table) == len(rows), "a code named twice"
    return table


# ---------------------------------------------------------------------------- messages


class Msg:
    CALL = "call"
    RET = "ret"
    ERR = "err"
    HELLO = "hello"


CALL = Layout("call", Msg.CALL, BOTH, ("id", "op", "args", "context", "updates", "releases"),
              "the peer runs `op` on the decoded args")
RET = Layout("ret", Msg.RET, BOTH, ("id", "value", "updates", "extra"), "the answer to call `id`")
ERR = Layout("err", Msg.ERR, BOTH, ("id", "exception", "updates", "extra"),
             "call `id` raised `exception`")
HELLO = Layout("hello", Msg.HELLO, WORKER_TO_JUDGE, ("ok", "module", "extra"),
               "the worker's first message: its module's handle, or why its import failed")
MESSAGES = _rows(CALL, RET, ERR)  # (hello is never an answer to a call)


# ---------------------------------------------------------------------------- values


class Tag:
    """Every value tag, named once (the bytes on the wire are the strings)."""

    TUPLE = "T"
    FROZENSET = "F"
    REF = "="
    LIST = "L"
    DICT = "D"
    SET = "S"
    LIST_COPY = "L0"
    DICT_COPY = "D0"
    VERBATIM = "V"
    TENSOR = "X"
    GENERATOR = "G"
    COMPLEX = "J"
    SLICE = "SL"
    ELLIPSIS = "EL"
    BYTEARRAY = "BA"
    DTYPE = "DT"
    DEVICE = "DV"
    SIZE = "SZ"
    NDARRAY = "NP"
    MODULE_STATE = "MU"
    HANDLE = "R"
    CALLBACK_REF = "c"
    EXCEPTION_VALUE = "EX"
    HANDLE_REF = "r"
    BOUND_METHOD = "rm"
    CALLBACK = "C"
    MODULE = "M"
    EXCEPTION = "E"


VALUES = _rows(
    # By value, both ways.
    Layout("tuple", Tag.TUPLE, BOTH, ("items",), "a tuple (a namedtuple crosses as a tuple)"),
    Layout("frozenset", Tag.FROZENSET, BOTH, ("items",), "a frozenset"),
    Layout("plain list", Tag.LIST_COPY, BOTH, ("items",), "a list by value (a list subclass too)"),
    Layout("plain dict", Tag.DICT_COPY, BOTH, ("pairs",), "a dict by value, [(key, value)]"),
    Layout("verbatim tree", Tag.VERBATIM, BOTH, ("tree",), "plain data, in one piece (codec.plain_tree)"),
    Layout("complex", Tag.COMPLEX, BOTH, ("real", "imag"), "a complex number"),
    Layout("slice", Tag.SLICE, BOTH, ("start", "stop", "step"), "a slice"),
    Layout("ellipsis", Tag.ELLIPSIS, BOTH, (), "..."),
    Layout("bytearray", Tag.BYTEARRAY, BOTH, ("data",), "a bytearray, as bytes"),
    Layout("dtype", Tag.DTYPE, BOTH, ("name",), "a torch.dtype, by name (values.TENSOR_DTYPES)"),
    Layout("device", Tag.DEVICE, BOTH, ("name",), "a torch.device"),
    Layout("size", Tag.SIZE, BOTH, ("dims",), "a torch.Size, [int]"),
    Layout("ndarray", Tag.NDARRAY, BOTH, ("dtype", "shape", "data"), "a numpy array of numbers"),
    # Shared objects, both ways: identity survives, in-place changes cross (codec.Registry).
    Layout("reference", Tag.REF, BOTH, ("sid",), "a shared object the peer already holds"),
    Layout("list", Tag.LIST, BOTH, ("sid", "items"), "a shared list"),
    Layout("dict", Tag.DICT, BOTH, ("sid", "pairs"), "a shared dict, [(key, value)]"),
    Layout("set", Tag.SET, BOTH, ("sid", "items"), "a shared set"),
    Layout("tensor", Tag.TENSOR, BOTH,
           ("sid", "dtype", "shape", "stride", "data", "device", "requires_grad", "is_param", "grad",
            "extra"),
           "a tensor (sid 0: a copy); grad is a GRADIENT record or None; extra: the worker's "
           "handle of a result to run backward through"),
    Layout("generator", Tag.GENERATOR, BOTH, ("sid", "device", "state"), "a torch.Generator"),
    Layout("module state", Tag.MODULE_STATE, BOTH, ("sid", "training_flags", "members"),
           "a shared nn.Module brought up to date (modules.py): [MODULE_MEMBER]"),
    # Worker to judge: what lives in the worker.
    Layout("handle", Tag.HANDLE, WORKER_TO_JUDGE, ("handle", "type_id", "type_info"),
           "an object of the candidate's, shown as a proxy; type_info: a TYPE_INFO record the "
           "first time a channel names the type, else None"),
    Layout("callback reference", Tag.CALLBACK_REF, WORKER_TO_JUDGE, ("handle",),
           "a judge callable the worker was given"),
    Layout("exception value", Tag.EXCEPTION_VALUE, WORKER_TO_JUDGE, ("exception",),
           "an exception as a value (an outcome of read_all): an EXCEPTION record"),
    # Judge to worker: what lives in the judge, or names something of the worker's.
    Layout("handle reference", Tag.HANDLE_REF, JUDGE_TO_WORKER, ("handle",), "an object the worker exported"),
    Layout("bound method", Tag.BOUND_METHOD, JUDGE_TO_WORKER, ("handle", "name"), "getattr(handle, name)"),
    Layout("callback", Tag.CALLBACK, JUDGE_TO_WORKER, ("handle",), "a judge callable, as a stub to call"),
    Layout("module", Tag.MODULE, JUDGE_TO_WORKER, ("sid", "pickled", "members"),
           "an nn.Module passed for the first time (modules.py): [(kind, name, sid)]"),
)

# Untagged records inside values, and the exception record (tagged, never a value itself).
EXCEPTION = Layout("exception", Tag.EXCEPTION, BOTH,
                   ("name", "module", "base", "args", "message", "frames", "token"),
                   "an exception: its class by name, the builtin base it has, plain args")
GRADIENT = Layout("gradient", None, BOTH, ("dtype", "shape", "data"), "a leaf tensor's .grad")
TYPE_INFO = Layout("type information", None, WORKER_TO_JUDGE,
                   ("qualname", "module", "is_class", "is_callable", "methods"), "what a proxy knows of its type")
MODULE_MEMBER = Layout("module member", None, BOTH, ("kind", "name", "value"),
                       "a parameter ('p') or buffer ('b') of a shared module, by dotted name")
PAIR = Layout("dict item", None, BOTH, ("key", "value"), "one item of a dict")
RELEASES = Layout("releases", None, JUDGE_TO_WORKER, ("sids", "handles"), "what the judge no longer holds")

# Sizes by tag, for the one check in Endpoint.decode.
SIZES = {code: row.size for code, row in VALUES.items()}


# ---------------------------------------------------------------------------- operations


class Op:
    """Every operation a call may name; its arguments are the call's ``args``."""

    HARNESS = "harness"
    CALL_MANY = "call_many"
    CALL_ROWS = "call_rows"
    READ_ALL = "read_all"
    CALL_THEN_READ = "call_then_read"
    NEW_THEN_CALL = "new_then_call"
    SCRIPT = "script"
    GETATTR = "getattr"
    SETATTR = "setattr"
    DELATTR = "delattr"
    CALL = "call"
    CALLMETHOD = "callmethod"
    LEN = "len"
    ITER = "iter"
    NEXT = "next"
    GETITEM = "getitem"
    SETITEM = "setitem"
    DELITEM = "delitem"
    CONTAINS = "contains"
    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    INDEX = "index"
    ISINSTANCE = "isinstance"
    ISSUBCLASS = "issubclass"
    DIR = "dir"
    REPR = "repr"
    STR = "str"
    BACKWARD = "backward"
    RESET = "reset"
    PING = "ping"
    NOOP = "noop"
    SPIN = "spin"
    STATS = "stats"
    CALLBACK = "callback"


class OpRow(NamedTuple):
    direction: str
    args: tuple[str, ...]  # "*name": any number of them
    internal: bool = False  # runs nothing of the candidate's: no random state, no grad mode, no meters


OPS: dict[str, OpRow] = {
    Op.HARNESS: OpRow(JUDGE_TO_WORKER, ("source", "name", "args")),
    Op.CALL_MANY: OpRow(JUDGE_TO_WORKER, ("fn", "calls", "clone_args")),
    Op.CALL_ROWS: OpRow(JUDGE_TO_WORKER, ("fn", "args", "kwargs", "columns", "n")),
    Op.READ_ALL: OpRow(JUDGE_TO_WORKER, ("obj", "reads")),
    Op.CALL_THEN_READ: OpRow(JUDGE_TO_WORKER, ("obj", "name", "args", "kwargs", "reads", "result_reads")),
    # cls(*args, **kwargs), then obj.name(that object), then reads on obj: a request whose
    # argument the test builds with the candidate's own class (add_request(Request(...))).
    Op.NEW_THEN_CALL: OpRow(JUDGE_TO_WORKER, ("obj", "name", "cls", "args", "kwargs", "reads")),
    # Calls on one object fixed in advance, as call_then_read and new_then_call make them, and
    # a call repeated while a read stays true: a trace test's whole workload in one request
    # (grader/engine/proxy.py's run_script says what each entry is and what comes back).
    Op.SCRIPT: OpRow(JUDGE_TO_WORKER, ("obj", "entries")),
    Op.GETATTR: OpRow(JUDGE_TO_WORKER, ("obj", "name")),
    Op.SETATTR: OpRow(JUDGE_TO_WORKER, ("obj", "name", "value")),
    Op.DELATTR: OpRow(JUDGE_TO_WORKER, ("obj", "name")),
    Op.CALL: OpRow(JUDGE_TO_WORKER, ("obj", "args", "kwargs")),
    Op.CALLMETHOD: OpRow(JUDGE_TO_WORKER, ("obj", "name", "args", "kwargs")),
    Op.LEN: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.ITER: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.NEXT: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.GETITEM: OpRow(JUDGE_TO_WORKER, ("obj", "key")),
    Op.SETITEM: OpRow(JUDGE_TO_WORKER, ("obj", "key", "value")),
    Op.DELITEM: OpRow(JUDGE_TO_WORKER, ("obj", "key")),
    Op.CONTAINS: OpRow(JUDGE_TO_WORKER, ("obj", "key")),
    Op.BOOL: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.INT: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.FLOAT: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.INDEX: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.ISINSTANCE: OpRow(JUDGE_TO_WORKER, ("obj", "cls")),
    Op.ISSUBCLASS: OpRow(JUDGE_TO_WORKER, ("obj", "cls")),
    Op.DIR: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.REPR: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.STR: OpRow(JUDGE_TO_WORKER, ("obj",)),
    Op.BACKWARD: OpRow(JUDGE_TO_WORKER, ("handle", "grad", "sids")),
    Op.RESET: OpRow(JUDGE_TO_WORKER, (), internal=True),
    Op.PING: OpRow(JUDGE_TO_WORKER, (), internal=True),
    # Runs nothing of the candidate's, measured like a call: the judge's calibration of what
    # the transport of one message costs the worker (grader/engine/judge_bridge.py).
    Op.NOOP: OpRow(JUDGE_TO_WORKER, ("*payload",)),
    Op.SPIN: OpRow(JUDGE_TO_WORKER, ("seconds",), internal=True),
    Op.STATS: OpRow(JUDGE_TO_WORKER, (), internal=True),
    Op.CALLBACK: OpRow(WORKER_TO_JUDGE, ("fn", "args", "kwargs")),
}
INTERNAL_OPS = frozenset(name for name, row in OPS.items() if row.internal)

# The exception a worker raises when it cannot take the judge's random state: the judge
# makes it an error of the test (a snippet's seed would otherwise not be what ran).
RNG_NOT_SYNCED = "RandomStateNotSynced"
