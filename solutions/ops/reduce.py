"""Reductions over axes: sum, mean, max, min, var, std, prod, argmax, argmin; and cumsum.

Book: chapter 2 (`book/02_broadcasting.md`): a reduction's gradient is a broadcast.
Tests: `tests/engine/test_ops.py`.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..graph import Function, Tensor, as_tensor
from .elementwise import where
from .shape import axis_error, broadcast_to, flip, kept_shape, normalize_axis, pad, transpose


class Sum(Function):
    r"""$z = \sum_{axes} x$: every summed element gets the upstream gradient once."""

    def __init__(self, axes: tuple[int, ...], keepdims: bool):
        self.axes, self.keepdims = axes, keepdims

    def forward(self, x):
        return x.sum(axis=self.axes, keepdims=self.keepdims)  # the method skips np.sum's dispatch

    def backward(self, grad):
        (x,) = self.inputs
        # Put the reduced axes back as size 1, then copy along them: sum's adjoint is broadcast.
        return broadcast_to(grad.reshape(kept_shape(x.shape, self.axes)), x.shape)


class _Extremum(Function):
    """max/min over axes. The gradient goes to the elements equal to the extremum, shared
    evenly on ties (PyTorch's amax/amin choice, which keeps the gradient symmetric)."""

    reduce: Callable[..., np.ndarray]  # the NumPy reduction: each subclass's own

    def __init__(self, axes: tuple[int, ...], keepdims: bool):
        self.axes, self.keepdims = axes, keepdims

    def forward(self, x):
        if x.size == 0:
            raise ValueError(f"{type(self).__name__.lower()}: cannot reduce an empty tensor of shape {x.shape}")
        return self.reduce(x, axis=self.axes, keepdims=self.keepdims)

    def backward(self, grad):
        (x,) = self.inputs
        shape = kept_shape(x.shape, self.axes)
        hit = x.data == self.output.data.reshape(shape)
        share = hit / hit.sum(axis=self.axes, keepdims=True)
        return broadcast_to(grad.reshape(shape), x.shape) * share.astype(grad.dtype)


class Max(_Extremum):
    reduce = staticmethod(np.max)


class Min(_Extremum):
    reduce = staticmethod(np.min)


def sum(x, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A001  (mirrors np.sum)
    x = as_tensor(x)
    return Sum.apply(x, axes=normalize_axis(axis, x.ndim, "sum"), keepdims=keepdims)


def mean(x, axis=None, keepdims: bool = False) -> Tensor:
    x = as_tensor(x)
    axes = normalize_axis(axis, x.ndim, "mean")
    count = int(np.prod([x.shape[a] for a in axes]))
    if count == 0:
        raise ValueError(f"mean: cannot average over an empty axis (shape {x.shape}, axis {axis})")
    return sum(x, axes, keepdims) / count


def max(x, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A001
    x = as_tensor(x)
    return Max.apply(x, axes=normalize_axis(axis, x.ndim, "max"), keepdims=keepdims)


def min(x, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A001
    x = as_tensor(x)
    return Min.apply(x, axes=normalize_axis(axis, x.ndim, "min"), keepdims=keepdims)


def var(x, axis=None, keepdims: bool = False, ddof: int = 0) -> Tensor:
    """Variance with NumPy's default ddof=0 (PyTorch's default is the unbiased ddof=1)."""
    x = as_tensor(x)
    axes = normalize_axis(axis, x.ndim, "var")
    count = int(np.prod([x.shape[a] for a in axes]))
    if count - ddof <= 0:
        raise ValueError(f"var: {count} elements with ddof={ddof} leave no degrees of freedom (shape {x.shape})")
    centered = x - mean(x, axes, keepdims=True)
    return sum(centered * centered, axes, keepdims) / (count - ddof)


def _index_axis(axis, ndim: int, op: str):
    """argmax/argmin take one axis (or None): NumPy's rule, since they return indices along it."""
    if axis is None:
        return None
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: axis must be an int or None, got {axis!r}")
    axes = normalize_axis(axis, ndim, op)
    return axes[0] if axes else None  # a 0-d tensor: its only element is at index 0


def argmax(x, axis=None, keepdims: bool = False) -> np.ndarray:
    """Indices of the maxima (a plain int array: indices have no gradient)."""
    data = as_tensor(x).data
    return np.argmax(data, axis=_index_axis(axis, data.ndim, "argmax"), keepdims=keepdims)


def argmin(x, axis=None, keepdims: bool = False) -> np.ndarray:
    data = as_tensor(x).data
    return np.argmin(data, axis=_index_axis(axis, data.ndim, "argmin"), keepdims=keepdims)


# --------------------------------------------------------------------------------------------
# std, prod, cumsum: the reductions a PyTorch user reaches for next
# --------------------------------------------------------------------------------------------
def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    return int(np.prod([shape[a] for a in axes]))


class Std(Function):
    r"""$s = \sqrt{\sum (x - \bar x)^2 / (n - c)}$ over axes, c the correction (1: unbiased).

    $\partial s/\partial x = (x - \bar x) / ((n - c) s)$, and 0 where s = 0 (a constant slice),
    as PyTorch: $\sqrt{\cdot}$ has no derivative at 0, and 0 is the subgradient that keeps
    training finite. With n - c <= 0 the result is nan (or inf), as in PyTorch, and so is its gradient.
    """

    def __init__(self, axes: tuple[int, ...], keepdims: bool, correction: float):
        self.axes, self.keepdims, self.correction = axes, keepdims, correction

    def forward(self, x):
        dof = _count(x.shape, self.axes) - self.correction
        centered = x - x.mean(axis=self.axes, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):  # dof <= 0: nan/inf, PyTorch's answer
            var = (centered * centered).sum(axis=self.axes, keepdims=self.keepdims) / float(max(dof, 0))
        return np.sqrt(var)

    def backward(self, grad):
        (x,) = self.inputs
        shape = kept_shape(x.shape, self.axes)
        dof = _count(x.shape, self.axes) - self.correction
        s = self.output.reshape(shape)
        zero = s.data == 0
        # grad / s where s != 0, else 0; s is made safe first so the masked branch holds no inf.
        g = where(zero, 0.0, grad.reshape(shape) / where(zero, 1.0, s))
        scale = np.array(1.0 / dof if dof > 0 else np.inf, dtype=x.dtype)  # a constant, in x's dtype
        return g * (x - mean(x, self.axes, keepdims=True)) * scale


def std(x, axis=None, keepdims: bool = False, correction: float = 1, *, ddof: float | None = None) -> Tensor:
    """Standard deviation with PyTorch's default correction=1 (unbiased); `ddof` is NumPy's name
    for the same number. (`var` keeps NumPy's default ddof=0.)"""
    x = as_tensor(x)
    if ddof is not None:
        correction = ddof
    if not x.dtype.kind == "f":
        x = x.astype(np.float64)
    return Std.apply(x, axes=normalize_axis(axis, x.ndim, "std"), keepdims=keepdims, correction=correction)


def _move_last(x: Tensor, axes: tuple[int, ...]) -> tuple[Tensor, tuple[int, ...]]:
    """x with `axes` moved to the end and merged into one: (kept..., n), and the permutation used."""
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    perm = kept + axes
    moved = transpose(x, perm) if perm != tuple(range(x.ndim)) else x
    return moved.reshape(tuple(x.shape[i] for i in kept) + (_count(x.shape, axes),)), perm


def _cumprod_last(y: Tensor) -> Tensor:
    """Inclusive running product along the last axis, with multiplications only (Hillis-Steele:
    log2(n) rounds, each multiplying by a copy shifted by 1, 2, 4, ... with ones shifted in). No
    division, so zeros are exact, and every derivative of it is exact too."""
    n = y.shape[-1]
    lead = ((0, 0),) * (y.ndim - 1)
    shift = 1
    while shift < n:
        y = y * pad(y[..., : n - shift], lead + ((shift, 0),), value=1.0)
        shift *= 2
    return y


def _others_product(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    r"""$\prod_{j \ne i} x_j$ over each reduced slice, for every i: prod's gradient, exact with
    zeros. The product before i times the product after i, both running products."""
    y, perm = _move_last(x, axes)
    n = y.shape[-1]
    lead = ((0, 0),) * (y.ndim - 1)
    before = pad(_cumprod_last(y)[..., : n - 1], lead + ((1, 0),), value=1.0)      # prod of x[:i]
    after = flip(pad(_cumprod_last(flip(y, -1))[..., : n - 1], lead + ((1, 0),), value=1.0), -1)  # prod of x[i+1:]
    others = (before * after).reshape(tuple(x.shape[i] for i in perm))
    return transpose(others, tuple(np.argsort(perm))) if perm != tuple(range(x.ndim)) else others


class Prod(Function):
    r"""$z = \prod_{axes} x$: $\partial z/\partial x_i = \prod_{j \ne i} x_j$, computed without
    dividing by $x_i$ (z / x_i would be 0/0 at a zero), so one zero, two zeros, all are exact."""

    def __init__(self, axes: tuple[int, ...], keepdims: bool):
        self.axes, self.keepdims = axes, keepdims

    def forward(self, x):
        return np.prod(x, axis=self.axes, keepdims=self.keepdims)

    def backward(self, grad):
        (x,) = self.inputs
        if not self.axes:
            return grad
        spread = broadcast_to(grad.reshape(kept_shape(x.shape, self.axes)), x.shape)
        return spread if x.size == 0 else spread * _others_product(x, self.axes)


def prod(x, axis=None, keepdims: bool = False) -> Tensor:
    """Product over `axis` (None: all, an int or a tuple), NumPy's and PyTorch's semantics."""
    x = as_tensor(x)
    return Prod.apply(x, axes=normalize_axis(axis, x.ndim, "prod"), keepdims=keepdims)


class CumSum(Function):
    r"""Running sum along one axis. Its adjoint is the running sum from the other end:
    $z_j = \sum_{i \le j} x_i$ gives $\partial L/\partial x_i = \sum_{j \ge i} g_j$."""

    def __init__(self, axis: int):
        self.axis = axis

    def forward(self, x):
        return np.cumsum(x, axis=self.axis)

    def backward(self, grad):
        return flip(cumsum(flip(grad, self.axis), self.axis), self.axis)


def cumsum(x, axis=None) -> Tensor:
    """Running sum along `axis` (PyTorch's `dim`); None runs over the flattened tensor (NumPy)."""
    x = as_tensor(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    elif not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"cumsum: axis must be an int or None, got {axis!r}")
    elif x.ndim == 0:
        if axis not in (0, -1):
            raise axis_error("cumsum", axis, 0)
        return CumSum.apply(x.reshape(1), axis=0).reshape(())
    return CumSum.apply(x, axis=normalize_axis(axis, x.ndim, "cumsum")[0])
