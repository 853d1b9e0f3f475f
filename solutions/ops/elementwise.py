"""Elementwise ops, each with its broadcasting-aware gradient.

Book: chapter 2 (`book/02_broadcasting.md`). Assignment: `assignments/source/a02_broadcasting/`.
Tests: `tests/engine/test_broadcasting.py`, `tests/engine/test_ops.py`.

Every backward is written with Tensor operations (never raw NumPy on `grad`), so that the
gradient is itself recorded when `create_graph=True`. Masks and signs are constants: they are
piecewise constant in x, so they carry no gradient of their own.
"""
from __future__ import annotations

import numpy as np

from ..graph import Function, Tensor, as_tensor
from .shape import unbroadcast


def _const(mask: np.ndarray, like: Tensor) -> np.ndarray:
    """A constant array (mask, sign) in `like`'s dtype, so it never upcasts float32."""
    return mask.astype(like.dtype, copy=False)


# --------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------
class Add(Function):
    r"""$z = x + y$: $\partial z/\partial x = \partial z/\partial y = 1$."""

    broadcasts = True  # on shapes that do not broadcast, Function.apply raises the error naming the op

    def forward(self, x, y):
        return x + y

    def backward(self, grad):
        x, y = self.inputs
        gx = unbroadcast(grad, x.shape) if self.needs_input_grad[0] else None
        gy = unbroadcast(grad, y.shape) if self.needs_input_grad[1] else None
        return gx, gy


class Sub(Function):
    """$z = x - y$."""

    broadcasts = True  # on shapes that do not broadcast, Function.apply raises the error naming the op

    def forward(self, x, y):
        return x - y

    def backward(self, grad):
        x, y = self.inputs
        # d(x - y) = dx - dy: x's share is grad, y's is -grad, each summed back to its input's shape
        return tuple(unbroadcast(g, t.shape) if needed else None
                     for g, t, needed in zip((grad, -grad), (x, y), self.needs_input_grad, strict=True))


class Mul(Function):
    r"""$z = x y$: $\partial z/\partial x = y$, $\partial z/\partial y = x$."""

    broadcasts = True  # on shapes that do not broadcast, Function.apply raises the error naming the op

    def forward(self, x, y):
        return x * y

    def backward(self, grad):
        x, y = self.inputs
        gx = unbroadcast(grad * y, x.shape) if self.needs_input_grad[0] else None
        gy = unbroadcast(grad * x, y.shape) if self.needs_input_grad[1] else None
        return gx, gy


class Div(Function):
    r"""$z = x / y$: $\partial z/\partial x = 1/y$, $\partial z/\partial y = -x/y^2$."""

    broadcasts = True  # on shapes that do not broadcast, Function.apply raises the error naming the op

    def forward(self, x, y):
        return x / y

    def backward(self, grad):
        x, y = self.inputs
        gx = unbroadcast(grad / y, x.shape) if self.needs_input_grad[0] else None
        gy = unbroadcast(-grad * x / (y * y), y.shape) if self.needs_input_grad[1] else None
        return gx, gy


class Neg(Function):
    def forward(self, x):
        return -x

    def backward(self, grad):
        return -grad


class PowScalar(Function):
    r"""$z = x^p$ for a constant exponent p: $\partial z/\partial x = p x^{p-1}$."""

    def __init__(self, exponent: float):
        self.exponent = exponent

    def forward(self, x):
        return x**self.exponent

    def backward(self, grad):
        (x,) = self.inputs
        p = self.exponent
        if p == 0:  # x**-1 would turn 0 * inf into nan at x = 0
            return grad * 0.0
        return grad * p * x ** (p - 1)


