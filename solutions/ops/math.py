"""More elementwise functions: trigonometric and hyperbolic ones, log1p, expm1, erf, a few
composites (square, reciprocal, rsqrt), and the piecewise-constant sign, floor, ceil, round, trunc.

Book: chapter 2 (`book/02_broadcasting.md`) for elementwise ops. Tests: `tests/engine/test_ops_more.py`,
`tests/engine/test_golden.py`.

Every backward is written with the engine's ops (sin's is a cos, erf's an exp), so second
derivatives come for free. sign, floor, ceil, round and trunc are constant between their jumps:
their gradient is zero everywhere (PyTorch's choice, also at the jumps), a zero *tensor* so that
a graph built on them still runs backward and create_graph still works. The inverse functions
have NumPy's names and, like NumPy 2 and PyTorch, the short ones too (`arctan` is `atan`).
"""
from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np

from ..graph import Function, Tensor, as_tensor
from .elementwise import exp, sqrt


class Sin(Function):
    r"""$\partial \sin x/\partial x = \cos x$."""

    def forward(self, x):
        return np.sin(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad * cos(x)


class Cos(Function):
    r"""$\partial \cos x/\partial x = -\sin x$."""

    def forward(self, x):
        return np.cos(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad * -sin(x)


class Tan(Function):
    r"""$\partial \tan x/\partial x = 1 + \tan^2 x$ (the output, reused)."""

    def forward(self, x):
        return np.tan(x)

    def backward(self, grad):
        t = self.output
        return grad * (1.0 + t * t)


class Sinh(Function):
    r"""$\partial \sinh x/\partial x = \cosh x$."""

    def forward(self, x):
        return np.sinh(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad * cosh(x)


class Cosh(Function):
    r"""$\partial \cosh x/\partial x = \sinh x$."""

    def forward(self, x):
        return np.cosh(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad * sinh(x)


class Arcsin(Function):
    r"""$\partial \arcsin x/\partial x = 1/\sqrt{1 - x^2}$ (infinite at $\pm 1$, as in PyTorch)."""

    def forward(self, x):
        return np.arcsin(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad / sqrt(1.0 - x * x)


class Arccos(Function):
    r"""$\partial \arccos x/\partial x = -1/\sqrt{1 - x^2}$."""

    def forward(self, x):
        return np.arccos(x)

    def backward(self, grad):
        (x,) = self.inputs
        return -grad / sqrt(1.0 - x * x)


class Arctan(Function):
    r"""$\partial \arctan x/\partial x = 1/(1 + x^2)$."""

    def forward(self, x):
        return np.arctan(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad / (1.0 + x * x)


class Log1p(Function):
    r"""$\log(1 + x)$, exact for tiny x where `log(1 + x)` rounds $1 + x$ to 1; derivative $1/(1 + x)$."""

    def forward(self, x):
        return np.log1p(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad / (1.0 + x)


class Expm1(Function):
    r"""$e^x - 1$, exact for tiny x; derivative $e^x$ = the output + 1."""

    def forward(self, x):
        return np.expm1(x)

    def backward(self, grad):
        return grad * (self.output + 1.0)


@functools.cache
def _erf_function() -> Callable[[np.ndarray], np.ndarray]:
    """The error function on arrays, looked up once. NumPy has none: SciPy's when it is installed
    (it comes with scikit-learn), otherwise the standard library's, one element at a time."""
    try:
        from scipy.special import erf
    except ImportError:
        return np.vectorize(math.erf, otypes=[np.float64])
    return erf


def _erf_array(x: np.ndarray) -> np.ndarray:
    out = np.asarray(_erf_function()(x))
    return out.astype(x.dtype, copy=False) if x.dtype.kind == "f" else out  # integers give floats


class Erf(Function):
    r"""$\mathrm{erf}(x) = \frac{2}{\sqrt\pi}\int_0^x e^{-t^2}\,dt$: its derivative is the integrand."""

    def forward(self, x):
        return _erf_array(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad * (2.0 / math.sqrt(math.pi)) * exp(-(x * x))


class _Step(Function):
    """A piecewise-constant function: its gradient is 0 (grad * 0 keeps the graph and the dtype)."""

    fn = staticmethod(np.sign)

    def forward(self, x):
        return self.fn(x)

    def backward(self, grad):
        return grad * 0.0


class Sign(_Step):
    fn = staticmethod(np.sign)


class Floor(_Step):
    fn = staticmethod(np.floor)


class Ceil(_Step):
    fn = staticmethod(np.ceil)


class Trunc(_Step):
    fn = staticmethod(np.trunc)


class Round(Function):
    """Round half to even (NumPy's and PyTorch's rule) to `decimals` places; gradient 0."""

    def __init__(self, decimals: int):
        self.decimals = decimals

    def forward(self, x):
        return np.round(x, self.decimals)

    def backward(self, grad):
        return grad * 0.0


def sin(x) -> Tensor: return Sin.apply(x)
def cos(x) -> Tensor: return Cos.apply(x)
def sign(x) -> Tensor: return Sign.apply(x)
def floor(x) -> Tensor: return Floor.apply(x)
def ceil(x) -> Tensor: return Ceil.apply(x)
def trunc(x) -> Tensor: return Trunc.apply(x)
def tan(x) -> Tensor: return Tan.apply(x)
def sinh(x) -> Tensor: return Sinh.apply(x)
def cosh(x) -> Tensor: return Cosh.apply(x)
def arcsin(x) -> Tensor: return Arcsin.apply(x)
def arccos(x) -> Tensor: return Arccos.apply(x)
def arctan(x) -> Tensor: return Arctan.apply(x)
def log1p(x) -> Tensor: return Log1p.apply(x)
def expm1(x) -> Tensor: return Expm1.apply(x)
def erf(x) -> Tensor: return Erf.apply(x)


asin, acos, atan = arcsin, arccos, arctan  # NumPy 2's and PyTorch's names


# Composites: their gradients follow from the ops they are made of.
def square(x) -> Tensor:
    x = as_tensor(x)
    return x * x


def reciprocal(x) -> Tensor:
    x = as_tensor(x)
    return 1.0 / x


def rsqrt(x) -> Tensor:
    r"""$1/\sqrt x$."""
    x = as_tensor(x)
    return 1.0 / sqrt(x)


def round(x, decimals: int = 0) -> Tensor:  # noqa: A001  (mirrors np.round and torch.round)
    if not isinstance(decimals, (int, np.integer)) or isinstance(decimals, bool):
        raise TypeError(f"round: decimals must be an int, got {decimals!r}")
    return Round.apply(as_tensor(x), decimals=int(decimals))
