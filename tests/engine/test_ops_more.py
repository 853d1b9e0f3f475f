"""The ops beyond the chapters, the ones a PyTorch user reaches for: sin, cos, sign, floor, ceil,
round, std, prod, cumsum, einsum, conv_transpose2d, max_pool2d with dilation; then tan, sinh, cosh,
the inverse trigonometric functions, log1p, expm1, erf, trunc, square, reciprocal, rsqrt; the
activations leaky_relu, elu, softplus, hardtanh, relu6, silu, gelu (and their layers); roll, tril,
triu, take, take_along_axis, gather, repeat, tile, split, chunk; layer_norm and LayerNorm; and the
AxisError every op that takes an axis raises.

Values against NumPy or a loop written from the definition, first and second derivatives against
finite differences (float64), PyTorch's choices at the edge cases (std of a constant slice, prod
with zeros), and the error messages. PyTorch's own numbers for these ops are in
`tests/golden/golden_ops.py` (checked by `test_golden.py`).
"""
from __future__ import annotations

import re
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

from support.strategies import as_tuple, axes_for, distinct, leaf, nonscalar_shapes, seeds, shapes, uniform


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


STEPS = {"sign": np.sign, "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc}


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
    "roll": lambda x: x.roll(1, 2),
    "take": lambda x: x.take([0], axis=2),
    "take_along_axis": lambda x: S.take_along_axis(x, np.zeros((2, 1), dtype=int), 2),
    "gather": lambda x: x.gather(-3, np.zeros((2, 1), dtype=int)),
    "repeat": lambda x: x.repeat(2, axis=2),
    "split": lambda x: x.split(2, axis=2),
    "chunk": lambda x: x.chunk(2, axis=-3),
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



# --------------------------------------------------------------------------------------------
# More elementwise math: values against NumPy, first and second derivatives numerically
# --------------------------------------------------------------------------------------------
def _erf(v: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf)(v)


MATH = {
    # name: (reference, low, high)
    "tan": (np.tan, -1.2, 1.2),
    "sinh": (np.sinh, -3, 3),
    "cosh": (np.cosh, -3, 3),
    "arcsin": (np.arcsin, -0.9, 0.9),
    "arccos": (np.arccos, -0.9, 0.9),
    "arctan": (np.arctan, -3, 3),
    "log1p": (np.log1p, -0.9, 3),
    "expm1": (np.expm1, -3, 3),
    "erf": (_erf, -3, 3),
    "square": (np.square, -2, 2),
    "rsqrt": (lambda v: 1 / np.sqrt(v), 0.5, 2),
}


@pytest.mark.parametrize("name", sorted(MATH))
@given(shape=shapes, seed=seeds)
def test_more_math(name, shape, seed):
    reference, low, high = MATH[name]
    x = leaf(uniform(np.random.default_rng(seed), shape, low, high))
    assert_close(getattr(S, name)(x), reference(x.data), msg=f"{name} forward")
    assert_close(getattr(x, name)(), reference(x.data), msg=f"Tensor.{name}")
    gradcheck(getattr(S, name), x)
    gradgradcheck(getattr(S, name), x)


@given(shape=shapes, seed=seeds)
def test_reciprocal(shape, seed):
    from support.strategies import nonzero

    x = leaf(nonzero(np.random.default_rng(seed), shape))
    assert_close(x.reciprocal(), 1 / x.data)
    gradcheck(S.reciprocal, x)
    gradgradcheck(S.reciprocal, x)


def test_short_names_of_the_inverse_functions_are_the_same_functions():
    assert S.asin is S.arcsin and S.acos is S.arccos and S.atan is S.arctan
    x = Tensor([0.25])
    assert_close(x.atan(), np.arctan([0.25]))


def test_log1p_and_expm1_are_exact_for_tiny_values():
    x = leaf([1e-20, -1e-18])
    assert np.array_equal(S.log1p(x).data, x.data) and np.array_equal(S.expm1(x).data, x.data)
    (g,) = S.grad(S.log1p(x).sum(), x)
    assert_close(g, [1.0, 1.0])


def test_erf_without_scipy_gives_the_same_values(monkeypatch):
    import sys

    from solutions.ops.math import _erf_function

    x = Tensor(np.linspace(-3, 3, 13, dtype=np.float32))
    with_scipy = S.erf(x)
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # importing it now raises ImportError
    _erf_function.cache_clear()  # the lookup is made once per process: make it again
    try:
        without = S.erf(x)
    finally:
        _erf_function.cache_clear()
    assert without.dtype == np.float32
    assert_close(without, with_scipy.data, rtol=1e-6, atol=1e-7)
    assert S.erf(Tensor(np.array([0, 1]))).dtype == np.float64  # integers give floats


# --------------------------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------------------------
def _gelu(v):
    return v * 0.5 * (1 + _erf(v / np.sqrt(2)))


ACTIVATIONS = {
    # name: (engine function, reference, kinks to keep away from)
    "leaky_relu": (lambda t: S.leaky_relu(t, 0.2), lambda v: np.where(v > 0, v, 0.2 * v), [0.0]),
    "elu": (lambda t: S.elu(t, 1.5), lambda v: np.where(v > 0, v, 1.5 * np.expm1(v)), [0.0]),
    "softplus": (S.softplus, lambda v: np.log1p(np.exp(v)), []),
    "softplus_beta": (lambda t: S.softplus(t, 2.0, 3.0),
                      lambda v: np.where(2 * v > 3, v, np.log1p(np.exp(2 * v)) / 2), [1.5]),
    "hardtanh": (lambda t: S.hardtanh(t, -0.5, 1.0), lambda v: np.clip(v, -0.5, 1.0), [-0.5, 1.0]),
    "relu6": (S.relu6, lambda v: np.clip(v, 0, 6), [0.0, 6.0]),
    "silu": (S.silu, lambda v: v / (1 + np.exp(-v)), []),
    "gelu": (S.gelu, _gelu, []),
    "gelu_tanh": (lambda t: S.gelu(t, "tanh"),
                  lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3))), []),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@given(shape=shapes, seed=seeds)