class Pow(Function):
    r"""$z = x^y$ with a tensor exponent: $\partial z/\partial y = x^y \ln x$."""

    broadcasts = True  # on shapes that do not broadcast, Function.apply raises the error naming the op

    def forward(self, x, y):
        return x**y

    def backward(self, grad):
        x, y = self.inputs
        gx = gy = None
        if self.needs_input_grad[0]:
            # As PyTorch: where y == 0 the base-gradient is 0, even at x == 0 (where y x^(y-1)
            # would be 0 * inf = nan); a harmless exponent there keeps inf out of the graph.
            zero_exp = y.data == 0
            gx = unbroadcast(where(zero_exp, 0.0, grad * y * x ** where(zero_exp, 1.0, y - 1.0)), x.shape)
        if self.needs_input_grad[1]:
            # As PyTorch: 0**y with y >= 0 has a zero exponent-gradient (ln 0 would give nan).
            zero_base = (x.data == 0) & (y.data >= 0)
            safe_x = where(zero_base, 1.0, x)
            gy = unbroadcast(where(zero_base, 0.0, grad * self.output * log(safe_x)), y.shape)
        return gx, gy


# --------------------------------------------------------------------------------------------
# Unary functions
# --------------------------------------------------------------------------------------------
class Exp(Function):
    r"""$\partial e^x/\partial x = e^x$: reuse the output."""

    def forward(self, x):
        return np.exp(x)

    def backward(self, grad):
        return grad * self.output


class Log(Function):
    def forward(self, x):
        return np.log(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad / x


class Sqrt(Function):
    r"""$\partial \sqrt{x}/\partial x = 1 / (2\sqrt{x})$."""

    def forward(self, x):
        return np.sqrt(x)

    def backward(self, grad):
        return grad / (2.0 * self.output)


class Abs(Function):
    """Gradient sign(x), and 0 at x = 0 (PyTorch's choice)."""

    def forward(self, x):
        return np.abs(x)

    def backward(self, grad):
        (x,) = self.inputs
        return grad * _const(np.sign(x.data), grad)


class ReLU(Function):
    """Gradient 1 where x > 0, else 0 (0 at x = 0, as PyTorch)."""

    def forward(self, x):
        return np.maximum(x, 0)

    def backward(self, grad):
        (x,) = self.inputs
        return grad * _const(x.data > 0, grad)


class Sigmoid(Function):
    r"""$\sigma'(x) = \sigma(x)(1 - \sigma(x))$."""

    def forward(self, x):
        # exp(-|x|) never overflows; pick the algebraically equal form per sign.
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1 / (1 + e), e / (1 + e))

    def backward(self, grad):
        s = self.output
        return grad * s * (1.0 - s)


class Tanh(Function):
    r"""$\tanh'(x) = 1 - \tanh^2(x)$."""

    def forward(self, x):
        return np.tanh(x)

    def backward(self, grad):
        t = self.output
        return grad * (1.0 - t * t)


class Maximum(Function):
    """Elementwise max. On ties the gradient is split half and half, as PyTorch does."""

    broadcasts = True  # on shapes that do not broadcast, Function.apply raises the error naming the op

    def forward(self, x, y):
        return np.maximum(x, y)

    def backward(self, grad):
        x, y = self.inputs
        wins, ties = x.data > y.data, x.data == y.data
        return _split(grad, x, y, wins, ties)


class Minimum(Function):
    broadcasts = True  # on shapes that do not broadcast, Function.apply raises the error naming the op

    def forward(self, x, y):
        return np.minimum(x, y)

    def backward(self, grad):
        x, y = self.inputs
        wins, ties = x.data < y.data, x.data == y.data
        return _split(grad, x, y, wins, ties)


def _split(grad: Tensor, x: Tensor, y: Tensor, x_wins: np.ndarray, ties: np.ndarray):
    """Send grad to x where it won, to y where it lost, half to each on a tie."""
    to_x = _const(x_wins + 0.5 * ties, grad)
    to_y = _const(~x_wins & ~ties, grad) + _const(0.5 * ties, grad)
    return unbroadcast(grad * to_x, x.shape), unbroadcast(grad * to_y, y.shape)


