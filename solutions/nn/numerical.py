r"""A numerical gradient by central differences: how chapter 5 checks the gradient of cross-entropy.

Book: chapter 5 (`book/05_layers.md`). Tests: `tests/engine/test_layers.py`. Assignment: a05 (`a05-numerical-gradient`).

For a function f of an array x, each partial derivative is approximated by moving one entry a
little either way: $\partial f/\partial x_i \approx (f(x + \epsilon e_i) - f(x - \epsilon e_i))/(2\epsilon)$.
The central difference is accurate to $O(\epsilon^2)$, where the one-sided
$(f(x + \epsilon e_i) - f(x))/\epsilon$ is only $O(\epsilon)$; in float64, $\epsilon = 10^{-6}$
balances that error against the rounding of f. (`solutions.testing.gradcheck` does the same for
every input of an op, with an upstream gradient.)
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["numerical_gradient"]


def numerical_gradient(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    r"""$\partial f/\partial x$ by central differences, for a float64 array x of any shape.

    x is changed in place, one entry at a time, and every entry is put back exactly, so f may
    also read x from outside (`lambda _: loss(W)`).
    """
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        original = x[i]
        x[i] = original + eps
        f_plus = f(x)
        x[i] = original - eps
        f_minus = f(x)
        x[i] = original  # put it back exactly (adding eps back would be off in the last bits)
        grad[i] = (f_plus - f_minus) / (2 * eps)
    return grad
