"""The ops beyond the chapters, the ones a PyTorch user reaches for: sin, cos, sign, floor, ceil,
round, std, prod, cumsum, einsum, conv_transpose2d, max_pool2d with dilation; and the AxisError
every op that takes an axis raises.

Values against NumPy or a loop written from the definition, first and second derivatives against
finite differences (float64), PyTorch's choices at the edge cases (std of a constant slice, prod
with zeros), and the error messages. PyTorch's own numbers for these ops are in
`tests/golden/golden_ops.py` (checked by `test_golden.py`).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import solutions as S
from solutions import Tensor, nn
from solutions.graph import toposort
from solutions.ops import kernels
from solutions.testing import assert_close, gradcheck, gradgradcheck

from engine_strategies import as_tuple, axes_for, distinct, leaf, nonscalar_shapes, seeds, shapes, uniform


# --------------------------------------------------------------------------------------------
# sin, cos and the piecewise-constant functions
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sin", "cos"])
@given(shape=shapes, seed=seeds)
def test_sin_cos(name, shape, seed):
    x = leaf(uniform(np.random.default_rng(seed), shape, -4, 4))
    op = getattr(S, name)
    assert_close(op(x), getattr(np, name)(x.data), msg=f"{name} forward")
    assert_close(getattr(x, name)(), getattr(np, name)(x.data), msg=f"Tensor.{name}")
    gradcheck(op, x)
    gradgradcheck(op, x)


def test_sin_second_derivative_is_minus_sin():
    x = leaf([0.3, -1.2, 2.0])
    (g,) = S.grad(S.sin(x).sum(), x, create_graph=True)
    (h,) = S.grad(g.sum(), x)
    assert_close(g, np.cos(x.data))
    assert_close(h, -np.sin(x.data))


STEPS = {"sign": np.sign, "floor": np.floor, "ceil": np.ceil, "round": np.round}


@pytest.mark.parametrize("name", sorted(STEPS))
@given(shape=shapes, seed=seeds)
def test_step_functions_have_zero_gradient(name, shape, seed):
    values = uniform(np.random.default_rng(seed), shape, -3, 3)
    x = leaf(np.where(np.abs(values) < 0.5, np.round(values * 2) / 2, values))  # some on the jumps too
    out = getattr(S, name)(x)
    assert_close(out, STEPS[name](x.data), msg=f"{name} forward")
    assert_close(getattr(x, name)(), STEPS[name](x.data), msg=f"Tensor.{name}")
    (g,) = S.grad((out * 3.0).sum(), x, create_graph=True)
    assert np.array_equal(g.data, np.zeros(x.shape)), f"{name}: the gradient must be exactly 0, also at the jumps"


def test_round_halves_to_even_and_decimals():
    x = Tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49])
    assert_close(S.round(x), [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 0.0])
    assert_close(Tensor([1.234, -5.678]).round(2), [1.23, -5.68])
    assert_close(round(Tensor([2.5, 3.5])), [2.0, 4.0])
    with pytest.raises(TypeError, match="round: decimals must be an int, got 1.5"):
        S.round(x, 1.5)


def test_step_functions_keep_float32():
    x = Tensor(np.array([0.4, -1.6], dtype=np.float32), requires_grad=True)
    for name in STEPS:
        out = getattr(S, name)(x)
        assert out.dtype == np.float32, name
        out.sum().backward()
        assert x.grad.dtype == np.float32


# --------------------------------------------------------------------------------------------
# std
# --------------------------------------------------------------------------------------------
@given(shape=shapes, seed=seeds, data=st.data())
def test_std_matches_numpy_and_gradchecks(shape, seed, data):
    axis = data.draw(axes_for(len(shape)), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    correction = data.draw(st.sampled_from([0, 1]), label="correction")
    x = leaf(uniform(np.random.default_rng(seed), shape))
    axes = as_tuple(axis, x.ndim)
    count = int(np.prod([x.shape[a] for a in (range(x.ndim) if axes is None else axes)]))
    if count - correction <= 0:
        return  # nan, tested below
    out = S.std(x, axis, keepdims, correction)
    assert_close(out, np.std(x.data, axis=axes, keepdims=keepdims, ddof=correction), msg="std forward")
    assert_close(x.std(axis, keepdims, correction), out, msg="Tensor.std")
    gradcheck(lambda t: S.std(t, axis, keepdims, correction), x)
    gradgradcheck(lambda t: S.std(t, axis, keepdims, correction), x)


def test_std_defaults_to_pytorchs_unbiased_estimate():
    x = Tensor([1.0, 2.0, 4.0, 7.0])
    assert_close(x.std(), np.std(x.data, ddof=1))
    assert_close(x.std(correction=0), np.std(x.data))
    assert_close(x.std(ddof=0), np.std(x.data))  # NumPy's name for the correction


def test_std_of_a_constant_slice_has_zero_gradient():
    # sqrt has no derivative at 0; PyTorch sends 0 there, not nan (golden case std_constant_slice).
    x = leaf([[3.0, 3.0, 3.0], [1.0, 2.0, 4.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = x.std(axis=1)
        (g,) = S.grad(out.sum(), x, create_graph=True)
        (h,) = S.grad(g.sum(), x)
    assert out.data[0] == 0.0
    assert np.array_equal(g.data[0], np.zeros(3)) and np.isfinite(g.data).all()
    assert np.isfinite(h.data).all()


def test_std_of_one_element():
    x = leaf([[2.0], [-1.0]])
    out = x.std(axis=1, correction=0)  # 0, and the gradient there is 0 (a constant slice)
    out.sum().backward()
    assert np.array_equal(out.data, [0.0, 0.0]) and np.array_equal(x.grad.data, [[0.0], [0.0]])
    x = leaf([[2.0], [-1.0]])
    out = x.std(axis=1)  # 0/0 with correction=1: nan, and a nan gradient, as PyTorch
    out.sum().backward()
    assert np.isnan(out.data).all() and np.isnan(x.grad.data).all()


def test_std_float32_and_integers():
    x = Tensor(np.array([1.0, 2.0, 4.0], dtype=np.float32), requires_grad=True)
    out = x.std()
    out.backward()
    assert out.dtype == np.float32 and x.grad.dtype == np.float32
    assert_close(S.std(Tensor(np.array([1, 2, 4]))), np.std([1.0, 2.0, 4.0], ddof=1))


# --------------------------------------------------------------------------------------------
# prod
# --------------------------------------------------------------------------------------------
@given(shape=shapes, seed=seeds, data=st.data())
def test_prod_matches_numpy_and_gradchecks(shape, seed, data):
    axis = data.draw(axes_for(len(shape)), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    x = leaf(uniform(np.random.default_rng(seed), shape, 0.5, 1.5) * np.random.default_rng(seed).choice([-1, 1], shape))
    out = S.prod(x, axis, keepdims)
    assert_close(out, np.prod(x.data, axis=as_tuple(axis, x.ndim), keepdims=keepdims), msg="prod forward")
    assert_close(x.prod(axis, keepdims), out, msg="Tensor.prod")
    gradcheck(lambda t: S.prod(t, axis, keepdims), x)
    gradgradcheck(lambda t: S.prod(t, axis, keepdims), x)


def _others(v: np.ndarray) -> np.ndarray:
    """prod's gradient by brute force: the product of all the other elements."""
    return np.array([np.prod(np.delete(v, i)) for i in range(v.size)])


