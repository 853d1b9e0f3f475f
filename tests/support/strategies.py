"""Shapes, values and helpers shared by the engine's tests (test_broadcasting, test_ops, test_golden).

Shapes come from Hypothesis, kept small (sides of 1 to 3, at most 3 axes besides matmul's
core ones) because every example runs a numerical gradient check. Values come from a seeded
NumPy generator rather than from Hypothesis element by element: Hypothesis would happily shrink
every value to 0.0, which puts abs, relu, max and clip exactly on their kinks, where a
finite difference measures nothing useful. Each helper below keeps values a clear distance away
from the points where an op is not differentiable.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from solutions import Tensor

MAX_SIDE = 3

seeds = st.integers(0, 2**32 - 1)
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=MAX_SIDE)
nonscalar_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=MAX_SIDE)
# Two shapes that broadcast together: leading axes missing, size-1 axes, both sides stretched, 0-d.
broadcast_pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=MAX_SIDE)
# Every case of NumPy's matmul: 1-D on either side, 2-D, batched, batch axes that broadcast.
matmul_shapes = hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, min_side=1,
                                                  max_side=MAX_SIDE)


def leaf(values) -> Tensor:
    """A float64 tensor that requires grad (what gradcheck needs)."""
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


def uniform(rng: np.random.Generator, shape, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, shape)


def nonzero(rng: np.random.Generator, shape, low: float = 0.3, high: float = 2.0) -> np.ndarray:
    """Values of either sign, at least `low` away from 0 (abs, relu, division, negative powers)."""
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(low, high, shape)


def positive(rng: np.random.Generator, shape, low: float = 0.5, high: float = 2.0) -> np.ndarray:
    """Values for log, sqrt, fractional powers."""
    return rng.uniform(low, high, shape)


def avoiding(x: np.ndarray, points, gap: float = 0.1) -> np.ndarray:
    """x with every value closer than `gap` to one of `points` pushed `2 gap` away from it."""
    x = np.array(x, dtype=np.float64)
    for p in points:
        near = np.abs(x - p) < gap
        x[near] = p + 2 * gap * np.where(x[near] >= p, 1.0, -1.0)
    return x


def distinct(rng: np.random.Generator, shape, step: float = 0.25) -> np.ndarray:
    """Values pairwise at least `step` apart: max/min/sort have a unique winner with a margin."""
    size = int(np.prod(shape, dtype=int))
    return ((rng.permutation(size) - size / 2) * step + rng.uniform(0, 0.01)).reshape(shape)


def separated_pair(rng: np.random.Generator, shape_x, shape_y) -> tuple[np.ndarray, np.ndarray]:
    """Two arrays whose elements differ by at least 0.5 wherever they meet under broadcasting
    (x on the quarter points, y on the three-quarter points): no ties for maximum/minimum."""
    x = rng.integers(-3, 3, shape_x) + 0.25
    y = rng.integers(-3, 3, shape_y) + 0.75
    return x.astype(np.float64), y.astype(np.float64)


def axes_for(ndim: int):
    """Any axis argument a reduction accepts on `ndim` axes: None, an int (negative too), a tuple."""
    options = [st.none(), hnp.valid_tuple_axes(ndim)]
    if ndim:
        options.append(st.integers(-ndim, ndim - 1))
    return st.one_of(*options)


def as_tuple(axis, ndim: int) -> tuple[int, ...] | None:
    """NumPy-ready form of an axis argument (NumPy takes no int axis on 0-d arrays in a tuple)."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % ndim for a in axes) if ndim else ()
