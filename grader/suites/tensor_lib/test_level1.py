"""Level 1 of tensor-lib: storage, views, indexing. Tensor(data), shape, strides, tolist,
transpose, permute, __getitem__ / __setitem__, reshape, is_contiguous, contiguous, and the
imports of the file (no numpy, no torch)."""

from __future__ import annotations

import torch
from hypothesis import given, reject, settings, strategies as st

from grader.protocol import expect, kata_test, read_all, run_in_one_process
from grader.suites.tensor_lib.harness import forbidden_imports
from grader.suites.tensor_lib.strategies import (build, cases, expect_error, expect_layout, read,
                                                 shapes)

RULES = {
    "the file imports neither numpy nor torch": "test_no_numpy_or_torch",
    "Tensor(data) from nested lists or a number: shape, contiguous strides in elements, tolist()":
        "test_construct_from_nested_lists",
    "values are float64: ints become floats, tolist() returns floats": "test_values_are_floats",
    "ValueError: ragged nested lists": "test_ragged_lists_rejected",
    "transpose(d0, d1) is a view: shape and strides swapped": "test_transpose_is_a_view",
    "permute(*dims) is a view: shape and strides reordered; permute(1, 0) and permute((1, 0)) agree":
        "test_permute_is_a_view",
    "negative dims count from the end": "test_negative_dims",
    "indexing with ints and slices (steps, negative and out-of-range bounds) is a view with torch's "
    "shape, strides and values": ("test_getitem_matches_torch", "test_slices_keep_the_offset"),
    "views share storage: a write through one is seen through the other": "test_writes_through_views_are_shared",
    "reshape is a view with torch.Tensor.view's strides when the layout allows":
        ("test_reshape_view_strides", "test_reshape_of_one_or_no_element"),
    "reshape copies when no view can do it: a write to the copy is not seen": "test_reshape_copies_when_needed",
    "reshape infers one -1; reshape(2, 3) and reshape((2, 3)) are the same": "test_reshape_infers_minus_one",
    "is_contiguous() as torch: size-1 dims ignored, empty tensors contiguous": "test_is_contiguous_matches_torch",
    "contiguous(): the tensor itself when contiguous, else a contiguous copy": "test_contiguous_copies_only_when_needed",
    "IndexError: an index or dim out of range, more indices than dims": "test_index_errors",
    "ValueError: a slice step <= 0, permute dims that are not a permutation, a reshape of the wrong size, "
    "with a size below -1, or a -1 among sizes whose product is 0": "test_value_errors_of_views",
}

SETTLED_BY = {
    "the file imports neither numpy nor torch": "ask",
    "Tensor(data) from nested lists or a number: shape, contiguous strides in elements, tolist()":
        ("ask", "layout"),
    "values are float64: ints become floats, tolist() returns floats": "float64",
    "ValueError: ragged nested lists": "errors",
    "transpose(d0, d1) is a view: shape and strides swapped": ("ask", "views"),
    "permute(*dims) is a view: shape and strides reordered; permute(1, 0) and permute((1, 0)) agree":
        ("ask", "views"),
    "negative dims count from the end": "ask",
    "indexing with ints and slices (steps, negative and out-of-range bounds) is a view with torch's "
    "shape, strides and values": ("ask", "indexing"),
    "views share storage: a write through one is seen through the other": ("ask", "views"),
    "reshape is a view with torch.Tensor.view's strides when the layout allows": ("ask", "reshape"),
    "reshape copies when no view can do it: a write to the copy is not seen": ("ask", "reshape"),
    "reshape infers one -1; reshape(2, 3) and reshape((2, 3)) are the same": "reshape",
    "is_contiguous() as torch: size-1 dims ignored, empty tensors contiguous": "contiguity",
    "contiguous(): the tensor itself when contiguous, else a contiguous copy": "contiguity",
    "IndexError: an index or dim out of range, more indices than dims": "errors",
    "ValueError: a slice step <= 0, permute dims that are not a permutation, a reshape of the wrong size, "
    "with a size below -1, or a -1 among sizes whose product is 0": "errors",
}
# ints kept as ints print the same numbers; the values are the level's point.
DETAILS = {"values are float64: ints become floats, tolist() returns floats"}


@kata_test(level=1, category="api contract", weight=2,
           description="the solution is pure Python: it imports neither numpy nor torch")