def _pair_others(v: np.ndarray) -> np.ndarray:
    """prod's Hessian by brute force: H[i, k] = the product of all but elements i and k (0 on the diagonal)."""
    n = v.size
    return np.array([[0.0 if i == k else np.prod(np.delete(v, [i, k])) for k in range(n)] for i in range(n)])


@pytest.mark.parametrize("values", [
    [3.0, 1.0, 0.0, 2.0],         # one zero
    [0.0, 3.0, 0.0, 2.0],         # two zeros
    [0.0, 0.0, 0.0, 5.0],         # three zeros
    [1.5, -2.0, 0.5, 4.0],        # none
    [0.0],                        # alone
])
def test_prod_with_zeros_is_exact(values):
    v = np.array(values)
    x = leaf(v)
    with warnings.catch_warnings(), np.errstate(all="raise"):  # no 0/0, no division at all
        warnings.simplefilter("error")
        (g,) = S.grad(S.prod(x), x, create_graph=True)
        d = np.random.default_rng(0).standard_normal(v.size)
        (h,) = S.grad((g * d).sum(), x, allow_unused=True)
    assert np.array_equal(g.data, _others(v)), "the gradient must be exactly the product of the others"
    assert_close(np.zeros(v.size) if h is None else h, _pair_others(v) @ d, msg="second derivative")


