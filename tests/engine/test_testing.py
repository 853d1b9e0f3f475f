"""`solutions.testing` (the students' `coursekit.testing`): the per-op checks that do not walk the graph.

`gradcheck(Op, *inputs, **params)` and `op_grads(Op, *inputs, grad=g, **params)` call one op's
backward directly on the node its forward made. They are what the visible tests of a02 and later
use, so that an op is tested before (or without) a working graph walk, a01's exercise: the tests
here run them with `run_backward` replaced by one that fails.
"""
from __future__ import annotations

import numpy as np
import pytest

from solutions import Function, Tensor, no_grad, override
from solutions.ops import GetItem, Mul, PowScalar, Sum
from solutions.testing import GradcheckError, gradcheck, op_grads

rng = np.random.default_rng(0)


def leaf(*shape: int) -> Tensor:
    return Tensor(rng.standard_normal(shape), requires_grad=True)


def no_walk(*args, **kwargs):
    raise AssertionError("the graph walk ran")


class WrongMul(Mul):
    """Mul whose backward forgets the chain rule for y."""

    def backward(self, grad):
        x, y = self.inputs
        return grad * y, x


def test_op_grads_calls_the_backward_of_one_node():
    x = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = Tensor([10.0, 20.0, 30.0], requires_grad=True)
    with override(run_backward=no_walk):
        gx, gy = op_grads(Mul, x, y, grad=np.ones((2, 3)))
    np.testing.assert_allclose(gx.data, [[10.0, 20.0, 30.0]] * 2)
    np.testing.assert_allclose(gy.data, [5.0, 7.0, 9.0])
    assert x.grad is None and y.grad is None, "op_grads touches no .grad"


def test_op_grads_parameters_default_upstream_and_constants():
    (g,) = op_grads(PowScalar, Tensor([3.0], requires_grad=True), exponent=2)
    assert g.data.tolist() == [6.0]  # grad defaults to ones of the output's shape
    gx, gc = op_grads(Mul, Tensor([2.0], requires_grad=True), Tensor([5.0]))
    assert gx.data.tolist() == [5.0] and gc is None  # a constant gets no gradient


def test_op_grads_works_inside_no_grad_and_checks_its_arguments():
    with no_grad():
        (g,) = op_grads(Sum, leaf(2, 3), axes=(1,), keepdims=False, grad=np.ones(2))
    assert g.shape == (2, 3)
    with pytest.raises(ValueError, match="no input of Mul requires grad"):
        op_grads(Mul, Tensor([1.0]), Tensor([2.0]))
    with pytest.raises(ValueError, match=r"grad has shape \(3,\).*Mul's output has shape \(2,\)"):
        op_grads(Mul, leaf(2), leaf(2), grad=np.ones(3))
    with pytest.raises(TypeError, match="Function class"):
        op_grads(lambda t: t, leaf(2))


@pytest.mark.parametrize("body,message", [
    ("return grad.sum(), grad", r"Bad.backward returned a gradient of shape \(\) for input 0 of shape \(3,\)"),
    ("return (grad,)", "Bad.backward returned 1 gradients for 2 inputs"),
    ("return grad.data, grad", "Bad.backward returned ndarray for input 0"),
])
def test_a_broken_backward_is_named(body, message):
    namespace: dict = {}
    exec(f"def backward(self, grad):\n    {body}\n", namespace)
    Bad = type("Bad", (Mul,), {"backward": namespace["backward"]})
    with pytest.raises(GradcheckError, match=message):
        op_grads(Bad, leaf(3), leaf(3))
    with pytest.raises(GradcheckError, match=message):
        gradcheck(Bad, leaf(3), leaf(3))


def test_gradcheck_of_an_op_class_does_not_walk_the_graph():
    with override(run_backward=no_walk):
        assert gradcheck(Mul, leaf(4, 3), leaf(4, 1))
        assert gradcheck(Sum, leaf(2, 3, 4), axes=(0, 2), keepdims=False)
        assert gradcheck(GetItem, leaf(4, 3), index=(slice(1, 3), np.array([0, 2, 2])))
        assert gradcheck(PowScalar, Tensor(rng.uniform(0.5, 2.0, (3, 2)), requires_grad=True), exponent=-1.5)
        with pytest.raises(GradcheckError, match="input 1"):
            gradcheck(WrongMul, leaf(3), leaf(3))
    assert gradcheck(Mul, leaf(3), Tensor(rng.standard_normal(3)))  # only x is checked


def test_gradcheck_of_a_function_still_uses_backward():
    assert gradcheck(lambda a, b: (a * b).sum(axis=0), leaf(3, 2), leaf(2))
    with pytest.raises(AssertionError, match="the graph walk ran"):
        with override(run_backward=no_walk):
            gradcheck(lambda a: a * 2.0, leaf(3))
    with pytest.raises(TypeError, match="only a Function class"):
        gradcheck(lambda a: a, leaf(2), axis=0)


def test_an_op_defined_outside_the_engine():
    class Cube(Function):
        def forward(self, x):
            return x**3

        def backward(self, grad):
            (x,) = self.inputs
            return grad * 3.0 * x * x

    assert gradcheck(Cube, leaf(5))
    (g,) = op_grads(Cube, Tensor([2.0], requires_grad=True))
    assert g.data.tolist() == [12.0]