def test_no_numpy_or_torch(solution):
    read(solution.Tensor([1.0, 2.0]), "Tensor([1.0, 2.0])")  # a library to check: Tensor works
    found = run_in_one_process(forbidden_imports, solution)
    expect(found == [], "the solution may not import numpy or torch (pure Python only)",
           input="the imports of your file", expected="no numpy, no torch",
           got=f"imports {', '.join(found)}")


@kata_test(level=1, category="correctness", weight=2,
           description="Tensor(nested lists or a number) has torch's shape, strides and tolist()")
@settings(max_examples=30)
@given(case=cases(shapes(min_size=1), layouts=("contiguous",)))
def test_construct_from_nested_lists(solution, case):
    data = case.torch().tolist()
    expect_layout(solution.Tensor(data), case.torch(), "Tensor(data)", input=f"Tensor({data})")


@kata_test(level=1, category="correctness", description="ints are stored as floats: tolist() returns floats")
def test_values_are_floats(solution):
    _, data = read(solution.Tensor([[1, 2], [3, 4]]), "Tensor([[1, 2], [3, 4]])")
    flat = [v for row in data for v in row] if isinstance(data, list) else []
    expect(len(flat) == 4 and all(type(v) is float for v in flat), "values are float64: tolist() gives floats",
           input="Tensor([[1, 2], [3, 4]]).tolist()", expected=[[1.0, 2.0], [3.0, 4.0]], got=data)
    _, value = read(solution.Tensor(5), "Tensor(5)")
    expect(type(value) is float and value == 5.0, "a 0-d tensor's tolist() is a float", input="Tensor(5).tolist()",
           expected=5.0, got=value)


@kata_test(level=1, category="edge cases", description="empty lists and numbers: Tensor([]), Tensor([[]]), Tensor(2.5)")
def test_construct_edge_shapes(solution):
    for data in ([], [[]], [[], []], 2.5, 0.0, [0.0]):
        expect_layout(solution.Tensor(data), torch.tensor(data, dtype=torch.float64), "Tensor(data)",
                      input=f"Tensor({data!r})")


@kata_test(level=1, category="api contract", description="ragged nested lists raise ValueError")
def test_ragged_lists_rejected(solution):
    for data in ([[1.0], [2.0, 3.0]], [[1.0, 2.0], 3.0], [[[1.0]], [[1.0], [2.0]]]):
        expect_error(lambda: solution.Tensor(data), ValueError, f"Tensor({data})")


def _pair(solution, case):
    return build(None, case)[1], build(solution, case)[1]


@kata_test(level=1, category="correctness", weight=2, description="transpose(d0, d1) swaps shape and strides (a view)")
@settings(max_examples=30)
@given(case=cases(shapes(min_dims=1)), data=st.data())
def test_transpose_is_a_view(solution, case, data):
    n = len(case.shape)
    d0, d1 = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    want, got = _pair(solution, case)
    expect_layout(got.transpose(d0, d1), want.transpose(d0, d1), f"transpose({d0}, {d1})",
                  input={"x": case.shown(), "call": f"x.transpose({d0}, {d1})"})


@kata_test(level=1, category="correctness", weight=2, description="permute(*dims) reorders shape and strides (a view)")
@settings(max_examples=30)
@given(case=cases(shapes(min_dims=1)), data=st.data())
def test_permute_is_a_view(solution, case, data):
    dims = data.draw(st.permutations(range(len(case.shape))))
    want, got = _pair(solution, case)
    expect_layout(got.permute(*dims), want.permute(*dims), f"permute{tuple(dims)}",
                  input={"x": case.shown(), "call": f"x.permute{tuple(dims)}"})
    expect_layout(got.permute(tuple(dims)), want.permute(*dims), f"permute({tuple(dims)}) (the dims as one tuple)",
                  input={"x": case.shown(), "call": f"x.permute({tuple(dims)})"})


@kata_test(level=1, category="correctness", description="negative dims count from the end (transpose, permute)")
@settings(max_examples=20)
@given(case=cases(shapes(min_dims=2, min_size=1)))
def test_negative_dims(solution, case):
    want, got = _pair(solution, case)
    n = len(case.shape)
    expect_layout(got.transpose(-1, -n), want.transpose(-1, -n), f"transpose(-1, {-n})",
                  input={"x": case.shown(), "call": f"x.transpose(-1, {-n})"})
    dims = tuple(range(-1, -n - 1, -1))
    expect_layout(got.permute(*dims), want.permute(*dims), f"permute{dims}",
                  input={"x": case.shown(), "call": f"x.permute{dims}"})