def test_prod_of_an_empty_slice_is_one():
    x = leaf(np.ones((2, 0)))
    out = x.prod(axis=1)
    out.sum().backward()
    assert np.array_equal(out.data, [1.0, 1.0]) and x.grad.shape == (2, 0)


def test_prod_with_zeros_along_an_axis():
    v = np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 3.0, 0.0, 2.0], [1.0, -2.0, 0.5, 4.0]])
    x = leaf(v)
    S.prod(x, axis=1).sum().backward()
    assert np.array_equal(x.grad.data, np.stack([_others(row) for row in v]))
    x = leaf(v.T.copy())
    S.prod(x, axis=0, keepdims=True).sum().backward()
    assert np.array_equal(x.grad.data, np.stack([_others(row) for row in v]).T)


# --------------------------------------------------------------------------------------------
# cumsum
# --------------------------------------------------------------------------------------------
@given(shape=nonscalar_shapes, seed=seeds, data=st.data())
def test_cumsum(shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    x = leaf(uniform(np.random.default_rng(seed), shape))
    assert_close(S.cumsum(x, axis), np.cumsum(x.data, axis=axis), msg="cumsum forward")
    assert_close(x.cumsum(axis), np.cumsum(x.data, axis=axis), msg="Tensor.cumsum")
    gradcheck(lambda t: S.cumsum(t, axis), x)
    gradgradcheck(lambda t: S.cumsum(t, axis) ** 2, x)


def test_cumsum_none_flattens_and_0d():
    x = leaf(np.arange(6.0).reshape(2, 3))
    assert_close(x.cumsum(), np.cumsum(x.data))
    gradcheck(lambda t: t.cumsum(), x)
    s = leaf(2.5)
    assert_close(s.cumsum(0), 2.5)
    assert s.cumsum(0).shape == ()
    with pytest.raises(TypeError, match=r"cumsum: axis must be an int or None, got \(0, 1\)"):
        x.cumsum((0, 1))


# --------------------------------------------------------------------------------------------
# einsum
# --------------------------------------------------------------------------------------------
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),              # implicit output
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]),
    ("ij->ji", [(2, 3)]),
    ("ij->i", [(2, 3)]),                       # j only in the operand: the gradient copies along it
    ("ij->", [(2, 3)]),
    ("ii->i", [(3, 3)]),                       # diagonal
    ("ii->", [(3, 3)]),                        # trace
    ("ii", [(3, 3)]),                          # trace, implicit
    ("iij->ji", [(3, 3, 2)]),
    ("iji->j", [(3, 2, 3)]),
    ("ii,i->i", [(3, 3), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),  # '...' with broadcasting
    ("...i,...i->...", [(2, 3, 4), (3, 4)]),
    ("i,i->", [(1,), (3,)]),                   # a size-1 axis broadcasts
    ("ij,ij->ij", [(2, 3), (2, 3)]),
]