def test_activations(name, shape, seed):
    from support.strategies import avoiding

    fn, reference, kinks = ACTIVATIONS[name]
    x = leaf(avoiding(uniform(np.random.default_rng(seed), shape, -4, 7), kinks))
    assert_close(fn(x), reference(x.data), msg=f"{name} forward")
    gradcheck(fn, x)
    gradgradcheck(fn, x)


def test_activation_derivatives_at_their_kinks_are_pytorchs():
    def slope(fn, at):
        x = leaf(at)
        (g,) = S.grad(fn(x).sum(), x)
        return g.data

    assert_close(slope(lambda t: S.leaky_relu(t, 0.2), [0.0]), [0.2])
    assert_close(slope(lambda t: S.elu(t, 1.5), [0.0]), [1.5])
    assert_close(slope(lambda t: S.hardtanh(t, -0.5, 1.0), [-0.5, 1.0, 0.0]), [0.0, 0.0, 1.0])
    assert_close(slope(S.relu6, [0.0, 6.0, 3.0]), [0.0, 0.0, 1.0])
    assert_close(slope(S.softplus, [0.0]), [0.5])


def test_activations_do_not_overflow_in_the_branch_they_do_not_take():
    x = leaf([-1000.0, -30.0, 0.0, 30.0, 1000.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow in exp would be a RuntimeWarning
        for fn in (S.elu, S.softplus, S.silu, S.gelu, lambda t: S.gelu(t, "tanh"), lambda t: S.softplus(t, 3.0, 5.0)):
            out = fn(x)
            (g,) = S.grad(out.sum(), x, create_graph=True)
            (h,) = S.grad(g.sum(), x)
            assert np.isfinite(out.data).all() and np.isfinite(g.data).all() and np.isfinite(h.data).all()
    assert_close(S.softplus(x).data[-1], 1000.0)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_keep_float32(name):
    fn = ACTIVATIONS[name][0]
    x = Tensor(np.array([-1.5, 0.25, 2.0], dtype=np.float32), requires_grad=True)
    out = fn(x)
    out.sum().backward()
    assert out.dtype == np.float32 and x.grad.dtype == np.float32, name


@pytest.mark.parametrize("call, message", [
    (lambda x: S.softplus(x, beta=0), "softplus: beta must be positive, got 0"),
    (lambda x: S.hardtanh(x, 1.0, -1.0), "hardtanh: min_val (1.0) must not exceed max_val (-1.0)"),
    (lambda x: S.gelu(x, "erf"), "gelu: approximate must be 'none' or 'tanh', got 'erf'"),
    (lambda x: nn.GELU("fast"), "GELU: approximate must be 'none' or 'tanh', got 'fast'"),
])
def test_activation_errors(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call(Tensor([1.0]))


def test_activation_layers_are_their_functions():
    x = Tensor(np.linspace(-3, 8, 12))
    layers = {
        "LeakyReLU(negative_slope=0.2)": (nn.LeakyReLU(0.2), S.leaky_relu(x, 0.2)),
        "ELU(alpha=1.5)": (nn.ELU(1.5), S.elu(x, 1.5)),
        "Softplus(beta=2.0, threshold=3.0)": (nn.Softplus(2.0, 3.0), S.softplus(x, 2.0, 3.0)),
        "Hardtanh(min_val=-0.5, max_val=1.0)": (nn.Hardtanh(-0.5, 1.0), S.hardtanh(x, -0.5, 1.0)),
        "ReLU6(min_val=0.0, max_val=6.0)": (nn.ReLU6(), S.relu6(x)),
        "SiLU()": (nn.SiLU(), S.silu(x)),
        "GELU(approximate='tanh')": (nn.GELU("tanh"), S.gelu(x, "tanh")),
    }
    for text, (layer, expected) in layers.items():
        assert repr(layer) == text
        assert_close(layer(x), expected.data, msg=text)
        assert not list(layer.parameters())
    assert nn.functional.gelu is S.gelu and nn.functional.leaky_relu is S.leaky_relu


# --------------------------------------------------------------------------------------------
# Selecting and rearranging: roll, tril/triu, take, take_along_axis, gather, repeat, tile, split, chunk
# --------------------------------------------------------------------------------------------
def _grad_of(fn, x):
    """The function's gradient with a fixed random upstream gradient, as an array."""
    out = fn(x)
    g_out = np.random.default_rng(3).standard_normal(out.shape)
    (g,) = S.grad(out, x, grad_outputs=g_out)
    return g.data, g_out


@given(shape=nonscalar_shapes, seed=seeds, data=st.data())
def test_roll(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    shift = data.draw(st.integers(-5, 5), label="shift")
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)), label="axis")
    assert_close(x.roll(shift, axis), np.roll(x.data, shift, axis))
    gradcheck(lambda t: S.roll(t, shift, axis) ** 2, x)
    g, g_out = _grad_of(lambda t: S.roll(t, shift, axis), x)
    assert_close(g, np.roll(g_out, -shift, axis))  # the adjoint of a roll rolls back


def test_roll_several_axes():
    x = Tensor(np.arange(24.0).reshape(2, 3, 4))
    assert_close(S.roll(x, (1, -2), (0, 2)), np.roll(x.data, (1, -2), (0, 2)))
    with pytest.raises(ValueError, match=re.escape("roll: 2 shift(s) (1, 2) for 1 axis/axes 0")):
        S.roll(x, (1, 2), 0)


@pytest.mark.parametrize("name", ["tril", "triu"])
@given(seed=seeds, data=st.data())
def test_triangles(name, seed, data):
    shape = data.draw(st.sampled_from([(3, 3), (2, 4), (4, 2), (2, 3, 3)]), label="shape")
    k = data.draw(st.integers(-3, 3), label="k")
    x = leaf(uniform(np.random.default_rng(seed), shape))
    assert_close(getattr(S, name)(x, k), getattr(np, name)(x.data, k))
    assert_close(getattr(x, name)(k), getattr(np, name)(x.data, k))
    g, g_out = _grad_of(lambda t: getattr(S, name)(t, k), x)
    assert_close(g, getattr(np, name)(g_out, k))
    gradcheck(lambda t: getattr(S, name)(t, k) ** 2, x)


def test_triangles_keep_inf_out_of_the_zeroed_part():
    x = Tensor([[1.0, np.inf], [2.0, 3.0]])
    assert np.array_equal(S.tril(x).data, [[1.0, 0.0], [2.0, 3.0]])  # a mask product would give nan
    with pytest.raises(ValueError, match=re.escape("tril: needs a tensor with at least 2 dimensions")):
        S.tril(Tensor([1.0, 2.0]))


def test_take_sums_the_gradient_of_a_repeated_index():
    x = leaf(np.arange(12.0).reshape(3, 4))
    out = x.take([3, 0, 3, 3], axis=1)
    assert_close(out, np.take(x.data, [3, 0, 3, 3], axis=1))
    out.sum().backward()
    assert_close(x.grad, np.tile([1.0, 0.0, 0.0, 3.0], (3, 1)))
    assert_close(S.take(x, [[0, 11], [-1, 5]]), np.take(x.data, [[0, 11], [-1, 5]]))  # flattened, negatives


@given(seed=seeds, data=st.data())
def test_take_along_axis_and_gather(seed, data):
    shape = data.draw(st.sampled_from([(3, 4), (2, 3, 4), (5,)]), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    rng = np.random.default_rng(seed)
    x = leaf(uniform(rng, shape))
    idx_shape = tuple(rng.integers(1, 4) if d == axis % len(shape) else n for d, n in enumerate(shape))
    idx = rng.integers(-shape[axis], shape[axis], idx_shape)
    expected = np.take_along_axis(x.data, idx, axis)
    assert_close(S.take_along_axis(x, idx, axis), expected)
    assert_close(x.gather(axis, idx), expected)
    g, g_out = _grad_of(lambda t: S.gather(t, axis, idx), x)
    expected_grad = np.zeros(shape)
    for pos in np.ndindex(*idx.shape):  # the definition: out[pos] = x[pos with idx[pos] on axis]
        source = list(pos)
        source[axis % len(shape)] = idx[pos]
        expected_grad[tuple(source)] += g_out[pos]
    assert_close(g, expected_grad)
    gradcheck(lambda t: S.gather(t, axis, idx) ** 2, x)


def test_gather_reads_the_leading_part_with_a_smaller_index():
    x = Tensor(np.arange(15.0).reshape(3, 5))
    assert_close(S.gather(x, 0, np.array([[2, 0], [0, 0]])), [[10.0, 1.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match=re.escape("gather: index of shape (4, 1) is larger than the tensor's "
                                                   "shape (3, 5) off dim 1")):
        S.gather(x, 1, np.zeros((4, 1), dtype=int))


@pytest.mark.parametrize("call, error, message", [
    (lambda x: x.take([4], axis=1), IndexError, "take: index 4 is out of bounds for axis 1 with size 4"),
    (lambda x: x.take([0.5]), TypeError, "take: indices must be integers, got dtype float64"),
    (lambda x: x.gather(1, np.array([[0], [9], [0]])), IndexError,
     "gather: index 9 is out of bounds for axis 1 with size 4"),
    (lambda x: x.gather(1, np.array([0, 1])), ValueError, "gather: the index has 1 dimensions, the tensor 2"),
    (lambda x: S.take_along_axis(x, np.zeros((2, 2), dtype=int), 1), ValueError,
     "take_along_axis: indices of shape (2, 2) do not broadcast against the tensor's shape (3, 4) off axis 1"),
    (lambda x: x.repeat([1, 2], axis=0), ValueError, "repeat: 2 repeat counts for an axis of size 3"),
    (lambda x: x.repeat(-1), ValueError, "repeat: repeats must be non-negative integers, got -1"),
    (lambda x: x.tile((2, -1)), ValueError, "tile: reps must be non-negative integers, got (2, -1)"),
    (lambda x: x.split(3, axis=1), ValueError, "split: axis 1 of size 4 cannot be split into 3 equal parts"),
    (lambda x: x.chunk(0), ValueError, "chunk: chunks must be a positive int, got 0"),
    (lambda x: x.split(2.5), TypeError, "split: indices_or_sections must be an int or a list of ints, got 2.5"),
    (lambda x: S.take_along_axis(x.sum(), np.array(0), 0), ValueError,
     "take_along_axis: a 0-d tensor has no axis to select along"),
    (lambda x: S.gather(x.sum(), 0, np.array(0)), ValueError, "gather: a 0-d tensor has no axis to select along"),
])
def test_selection_errors_name_the_op(call, error, message):
    x = Tensor(np.ones((3, 4)))
    with pytest.raises(error, match=re.escape(message)):
        call(x)


@given(shape=shapes, seed=seeds, data=st.data())
def test_repeat_and_tile(shape, seed, data):
    rng = np.random.default_rng(seed)
    x = leaf(uniform(rng, shape))
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)) if shape else st.none())
    n = x.data.size if axis is None else shape[axis]
    counts = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    assert_close(x.repeat(counts, axis), np.repeat(x.data, counts, axis))
    gradcheck(lambda t: S.repeat(t, counts, axis) ** 2, x)
    reps = tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=4), label="reps"))
    assert_close(x.tile(reps), np.tile(x.data, reps))
    g, g_out = _grad_of(lambda t: S.tile(t, reps), x)
    d = max(x.ndim, len(reps))
    full = (1,) * (d - len(reps)) + reps
    blocks = g_out.reshape(tuple(v for r, m in zip(full, (1,) * (d - x.ndim) + shape, strict=True) for v in (r, m)))
    assert_close(g, blocks.sum(axis=tuple(range(0, 2 * d, 2))).reshape(shape))  # the copies' gradients summed