@st.composite
def index_keys(draw, shape):
    """A key for a tensor of `shape`: an int or a slice per leading dim, as an int, a slice or a tuple."""
    parts = []
    for size in shape[:draw(st.integers(1, len(shape)))]:
        if size and draw(st.booleans()) and draw(st.booleans()):
            parts.append(draw(st.integers(-size, size - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
            parts.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3]))))
    return parts[0] if len(parts) == 1 and draw(st.booleans()) else tuple(parts)


@kata_test(level=1, category="correctness", weight=3,
           description="x[key] with ints and slices (steps, negative bounds) is torch's view")
@settings(max_examples=40)
@given(case=cases(shapes(min_dims=1)), data=st.data())
def test_getitem_matches_torch(solution, case, data):
    key = data.draw(index_keys(case.shape))
    want, got = _pair(solution, case)
    expect_layout(got[key], want[key], "x[key]", input={"x": case.shown(), "key": key})


@kata_test(level=1, category="correctness", weight=2,
           description="a slice of a slice starts where the first one did (the offset is kept)")
def test_slices_keep_the_offset(solution):
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    got = solution.Tensor(base.tolist())
    for k1, k2 in [((slice(1, None), slice(2, None, 2)), (slice(1, None), slice(1, None))),
                   ((slice(None, None, 2), 3), slice(1, 2)), ((2, slice(1, None)), slice(None, None, 3)),
                   ((slice(1, 3), slice(None)), (1, slice(2, 5, 2)))]:
        expect_layout(got[k1][k2], base[k1][k2], "x[k1][k2]", input={"x": base.tolist(), "k1": k1, "k2": k2})


@kata_test(level=1, category="correctness", weight=3,
           description="views share storage: a write through a view is seen by its base, and back")
@settings(max_examples=25)
@given(case=cases(shapes(min_dims=2, min_size=1), layouts=("contiguous",)), data=st.data())
def test_writes_through_views_are_shared(solution, case, data):
    want_base, got_base = build(None, case)[1], build(solution, case)[1]
    view = data.draw(st.sampled_from(["transpose(0, 1)", "[1:, ::2]", "[0]", "permute", "reshape(-1)"]))

    def make(t):
        return {"transpose(0, 1)": lambda: t.transpose(0, 1), "[1:, ::2]": lambda: t[1:, ::2],
                "[0]": lambda: t[0], "permute": lambda: t.permute(*reversed(range(len(case.shape)))),
                "reshape(-1)": lambda: t.reshape(-1)}[view]()

    want_view, got_view = make(want_base), make(got_base)
    if want_view.numel() == 0:
        return
    idx = (0,) * want_view.dim()
    want_view[idx] = 100.0
    got_view[idx] = 100.0
    expect_layout(got_base, want_base, f"after v = x.{view}; v[{idx}] = 100.0, x sees the write",
                  input={"x": case.shown(), "view": view}, what="x")
    last = tuple(s - 1 for s in case.shape)
    want_base[last] = -50.0
    got_base[last] = -50.0
    expect_layout(got_view, want_view, f"after x[{last}] = -50.0, the view x.{view} sees the write",
                  input={"x": case.shown(), "view": view}, what="the view")


def _torch_shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


