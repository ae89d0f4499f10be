"""The bridge's wire protocol (grader/worker/schema.py), tested in one process: every value
tag round-trips (encode, the frame's pickle, decode gives the value back) with its layout
as the schema writes it, malformed messages are refused with the protocol's error, and a
judge endpoint talks to a worker endpoint served on a thread over a socket pair."""

from __future__ import annotations

import collections
import math
import socket
import threading
import types
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.engine.judge_bridge import JudgeEndpoint, RandomStateNotSynced
from grader.engine.proxy import read_all
from grader.worker import codec, schema, wire
from grader.worker.bridge import Endpoint
from grader.worker.codec import BridgeError, Verbatim
from grader.worker.schema import BOTH, JUDGE_TO_WORKER, OPS, VALUES, WORKER_TO_JUDGE, Layout, ProtocolError, Tag
from grader.worker.serve import _OPS, WorkerEndpoint, serve

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- the schema itself


def test_every_tag_and_op_is_named_once_with_a_direction():
    codes = [getattr(Tag, name) for name in vars(Tag) if name.isupper()]
    assert len(codes) == len(set(codes))
    assert set(codes) == set(VALUES) | {Tag.EXCEPTION}
    assert all(row.direction in (BOTH, JUDGE_TO_WORKER, WORKER_TO_JUDGE) for row in VALUES.values())
    ops = [getattr(schema.Op, name) for name in vars(schema.Op) if name.isupper()]
    assert sorted(ops) == sorted(OPS)
    # The worker runs every judge-to-worker operation, and nothing else.
    assert set(_OPS) == {name for name, row in OPS.items() if row.direction == JUDGE_TO_WORKER}


def test_each_side_decodes_exactly_the_tags_sent_to_it():
    judge = {tag for tag, row in VALUES.items() if row.direction in (BOTH, WORKER_TO_JUDGE)}
    worker = {tag for tag, row in VALUES.items() if row.direction in (BOTH, JUDGE_TO_WORKER)}
    assert set(JudgeEndpoint.DECODERS) == judge
    assert set(WorkerEndpoint.DECODERS) == worker


def test_check_takes_a_fitting_message_and_names_the_layout_of_one_that_does_not():
    layout = Layout("pair", "P", BOTH, ("a", "b"), "")
    assert schema.check(("P", 1, 2), layout) == ("P", 1, 2)
    for bad in (("P", 1), ("P", 1, 2, 3), ("Q", 1, 2), ["P", 1, 2], None):
        with pytest.raises(ProtocolError, match="malformed pair"):
            schema.check(bad, layout)
    with pytest.raises(wire.WireError):
        schema.check(("P",), layout, wire.WireError)
    assert issubclass(wire.WireError, ProtocolError)


# ---------------------------------------------------------------- by value, both ways


class _ListSub(list):
    pass


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=True), st.text(max_size=8), st.binary(max_size=8))
_hashable = st.one_of(st.none(), st.booleans(), st.integers(-100, 100), st.text(max_size=4))
_DTYPES = ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool",
           "complex64"]


@st.composite
def _tensors(draw: Any) -> Any:
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    dtype = getattr(torch, draw(st.sampled_from(_DTYPES)))
    t = (torch.randn(shape, generator=torch.Generator().manual_seed(draw(st.integers(0, 99)))) * 10).to(dtype)
    if draw(st.booleans()) and t.dim() == 2:
        t = t.t()  # crosses with its strides
    if t.is_floating_point() and draw(st.booleans()):
        t.requires_grad_(True)
    return t


@st.composite
def _ndarrays(draw: Any) -> Any:
    import numpy as np

    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    dtype = draw(st.sampled_from(["<f8", "<f4", "<i8", "|u1", "|b1", "<c16"]))
    return (np.arange(math.prod(shape)) % 3).astype(dtype).reshape(shape)