@given(seed=seeds, data=st.data())
def test_split_and_chunk(seed, data):
    shape = data.draw(st.sampled_from([(6,), (4, 6), (2, 7, 3)]), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    x = leaf(uniform(np.random.default_rng(seed), shape))
    n = shape[axis]
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3), label="cuts"))
    parts = x.split(cuts, axis)
    for got, want in zip(parts, np.split(x.data, cuts, axis), strict=True):
        assert_close(got, want)
    sections = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]), label="sections")
    assert [p.shape for p in S.split(x, sections, axis)] == [a.shape for a in np.split(x.data, sections, axis)]
    chunks = data.draw(st.integers(1, n + 1), label="chunks")
    pieces = x.chunk(chunks, axis)
    size = -(-n // chunks)
    assert [p.shape[axis] for p in pieces] == [min(size, n - i) for i in range(0, n, size)]  # PyTorch's sizes
    assert_close(S.concatenate(pieces, axis), x.data)
    weighted = lambda t: S.concatenate([p * (i + 1.0) for i, p in enumerate(S.chunk(t, chunks, axis))], axis)  # noqa: E731
    gradcheck(weighted, x)


def test_chunk_sizes_are_pytorchs():
    assert [p.shape[0] for p in Tensor(np.zeros(7)).chunk(3)] == [3, 3, 1]
    assert [p.shape[0] for p in Tensor(np.zeros(4)).chunk(3)] == [2, 2]  # fewer parts than asked, as PyTorch
    assert [p.shape[0] for p in Tensor(np.zeros(2)).chunk(5)] == [1, 1]


# --------------------------------------------------------------------------------------------
# layer_norm and LayerNorm
# --------------------------------------------------------------------------------------------
@given(seed=seeds, data=st.data())
@pytest.mark.slow
def test_layer_norm(seed, data):
    shape = data.draw(st.sampled_from([(2, 3), (2, 3, 4), (4,)]), label="shape")
    k = data.draw(st.integers(1, len(shape)), label="axes normalized")
    norm = shape[len(shape) - k:]
    rng = np.random.default_rng(seed)
    x, w, b = leaf(uniform(rng, shape)), leaf(uniform(rng, norm)), leaf(uniform(rng, norm))
    axes = tuple(range(len(shape) - k, len(shape)))
    mean, var = x.data.mean(axis=axes, keepdims=True), x.data.var(axis=axes, keepdims=True)
    expected = (x.data - mean) / np.sqrt(var + 1e-5) * w.data + b.data
    assert_close(nn.functional.layer_norm(x, norm, w, b), expected)
    gradcheck(lambda a, c, d: nn.functional.layer_norm(a, norm, c, d), x, w, b)
    gradgradcheck(lambda a, c, d: nn.functional.layer_norm(a, norm, c, d), x, w, b)


def test_layer_norm_layer():
    layer = nn.LayerNorm((3, 4), dtype=np.float64)
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
    assert repr(layer) == "LayerNorm((3, 4), eps=1e-05, elementwise_affine=True)"
    x = Tensor(np.random.default_rng(0).standard_normal((2, 3, 4)) * 5 + 3)
    y = layer(x)
    assert_close(y.data.mean(axis=(1, 2)), np.zeros(2), atol=1e-12)
    assert_close(y.data.var(axis=(1, 2)), np.ones(2), rtol=1e-4)
    layer.eval()
    assert_close(layer(x), y.data)  # no running statistics: eval is the same computation
    assert [n for n, _ in nn.LayerNorm(4, bias=False).named_parameters()] == ["weight"]
    assert not list(nn.LayerNorm(4, elementwise_affine=False).parameters())
    assert nn.LayerNorm(4).weight.dtype == np.float32


@pytest.mark.parametrize("call, message", [
    (lambda: nn.functional.layer_norm(Tensor(np.ones((2, 3))), (2,)),
     "layer_norm: normalized_shape (2,) must be the last axes of the input, got input shape (2, 3)"),
    (lambda: nn.functional.layer_norm(Tensor(np.ones(3)), (2, 3)),
     "layer_norm: normalized_shape (2, 3) must be the last axes of the input, got input shape (3,)"),
    (lambda: nn.functional.layer_norm(Tensor(np.ones((2, 3))), 3, weight=Tensor(np.ones(2))),
     "layer_norm: weight has shape (2,), expected normalized_shape (3,)"),
])
def test_layer_norm_errors(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