@pytest.mark.parametrize("eq, shapes_", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, shapes_):
    rng = np.random.default_rng(len(eq))
    xs = [leaf(uniform(rng, s)) for s in shapes_]
    out = S.einsum(eq, *xs)
    assert_close(out, np.einsum(eq, *[x.data for x in xs]), msg=f"einsum {eq}")
    gradcheck(lambda *ts: S.einsum(eq, *ts), *xs)
    gradgradcheck(lambda *ts: S.einsum(eq, *ts) ** 2, *xs)


def test_einsum_gradient_is_an_einsum():
    a, b = leaf(np.ones((2, 3))), leaf(np.ones((3, 4)))
    ga, gb = S.grad(S.einsum("ij,jk->ik", a, b).sum(), [a, b], create_graph=True)
    for g in (ga, gb):  # recorded: the gradient's graph is made of einsums (then a clone into .grad)
        assert [t.grad_fn.name for t in toposort([g]) if t.grad_fn is not None] == ["Einsum", "Clone"]
    assert_close(ga, np.full((2, 3), 4.0))


def test_einsum_trace_gradient_is_the_identity():
    x = leaf(np.arange(9.0).reshape(3, 3))
    S.einsum("ii->", x).backward()
    assert np.array_equal(x.grad.data, np.eye(3))


def test_einsum_sums_unnamed_ellipsis_axes_as_pytorch():
    # NumPy refuses '...i->i' on a 3-D operand; PyTorch sums the '...' axes away.
    x = leaf(uniform(np.random.default_rng(0), (2, 3, 4)))
    assert_close(S.einsum("...i->i", x), x.data.sum(axis=(0, 1)))
    gradcheck(lambda t: S.einsum("...i->i", t), x)


def test_einsum_operands_as_a_list():
    a, b = Tensor(np.ones((2, 3))), Tensor(np.ones((3,)))
    assert_close(S.einsum("ij,j->i", [a, b]), [3.0, 3.0])


@pytest.mark.parametrize("eq, shapes_, message", [
    ("ij,jk->ik", [(2, 3)], "subscripts 'ij,jk->ik' name 2 operands but 1 were given"),
    ("ij,jk->ik", [(2, 3), (4, 5)], "index 'j' has size 3 in one operand and 4 in another"),
    ("ij->ii", [(2, 2)], "output subscripts 'ii' repeat an index"),
    ("ij->k", [(2, 2)], "output index 'k' appears in no operand"),
    ("i1->i", [(2, 2)], "invalid subscripts"),
    ("ijk->i", [(2, 2)], r"operand subscripts 'ijk' do not fit an operand of shape \(2, 2\)"),
    ("ii->i", [(2, 3)], r"index 'i' repeats in one operand with different sizes \[2, 3\]"),
])
def test_einsum_errors(eq, shapes_, message):
    with pytest.raises(ValueError, match="einsum: " + message):
        S.einsum(eq, *[Tensor(np.ones(s)) for s in shapes_])


# --------------------------------------------------------------------------------------------
# conv_transpose2d
# --------------------------------------------------------------------------------------------
def conv_transpose_loops(x, w, b, stride, padding, output_padding, groups, dilation):
    """The definition, one input pixel at a time: each pixel adds its kernel, scaled, to the output."""
    (sh, sw), (ph, pw), (oh_, ow_), (dh, dw) = [(v, v) if isinstance(v, int) else v
                                               for v in (stride, padding, output_padding, dilation)]
    N, C, H, W = x.shape
    _, Kg, KH, KW = w.shape
    Cg = C // groups
    OH = (H - 1) * sh - 2 * ph + dh * (KH - 1) + oh_ + 1
    OW = (W - 1) * sw - 2 * pw + dw * (KW - 1) + ow_ + 1
    full = np.zeros((N, Kg * groups, OH + 2 * ph + KH * dh + sh, OW + 2 * pw + KW * dw + sw))
    for n in range(N):
        for c in range(C):
            g = c // Cg
            for i in range(H):
                for j in range(W):
                    for kh in range(KH):
                        for kw in range(KW):
                            r, q = i * sh + kh * dh, j * sw + kw * dw
                            full[n, g * Kg:(g + 1) * Kg, r, q] += x[n, c, i, j] * w[c, :, kh, kw]
    out = full[:, :, ph:ph + OH, pw:pw + OW]
    return out if b is None else out + b.reshape(1, -1, 1, 1)


