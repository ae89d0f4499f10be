"""Buggy tensor_lib (corpus): backward skips gradients with no elements, so a 0-size leaf keeps grad None instead of an empty gradient of its shape.

Level 3; rejected by test_zero_size_grads, test_elementwise_grads.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

_grad_enabled = True


@contextmanager
def no_grad() -> Iterator[None]:
    """Operations inside build no graph; the previous mode comes back on exit, also when the
    body raises."""
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = previous


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _flatten(data: Any) -> tuple[tuple[int, ...], list[float]]:
    if isinstance(data, bool) or not isinstance(data, (int, float, list, tuple)):
        raise TypeError(f"Tensor data must be numbers or nested lists, not {type(data).__name__}")
    if isinstance(data, (int, float)):
        return (), [float(data)]
    if len(data) == 0:
        return (0,), []
    parts = [_flatten(item) for item in data]
    shape = parts[0][0]
    if any(part[0] != shape for part in parts):
        raise ValueError("ragged nested lists: every row of a dimension must have the same shape")
    return (len(data),) + shape, [v for part in parts for v in part[1]]


def _dim(dim: int, ndim: int) -> int:
    """A dimension in [-ndim, ndim) made non-negative; a 0-d tensor accepts -1 and 0."""
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"dimension {dim} out of range for a {ndim}-d tensor")
    return dim % bound


def _broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise ValueError(f"shapes {tuple(a)} and {tuple(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _view_strides(shape: Sequence[int], strides: Sequence[int],
                  new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """The strides a view of `new_shape` needs over this layout, or None when no view can
    do it (ATen's computeStride)."""
    if len(shape) == 0:
        return (1,) * len(new_shape)
    if math.prod(shape) == 0:
        return tuple(strides) if tuple(shape) == tuple(new_shape) else _contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base_stride, tensor_numel, view_numel = strides[d - 1], 1, 1
    return tuple(new_strides) if view_d == -1 else None


class Tensor:
    """float64 values over a flat storage. Invariants: len(shape) == len(strides); every
    element's position offset + sum(i_d * strides[d]) lies in storage; `grad`, when set, has
    this tensor's shape; a tensor with `_backward` has parents and requires grad."""

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        shape, values = _flatten(data)
        self._storage: list[float] = values
        self._shape, self._strides, self._offset = shape, _contiguous_strides(shape), 0
        self.requires_grad = bool(requires_grad)
        self.grad: Tensor | None = None
        self._parents: tuple[Tensor, ...] = ()
        self._backward: Callable[[Tensor], Sequence[Tensor | None]] | None = None

    @classmethod
    def _make(cls, storage: list[float], shape: Sequence[int], strides: Sequence[int] | None = None,
              offset: int = 0) -> Tensor:
        t = cls.__new__(cls)
        t._storage, t._shape, t._offset = storage, tuple(shape), offset
        t._strides = _contiguous_strides(shape) if strides is None else tuple(strides)
        t.requires_grad, t.grad, t._parents, t._backward = False, None, (), None
        return t

    def _record(self, parents: Sequence[Tensor], backward: Callable[[Tensor], Sequence[Tensor | None]]) -> Tensor:
        """Make self an op's output: in the graph when grad mode is on and an input requires grad."""
        if _grad_enabled and any(p.requires_grad for p in parents):
            self.requires_grad, self._parents, self._backward = True, tuple(parents), backward
        return self

    # ------------------------------------------------------------------ layout (level 1)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def strides(self) -> tuple[int, ...]:
        return self._strides

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return math.prod(self._shape)

    def _positions(self) -> list[int]:
        """Storage positions of the elements, in row-major order."""
        positions = [self._offset]
        for size, stride in zip(self._shape, self._strides):
            positions = [p + i * stride for p in positions for i in range(size)]
        return positions

    def _values(self) -> list[float]:
        storage = self._storage
        return [storage[p] for p in self._positions()]

    def tolist(self) -> Any:
        values = self._values()
        return values[0] if not self._shape else self._nest(values, self._shape)

    @staticmethod
    def _nest(values: list[float], shape: Sequence[int]) -> Any:
        if len(shape) == 1:
            return list(values)
        step = math.prod(shape[1:])
        return [Tensor._nest(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]

    def item(self) -> float:
        if self.numel() != 1:
            raise ValueError(f"item() needs exactly one element, this tensor has {self.numel()}")
        return self._values()[0]

    def __repr__(self) -> str:
        return f"Tensor({self.tolist()!r}, shape={self._shape})"

    def is_contiguous(self) -> bool:
        expected = 1
        if self.numel() == 0:
            return True
        for size, stride in zip(reversed(self._shape), reversed(self._strides)):
            if size != 1:
                if stride != expected:
                    return False
                expected *= size
        return True

    def contiguous(self) -> Tensor:
        if self.is_contiguous():
            return self
        out = Tensor._make(self._values(), self._shape)
        return out._record([self], lambda g: [g])

    def _view(self, shape: Sequence[int], strides: Sequence[int], offset: int,
              backward: Callable[[Tensor], Sequence[Tensor | None]]) -> Tensor:
        return Tensor._make(self._storage, shape, strides, offset)._record([self], backward)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        d0, d1 = _dim(dim0, self.ndim), _dim(dim1, self.ndim)
        if not self._shape:
            return self._view((), (), self._offset, lambda g: [g])
        shape, strides = list(self._shape), list(self._strides)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        strides[d0], strides[d1] = strides[d1], strides[d0]
        return self._view(shape, strides, self._offset, lambda g: [g.transpose(d0, d1)])

    def permute(self, *dims: Any) -> Tensor:
        order = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        if len(order) != self.ndim:
            raise ValueError(f"permute needs {self.ndim} dims, got {len(order)}")
        order = tuple(_dim(d, self.ndim) for d in order)
        if len(set(order)) != len(order):
            raise ValueError(f"permute: repeated dims in {tuple(dims)}")
        inverse = [0] * len(order)
        for i, d in enumerate(order):
            inverse[d] = i
        return self._view([self._shape[d] for d in order], [self._strides[d] for d in order], self._offset,
                          lambda g: [g.permute(*inverse)])

    def reshape(self, *shape: Any) -> Tensor:
        wanted = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else list(shape)
        numel = self.numel()
        if wanted.count(-1) > 1 or any(s < -1 for s in wanted):
            raise ValueError(f"invalid shape {tuple(wanted)}")
        if -1 in wanted:
            known = math.prod(s for s in wanted if s != -1)
            if known == 0 or numel % known:
                raise ValueError(f"shape {tuple(wanted)} is invalid for {numel} elements")
            wanted[wanted.index(-1)] = numel // known
        if math.prod(wanted) != numel:
            raise ValueError(f"shape {tuple(wanted)} is invalid for {numel} elements")
        old_shape = self._shape
        strides = _view_strides(self._shape, self._strides, wanted)
        source = self if strides is not None else self.contiguous()
        if strides is None:
            strides = _contiguous_strides(wanted)
        return source._view(wanted, strides, source._offset, lambda g: [g.reshape(old_shape)])

    def _index(self, key: Any) -> tuple[list[int], list[int], int]:
        keys = key if isinstance(key, tuple) else (key,)
        if len(keys) > self.ndim:
            raise IndexError(f"too many indices for a {self.ndim}-d tensor")
        shape, strides, offset = [], [], self._offset
        for d, k in enumerate(keys):
            size, stride = self._shape[d], self._strides[d]
            if isinstance(k, slice):
                if k.step is not None and k.step <= 0:
                    raise ValueError("slice step must be greater than zero")
                start, stop, step = k.indices(size)
                shape.append(len(range(start, stop, step)))
                strides.append(stride * step)
                offset += start * stride
            elif isinstance(k, int) and not isinstance(k, bool):
                if not -size <= k < size:
                    raise IndexError(f"index {k} is out of bounds for dimension {d} with size {size}")
                offset += (k % size) * stride
            else:
                raise TypeError(f"indices must be ints or slices, not {type(k).__name__}")
        rest = len(keys)
        return shape + list(self._shape[rest:]), strides + list(self._strides[rest:]), offset

    def __getitem__(self, key: Any) -> Tensor:
        shape, strides, offset = self._index(key)
        parent_shape = self._shape

        def backward(g: Tensor) -> list[Tensor]:
            grad = Tensor._make([0.0] * math.prod(parent_shape), parent_shape)
            grad[key]._write(g._values())
            return [grad]

        return self._view(shape, strides, offset, backward)

    def _write(self, values: list[float]) -> None:
        storage = self._storage
        for p, v in zip(self._positions(), values):
            storage[p] = v

    def __setitem__(self, key: Any, value: float) -> None:
        shape, strides, offset = self._index(key)
        target = Tensor._make(self._storage, shape, strides, offset)
        target._write([float(value)] * target.numel())

    # ------------------------------------------------------------------ math (level 2)

    def _expand(self, shape: Sequence[int]) -> Tensor:
        """A broadcast view of `shape` (stride 0 where a dim is added or stretched)."""
        if tuple(shape) == self._shape:
            return self
        lead = len(shape) - self.ndim
        strides = [0] * lead + [0 if size == 1 and n != 1 else st
                                for size, st, n in zip(self._shape, self._strides, shape[lead:])]
        own = self._shape
        return self._view(shape, strides, self._offset, lambda g: [g._sum_to(own)])

    def _sum_to(self, shape: Sequence[int]) -> Tensor:
        """Sum a broadcast gradient back to `shape`."""
        out = self
        while out.ndim > len(shape):
            out = out.sum(0)
        for d, size in enumerate(shape):
            if size == 1 and out._shape[d] != 1:
                out = out.sum(d, keepdim=True)
        return out

    def _binary(self, other: Any, fn: Callable[[float, float], float],
                grads: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]) -> Tensor:
        b = other if isinstance(other, Tensor) else Tensor(other)
        shape = _broadcast_shape(self._shape, b._shape)
        x, y = self._expand(shape), b._expand(shape)
        out = Tensor._make([fn(u, v) for u, v in zip(x._values(), y._values())], shape)
        return out._record([x, y], lambda g: grads(g, x, y))

    def add(self, other: Any) -> Tensor:
        return self._binary(other, lambda u, v: u + v, lambda g, x, y: (g, g))

    def sub(self, other: Any) -> Tensor:
        return self._binary(other, lambda u, v: u - v, lambda g, x, y: (g, g.neg()))

    def mul(self, other: Any) -> Tensor:
        return self._binary(other, lambda u, v: u * v, lambda g, x, y: (g.mul(y), g.mul(x)))

    def div(self, other: Any) -> Tensor:
        return self._binary(other, _divide,
                            lambda g, x, y: (g.div(y), g.mul(x).div(y.mul(y)).neg()))

    def _unary(self, fn: Callable[[float], float], grad: Callable[[Tensor, Tensor, Tensor], Tensor]) -> Tensor:
        out = Tensor._make([fn(v) for v in self._values()], self._shape)
        return out._record([self], lambda g: [grad(g, self, out)])

    def neg(self) -> Tensor:
        return self._unary(lambda v: -v, lambda g, x, out: g.neg())

    def exp(self) -> Tensor:
        return self._unary(_exp, lambda g, x, out: g.mul(out))

    def log(self) -> Tensor:
        return self._unary(_log, lambda g, x, out: g.div(x))

    def _reduce(self, dim: int | None, keepdim: bool,
                fn: Callable[[list[float]], float]) -> tuple[Tensor, int | None]:
        if dim is None:
            out_shape = (1,) * self.ndim if keepdim else ()
            return Tensor._make([fn(self._values())], out_shape), None
        d = _dim(dim, self.ndim)
        if not self._shape:
            return Tensor._make([fn(self._values())], ()), d
        order = [i for i in range(self.ndim) if i != d] + [d]
        moved = Tensor._make(self._storage, [self._shape[i] for i in order],
                             [self._strides[i] for i in order], self._offset)
        values, k = moved._values(), self._shape[d]
        num_out = math.prod(self._shape) // k if k else math.prod(s for i, s in enumerate(self._shape) if i != d)
        out = [fn(values[i * k:(i + 1) * k]) for i in range(num_out)]
        shape = list(self._shape)
        if keepdim:
            shape[d] = 1
        else:
            del shape[d]
        return Tensor._make(out, shape), d

    def sum(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        out, d = self._reduce(dim, keepdim, _sum)
        own = self._shape

        return out._record([self], lambda g: [_expand_like(g, d, own)])

    def _unsqueeze(self, d: int) -> Tensor:
        shape = list(self._shape)
        shape.insert(d, 1)
        return self.reshape(shape)

    def max(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        if dim is None and self.numel() == 0:
            raise ValueError("max() of an empty tensor: give a dim")
        if dim is not None and self._shape and self._shape[_dim(dim, self.ndim)] == 0:
            raise IndexError(f"max(): dimension {dim} has size 0")
        out, d = self._reduce(dim, keepdim, max)
        own = self._shape

        def backward(g: Tensor) -> list[Tensor]:
            xs = self._values()
            if d is None:  # every maximal element gets an equal share, as torch's max()
                top = out.item()
                ties = [v == top for v in xs]
                share = g.item() / sum(ties)
                return [Tensor._make([share if t else 0.0 for t in ties], own)]
            if not own:
                return [g]
            if not keepdim:
                g = g._unsqueeze(d)
            grad = Tensor._make([0.0] * len(xs), own)
            flat_g = g._values()
            # the first maximal element along d gets the gradient, as torch's max(dim) indices
            outer, k = math.prod(own[:d]), own[d]
            inner = math.prod(own[d + 1:])
            for o in range(outer):
                for i in range(inner):
                    base = o * k * inner + i
                    column = [xs[base + j * inner] for j in range(k)]
                    j = column.index(max(column))
                    grad._storage[base + j * inner] = flat_g[o * inner + i]
            return [grad]

        return out._record([self], backward)

    def matmul(self, other: Tensor) -> Tensor:
        if self.ndim == 0 or other.ndim == 0:
            raise ValueError("matmul needs operands of at least 1 dimension")
        a = self.reshape(1, self._shape[0]) if self.ndim == 1 else self
        b = other.reshape(other._shape[0], 1) if other.ndim == 1 else other
        n, k = a._shape[-2:]
        k2, m = b._shape[-2:]
        if k != k2:
            raise ValueError(f"matmul: shapes {self._shape} and {other._shape} do not fit ({k} != {k2})")
        batch = _broadcast_shape(a._shape[:-2], b._shape[:-2])
        num_batch = math.prod(batch)
        a3 = a._expand(batch + (n, k)).reshape(num_batch, n, k)  # (NB, n, k)
        b3 = b._expand(batch + (k, m)).reshape(num_batch, k, m)  # (NB, k, m)
        out = _bmm(a3, b3).reshape(batch + (n, m))
        if self.ndim == 1:
            out = out.reshape(out._shape[:-2] + (m,))
        if other.ndim == 1:
            out = out.reshape(out._shape[:-1])
        return out

    # operators: the named methods
    def __add__(self, other: Any) -> Tensor:
        return self.add(other)

    def __radd__(self, other: Any) -> Tensor:
        return Tensor(other).add(self)

    def __sub__(self, other: Any) -> Tensor:
        return self.sub(other)

    def __rsub__(self, other: Any) -> Tensor:
        return Tensor(other).sub(self)

    def __mul__(self, other: Any) -> Tensor:
        return self.mul(other)

    def __rmul__(self, other: Any) -> Tensor:
        return Tensor(other).mul(self)

    def __truediv__(self, other: Any) -> Tensor:
        return self.div(other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return Tensor(other).div(self)

    def __neg__(self) -> Tensor:
        return self.neg()

    def __matmul__(self, other: Tensor) -> Tensor:
        return self.matmul(other)

    # ------------------------------------------------------------------ autograd (level 3)

    def backward(self, gradient: Tensor | None = None) -> None:
        if not self.requires_grad:
            raise RuntimeError("backward() of a tensor that does not require grad")
        if gradient is None:
            if self.numel() != 1:
                raise RuntimeError("backward() without a gradient needs a tensor of one element")
            gradient = Tensor._make([1.0], self._shape)
        elif tuple(gradient.shape) != self._shape:
            raise RuntimeError(f"gradient of shape {tuple(gradient.shape)} for a tensor of shape {self._shape}")
        order = _topological_order(self)
        grads: dict[int, Tensor] = {id(self): Tensor._make(gradient._values(), self._shape)}
        with no_grad():
            for node in reversed(order):  # every user of a node runs before the node
                g = grads.pop(id(node), None)
                if g is None or g.numel() == 0:
                    continue
                if node._backward is None:
                    if node.requires_grad:
                        node.grad = g if node.grad is None else node.grad.add(g)
                    continue
                for parent, pg in zip(node._parents, node._backward(g)):
                    if pg is None or not parent.requires_grad:
                        continue
                    pg = Tensor._make(pg._values(), parent._shape)
                    grads[id(parent)] = pg if id(parent) not in grads else grads[id(parent)].add(pg)


def _topological_order(root: Tensor) -> list[Tensor]:
    """Nodes reachable from root, each after all of its parents (iterative DFS)."""
    order: list[Tensor] = []
    seen = {id(root)}
    stack: list[tuple[Tensor, int]] = [(root, 0)]
    while stack:
        node, i = stack.pop()
        if i < len(node._parents):
            stack.append((node, i + 1))
            parent = node._parents[i]
            if id(parent) not in seen:
                seen.add(id(parent))
                stack.append((parent, 0))
        else:
            order.append(node)
    return order


def _expand_like(g: Tensor, d: int | None, shape: Sequence[int]) -> Tensor:
    """A sum's gradient broadcast back over the reduced dims: (shape) contiguous."""
    if d is None:
        g = g.reshape([1] * len(shape))
    elif shape and g.ndim < len(shape):
        g = g._unsqueeze(d)
    return Tensor._make(g._expand(tuple(shape))._values(), shape)


def _bmm(a: Tensor, b: Tensor) -> Tensor:
    """(NB, n, k) @ (NB, k, m) -> (NB, n, m)."""
    num_batch, n, k = a._shape
    m = b._shape[2]
    av, bv = a._values(), b._values()
    out = []
    for z in range(num_batch):
        ao, bo = z * n * k, z * k * m
        for i in range(n):
            row = av[ao + i * k: ao + (i + 1) * k]
            for j in range(m):
                out.append(_sum([row[t] * bv[bo + t * m + j] for t in range(k)]))
    result = Tensor._make(out, (num_batch, n, m))
    return result._record([a, b], lambda g: [_bmm(g, b.transpose(1, 2)), _bmm(a.transpose(1, 2), g)])


def _sum(values: list[float]) -> float:
    """The exactly rounded sum (math.fsum), or the plain one where infinities meet."""
    try:
        return math.fsum(values)
    except (ValueError, OverflowError):
        return sum(values, 0.0)


def _divide(u: float, v: float) -> float:
    if v == 0.0:
        if u == 0.0 or u != u:
            return math.nan
        return math.copysign(math.inf, u) * math.copysign(1.0, v)
    return u / v


def _exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _log(v: float) -> float:
    if v == 0.0:
        return -math.inf
    if v < 0.0 or v != v:
        return math.nan
    return math.log(v)

