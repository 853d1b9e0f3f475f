"""The reference scalar engine of a01 (`solutions/scalar.py`): values, gradients, the graph walk."""
from __future__ import annotations

import math

import pytest

from solutions.scalar import Value, backward, topological_order, zero_grad


def numeric(f, x: float, eps: float = 1e-6) -> float:
    return (f(x + eps) - f(x - eps)) / (2 * eps)


def test_the_worked_example():
    a, b, c = Value(2.0), Value(3.0), Value(4.0)
    y = (a + b) * (b + c)
    y.backward()
    assert (y.data, a.grad, b.grad, c.grad) == (35.0, 7.0, 12.0, 5.0)


def test_neuron_matches_finite_differences():
    def neuron(w1):
        x1, x2, w2, b = Value(2.0), Value(0.0), Value(1.0), Value(6.8813735870195432)
        w = Value(w1)
        return (x1 * w + x2 * w2 + b).tanh(), w

    o, w = neuron(-3.0)
    o.backward()
    assert math.isclose(o.data, math.sqrt(0.5), rel_tol=1e-9)
    assert math.isclose(w.grad, numeric(lambda v: neuron(v)[0].data, -3.0), rel_tol=1e-6)


@pytest.mark.parametrize("f,df", [
    (lambda v: v * v * 3.0 - v, lambda x: 6 * x - 1),
    (lambda v: 1.0 / v + v / 2.0, lambda x: -1 / x**2 + 0.5),
    (lambda v: (2.0 - v) ** 3, lambda x: -3 * (2 - x) ** 2),
    (lambda v: -v.exp() + v.relu(), lambda x: -math.exp(x) + (1.0 if x > 0 else 0.0)),
    (lambda v: (v ** -0.5).tanh(), lambda x: -0.5 * x**-1.5 * (1 - math.tanh(x**-0.5) ** 2)),
])
@pytest.mark.parametrize("x", [0.7, 1.9])
def test_derived_ops_differentiate_correctly(f, df, x):
    v = Value(x)
    f(v).backward()
    assert math.isclose(v.grad, df(x), rel_tol=1e-9, abs_tol=1e-12)


def test_relu_gradient_at_zero_is_zero():
    v = Value(0.0)
    v.relu().backward()
    assert v.grad == 0.0


@pytest.mark.parametrize("x, p", [(0.0, 0), (2.0, 0), (0.0, 0.5), (0.0, 2), (0.0, 1), (0.0, 1.5)])
def test_power_at_zero_agrees_with_the_tensor_engine(x, p):
    """Issue 11: `Value(0.0) ** 0` and `** 0.5` then backward() raised ZeroDivisionError; the tensor
    engine (NumPy) gives 0 and inf. Both engines must give the same gradient."""
    import warnings

    import numpy as np

    from solutions import Tensor

    v = Value(x)
    (v**p).backward()
    t = Tensor(np.array(x), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's divide by zero, on purpose
        (t**p).backward()
    assert v.grad == float(t.grad.data)


def test_pow_rejects_a_value_exponent():
    with pytest.raises(TypeError):
        Value(2.0) ** Value(3.0)


def test_topological_order_lists_each_node_once_children_first():
    x = Value(1.0)
    t = x * x + x
    y = t * t
    order = topological_order(y)
    assert len(order) == len({id(v) for v in order}) == 4  # x, x * x, t and y, each once
    position = {id(v): k for k, v in enumerate(order)}
    for v in order:
        assert all(position[id(c)] < position[id(v)] for c in v._children)
    assert order[-1] is y


@pytest.mark.slow
def test_diamond_ladder_is_linear_and_deep_chains_need_no_recursion():
    x = Value(0.5)
    v = x
    for _ in range(60):  # 2^60 paths: only a walk that visits each node once finishes
        v = v * 0.5 + v * 0.5
    calls: dict[int, int] = {}
    for node in topological_order(v):  # each node's closure, counted: a walk per path calls them 2^60 times
        def counted(node=node, inner=node._backward):
            calls[id(node)] = calls.get(id(node), 0) + 1
            inner()
        node._backward = counted
    backward(v)
    assert set(calls.values()) == {1} and len(calls) == len(topological_order(v))
    assert math.isclose(x.grad, 1.0)

    x = Value(0.0)
    v = x
    for _ in range(100_000):
        v = v + 1.0
    backward(v)
    assert v.data == 100_000 and x.grad == 1.0


def test_zero_grad_then_backward_again_gives_the_same_gradients():
    a, b = Value(2.0), Value(-1.0)
    y = (a * b + a).tanh()
    y.backward()
    first = (a.grad, b.grad)
    zero_grad(y)
    assert all(v.grad == 0.0 for v in topological_order(y))
    y.backward()
    assert (a.grad, b.grad) == first
