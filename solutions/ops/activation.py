"""softmax, log_softmax and logsumexp along an axis, numerically stable.

Book: chapter 2 (`book/02_broadcasting.md`), where the full softmax Jacobian is built and
compared with the vector-Jacobian product below. Tests: `tests/test_ops.py`.
"""
from __future__ import annotations

import numpy as np

from ..graph import Function, Tensor, as_tensor
from .shape import kept_shape, normalize_axis


def _stable_logsumexp(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """log(sum(exp(x))) with keepdims, shifted by the max so exp never overflows."""
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)  # a row of -inf stays -inf instead of becoming nan
    with np.errstate(divide="ignore"):  # ...through log(0) = -inf, which is the right answer
        return np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m


class Softmax(Function):
    r"""$s = e^x / \sum e^x$. Backward is the vector-Jacobian product
    $g^T J = s \odot (g - \langle g, s\rangle)$: O(n), never the n-by-n Jacobian."""

    def __init__(self, axis: int):
        self.axis = axis

    def forward(self, x):
        e = np.exp(x - np.max(x, axis=self.axis, keepdims=True))
        return e / np.sum(e, axis=self.axis, keepdims=True)

    def backward(self, grad):
        s = self.output
        return s * (grad - (grad * s).sum(axis=self.axis, keepdims=True))


class LogSoftmax(Function):
    r"""$x - \operatorname{logsumexp}(x)$; backward $g - \operatorname{softmax}(x) \sum g$."""

    def __init__(self, axis: int):
        self.axis = axis

    def forward(self, x):
        return x - _stable_logsumexp(x, (self.axis,))

    def backward(self, grad):
        return grad - self.output.exp() * grad.sum(axis=self.axis, keepdims=True)


class LogSumExp(Function):
    r"""$\log \sum e^x$ over axes; its gradient is the softmax over those axes."""

    def __init__(self, axes: tuple[int, ...], keepdims: bool):
        self.axes, self.keepdims = axes, keepdims

    def forward(self, x):
        out = _stable_logsumexp(x, self.axes)
        return out if self.keepdims else out.reshape([n for i, n in enumerate(out.shape) if i not in self.axes])

    def backward(self, grad):
        (x,) = self.inputs
        shape = kept_shape(x.shape, self.axes)
        return grad.reshape(shape) * (x - self.output.reshape(shape)).exp()


def _one_axis(x: Tensor, axis: int, op: str) -> int:
    if x.ndim == 0:
        raise ValueError(f"{op}: needs at least one dimension, got a 0-d tensor")
    return normalize_axis(axis, x.ndim, op)[0]


def softmax(x, axis: int = -1) -> Tensor:
    x = as_tensor(x)
    return Softmax.apply(x, axis=_one_axis(x, axis, "softmax"))


def log_softmax(x, axis: int = -1) -> Tensor:
    x = as_tensor(x)
    return LogSoftmax.apply(x, axis=_one_axis(x, axis, "log_softmax"))


def logsumexp(x, axis=None, keepdims: bool = False) -> Tensor:
    x = as_tensor(x)
    return LogSumExp.apply(x, axes=normalize_axis(axis, x.ndim, "logsumexp"), keepdims=keepdims)
