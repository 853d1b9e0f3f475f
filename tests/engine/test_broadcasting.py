"""Broadcasting and its gradient (chapter 2, `book/02_broadcasting.md`).

Broadcasting copies an operand along the axes it lacks and along its size-1 axes; the gradient
of a copy is a sum, so every binary op's backward ends in `unbroadcast`. These tests draw the
shape pairs with Hypothesis (every pattern NumPy allows: leading axes added, size-1 axes, both
sides stretched, 0-d operands) and check first and second derivatives numerically (float64).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import solutions as S
from solutions import Tensor
from solutions.testing import assert_close, gradcheck, gradgradcheck

from support.strategies import broadcast_pairs, leaf, matmul_shapes, nonzero, positive, seeds, separated_pair, uniform


# --------------------------------------------------------------------------------------------
# The binary ops: how to call each one, and inputs on which it is smooth
# --------------------------------------------------------------------------------------------
def _values(kind):
    def make(rng, sx, sy):
        if kind == "any":
            return uniform(rng, sx), uniform(rng, sy)
        if kind == "divisor":  # y away from 0
            return uniform(rng, sx), nonzero(rng, sy, 0.5)
        if kind == "base":  # x > 0, so x**y and its log are smooth
            return positive(rng, sx), uniform(rng, sy)
        if kind == "separated":  # no ties between x and y
            return separated_pair(rng, sx, sy)
        raise ValueError(kind)

    return make


BINARY = {
    "add": (lambda x, y: x + y, np.add, _values("any")),
    "sub": (lambda x, y: x - y, np.subtract, _values("any")),
    "mul": (lambda x, y: x * y, np.multiply, _values("any")),
    "div": (lambda x, y: x / y, np.divide, _values("divisor")),
    "pow": (lambda x, y: x**y, np.power, _values("base")),
    "maximum": (S.maximum, np.maximum, _values("separated")),
    "minimum": (S.minimum, np.minimum, _values("separated")),
}


def check_binary(name, sx, sy, seed, second_order=True):
    op, ref, make = BINARY[name]
    rng = np.random.default_rng(seed)
    xv, yv = make(rng, sx, sy)
    x, y = leaf(xv), leaf(yv)
    out = op(x, y)
    assert out.shape == np.broadcast_shapes(sx, sy)
    assert_close(out, ref(xv, yv), msg=f"{name} forward")
    gradcheck(op, x, y)
    if second_order:
        gradgradcheck(op, x, y)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(shapes=broadcast_pairs, seed=seeds)
def test_binary_op_gradients_on_any_broadcast(name, shapes, seed):
    sx, sy = shapes.input_shapes
    check_binary(name, sx, sy, seed)


# The patterns by name, so that a failure says which one broke.
PATTERNS = {
    "same shape": ((2, 3), (2, 3)),
    "leading axis added to y": ((2, 3), (3,)),
    "leading axis added to x": ((3,), (2, 3)),
    "two leading axes": ((4, 1, 3), (3,)),
    "size-1 axis in y": ((2, 3), (2, 1)),
    "size-1 axis in x": ((1, 3), (2, 3)),
    "both sides stretched": ((2, 1), (1, 3)),
    "both sides, different ranks": ((3, 1, 2), (4, 1)),
    "0-d y": ((2, 3), ()),
    "0-d x": ((), (2, 3)),
    "both 0-d": ((), ()),
    "size-1 against 0-d": ((1, 1), ()),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_binary_op_gradients_on_each_pattern(name, pattern):
    sx, sy = PATTERNS[pattern]
    check_binary(name, sx, sy, seed=len(pattern))


# --------------------------------------------------------------------------------------------
# Non-tensor operands: Python numbers and ndarrays on either side are constants
# --------------------------------------------------------------------------------------------
CONSTANT_OPERANDS = [
    ("t + 2", lambda t: t + 2, lambda a: a + 2),
    ("2 + t", lambda t: 2 + t, lambda a: 2 + a),
    ("t - 1.5", lambda t: t - 1.5, lambda a: a - 1.5),
    ("1.5 - t", lambda t: 1.5 - t, lambda a: 1.5 - a),
    ("3 * t", lambda t: 3 * t, lambda a: 3 * a),
    ("t * 3", lambda t: t * 3, lambda a: a * 3),
    ("1 / t", lambda t: 1 / t, lambda a: 1 / a),
    ("t / 4", lambda t: t / 4, lambda a: a / 4),
    ("t ** 2", lambda t: t**2, lambda a: a**2),
    ("t ** -1.5", lambda t: t**-1.5, lambda a: a**-1.5),
    ("2 ** t", lambda t: 2**t, lambda a: 2.0**a),
    ("array + t", lambda t: np.arange(3.0) + t, lambda a: np.arange(3.0) + a),
    ("t * array", lambda t: t * np.arange(3.0), lambda a: a * np.arange(3.0)),
    ("array / t", lambda t: np.arange(1.0, 4.0) / t, lambda a: np.arange(1.0, 4.0) / a),
    ("column array - t", lambda t: np.ones((2, 1)) - t, lambda a: np.ones((2, 1)) - a),
    ("maximum(t, 0.5)", lambda t: S.maximum(t, 0.5), lambda a: np.maximum(a, 0.5)),
    ("minimum(array, t)", lambda t: S.minimum(np.full(3, 0.8), t), lambda a: np.minimum(np.full(3, 0.8), a)),
]


@pytest.mark.parametrize("label, op, ref", CONSTANT_OPERANDS, ids=[c[0] for c in CONSTANT_OPERANDS])
def test_constant_operands(label, op, ref):
    t = leaf([0.6, 1.3, 2.1])
    assert_close(op(t), ref(t.data))
    gradcheck(op, t)
    gradgradcheck(op, t)


# --------------------------------------------------------------------------------------------
# where: a boolean condition that broadcasts too
# --------------------------------------------------------------------------------------------
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=3), seed=seeds)
def test_where_gradients_on_any_broadcast(shapes, seed):
    sc, sx, sy = shapes.input_shapes
    rng = np.random.default_rng(seed)
    cond = rng.random(sc) < 0.5
    x, y = leaf(uniform(rng, sx)), leaf(uniform(rng, sy))

    def op(a, b):
        return S.where(cond, a, b)

    assert_close(op(x, y), np.where(cond, x.data, y.data))
    gradcheck(op, x, y)
    gradgradcheck(op, x, y)


def test_where_sends_each_branch_its_share():
    cond = np.array([[True, False, True]])
    x = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = leaf(10.0)
    S.where(cond, x, y).sum().backward()
    assert_close(x.grad, np.broadcast_to(cond, (2, 3)).astype(float))
    assert_close(y.grad, 2.0)  # chosen twice (two rows) at the one False position
    assert_close(S.where(Tensor(cond), 1.0, 0.0), cond.astype(float))


# --------------------------------------------------------------------------------------------
# unbroadcast and broadcast_to: a sum and a copy, each the other's adjoint
# --------------------------------------------------------------------------------------------
@st.composite
def shape_and_target(draw):
    """A shape and a larger shape it broadcasts to."""
    shapes = draw(broadcast_pairs)
    target = shapes.result_shape
    small = draw(st.sampled_from(shapes.input_shapes))
    return small, target


@given(shape_and_target(), seeds)
def test_unbroadcast_is_the_adjoint_of_broadcast_to(pair, seed):
    """<broadcast_to(x), G> == <x, unbroadcast(G)> for all x, G: the defining property."""
    small, target = pair
    rng = np.random.default_rng(seed)
    x, g = rng.standard_normal(small), rng.standard_normal(target)
    summed = S.unbroadcast(Tensor(g), small)
    assert summed.shape == tuple(small)
    assert np.isclose(np.sum(np.broadcast_to(x, target) * g), np.sum(x * summed.data))


@given(shape_and_target(), seeds)
def test_unbroadcast_of_broadcast_counts_the_copies(pair, seed):
    small, target = pair
    x = np.random.default_rng(seed).standard_normal(small)
    copies = int(np.prod(target)) // int(np.prod(small))
    assert_close(S.unbroadcast(Tensor(np.broadcast_to(x, target)), small), copies * x)


def test_unbroadcast_by_hand():
    g = Tensor(np.arange(24.0).reshape(2, 3, 4))
    assert_close(S.unbroadcast(g, (4,)), g.data.sum(axis=(0, 1)))
    assert_close(S.unbroadcast(g, (3, 1)), g.data.sum(axis=(0, 2))[:, None])
    assert_close(S.unbroadcast(g, (1, 1, 4)), g.data.sum(axis=(0, 1), keepdims=True))
    assert_close(S.unbroadcast(g, ()), g.data.sum())
    assert_close(S.unbroadcast(g, [2, 3, 4]), g.data)
    assert S.unbroadcast(g, (2, 3, 4)) is g  # nothing to do: no copy, no node


@pytest.mark.parametrize("bad", [(2,), (3, 3), (2, 3, 1, 4), (1, 2, 3, 4), (5,)])
def test_unbroadcast_rejects_a_shape_that_could_not_have_broadcast(bad):
    g = Tensor(np.ones((2, 3, 4)))
    with pytest.raises(ValueError,
                       match=r"unbroadcast: a gradient of shape \(2, 3, 4\) cannot be summed back to shape"):
        S.unbroadcast(g, bad)


def test_unbroadcast_is_differentiable():
    g = leaf(np.arange(6.0).reshape(2, 3))
    gradcheck(lambda t: S.unbroadcast(t, (1, 3)), g)
    gradcheck(lambda t: S.unbroadcast(t, ()), g)


@given(shape_and_target(), seeds)
def test_broadcast_to_gradients(pair, seed):
    small, target = pair
    x = leaf(np.random.default_rng(seed).standard_normal(small))
    out = x.broadcast_to(target)
    assert out.shape == tuple(target)
    gradcheck(lambda t: t.broadcast_to(target), x)
    gradgradcheck(lambda t: t.broadcast_to(target) * t.broadcast_to(target), x)


def test_broadcast_to_error_names_both_shapes():
    with pytest.raises(ValueError, match=r"broadcast_to: cannot broadcast shape \(2, 3\) to \(3, 3\)"):
        Tensor(np.ones((2, 3))).broadcast_to((3, 3))


@pytest.mark.parametrize(
    "name, op, sx, sy",
    [
        ("add", lambda x, y: x + y, (2, 3), (4,)),
        ("sub", lambda x, y: x - y, (2, 3), (3, 2)),
        ("mul", lambda x, y: x * y, (5,), (4,)),
        ("div", lambda x, y: x / y, (2, 1, 3), (2, 4)),
        ("pow", lambda x, y: x**y, (2,), (3,)),
        ("maximum", S.maximum, (2,), (3,)),
        ("minimum", S.minimum, (2,), (3,)),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_shape_mismatch_names_the_op_and_both_shapes(name, op, sx, sy):
    with pytest.raises(ValueError) as info:
        op(Tensor(np.ones(sx)), Tensor(np.ones(sy)))
    message = str(info.value)
    assert message.startswith(f"{name}: shapes {sx} and {sy} cannot be broadcast together"), message


def test_where_mismatch_names_all_three_shapes():
    with pytest.raises(ValueError, match=r"where: condition \(5,\), x \(2, 3\) and y \(\)"):
        S.where(np.ones(5, dtype=bool), Tensor(np.ones((2, 3))), 0.0)


# --------------------------------------------------------------------------------------------
# matmul: broadcasting batch axes
# --------------------------------------------------------------------------------------------
@given(shapes=matmul_shapes, seed=seeds)
def test_matmul_gradients_in_every_numpy_case(shapes, seed):
    sa, sb = shapes.input_shapes
    rng = np.random.default_rng(seed)
    a, b = leaf(rng.standard_normal(sa)), leaf(rng.standard_normal(sb))
    out = a @ b
    assert out.shape == shapes.result_shape
    assert_close(out, np.matmul(a.data, b.data))
    gradcheck(lambda x, y: x @ y, a, b)
    gradgradcheck(lambda x, y: x @ y, a, b)


@pytest.mark.parametrize(
    "sa, sb",
    [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
     ((2, 3), (5, 3, 4)), ((3,), (5, 3, 4)), ((5, 2, 3), (3,)), ((5, 1, 2, 3), (4, 3, 2)),
     ((1, 2, 3), (4, 3, 2))],
    ids=lambda s: "x".join(map(str, s)) or "0d",
)
def test_matmul_gradients_by_case(sa, sb):
    rng = np.random.default_rng(0)
    a, b = leaf(rng.standard_normal(sa)), leaf(rng.standard_normal(sb))
    assert_close(a @ b, np.matmul(a.data, b.data))
    gradcheck(lambda x, y: x @ y, a, b)
    gradgradcheck(lambda x, y: x @ y, a, b)


def test_matmul_vector_dot_vector_by_hand():
    a, b = leaf([1.0, 2.0, 3.0]), leaf([4.0, 5.0, 6.0])
    y = a @ b
    assert y.shape == () and y.item() == 32.0
    y.backward()
    assert_close(a.grad, b.data)
    assert_close(b.grad, a.data)


def test_matmul_with_a_constant_matrix_on_either_side():
    x = leaf(np.ones((2, 3)))
    w = np.arange(12.0).reshape(3, 4)
    assert_close(x @ w, x.data @ w)
    assert_close(np.ones((4, 2)) @ x, np.ones((4, 2)) @ x.data)
    gradcheck(lambda t: (t @ w) + (np.ones((4, 2)) @ t).sum(), x)


@pytest.mark.parametrize(
    "sa, sb, pattern",
    [((2, 3), (2, 2), r"matmul: shapes \(2, 3\) and \(2, 2\) do not match \(inner dimensions 3 and 2\)"),
     ((3,), (4,), r"matmul: shapes \(3,\) and \(4,\) do not match"),
     ((2, 2, 3), (3, 3, 1), r"matmul: shapes \(2, 2, 3\) and \(3, 3, 1\)"),
     ((), (3,), r"matmul: operands must have at least 1 dimension, got shapes \(\) and \(3,\)")],
)
def test_matmul_errors(sa, sb, pattern):
    with pytest.raises(ValueError, match=pattern):
        Tensor(np.ones(sa)) @ Tensor(np.ones(sb))


# --------------------------------------------------------------------------------------------
# The seed article's mistake, fixed: broadcasting is undone on every axis, not only axis 0
# --------------------------------------------------------------------------------------------
def test_bias_broadcast_on_a_middle_axis():
    x = leaf(np.ones((2, 3, 4)))
    b = leaf(np.zeros((3, 1)))  # one bias per middle row, shared along the last axis and the batch
    (x * 2.0 + b).sum().backward()
    assert_close(b.grad, np.full((3, 1), 8.0))  # 2 batch entries x 4 columns
    assert_close(x.grad, np.full((2, 3, 4), 2.0))
