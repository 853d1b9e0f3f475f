"""Reductions over axes: sum, mean, max, min, var, argmax, argmin.

Book: chapter 2 (`book/02_broadcasting.md`): a reduction's gradient is a broadcast.
Tests: `tests/test_ops.py`.
"""
from __future__ import annotations

import numpy as np

from ..graph import Function, Tensor, as_tensor
from .shape import broadcast_to, kept_shape, normalize_axis


class Sum(Function):
    """$z = \\sum_{axes} x$: every summed element gets the upstream gradient once."""

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

    reduce = staticmethod(np.max)

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
