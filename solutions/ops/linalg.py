"""Matrix product with NumPy's full `matmul` semantics (1-D, 2-D, batched, broadcast batches).

Book: chapter 2 (`book/02_broadcasting.md`). Tests: `tests/engine/test_ops.py`.
"""
from __future__ import annotations

import numpy as np

from ..graph import Function, Tensor
from .shape import swapaxes, unbroadcast


class MatMul(Function):
    r"""$Z = X W$: $\partial L/\partial X = G W^T$, $\partial L/\partial W = X^T G$.

    A 1-D operand is a row (left) or column (right) vector with that axis removed from the
    result; batch axes broadcast, so their gradients are summed back with `unbroadcast`.
    """

    def forward(self, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"matmul: operands must have at least 1 dimension, got shapes {a.shape} and {b.shape}")
        try:
            return np.matmul(a, b)
        except ValueError:
            raise ValueError(
                f"matmul: shapes {a.shape} and {b.shape} do not match "
                f"(inner dimensions {a.shape[-1]} and {b.shape[-2] if b.ndim > 1 else b.shape[0]})"
            ) from None

    def backward(self, grad):
        a, b = self.inputs
        # Treat vectors as (1, n) / (n, 1) matrices so one formula covers every case.
        a2 = a.reshape((1,) + a.shape) if a.ndim == 1 else a
        b2 = b.reshape(b.shape + (1,)) if b.ndim == 1 else b
        g = grad
        if b.ndim == 1:  # first: for vector @ vector the gradient is 0-d and has no axis -2 yet
            g = g.expand_dims(-1)
        if a.ndim == 1:
            g = g.expand_dims(-2)
        ga = gb = None
        if self.needs_input_grad[0]:
            ga = unbroadcast(g @ swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
        if self.needs_input_grad[1]:
            gb = unbroadcast(swapaxes(a2, -1, -2) @ g, b2.shape).reshape(b.shape)
        return ga, gb


def matmul(a, b) -> Tensor:
    return MatMul.apply(a, b)
