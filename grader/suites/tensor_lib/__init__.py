"""Hidden suite of the tensor-lib kata: a pure-Python Tensor over a flat storage with shape,
strides and offset (level 1: storage, views, indexing), broadcasting, reductions and matmul
(level 2), reverse-mode autograd (level 3). torch (float64) is the oracle on the judge's side.

Files:
    strategies.py    shapes (0-4 dims of size 0-4), values (multiples of 0.25, so sums and
                     products are exact), layouts (contiguous, transposed, strided), the
                     builders that make the same tensor in torch and in the candidate's
                     library, and the comparisons
    harness.py       run in the candidate's process: the imports of their file, the
                     operators (+ - * / @, reflected), no_grad blocks
    test_level1.py   RULES map + construction, views, indexing, reshape, contiguity, errors
    test_level2.py   RULES map + elementwise ops, broadcasting, sum, max, matmul, errors
    test_level3.py   RULES map + autograd against torch.autograd, accumulation, topological
                     order, no_grad, backward's errors
"""
