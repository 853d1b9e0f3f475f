"""A scalar autograd engine in the style of micrograd: one `Value` per number.

Book: chapter 1 (`book/01_graphs.md`). Assignment: `assignments/source/a01_graphs/`.
Tests: `tests/grader/test_exercises.py` (grading), `tests/engine/test_scalar.py`.

Each op is a module-level function that builds its output `Value` and, a few lines below, the
`_backward` closure that sends the output's gradient to the inputs. Closures *accumulate*
(`+=`): a value used twice receives gradient along both paths. `Value`'s operators look the op
functions up by name at call time, so a grader (or a student's notebook, through
`coursekit.use`) can swap one op for another implementation.

    >>> a, b = Value(2.0), Value(3.0)
    >>> y = a * b + b
    >>> y.backward()
    >>> a.grad, b.grad
    (3.0, 3.0)
"""
from __future__ import annotations

import math

__all__ = [
    "Value", "add", "as_value", "backward", "exp", "mul", "power", "relu", "tanh",
    "topological_order", "zero_grad",
]


class Value:
    """A number that remembers how it was computed.

    `data` is the number, `grad` the derivative of the final output with respect to it (filled
    in by `backward`), `_children` the Values it was computed from and `_backward` the closure
    that pushes `grad` into their `grad`s.
    """

    __slots__ = ("data", "grad", "_children", "_op", "_backward", "label")

    def __init__(self, data: float, _children: tuple["Value", ...] = (), _op: str = "", label: str = ""):
        self.data = float(data)
        self.grad = 0.0
        self._children = tuple(_children)
        self._op = _op
        self._backward = _no_backward
        self.label = label

    def __repr__(self) -> str:
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"

    # The operators call the module's functions by name, so replacing `add` in this module
    # changes what `a + b` does (see `coursekit.use` in the assignment).
    def __add__(self, other): return add(self, other)
    def __radd__(self, other): return add(other, self)
    def __mul__(self, other): return mul(self, other)
    def __rmul__(self, other): return mul(other, self)
    def __neg__(self): return self * -1.0
    def __sub__(self, other): return self + (-other)
    def __rsub__(self, other): return other + (-self)
    # Division is multiplication by a power, so it needs no backward of its own.
    def __truediv__(self, other): return self * other**-1
    def __rtruediv__(self, other): return other * self**-1

    def __pow__(self, exponent):
        if not isinstance(exponent, (int, float)) or isinstance(exponent, bool):
            return NotImplemented  # only constant exponents: x ** 2, x ** -0.5
        return power(self, exponent)

    def exp(self): return exp(self)
    def tanh(self): return tanh(self)
    def relu(self): return relu(self)
    def backward(self) -> None: backward(self)
    def zero_grad(self) -> None: zero_grad(self)


def _no_backward() -> None:
    """A leaf has nothing to send its gradient to."""


def as_value(x) -> Value:
    """`x` itself if it is a Value, else a new constant leaf (so `v + 1` works)."""
    return x if isinstance(x, Value) else Value(x)


# --------------------------------------------------------------------------------------------
# Ops: forward value, then the closure that sends gradient back (accumulating with +=).
# --------------------------------------------------------------------------------------------
def add(a, b) -> Value:
    r"""$c = a + b$: $\partial c/\partial a = \partial c/\partial b = 1$. Numbers become Values."""
    a, b = as_value(a), as_value(b)
    out = Value(a.data + b.data, (a, b), "+")

    def _backward():
        a.grad += out.grad
        b.grad += out.grad

    out._backward = _backward
    return out


def mul(a, b) -> Value:
    r"""$c = a b$: $\partial c/\partial a = b$, $\partial c/\partial b = a$. Numbers become Values."""
    a, b = as_value(a), as_value(b)
    out = Value(a.data * b.data, (a, b), "*")

    def _backward():
        a.grad += b.data * out.grad
        b.grad += a.data * out.grad

    out._backward = _backward
    return out


def power(a: Value, exponent: float) -> Value:
    r"""$c = a^p$ for a constant number p: $\partial c/\partial a = p\,a^{p-1}$.

    Two guards, so that the scalar engine agrees with the tensor engine (NumPy) where Python's
    `0.0 ** -1` raises ZeroDivisionError: p = 0 sends no gradient (c = 1 is a constant, even at
    a = 0), and at a = 0 an exponent p < 1 has an infinite slope: p * inf.
    """
    out = Value(a.data**exponent, (a,), f"**{exponent:g}")

    def _backward():
        if exponent == 0:  # c = 1 whatever a is: nothing to send (and 0.0 ** -1 would raise)
            return
        if a.data == 0 and exponent < 1:  # a^(p-1) is infinite at 0: the slope is p * inf, as NumPy's
            a.grad += math.copysign(math.inf, exponent) * out.grad
        else:
            a.grad += exponent * a.data ** (exponent - 1) * out.grad

    out._backward = _backward
    return out


def exp(a: Value) -> Value:
    r"""$c = e^a$: $\partial c/\partial a = e^a = c$, so the closure reuses the output."""
    out = Value(math.exp(a.data), (a,), "exp")

    def _backward():
        a.grad += out.data * out.grad

    out._backward = _backward
    return out


def tanh(a: Value) -> Value:
    r"""$c = \tanh a$: $\partial c/\partial a = 1 - \tanh^2 a = 1 - c^2$."""
    t = math.tanh(a.data)
    out = Value(t, (a,), "tanh")

    def _backward():
        a.grad += (1.0 - t * t) * out.grad

    out._backward = _backward
    return out


def relu(a: Value) -> Value:
    r"""$c = \max(a, 0)$: $\partial c/\partial a$ is 1 where a > 0, else 0 (0 at a = 0, as PyTorch)."""
    out = Value(a.data if a.data > 0 else 0.0, (a,), "relu")

    def _backward():
        a.grad += (1.0 if a.data > 0 else 0.0) * out.grad

    out._backward = _backward
    return out


# --------------------------------------------------------------------------------------------
# The graph walk
# --------------------------------------------------------------------------------------------
def topological_order(root: Value) -> list[Value]:
    """Every Value that `root` was computed from (root included), each after all of its children.

    Iterative depth-first search with an explicit stack, so a chain of 100 000 ops needs no
    recursion; a visited set means each node is expanded once, so shared subgraphs cost
    linear time.
    """
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            order.append(node)
        elif node not in visited:
            visited.add(node)
            stack.append((node, True))
            for child in node._children:
                stack.append((child, False))
    return order


def backward(root: Value) -> None:
    r"""Fill in `grad` of every Value `root` depends on with $\partial\,\mathrm{root}/\partial v$.

    Assumes a fresh graph (every grad 0; see `zero_grad`). Seeds the root with 1 and calls each
    node's closure in reverse topological order, so a node sends its gradient back only after
    every node that uses it has sent gradient to it.
    """
    order = topological_order(root)
    root.grad = 1.0
    for node in reversed(order):
        node._backward()


def zero_grad(root: Value) -> None:
    """Reset `grad` to 0 on every Value `root` depends on, before another `backward`."""
    for node in topological_order(root):
        node.grad = 0.0