# One strategy for every tag both sides encode by value or share: its values encode under it.
BY_VALUE: dict[str, Any] = {
    Tag.TUPLE: st.lists(_scalars, max_size=4).map(tuple),
    Tag.FROZENSET: st.frozensets(_hashable, max_size=4),
    Tag.LIST: st.lists(_scalars, max_size=4),
    Tag.DICT: st.dictionaries(_hashable, _scalars, max_size=4),
    Tag.SET: st.sets(_hashable, max_size=4),
    Tag.LIST_COPY: st.lists(_scalars, max_size=4).map(_ListSub),
    Tag.DICT_COPY: st.dictionaries(_hashable, _scalars, max_size=4).map(collections.OrderedDict),
    Tag.VERBATIM: st.lists(st.tuples(st.booleans(), st.lists(st.integers(), max_size=3)), max_size=3).map(Verbatim),
    Tag.REF: st.lists(st.integers(), max_size=3).map(lambda items: (items, items)),
    Tag.COMPLEX: st.complex_numbers(allow_nan=False),
    Tag.SLICE: st.builds(slice, _hashable, _hashable, _hashable),
    Tag.ELLIPSIS: st.just(...),
    Tag.BYTEARRAY: st.binary(max_size=8).map(bytearray),
    Tag.DTYPE: st.sampled_from(codec.TENSOR_DTYPES).map(lambda name: getattr(torch, name)),
    Tag.DEVICE: st.sampled_from(["cpu", "cpu:0", "meta"]).map(torch.device),
    Tag.SIZE: st.lists(st.integers(0, 5), max_size=4).map(torch.Size),
    Tag.TENSOR: _tensors(),
    Tag.GENERATOR: st.integers(0, 2**32).map(lambda seed: torch.Generator().manual_seed(seed)),
    Tag.NDARRAY: _ndarrays(),
}


def same(a: Any, b: Any) -> bool:
    """Equal values of the same type (a Verbatim arrives as its tree; NaN equals NaN)."""
    if isinstance(a, Verbatim):
        return same(a.value, b)
    if isinstance(a, (_ListSub, collections.OrderedDict)):
        return type(b) is (list if isinstance(a, list) else dict) and same(type(b)(a), b)
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        # (a dense layout keeps its strides; those of an empty tensor or of size-1 dims mean nothing)
        strides_kept = a.numel() == 0 or 1 in a.shape or a.stride() == b.stride()
        return (a.dtype == b.dtype and a.shape == b.shape and strides_kept
                and a.requires_grad == b.requires_grad and _same_values(a.detach(), b.detach()))
    if isinstance(a, torch.Generator):
        return torch.equal(a.get_state(), b.get_state())
    if type(a).__module__ == "numpy":
        return a.dtype == b.dtype and a.shape == b.shape and (a == b).all()
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def _same_values(a: Any, b: Any) -> bool:
    if a.is_floating_point() or a.is_complex():
        return bool(torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all())
    return torch.equal(a, b)


def tags_in(tree: Any) -> list[str]:
    """Every tag of an encoded value, each tuple's layout checked against the schema; only the
    fields the schema says hold values are walked (a dict's str key is not a tag)."""
    if type(tree) is not tuple:
        assert type(tree) in codec.PLAIN
        return []
    row = VALUES[tree[0]]
    schema.check(tree, row)
    found = [tree[0]]
    for name, field in zip(row.fields, tree[1:]):
        if name == "items":
            assert type(field) is list
            found += [tag for item in field for tag in tags_in(item)]
        elif name == "pairs":
            for pair in field:
                schema.check(pair, schema.PAIR)
                found += tags_in(pair[0]) + tags_in(pair[1])
        elif name in ("start", "stop", "step"):
            found += tags_in(field)
    return found


def round_trip(value: Any) -> tuple[Any, list[str]]:
    sender, receiver = Endpoint(None, sign=+1), Endpoint(None, sign=-1)
    with sender.registry.lock:
        tree = sender.encode(value)
    tree = wire.loads(wire.dumps(tree))  # what a frame carries: plain data only
    with receiver.registry.lock:
        return receiver.decode(tree), tags_in(tree)


