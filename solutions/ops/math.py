"""More elementwise functions: sin, cos, and the piecewise-constant sign, floor, ceil, round.

Book: chapter 2 (`book/02_broadcasting.md`) for elementwise ops. Tests: `tests/test_ops_more.py`,
`tests/test_golden.py`.

sin and cos differentiate into each other, written with the engine's ops, so their second
derivatives come for free. sign, floor, ceil and round are constant between their jumps: their
gradient is zero everywhere (PyTorch's choice, also at the jumps), a zero *tensor* so that a
graph built on them still runs backward and create_graph still works.
"""
from __future__ import annotations

import numpy as np

from ..graph import Function, Tensor, as_tensor


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


def round(x, decimals: int = 0) -> Tensor:  # noqa: A001  (mirrors np.round and torch.round)
    if not isinstance(decimals, (int, np.integer)) or isinstance(decimals, bool):
        raise TypeError(f"round: decimals must be an int, got {decimals!r}")
    return Round.apply(as_tensor(x), decimals=int(decimals))
