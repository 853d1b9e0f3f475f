"""Activations: softmax, log_softmax and logsumexp along an axis, numerically stable; and the
elementwise ones beyond relu, sigmoid and tanh (which are in `elementwise.py`): leaky_relu, elu,
softplus, hardtanh, relu6, silu, gelu.

Book: chapter 2 (`book/02_broadcasting.md`), where the full softmax Jacobian is built and
compared with the vector-Jacobian product below. Tests: `tests/engine/test_ops.py`, `tests/engine/test_ops_more.py`.

The elementwise activations follow PyTorch at their kinks, where a derivative has to be chosen:
leaky_relu'(0) = negative_slope, elu'(0) = alpha, hardtanh' = 0 at its two corners. A branch that
is not taken is never evaluated where it would overflow (elu's exp of a large x, softplus's
exp(beta x) above the threshold), so no inf meets a zero in a gradient.
"""
from __future__ import annotations

import math

import numpy as np

from ..graph import Function, Tensor, as_tensor
from .elementwise import exp, sigmoid, tanh, where
from .math import erf
from .shape import kept_shape, normalize_axis


def stable_logsumexp(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """log(sum(exp(x))) with keepdims, shifted by the max so exp never overflows."""
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)  # a row of -inf stays -inf instead of becoming nan
    with np.errstate(divide="ignore"):  # ...through log(0) = -inf, which is the right answer
        return np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m


# Its name before it was public (issue 39): notebooks released earlier import it, and are still graded.
_stable_logsumexp = stable_logsumexp


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
        return x - stable_logsumexp(x, (self.axis,))

    def backward(self, grad):
        return grad - self.output.exp() * grad.sum(axis=self.axis, keepdims=True)


class LogSumExp(Function):
    r"""$\log \sum e^x$ over axes; its gradient is the softmax over those axes."""

    def __init__(self, axes: tuple[int, ...], keepdims: bool):
        self.axes, self.keepdims = axes, keepdims

    def forward(self, x):
        out = stable_logsumexp(x, self.axes)
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


# --------------------------------------------------------------------------------------------
# Elementwise activations
# --------------------------------------------------------------------------------------------
class LeakyReLU(Function):
    r"""$x$ for $x > 0$, else $a x$; the derivative is 1 or $a$ (a at 0, as in PyTorch)."""

    def __init__(self, negative_slope: float):
        self.negative_slope = negative_slope

    def forward(self, x):
        return np.where(x > 0, x, x * self.negative_slope)

    def backward(self, grad):
        (x,) = self.inputs
        return grad * np.where(x.data > 0, 1.0, self.negative_slope).astype(grad.dtype)


class ELU(Function):
    r"""$x$ for $x > 0$, else $\alpha (e^x - 1)$; the derivative is 1, or $\alpha e^x$ (also at 0)."""

    def __init__(self, alpha: float):
        self.alpha = alpha

    def forward(self, x):
        return np.where(x > 0, x, self.alpha * np.expm1(np.minimum(x, 0)))

    def backward(self, grad):
        (x,) = self.inputs
        zero = np.zeros((), dtype=x.dtype)
        # e^x where x < 0 and e^0 elsewhere: at 0 the slope is alpha (PyTorch's choice) while the
        # second derivative there is 0 (PyTorch's too); for x > 0 the value is unused.
        negative_part = exp(where(x.data < 0, x, zero))
        return grad * where(x.data > 0, np.ones((), dtype=x.dtype), negative_part * self.alpha)


class Softplus(Function):
    r"""$\frac1\beta \log(1 + e^{\beta x})$, and x itself once $\beta x$ passes the threshold
    (PyTorch's switch to the asymptote); the derivative is $\sigma(\beta x)$, or 1 past the threshold."""

    def __init__(self, beta: float, threshold: float):
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        z = x * self.beta
        return np.where(z > self.threshold, x, np.logaddexp(0, z) / self.beta).astype(x.dtype, copy=False)

    def backward(self, grad):
        (x,) = self.inputs
        linear = x.data * self.beta > self.threshold
        return grad * where(linear, np.ones((), dtype=x.dtype), sigmoid(x * self.beta))


class Hardtanh(Function):
    """x clipped to [min_val, max_val]; the derivative is 1 strictly inside, 0 outside and at the
    two corners (PyTorch's choice, unlike clip's closed interval)."""

    def __init__(self, min_val: float, max_val: float):
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x):
        return np.clip(x, self.min_val, self.max_val)

    def backward(self, grad):
        (x,) = self.inputs
        inside = (x.data > self.min_val) & (x.data < self.max_val)
        return grad * inside.astype(grad.dtype)


def leaky_relu(x, negative_slope: float = 0.01) -> Tensor:
    return LeakyReLU.apply(as_tensor(x), negative_slope=float(negative_slope))


def elu(x, alpha: float = 1.0) -> Tensor:
    return ELU.apply(as_tensor(x), alpha=float(alpha))


def softplus(x, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    if beta <= 0:
        raise ValueError(f"softplus: beta must be positive, got {beta}")
    return Softplus.apply(as_tensor(x), beta=float(beta), threshold=float(threshold))


def hardtanh(x, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must not exceed max_val ({max_val})")
    return Hardtanh.apply(as_tensor(x), min_val=float(min_val), max_val=float(max_val))


def relu6(x) -> Tensor:
    return hardtanh(x, 0.0, 6.0)


# Composites: their gradients follow from the ops they are made of.
def silu(x) -> Tensor:
    r"""$x \sigma(x)$ (also called swish)."""
    x = as_tensor(x)
    return x * sigmoid(x)


def gelu(x, approximate: str = "none") -> Tensor:
    r"""$x \Phi(x)$ with $\Phi$ the standard normal CDF, $\frac12(1 + \mathrm{erf}(x/\sqrt2))$;
    `approximate="tanh"` is the tanh formula of Hendrycks and Gimpel (PyTorch's two choices)."""
    x = as_tensor(x)
    if approximate == "none":
        return x * (0.5 + 0.5 * erf(x * (1.0 / math.sqrt(2.0))))
    if approximate == "tanh":
        inner = (x + 0.044715 * x * x * x) * math.sqrt(2.0 / math.pi)
        return x * (0.5 + 0.5 * tanh(inner))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