CONV_T = [
    # x shape, weight shape (C_in, C_out/G, KH, KW), stride, padding, output_padding, groups, dilation
    ((2, 3, 4, 5), (3, 2, 3, 3), 1, 0, 0, 1, 1),
    ((2, 3, 4, 4), (3, 2, 3, 3), 2, 1, 1, 1, 1),
    ((1, 4, 3, 4), (4, 3, 2, 3), 2, 0, 1, 2, 1),
    ((1, 2, 4, 3), (2, 2, 3, 2), 1, 1, 1, 1, 2),       # output_padding allowed by the dilation
    ((1, 2, 3, 4), (2, 3, 2, 3), (2, 3), (1, 0), (1, 2), 1, (1, 2)),
    ((1, 2, 3, 3), (2, 2, 2, 2), 3, 0, 2, 1, 1),       # output_padding beyond the padding: zero rows
    ((1, 4, 2, 2), (4, 1, 3, 3), 2, 2, 0, 4, 1),       # depthwise, padding crops
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "teaching"])
@pytest.mark.parametrize("case", CONV_T, ids=[f"c{i}" for i in range(len(CONV_T))])
def test_conv_transpose2d(case, fast, bias):
    if fast and not kernels.fast_available():
        pytest.skip("no fast kernels in this engine")
    sx, sw, s, p, op, g, d = case
    rng = np.random.default_rng(sum(sx) + sum(sw))
    x, w = leaf(uniform(rng, sx)), leaf(uniform(rng, sw))
    b = leaf(uniform(rng, (sw[1] * g,))) if bias else None
    args = (x, w) if b is None else (x, w, b)
    was = kernels.fast_enabled()
    kernels.use_fast(fast)
    try:
        out = S.conv_transpose2d(x, w, b, s, p, op, g, d)
        want = conv_transpose_loops(x.data, w.data, None if b is None else b.data, s, p, op, g, d)
        assert_close(out, want, msg="conv_transpose2d forward")
        gradcheck(lambda *ts: S.conv_transpose2d(ts[0], ts[1], ts[2] if bias else None, s, p, op, g, d), *args)
        gradgradcheck(lambda *ts: S.conv_transpose2d(ts[0], ts[1], ts[2] if bias else None, s, p, op, g, d), *args)
    finally:
        kernels.use_fast(was)


def test_conv_transpose2d_is_the_adjoint_of_conv2d():
    # <conv2d(y, w), x> = <y, conv_transpose2d(x, w)> for every x, y: the transposed convolution.
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3, 3, 3))
    x = rng.standard_normal((2, 4, 3, 3))  # conv2d's output shape for y below
    y = rng.standard_normal((2, 3, 6, 6))
    z = S.conv2d(Tensor(y), Tensor(w), stride=2, padding=1).data
    assert z.shape == x.shape
    back = S.conv_transpose2d(Tensor(x), Tensor(w), stride=2, padding=1, output_padding=1).data
    assert back.shape == y.shape
    assert_close(np.sum(z * x), np.sum(y * back))


@pytest.mark.parametrize("kwargs, message", [
    (dict(stride=2, output_padding=2),
     r"output_padding \(2, 2\) must be smaller than either stride \(2, 2\) or dilation"),
    (dict(stride=1, dilation=2, output_padding=2), r"output_padding \(2, 2\) must be smaller than either stride"),
    (dict(output_padding=-1), "padding and output_padding must be >= 0"),
    (dict(groups=3), "groups=3 does not divide the 4 input channels"),
    (dict(padding=5), "the output would have size"),
])
def test_conv_transpose2d_errors(kwargs, message):
    x, w = Tensor(np.ones((1, 4, 3, 3))), Tensor(np.ones((4, 2, 3, 3)))
    with pytest.raises(ValueError, match="conv_transpose2d: " + message):
        S.conv_transpose2d(x, w, **kwargs)