def test_every_tag_has_a_round_trip_test():
    """A new tag needs its strategy here (by value) or its own test below (through a worker)."""
    through_a_worker = {Tag.HANDLE, Tag.HANDLE_REF, Tag.BOUND_METHOD, Tag.CALLBACK, Tag.CALLBACK_REF,
                        Tag.EXCEPTION_VALUE, Tag.MODULE, Tag.MODULE_STATE}
    assert set(BY_VALUE) | through_a_worker == set(VALUES)


@pytest.mark.parametrize("tag", sorted(BY_VALUE))
def test_a_value_round_trips_under_its_tag(tag: str):
    @FAST
    @given(BY_VALUE[tag])
    def check(value: Any) -> None:
        got, tags = round_trip(value)
        assert tag in tags
        if tag == Tag.REF:  # one list twice: one object on arrival
            assert got[0] is got[1] and got[0] == value[0]
        else:
            assert same(value, got), (value, got)

    check()


@FAST
@given(st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(_hashable, inner, max_size=3)), max_leaves=10))
def test_nested_plain_data_round_trips(value: Any):
    got, _ = round_trip(value)
    assert same(value, got)


# ---------------------------------------------------------------- malformed messages


class _OneMessage:
    """A channel that delivers one message (what `_await` reads)."""

    def __init__(self, msg: Any) -> None:
        self.msg, self.last_frame_bytes = wire.loads(wire.dumps(msg)), 1000

    def recv(self) -> Any:
        return self.msg


def _receive(endpoint: Endpoint, body: Any) -> Any:
    ok, value = endpoint._await(_OneMessage(("ret", 1, body, [], None)), 1)
    return value


@pytest.mark.parametrize("tag", sorted(VALUES))
def test_a_tag_with_a_field_too_many_or_too_few_is_refused(tag: str):
    endpoint = WorkerEndpoint.__new__(WorkerEndpoint) if VALUES[tag].direction == JUDGE_TO_WORKER \
        else JudgeEndpoint(None, None)
    if isinstance(endpoint, WorkerEndpoint):
        Endpoint.__init__(endpoint, None, sign=-1)
    size = VALUES[tag].size
    for wrong in (size - 1, size + 1):
        if wrong < 1:
            continue
        tree = (tag,) + (0,) * (wrong - 1)
        with pytest.raises(wire.WireError, match="malformed"):
            _receive(endpoint, tree)


_junk = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(st.sampled_from(sorted(VALUES)), inner, inner, inner).map(lambda t: t[: 1 + len(t[1:]) % 4]),
        st.builds(lambda tag, fields: (tag, *fields), st.sampled_from(sorted(VALUES)),
                  st.lists(inner, max_size=10))),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(_junk)
def test_whatever_a_worker_sends_the_judge_rebuilds_it_or_refuses_it(tree: Any):
    """Never another exception (a crash of the judge): a value, or the protocol's error."""
    try:
        _receive(JudgeEndpoint(None, None), tree)
    except (ProtocolError, BridgeError):
        pass


@pytest.mark.parametrize("msg", [("ret", 1), ("ret", 1, None, [], None, 0), ("err", 1, None, []),
                                 ("bye", 1, None, [], None), ("ret", 2, None, [], None), []])
def test_an_answer_that_does_not_fit_its_layout_is_refused(msg: Any):
    with pytest.raises(wire.WireError):
        JudgeEndpoint(None, None)._await(_OneMessage(msg), 1)


def test_a_malformed_exception_reads_as_a_bridge_error():
    exc = _receive(JudgeEndpoint(None, None), None)  # (a "ret" of None: fine)
    assert exc is None
    assert isinstance(Endpoint(None, 1).decode_exception(("E", "X")), BridgeError)


# ---------------------------------------------------------------- a worker on a thread

