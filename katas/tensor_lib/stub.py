"""A tensor library in pure Python: float64 values in a flat storage list, read through a
shape, strides (in elements) and an offset, as torch.Tensor does; then broadcasting,
reductions and matmul; then reverse-mode autograd.

Example: x = Tensor([[1, 2, 3], [4, 5, 6]])
    x.shape == (2, 3), x.strides == (3, 1), x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    x.transpose(0, 1).strides == (1, 3)     (a view: no value is copied)
    x[:, ::2].tolist() == [[1.0, 3.0], [4.0, 6.0]], strides (3, 2)

Levels:
    1. Tensor(data), shape, strides, tolist, transpose, permute, x[key], x[key] = v, reshape,
       is_contiguous, contiguous: views share storage; reshape copies only when it must.
    2. add / sub / mul / div / neg / exp / log with broadcasting, sum, max, matmul, and the
       operators + - * / @ and unary -: every result equal to torch's.
    3. requires_grad, backward(gradient=None), .grad, no_grad(): gradients equal to
       torch.autograd's.

Constraints: pure Python: no numpy, no torch (the suite checks your imports). Errors:
IndexError for an index or a dim out of range; ValueError for shapes that do not fit;
RuntimeError for backward's misuse (see each docstring).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator


@contextmanager
def no_grad() -> Iterator[None]:
    """Level 3. `with no_grad():` operations inside record no graph (their results do not
    require grad); on exit the previous mode comes back, also when the body raises; blocks nest."""
    # TODO level 3: a module-level flag, saved and restored in a finally.
    raise NotImplementedError
    yield


class Tensor:
    """float64 values over a flat storage: element (i0, ..., ik) is
    storage[offset + i0 * strides[0] + ... + ik * strides[k]].

    Invariants: len(shape) == len(strides); views (transpose, permute, indexing, a reshape
    the layout allows) share the storage of their base; `grad`, when set, has this shape.
    """

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        """data: a number (a 0-d tensor, shape ()) or nested lists of numbers (ints become
        floats); [] is shape (0,), [[]] shape (1, 0). Contiguous row-major strides:
        strides[d] = product of max(size, 1) over the dims after d, as torch.
        `requires_grad` is an attribute (level 3), settable on a leaf; `grad` starts None.
        Raises ValueError: ragged lists ([[1], [2, 3]])."""
        # TODO level 1: flatten into a storage list of floats; shape, strides, offset 0.
        raise NotImplementedError

    # ---------------------------------------------------------------- level 1: layout

    @property
    def shape(self) -> tuple[int, ...]:
        """The sizes, a tuple of ints (() for a 0-d tensor)."""
        raise NotImplementedError

    @property
    def strides(self) -> tuple[int, ...]:
        """Storage steps per dim, in elements, a tuple of ints (torch's .stride())."""
        raise NotImplementedError

    def tolist(self) -> Any:
        """Nested lists of floats as torch's tolist(); a float for a 0-d tensor."""
        # TODO level 1
        raise NotImplementedError

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        """A view with dims dim0 and dim1 swapped (negative dims count from the end).
        Raises IndexError: a dim out of range."""
        # TODO level 1: swap shape and strides; share the storage and the offset.
        raise NotImplementedError

    def permute(self, *dims: int) -> Tensor:
        """A view with dims reordered: result dim i is this tensor's dim dims[i].
        permute(1, 0) and permute((1, 0)) are the same.
        Raises IndexError: a dim out of range; ValueError: not a permutation of all dims."""
        # TODO level 1
        raise NotImplementedError

    def __getitem__(self, key: Any) -> Tensor:
        """x[i], x[a:b:step], x[i, a:b] ...: an int or a slice per leading dim (a tuple for
        several); the rest of the dims are kept. Python's rules for negative and out-of-range
        slice bounds. Always a view (an int removes its dim; x[i] of a 1-D tensor is 0-d).
        Raises IndexError: an int out of range, more indices than dims; ValueError: step <= 0."""
        # TODO level 1: offset += start * stride; stride *= step; size = len(range(...)).
        raise NotImplementedError

    def __setitem__(self, key: Any, value: float) -> None:
        """x[key] = number: writes the number into every element x[key] selects (in the
        storage, so every view of it sees the write). Not part of autograd."""
        # TODO level 1
        raise NotImplementedError

    def reshape(self, *shape: Any) -> Tensor:
        """reshape(2, 3) or reshape((2, 3)); one -1 is inferred. A view, with the strides
        torch.Tensor.view gives, whenever the layout allows one; otherwise a contiguous copy.
        Raises ValueError: a shape of another number of elements, more than one -1, a size
        below -1, a -1 among sizes whose product is 0."""
        # TODO level 1: decide when a view is possible (torch's rule), else copy.
        raise NotImplementedError

    def is_contiguous(self) -> bool:
        """True when the strides are row-major for this shape, ignoring dims of size 1;
        an empty tensor is contiguous (torch's rule)."""
        # TODO level 1
        raise NotImplementedError

    def contiguous(self) -> Tensor:
        """The tensor itself when it is contiguous, else a row-major copy."""
        # TODO level 1
        raise NotImplementedError

    # ---------------------------------------------------------------- level 2: math

    def add(self, other: Any) -> Tensor:
        """Elementwise self + other (a Tensor or a number), broadcast as torch.
        A new contiguous tensor. Raises ValueError: shapes that do not broadcast."""
        # TODO level 2
        raise NotImplementedError

    def sub(self, other: Any) -> Tensor:
        """Elementwise self - other, broadcast."""
        raise NotImplementedError

    def mul(self, other: Any) -> Tensor:
        """Elementwise self * other, broadcast."""
        raise NotImplementedError

    def div(self, other: Any) -> Tensor:
        """Elementwise self / other, broadcast; x / 0 is +-inf and 0 / 0 is nan (IEEE, as torch)."""
        raise NotImplementedError

    def neg(self) -> Tensor:
        """Elementwise -self."""
        raise NotImplementedError

    def exp(self) -> Tensor:
        """Elementwise e ** self (inf where it overflows)."""
        raise NotImplementedError

    def log(self) -> Tensor:
        """Elementwise natural log: log(0) = -inf, log(x < 0) = nan."""
        raise NotImplementedError

    def sum(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """Sum over `dim`, or over everything (a 0-d tensor) when dim is None; keepdim=True
        keeps each reduced dim with size 1. A sum over nothing is 0.
        Raises IndexError: a dim out of range."""
        # TODO level 2
        raise NotImplementedError

    def max(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """The largest value over `dim`, or over everything (0-d) when dim is None: the
        values only (torch.max(dim) also returns indices; this does not).
        Raises ValueError: max() of an empty tensor; IndexError: a dim out of range, or a
        reduced dim of size 0."""
        # TODO level 2
        raise NotImplementedError

    def matmul(self, other: Tensor) -> Tensor:
        """torch.matmul: (..., n, k) @ (..., k, m) -> (..., n, m) with the batch dims
        broadcast; a 1-D first operand is a row (its dim removed from the result), a 1-D
        second operand a column (removed too); 1-D @ 1-D is a 0-d dot product.
        Raises ValueError: a 0-d operand, inner dims that differ, batch dims that do not broadcast."""
        # TODO level 2
        raise NotImplementedError

    # The operators are the methods: a + b, 2 - a, a * 0.5, 1 / a, -a, a @ b.
    def __add__(self, other: Any) -> Tensor:
        return self.add(other)

    def __radd__(self, other: Any) -> Tensor:
        # TODO level 2: number + tensor (and __rsub__, __rmul__, __rtruediv__ below)
        raise NotImplementedError

    def __sub__(self, other: Any) -> Tensor:
        return self.sub(other)

    def __rsub__(self, other: Any) -> Tensor:
        raise NotImplementedError

    def __mul__(self, other: Any) -> Tensor:
        return self.mul(other)

    def __rmul__(self, other: Any) -> Tensor:
        raise NotImplementedError

    def __truediv__(self, other: Any) -> Tensor:
        return self.div(other)

    def __rtruediv__(self, other: Any) -> Tensor:
        raise NotImplementedError

    def __neg__(self) -> Tensor:
        return self.neg()

    def __matmul__(self, other: Tensor) -> Tensor:
        return self.matmul(other)

    # ---------------------------------------------------------------- level 3: autograd

    def backward(self, gradient: Tensor | None = None) -> None:
        """Accumulate d(self)/d(leaf), weighted by `gradient` (a Tensor of self's shape; 1.0
        when None), into the .grad of every leaf that requires grad (tensors you created;
        results of operations are not leaves). Each operation's backward runs once.
        Raises RuntimeError: self does not require grad; no gradient and self has more than
        one element; a gradient of another shape."""
        # TODO level 3: order the graph, then run each node's backward once, in reverse.
        raise NotImplementedError