def test_conv_transpose2d_shape_errors():
    with pytest.raises(ValueError, match=r"conv_transpose2d: input has 3 channels but the weight \(4, 2, 3, 3\) "
                                         "expects 4"):
        S.conv_transpose2d(Tensor(np.ones((1, 3, 3, 3))), Tensor(np.ones((4, 2, 3, 3))))
    with pytest.raises(ValueError, match=r"conv_transpose2d: bias has shape \(3,\) but the output has 2 channels"):
        S.conv_transpose2d(Tensor(np.ones((1, 4, 3, 3))), Tensor(np.ones((4, 2, 3, 3))), Tensor(np.ones(3)))
    with pytest.raises(ValueError, match="conv_transpose2d: expected a 4-D input .* add a batch axis"):
        S.conv_transpose2d(Tensor(np.ones((4, 3, 3))), Tensor(np.ones((4, 2, 3, 3))))


def test_conv_transpose2d_layer():
    layer = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, rng=0, dtype=np.float64)
    assert layer.weight.shape == (4, 3, 3, 3) and layer.bias.shape == (6,)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 4, 5, 5)))
    out = layer(x)
    assert out.shape == (2, 6, 10, 10)
    assert_close(out, S.conv_transpose2d(x, layer.weight, layer.bias, 2, 1, 1, 2))
    assert "output_padding=(1, 1)" in repr(layer)
    bound = 1 / np.sqrt(3 * 3 * 3)  # PyTorch's fan_in for this layout: C_out/G * KH * KW
    assert np.abs(layer.bias.data).max() <= bound
    with pytest.raises(ValueError, match="ConvTranspose2d: output_padding"):
        nn.ConvTranspose2d(2, 2, 3, stride=1, output_padding=1)
    assert S.nn.functional.conv_transpose2d is S.conv_transpose2d


# --------------------------------------------------------------------------------------------
# max_pool2d with dilation
# --------------------------------------------------------------------------------------------
def max_pool_loops(x, kernel, stride, padding, dilation):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = [(v, v) if isinstance(v, int) else v
                                               for v in (kernel, stride, padding, dilation)]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-np.inf)
    N, C, Hp, Wp = xp.shape
    OH, OW = (Hp - dh * (kh - 1) - 1) // sh + 1, (Wp - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((N, C, OH, OW))
    for i in range(OH):
        for j in range(OW):
            win = xp[:, :, i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]
            out[:, :, i, j] = win.max(axis=(2, 3))
    return out


POOLS = [
    ((2, 2, 7, 7), 3, 1, 0, 2),
    ((1, 2, 8, 9), 3, 2, 1, 2),
    ((1, 1, 9, 8), (2, 3), (1, 2), (1, 0), (3, 2)),
    ((1, 3, 6, 6), 2, None, 1, (2, 1)),
]


@pytest.mark.parametrize("case", POOLS, ids=[f"p{i}" for i in range(len(POOLS))])
def test_max_pool2d_dilation(case):
    sx, k, s, p, d = case
    x = leaf(distinct(np.random.default_rng(sum(sx)), sx))
    out = S.max_pool2d(x, k, s, p, d)
    assert out.grad_fn.name == "MaxPool2dDilated"
    assert_close(out, max_pool_loops(x.data, k, k if s is None else s, p, d), msg="dilated max pool forward")
    gradcheck(lambda t: S.max_pool2d(t, k, s, p, d), x)
    gradgradcheck(lambda t: S.max_pool2d(t, k, s, p, d) ** 2, x)
    assert_close(nn.MaxPool2d(k, s, p, dilation=d)(x), out)