CANDIDATE = '''
def echo(x):
    return x

def same(a, b):
    return a is b

def call(f, *args):
    return f(*args)

def fail():
    raise ValueError("bad input")

def draw():
    import torch
    return torch.rand(()).item()

def to_eval(m):
    m.eval()
    return m.training

class Box:
    def __init__(self):
        self.items = []

    def push(self, x):
        self.items.append(x)
        return len(self.items)

    @property
    def broken(self):
        raise KeyError("nothing here")
'''


@pytest.fixture
def connected():
    """(judge endpoint, the candidate module's proxy): a worker endpoint served on a thread."""
    judge_sock, worker_sock = socket.socketpair()
    broker_judge, broker_worker = socket.socketpair()
    module = types.ModuleType("candidate")
    exec(compile(CANDIDATE, "<candidate>", "exec"), module.__dict__)
    worker = WorkerEndpoint(wire.FramedSocket(worker_sock), module, "<candidate>", None)
    hello = wire.loads(wire.dumps(worker.hello()))
    thread = threading.Thread(target=serve, args=(worker, broker_worker), daemon=True)
    thread.start()
    judge = JudgeEndpoint(wire.FramedSocket(judge_sock), broker_judge)
    yield judge, judge.module(hello)
    judge_sock.close()
    broker_judge.close()
    thread.join(timeout=5)


def test_handles_bound_methods_and_their_references(connected):
    judge, cand = connected
    box = cand.Box()  # HANDLE
    assert type(box).__name__ == "RemoteObject" and box._kata_type.qualname == "Box"
    assert cand.same(box, box) is True  # HANDLE_REF: the worker's own object again
    assert cand.call(box.push, 7) == 1  # BOUND_METHOD
    assert cand.echo(box) is box


def test_callbacks_and_their_references(connected):
    judge, cand = connected

    def double(x):
        return 2 * x

    assert cand.call(double, 21) == 42  # CALLBACK: the worker calls back into the judge
    assert cand.echo(double) is double  # CALLBACK_REF: the judge's own function again


def test_exceptions_as_answers_and_as_values(connected):
    judge, cand = connected
    with pytest.raises(ValueError, match="bad input") as info:
        cand.fail()  # EXCEPTION, in an "err"
    assert info.value._kata_remote
    [(ok, exc)] = read_all(cand.Box(), [("broken", None)])  # EXCEPTION_VALUE
    assert not ok and isinstance(exc, KeyError)


def test_shared_objects_keep_identity_and_in_place_changes(connected):
    judge, cand = connected
    items = [1, 2]
    assert cand.echo(items) is items
    box = cand.Box()
    box.push(items)
    assert box.items[0] is items
    gen = torch.Generator().manual_seed(3)
    assert cand.echo(gen) is gen


def test_a_module_crosses_once_and_its_training_flag_comes_back(connected):
    judge, cand = connected
    layer = torch.nn.Linear(2, 3)
    assert cand.echo(layer) is layer  # MODULE, then MODULE_STATE on the way back
    assert cand.to_eval(layer) is False
    assert layer.training is False  # the worker's change, applied to the judge's module


def test_both_sides_draw_from_the_judges_random_state(connected):
    judge, cand = connected
    torch.default_generator.manual_seed(11)
    first = cand.draw()
    torch.default_generator.manual_seed(11)
    assert cand.draw() == first


def test_a_failed_random_state_sync_is_an_error_of_the_test(connected, monkeypatch):
    judge, cand = connected
    box = cand.Box()
    monkeypatch.setattr(judge, "call_context", lambda: {"rng": b"not a generator state"})
    with pytest.raises(RandomStateNotSynced, match="random state"):
        box.push(1)
    monkeypatch.undo()
    assert judge.rng_synced is None  # the next call sends the state again
    assert box.push(2) == 1  # the refused call did not run
    assert isinstance(RandomStateNotSynced("x"), AssertionError)