@st.composite
def reshape_cases(draw, need_view: bool):
    """A (maybe non-contiguous) tensor with at least one element and a shape of its size,
    where torch's reshape is a view (need_view True) or a copy (False)."""
    layouts = ("contiguous", "transposed", "strided") if need_view else ("transposed",)
    case = draw(cases(shapes(min_dims=1 if need_view else 2, min_size=1), layouts=layouts))
    t = build(None, case)[1]
    n = t.numel()
    d = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    options = [(n,), tuple(reversed(case.shape)), (n, 1), case.shape + (1,), (1,) + case.shape, (d, n // d)]
    if len(case.shape) >= 2:
        options.append(case.shape[:-2] + (case.shape[-2] * case.shape[-1],))
    fitting = [o for o in options if _torch_shares(t.reshape(o), t) == need_view]
    if not fitting:
        reject()
    return case, draw(st.sampled_from(fitting))


@kata_test(level=1, category="correctness", weight=3,
           description="reshape is a view with torch's strides when the layout allows")
@settings(max_examples=30)
@given(cs=reshape_cases(need_view=True))
def test_reshape_view_strides(solution, cs):
    case, new = cs
    want, got = _pair(solution, case)
    r_want, r_got = want.reshape(new), got.reshape(new)
    expect_layout(r_got, r_want, f"reshape{new} (a view)", input={"x": case.shown(), "shape": new})
    idx = (0,) * len(new)
    r_want[idx] = 99.0
    r_got[idx] = 99.0
    expect_layout(got, want, f"reshape{new} is a view: a write to it is seen by x", input={"x": case.shown(),
                  "shape": new, "then": f"r[{idx}] = 99.0"}, what="x")


@kata_test(level=1, category="correctness", weight=3,
           description="reshape copies when no view can do it: a write to the copy is not seen by x")
@settings(max_examples=25)
@given(cs=reshape_cases(need_view=False))
def test_reshape_copies_when_needed(solution, cs):
    case, new = cs
    want, got = _pair(solution, case)
    r_want, r_got = want.reshape(new), got.reshape(new)
    expect_layout(r_got, r_want, f"reshape{new} (a copy, contiguous)", input={"x": case.shown(), "shape": new})
    idx = (0,) * len(new)
    r_want[idx] = 99.0
    r_got[idx] = 99.0
    expect_layout(got, want, f"reshape{new} of this layout is a copy: x does not change when it is written",
                  input={"x": case.shown(), "shape": new, "then": f"r[{idx}] = 99.0"}, what="x")


@kata_test(level=1, category="edge cases", weight=2,
           description="reshape of a one-element strided tensor and of an empty transposed one: torch's strides")
def test_reshape_of_one_or_no_element(solution):
    one_want = torch.tensor([[1.0, 2.0]], dtype=torch.float64)[:, ::2]  # shape (1, 1), strides (2, 2)
    one_got = solution.Tensor([[1.0, 2.0]])[:, ::2]
    for new in [(1,), (1, 1, 1), ()]:
        expect_layout(one_got.reshape(new), one_want.reshape(new), f"reshape{new} of x[:, ::2], x = [[1, 2]]",
                      input={"x": [[1.0, 2.0]], "view": "x[:, ::2]", "shape": new})
    expect_layout(solution.Tensor(5.0).reshape(1, 1), torch.tensor(5.0, dtype=torch.float64).reshape(1, 1),
                  "reshape(1, 1) of a 0-d tensor", input={"x": "Tensor(5.0)", "shape": (1, 1)})
    none_want = torch.empty(0, 3, dtype=torch.float64).transpose(0, 1)  # shape (3, 0), strides (1, 3)
    none_got = solution.Tensor([]).reshape(0, 3).transpose(0, 1)
    for new in [(3, 0), (0, 3), (-1,), (1, 0, 3)]:
        expect_layout(none_got.reshape(new), none_want.reshape(new), f"reshape{new} of an empty (3, 0) transpose",
                      input={"x": "Tensor([]).reshape(0, 3).transpose(0, 1)", "shape": new})


@kata_test(level=1, category="correctness", description="reshape infers one -1; reshape(a, b) and reshape((a, b)) agree")
def test_reshape_infers_minus_one(solution):
    base = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    got = solution.Tensor(base.tolist())
    for new in [(-1,), (2, -1), (-1, 3, 1), (1, -1, 2), (-1, 12)]:
        expect_layout(got.reshape(*new), base.reshape(new), f"reshape{new}", input={"x": base.tolist(), "shape": new})
        expect_layout(got.reshape(new), base.reshape(new), f"reshape({new},)", input={"x": base.tolist(), "shape": new})
    empty = torch.empty(2, 0, 3, dtype=torch.float64)
    got_empty = solution.Tensor([]).reshape(2, 0, 3)
    for new in [(0, 5), (3, 0), (0,)]:
        expect_layout(got_empty.reshape(new), empty.reshape(new), f"reshape{new} of a (2, 0, 3) tensor",
                      input={"x": "shape (2, 0, 3)", "shape": new})


@kata_test(level=1, category="correctness", weight=2,
           description="is_contiguous() as torch: size-1 dims do not count, an empty tensor is contiguous")
@settings(max_examples=30)
@given(case=cases(shapes(min_dims=1)), data=st.data())
def test_is_contiguous_matches_torch(solution, case, data):
    want, got = _pair(solution, case)
    n = len(case.shape)
    dims = data.draw(st.permutations(range(n)))
    for name, w, g in [("x", want, got), (f"x.permute{tuple(dims)}", want.permute(*dims), got.permute(*dims)),
                       ("x[:, :1]" if n > 1 else "x[:1]", want[(slice(None),) * (n > 1) + (slice(None, 1),)],
                        got[(slice(None),) * (n > 1) + (slice(None, 1),)])]:
        (ok, value), = read_all(g, [("is_contiguous", ())])
        if not ok:
            raise value
        expect(value is w.is_contiguous(), f"{name}.is_contiguous()", input={"x": case.shown(), "tensor": name},
               expected=w.is_contiguous(), got=value)


@kata_test(level=1, category="correctness", weight=2,
           description="contiguous() returns the tensor itself when contiguous, else a contiguous copy")
@settings(max_examples=20)
@given(case=cases(shapes(min_dims=2, min_size=2), layouts=("transposed", "strided")))
def test_contiguous_copies_only_when_needed(solution, case):
    want_leaf, want = build(None, case)
    got_leaf, got = build(solution, case)
    expect(got_leaf.contiguous() is got_leaf, "contiguous() of a contiguous tensor is the tensor itself",
           input={"x": case.shown()}, expected="x itself", got="another object")
    c_want, c_got = want.contiguous(), got.contiguous()
    expect_layout(c_got, c_want, "contiguous() of a non-contiguous view (row-major strides)",
                  input={"x": case.shown()})
    c_want[0, 0] = 42.0
    c_got[0, 0] = 42.0
    expect_layout(got, want, "contiguous() of a non-contiguous tensor is a copy: x does not change",
                  input={"x": case.shown(), "then": "c[0, 0] = 42.0"}, what="x")


@kata_test(level=1, category="api contract", weight=2,
           description="IndexError: an index or a dim out of range, more indices than dims")
def test_index_errors(solution):
    x = solution.Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    expect_error(lambda: x[2], IndexError, "x[2] of a (2, 3) tensor")
    expect_error(lambda: x[-3], IndexError, "x[-3] of a (2, 3) tensor")
    expect_error(lambda: x[0, 3], IndexError, "x[0, 3] of a (2, 3) tensor")
    expect_error(lambda: x[0, 0, 0], IndexError, "x[0, 0, 0] of a (2, 3) tensor")
    expect_error(lambda: x.transpose(0, 2), IndexError, "x.transpose(0, 2) of a (2, 3) tensor")
    expect_error(lambda: x.transpose(-3, 0), IndexError, "x.transpose(-3, 0) of a (2, 3) tensor")
    expect_error(lambda: x.permute(0, 2), IndexError, "x.permute(0, 2) of a (2, 3) tensor")
    expect_layout(x[1], torch.tensor([4.0, 5.0, 6.0], dtype=torch.float64), "x[1] after the rejected calls",
                  input="x[1] of [[1, 2, 3], [4, 5, 6]]")


@kata_test(level=1, category="api contract", weight=2,
           description="ValueError: slice step <= 0, permute dims not a permutation, reshape of the wrong size")
def test_value_errors_of_views(solution):
    x = solution.Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    expect_error(lambda: x[::0], ValueError, "x[::0]")
    expect_error(lambda: x[:, ::-1], ValueError, "x[:, ::-1]")
    expect_error(lambda: x.permute(0, 0), ValueError, "x.permute(0, 0) of a (2, 3) tensor")
    expect_error(lambda: x.permute(0), ValueError, "x.permute(0) of a (2, 3) tensor")
    expect_error(lambda: x.reshape(4), ValueError, "x.reshape(4) of a (2, 3) tensor")
    expect_error(lambda: x.reshape(-1, -1), ValueError, "x.reshape(-1, -1)")
    expect_error(lambda: x.reshape(4, -1), ValueError, "x.reshape(4, -1) of a (2, 3) tensor")
    expect_error(lambda: x.reshape(-2, -3), ValueError, "x.reshape(-2, -3) of a (2, 3) tensor (a size below -1)")
    expect_error(lambda: x.reshape(-2, -1), ValueError, "x.reshape(-2, -1) of a (2, 3) tensor (a size below -1)")
    empty = solution.Tensor([]).reshape(2, 0, 3)
    expect_error(lambda: empty.reshape(-1, -1), ValueError, "reshape(-1, -1) of a (2, 0, 3) tensor")
    expect_error(lambda: empty.reshape(0, -1), ValueError, "reshape(0, -1) of a (2, 0, 3) tensor (-1 could be anything)")
    expect_layout(x.reshape(3, 2), torch.arange(1.0, 7.0, dtype=torch.float64).reshape(3, 2),
                  "reshape(3, 2) after the rejected calls", input="x = [[1, 2, 3], [4, 5, 6]]")

