"""One table of values (grader/worker/values.py) serves the codec, the scorecard's `show` and
the snippet's `literal`: every type the codec carries crosses under its tag, can be shown,
and is rebuilt exactly by the source a snippet prints for it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy
import pytest
import torch

from grader.engine.snippet import _Names, literal
from grader.protocol import show
from grader.worker import values
from grader.worker.bridge import Endpoint
from grader.worker.schema import VALUES
from tests.test_wire_schema import round_trip, same

nan, inf = float("nan"), float("inf")

# Values of every row of the table: a new row needs its samples here.
SAMPLES = {
    "none": [None],
    "bool": [True, False],
    "int": [0, -3, 2**70],
    "float": [0.1, -0.0, 2.0, inf, -inf, nan],
    "str": ["", "a'b\"\n\u00e9"],
    "bytes": [b"", b"\x00a'"],
    "tuple": [(), (1,), (1, (2.5, None), "x")],
    "list": [[], [1, [2, None], nan]],
    "dict": [{}, {"a": [1], 2: (3,), None: {"b": 1.5}}],
    "set": [set(), {1, "a", None}],
    "frozenset": [frozenset(), frozenset({1, "a"})],
    "complex": [complex(1.5, -2), complex(0, inf), complex(nan, 1)],
    "slice": [slice(1, None, -1), slice(None), slice("a", (1,), 2.5)],
    "ellipsis": [...],
    "bytearray": [bytearray(), bytearray(b"a\x00'")],
    "tensor": [torch.tensor([[1.5, nan], [-inf, 0.0]], dtype=torch.float64), torch.tensor([1, -2]),
               torch.tensor([True, False]), torch.tensor([1.5, 2.25], dtype=torch.bfloat16),
               torch.empty((0, 3), dtype=torch.int8), torch.tensor(3.0, requires_grad=True),
               torch.arange(5000, dtype=torch.int32).reshape(50, 100),  # past the literal limit: base64
               torch.nn.Parameter(torch.tensor([1.0, 2.0]))],
    "generator": [torch.Generator().manual_seed(5)],
    "dtype": [torch.float32, torch.bfloat16, torch.bool],
    "device": [torch.device("cpu"), torch.device("meta")],
    "size": [torch.Size([]), torch.Size([2, 3])],
    "ndarray": [numpy.arange(6, dtype=numpy.int32).reshape(2, 3), numpy.array(2.5), numpy.array([1 + 2j]),
                numpy.zeros((0, 2), dtype=numpy.uint8)],
}


def rebuilt(value):
    """What the snippet's source for `value` evaluates to (its setup lines run first)."""
    names = _Names("solution")
    source = literal(value, names)
    # What the snippet imports: torch, and the modules its literals asked for.
    namespace = {"torch": torch, **{name: importlib.import_module(name) for name in names.imports}}
    exec("\n".join(names.setup), namespace)  # the snippet's own source, as a candidate runs it
    return eval(source, namespace)


def test_every_row_has_samples_and_every_carried_tag_a_row():
    assert set(SAMPLES) == set(values.BY_NAME)
    by_value = {row.tag for row in values.TYPES if row.tag is not None}
    # The rest cross as the bridge's own (a handle, a callback, a module, a plain copy of a
    # subclass, a reference to a shared object, a verbatim tree): not values a test passes.
    assert by_value <= set(VALUES)
    assert set(VALUES) - by_value == {"=", "L0", "D0", "V", "MU", "R", "c", "EX", "r", "rm", "C", "M"}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_value_crosses_shows_and_is_rebuilt_by_its_snippet(name):
    row = values.BY_NAME[name]
    for value in SAMPLES[name]:
        assert values.nearest(type(value)) is row
        got, tags = round_trip(value)  # the codec carries it, under its row's tag
        assert same(value, got), (value, got)
        if row.tag is not None:
            assert tags[0] == row.tag
        assert isinstance(show(value), str)
        again = rebuilt(value)
        if name == "generator":  # rebuilt from its seed (a transcript keeps the generator, not a state)
            assert again.initial_seed() == value.initial_seed()
            assert torch.equal(again.get_state(), value.get_state())
        elif name == "tensor" and type(value) is torch.nn.Parameter:  # rebuilt as the tensor it holds
            assert type(again) is torch.Tensor and again.requires_grad and torch.equal(again.detach(), value.detach())
        else:
            assert same(value, again), (value, literal(value, _Names("solution")))


def test_subclasses_are_shown_and_rebuilt_as_their_base():
    class Flags(dict):
        pass

    point = __import__("collections").namedtuple("Point", "x y")(1, 2.5)
    assert values.nearest(Flags) is values.BY_NAME["dict"] and values.exact(Flags) is None
    assert rebuilt(Flags(a=1)) == {"a": 1} and rebuilt(point) == (1, 2.5)
    assert show(point) == "(1, 2.5)" and show(numpy.float64(2.0)) == "2."


def test_show_keeps_the_scorecards_forms():
    assert show(2.0) == "2." and show([1.0, (2,)]) == "[1., (2,)]" and show({"a": 1.5}) == "{'a': 1.5}"
    assert show(torch.tensor([1.0, 2.0])) == "torch.tensor([1., 2.])"
    assert show(torch.tensor([1, 2], dtype=torch.int32)) == "torch.tensor([1, 2], dtype=torch.int32)"
    assert show(torch.Size([2, 3])) == "(2, 3)" and show(complex(1, 2)) == "(1+2j)"
    assert show(list(range(70))).endswith("... 6 more]")
    assert show([[[[[[1]]]]]]) == "[[[[[...]]]]]"


def test_a_type_is_checked_without_importing_torch_or_numpy():
    code = ("import sys; from grader.worker import values\n"
            "class Flags(dict): pass\n"
            "assert values.nearest(Flags) is values.BY_NAME['dict'] and values.exact(object) is None\n"
            "assert 'torch' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_class_named_like_a_tensor_is_not_taken_for_one():
    forged = type("Tensor", (), {"__module__": "torch"})
    assert values.exact(forged) is None and values.nearest(forged) is None


def test_an_endpoint_finds_each_types_encoder_once():
    class Side(Endpoint):
        pass

    side = Side(None, sign=1)
    with side.registry.lock:
        side.encode(complex(1, 2))
        side.encode(torch.Size([1]))
    assert Side._encoders[complex] is values.BY_NAME["complex"].encode
    assert Side._encoders[torch.Size] is values.BY_NAME["size"].encode
    assert Side._encoders is not Endpoint._encoders  # (each endpoint class keeps its own)
