# ---
# jupyter:
#   jupytext:
#     formats: py:percent,ipynb
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A tensor library in pure Python: strides, broadcasting, autograd
#
# This walkthrough drives the reference (`reference/tensor_lib.py`). Four pictures:
#
# 1. **Strides.** One storage, several views: transpose and slicing change only the shape,
#    the strides and the offset.
# 2. **When reshape copies.** Which reshapes of a transposed tensor can stay views.
# 3. **Broadcasting as stride 0.** An expanded operand reads the same element again.
# 4. **Why a topological order.** The work of backward on a graph whose paths double at
#    each step: linear with the order, exponential with a naive recursion.

# %%
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt

sys.path.insert(0, str(Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()))
from reference.tensor_lib import Tensor, no_grad

# %% [markdown]
# ## 1. One storage, many views

# %%
x = Tensor([[float(3 * i + j) for j in range(3)] for i in range(2)])
views = {"x": x, "x.transpose(0, 1)": x.transpose(0, 1), "x[:, ::2]": x[:, ::2], "x[1, 1:]": x[1, 1:]}
for name, v in views.items():
    print(f"{name:18} shape {v.shape!s:8} strides {v.strides!s:8} offset {v._offset}  {v.tolist()}")
print("same storage:", all(v._storage is x._storage for v in views.values()))

# %% [markdown]
# ## 2. When must reshape copy?
#
# A (2, 3, 4) tensor, its last two dims transposed, reshaped to each shape of 24 elements
# that keeps or merges dims. Merging the two transposed dims needs a copy; splitting or
# keeping them does not.

# %%
base = Tensor(list(range(24))).reshape(2, 3, 4).transpose(1, 2)  # (2, 4, 3), strides (12, 1, 4)
for shape in [(2, 4, 3), (8, 3), (2, 12), (24,), (2, 4, 3, 1), (2, 2, 2, 3)]:
    r = base.reshape(*shape)
    print(f"reshape{shape!s:14} -> {'view' if r._storage is base._storage else 'copy'}, strides {r.strides}")

# %% [markdown]
# ## 3. Broadcasting is a view with stride 0

# %%
row = Tensor([10.0, 20.0, 30.0])
expanded = row._expand((4, 3))
print("expanded strides:", expanded.strides, "values:", expanded.tolist())
print("x + row:", x.add(row).tolist())

# %% [markdown]
# ## 4. backward once per node
#
# `y = (y + y) * 0.5`, repeated `depth` times: 2**depth paths from the output to x. The
# reference's topological order visits each node once. A naive recursion that follows each
# path separately would do 2**depth units of work: plotted next to the measured time.

# %%
depths = list(range(2, 15, 2))
times = []
for depth in depths:
    start = time.perf_counter()
    leaf = Tensor([1.0, 2.0], requires_grad=True)
    y = leaf
    for _ in range(depth):
        y = y.add(y).mul(0.5)
    y.sum().backward()
    times.append(time.perf_counter() - start)
    assert leaf.grad is not None and leaf.grad.tolist() == [1.0, 1.0]
scale = times[0] / 2 ** depths[0]
plt.semilogy(depths, times, "o-", label="topological order (measured)")
plt.semilogy(depths, [scale * 2 ** d for d in depths], "--", label="one visit per path (2**depth)")
plt.xlabel("depth")
plt.ylabel("seconds")
plt.legend()
plt.title("backward on a graph whose paths double at each step")
plt.show()

# %%
with no_grad():
    c = leaf.mul(3.0)
print("made under no_grad: requires_grad =", c.requires_grad)