def test_max_pool2d_dilation_one_is_the_a03_path():
    x = leaf(distinct(np.random.default_rng(0), (1, 2, 6, 6)))
    assert S.max_pool2d(x, 2).grad_fn.name == "MaxPool2d"
    assert S.max_pool2d(x, 2, dilation=1).grad_fn.name == "MaxPool2d"
    assert_close(S.max_pool2d(x, 3, 1, 1, dilation=1), max_pool_loops(x.data, 3, 1, 1, 1))


def test_max_pool2d_dilation_sends_the_gradient_to_the_first_maximum_and_keeps_nan():
    x = leaf(np.array([[[[1.0, 5.0, 5.0, 0.0, 5.0]]]]))
    out = S.max_pool2d(x, (1, 2), stride=1, dilation=(1, 2))  # windows (0, 2), (1, 3), (2, 4)
    out.sum().backward()
    assert_close(out, [[[[5.0, 5.0, 5.0]]]])
    assert_close(x.grad, [[[[0.0, 1.0, 2.0, 0.0, 0.0]]]])  # the tie (2, 4) goes to 2, the first
    y = S.max_pool2d(Tensor(np.array([[[[1.0, np.nan, 3.0, 0.0]]]])), (1, 2), stride=1, dilation=(1, 2))
    assert np.isnan(y.data[0, 0, 0, 1]) and y.data[0, 0, 0, 0] == 3.0


def test_max_pool2d_dilation_errors():
    x = Tensor(np.ones((1, 1, 5, 5)))
    with pytest.raises(ValueError, match=r"max_pool2d: kernel \(3, 3\) with dilation \(3, 3\) spans \(7, 7\), "
                                         "larger than"):
        S.max_pool2d(x, 3, dilation=3)
    with pytest.raises(ValueError, match="max_pool2d: dilation must be positive, got 0"):
        S.max_pool2d(x, 3, dilation=0)


# --------------------------------------------------------------------------------------------
# An axis out of range: NumPy's AxisError (a ValueError and an IndexError) naming op, axis, ndim
# --------------------------------------------------------------------------------------------
AXIS_OPS = {
    "sum": lambda x: x.sum(axis=2),
    "mean": lambda x: x.mean(axis=-3),
    "max": lambda x: x.max(axis=2),
    "min": lambda x: x.min(axis=(0, 2)),
    "var": lambda x: x.var(axis=2),
    "std": lambda x: x.std(axis=2),
    "prod": lambda x: x.prod(axis=2),
    "cumsum": lambda x: x.cumsum(2),
    "logsumexp": lambda x: x.logsumexp(axis=2),
    "softmax": lambda x: x.softmax(2),
    "log_softmax": lambda x: x.log_softmax(-3),
    "argmax": lambda x: x.argmax(axis=2),
    "argmin": lambda x: x.argmin(axis=2),
    "flip": lambda x: x.flip(2),
    "squeeze": lambda x: x.squeeze(2),
    "swapaxes": lambda x: x.swapaxes(0, 2),
    "flatten": lambda x: x.flatten(2),
    "concatenate": lambda x: S.concatenate([x, x], axis=2),
    "stack": lambda x: S.stack([x, x], axis=3),
    "expand_dims": lambda x: x.expand_dims(3),
    "transpose": lambda x: x.transpose((0, 2)),
}


@pytest.mark.parametrize("op", sorted(AXIS_OPS))
def test_axis_out_of_range_is_an_axis_error(op):
    x = Tensor(np.ones((2, 3)))
    with pytest.raises(np.exceptions.AxisError) as info:
        AXIS_OPS[op](x)
    assert isinstance(info.value, ValueError) and isinstance(info.value, IndexError)
    message = str(info.value)
    assert message.startswith(f"{op}: "), message
    assert "out of range" in message and ("2 dimensions" in message or "(2, 3)" in message), message
