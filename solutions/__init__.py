"""The course's reference engine: a NumPy autograd library with PyTorch's autograd semantics.

    >>> from solutions import Tensor
    >>> a, b, c = Tensor(2.0, requires_grad=True), Tensor(3.0, requires_grad=True), Tensor(4.0, requires_grad=True)
    >>> y = (a + b) * (b + c)
    >>> y.backward()
    >>> a.grad.item(), b.grad.item(), c.grad.item()
    (7.0, 12.0, 5.0)
"""
from . import ops
from .graph import (
    Function,
    Tensor,
    as_tensor,
    enable_grad,
    grad,
    is_grad_enabled,
    no_grad,
    run_backward,
    set_grad_enabled,
    topological_order,
)
from .ops import *  # noqa: F401,F403  (the lowercase op functions and op classes)
from .overrides import override

__all__ = [
    "Function", "Tensor", "as_tensor", "enable_grad", "grad", "is_grad_enabled", "no_grad",
    "override", "run_backward", "set_grad_enabled", "topological_order", "ops",
]