class Where(Function):
    """`x` where `condition`, else `y`; each branch gets the gradient where it was chosen."""

    def __init__(self, condition: np.ndarray):
        self.condition = condition

    def forward(self, x, y):
        try:
            return np.where(self.condition, x, y)
        except ValueError:
            raise ValueError(
                f"where: condition {self.condition.shape}, x {x.shape} and y {y.shape} cannot be broadcast together"
            ) from None

    def backward(self, grad):
        x, y = self.inputs
        zero = np.zeros((), dtype=grad.dtype)
        gx = unbroadcast(where(self.condition, grad, zero), x.shape) if self.needs_input_grad[0] else None
        gy = unbroadcast(where(self.condition, zero, grad), y.shape) if self.needs_input_grad[1] else None
        return gx, gy


class Clip(Function):
    """Clamp to [lo, hi]; gradient 1 inside the closed interval, 0 outside (PyTorch's clamp)."""

    def __init__(self, lo: float | None, hi: float | None):
        self.lo, self.hi = lo, hi

    def forward(self, x):
        return np.clip(x, self.lo, self.hi)

    def backward(self, grad):
        (x,) = self.inputs
        inside = np.ones(x.shape, dtype=bool)
        if self.lo is not None:
            inside &= x.data >= self.lo
        if self.hi is not None:
            inside &= x.data <= self.hi
        return grad * _const(inside, grad)


class Cast(Function):
    """Change dtype; the gradient goes back in the input's dtype."""

    def __init__(self, dtype: np.dtype):
        self.dtype = np.dtype(dtype)

    def forward(self, x):
        return x.astype(self.dtype)

    def backward(self, grad):
        (x,) = self.inputs
        return grad.astype(x.dtype)


# --------------------------------------------------------------------------------------------
# Lowercase functions: what Tensor's operators and methods call. They look the class up at
# call time, so a grader can swap in a student's class (see `solutions.override`).
# --------------------------------------------------------------------------------------------
def add(x, y): return Add.apply(x, y)
def sub(x, y): return Sub.apply(x, y)
def mul(x, y): return Mul.apply(x, y)
def div(x, y): return Div.apply(x, y)
def neg(x): return Neg.apply(x)
def exp(x): return Exp.apply(x)
def log(x): return Log.apply(x)
def sqrt(x): return Sqrt.apply(x)
def abs(x): return Abs.apply(x)  # noqa: A001  (mirrors np.abs)
def relu(x): return ReLU.apply(x)
def sigmoid(x): return Sigmoid.apply(x)
def tanh(x): return Tanh.apply(x)
def maximum(x, y): return Maximum.apply(x, y)
def minimum(x, y): return Minimum.apply(x, y)


def pow(x, exponent):  # noqa: A001  (mirrors np.pow)
    """x ** exponent; a Python number exponent is a constant (PowScalar), a tensor one is differentiable."""
    if isinstance(exponent, (int, float, np.number)) and not isinstance(exponent, (bool, np.bool_)):
        return PowScalar.apply(x, exponent=exponent)
    return Pow.apply(x, exponent)


def where(condition, x, y) -> Tensor:
    """NumPy's `where(condition, x, y)`; `condition` is a boolean array (or Tensor), never differentiated."""
    cond = np.asarray(condition.data if isinstance(condition, Tensor) else condition, dtype=bool)
    return Where.apply(x, y, condition=cond)


def clip(x, min=None, max=None) -> Tensor:  # noqa: A002  (NumPy's and PyTorch's argument names)
    if min is None and max is None:
        raise ValueError("clip: give at least one of min and max")
    return Clip.apply(x, lo=min, hi=max)


def astype(x, dtype) -> Tensor:
    """A copy in `dtype`. Only a floating-point result carries gradient (as in PyTorch): rounding
    to integers is piecewise constant, so an integer result is a constant."""
    x = as_tensor(x)
    dtype = np.dtype(dtype)
    if dtype == x.dtype:
        return x
    if not np.issubdtype(dtype, np.floating):
        return Tensor(x.data.astype(dtype))
    return Cast.apply(x, dtype=dtype)
