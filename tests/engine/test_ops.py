"""Every op of the engine: values against NumPy, first and second derivatives against finite
differences (float64), PyTorch's choices at the kinks, numerical stability, and error messages.

Chapter 2 (`book/02_broadcasting.md`) teaches these ops; broadcasting itself is tested in
`test_broadcasting.py`, and the comparison with PyTorch's own numbers in `test_golden.py`.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import solutions as S
from solutions import Tensor
from solutions.testing import assert_close, gradcheck, gradgradcheck

from support.strategies import (
    as_tuple,
    avoiding,
    axes_for,
    distinct,
    leaf,
    nonscalar_shapes,
    nonzero,
    positive,
    seeds,
    shapes,
    uniform,
)


# --------------------------------------------------------------------------------------------
# Elementwise unary ops
# --------------------------------------------------------------------------------------------
def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


CLIP_LO, CLIP_HI = -0.5, 0.7

# name: (op, NumPy reference, values on which the op is smooth)
UNARY = {
    "neg": (lambda t: -t, np.negative, uniform),
    "exp": (S.exp, np.exp, uniform),
    "log": (S.log, np.log, positive),
    "sqrt": (S.sqrt, np.sqrt, positive),
    "abs": (S.abs, np.abs, nonzero),
    "relu": (S.relu, lambda a: np.maximum(a, 0), nonzero),
    "sigmoid": (S.sigmoid, _sigmoid, uniform),
    "tanh": (S.tanh, np.tanh, uniform),
    "pow 2": (lambda t: t**2, lambda a: a**2, uniform),
    "pow 3": (lambda t: t**3, lambda a: a**3, uniform),
    "pow 1": (lambda t: t**1, lambda a: a**1, uniform),
    "pow 0": (lambda t: t**0, lambda a: a**0, uniform),
    "pow -1": (lambda t: t**-1, lambda a: a**-1.0, nonzero),
    "pow -2": (lambda t: t**-2, lambda a: a**-2.0, nonzero),
    "pow 0.5": (lambda t: t**0.5, np.sqrt, positive),
    "pow -1.5": (lambda t: t**-1.5, lambda a: a**-1.5, positive),
    "pow 2.7": (lambda t: t**2.7, lambda a: a**2.7, positive),
    "clip": (lambda t: t.clip(CLIP_LO, CLIP_HI), lambda a: np.clip(a, CLIP_LO, CLIP_HI),
             lambda rng, s: avoiding(uniform(rng, s), [CLIP_LO, CLIP_HI])),
    "clip min": (lambda t: S.clip(t, min=CLIP_LO), lambda a: np.maximum(a, CLIP_LO),
                 lambda rng, s: avoiding(uniform(rng, s), [CLIP_LO])),
    "clip max": (lambda t: S.clip(t, max=CLIP_HI), lambda a: np.minimum(a, CLIP_HI),
                 lambda rng, s: avoiding(uniform(rng, s), [CLIP_HI])),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(shape=shapes, seed=seeds)
def test_unary_op(name, shape, seed):
    op, ref, values = UNARY[name]
    x = leaf(values(np.random.default_rng(seed), shape))
    out = op(x)
    assert out.shape == x.shape and out.dtype == np.float64
    assert_close(out, ref(x.data), msg=f"{name} forward")
    gradcheck(op, x)
    gradgradcheck(op, x)


def test_sigmoid_is_stable_far_from_zero():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in exp
        x = leaf([-1000.0, -40.0, 0.0, 40.0, 1000.0])
        y = S.sigmoid(x)
        y.sum().backward()
    assert_close(y, [0.0, _sigmoid(-40.0), 0.5, _sigmoid(40.0), 1.0], atol=1e-300)
    assert np.all(np.isfinite(x.grad.data)) and x.grad.data[2] == 0.25


# PyTorch's values at the points where these ops have no derivative.
def test_abs_and_relu_have_zero_gradient_at_zero():
    x = leaf([-2.0, 0.0, 3.0])
    (abs(x) + x.relu()).sum().backward()
    assert_close(x.grad, [-1.0, 0.0, 2.0])


def test_clip_passes_gradient_at_the_boundary():
    x = leaf([-1.0, -0.5, 0.0, 0.7, 1.0])
    x.clip(-0.5, 0.7).sum().backward()
    assert_close(x.grad, [0.0, 1.0, 1.0, 1.0, 0.0])  # closed interval, as torch.clamp


def test_clip_needs_a_bound():
    with pytest.raises(ValueError, match="clip: give at least one of min and max"):
        Tensor([1.0]).clip()


def test_maximum_and_minimum_split_ties_half_and_half():
    x, y = leaf([1.0, 2.0, 3.0]), leaf([1.0, 5.0, 0.0])
    S.maximum(x, y).sum().backward()
    assert_close(x.grad, [0.5, 0.0, 1.0])
    assert_close(y.grad, [0.5, 1.0, 0.0])
    x, y = leaf([1.0, 2.0, 3.0]), leaf([1.0, 5.0, 0.0])
    S.minimum(x, y).sum().backward()
    assert_close(x.grad, [0.5, 1.0, 0.0])
    assert_close(y.grad, [0.5, 0.0, 1.0])


def test_maximum_tie_with_a_broadcast_scalar():
    x, floor = leaf([0.0, 1.0, 0.0]), leaf(0.0)
    S.maximum(x, floor).sum().backward()
    assert_close(x.grad, [0.5, 1.0, 0.5])
    assert_close(floor.grad, 1.0)  # two half shares


def test_pow_exponent_gradient_at_base_zero():
    """d(x^y)/dy = x^y ln x has ln 0 at x = 0; PyTorch defines it as 0 there when y >= 0.
    d(x^y)/dx at y = 0 is 0 everywhere, x = 0 included (not 0 * inf)."""
    x = leaf([0.0, 0.0, 2.0])
    y = leaf([0.0, 2.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0 * inf on the way
        (x**y).sum().backward()
    assert_close(x.grad, [0.0, 0.0, 0.0])
    assert_close(y.grad, [0.0, 0.0, np.log(2.0)])
    x, y = leaf([0.0]), leaf([0.5])
    with np.errstate(divide="ignore"):
        (x**y).sum().backward()
    assert_close(x.grad, [np.inf])  # 0.5 * 0^-0.5, as in PyTorch
    assert_close(y.grad, [0.0])


def test_scalar_pow_zero_exponent_has_zero_gradient_at_zero():
    x = leaf([0.0, 1.0])
    (x**0).sum().backward()
    assert_close(x.grad, [0.0, 0.0])


def test_bool_exponent_is_a_tensor_exponent_not_a_number():
    x = leaf([2.0, 3.0])
    assert_close(x ** np.array([True, False]), [2.0, 1.0])


# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------
@st.composite
def reduction_args(draw, min_dims=0):
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=1, max_side=3))
    return shape, draw(axes_for(len(shape))), draw(st.booleans()), draw(seeds)


REDUCTIONS = {
    "sum": (lambda t, a, k: t.sum(a, k), np.sum, uniform),
    "mean": (lambda t, a, k: t.mean(a, k), np.mean, uniform),
    "max": (lambda t, a, k: t.max(a, k), np.max, distinct),
    "min": (lambda t, a, k: t.min(a, k), np.min, distinct),
    "var": (lambda t, a, k: t.var(a, k), np.var, uniform),
    "logsumexp": (lambda t, a, k: t.logsumexp(a, k), None, uniform),
}


def _logsumexp_ref(a, axis, keepdims):
    return np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@given(args=reduction_args())
def test_reduction(name, args):
    shape, axis, keepdims, seed = args
    op, ref, values = REDUCTIONS[name]
    ref = ref or _logsumexp_ref
    x = leaf(values(np.random.default_rng(seed), shape))
    out = op(x, axis, keepdims)
    expected = np.asarray(ref(x.data, axis=as_tuple(axis, x.ndim), keepdims=keepdims))
    assert_close(out, expected, msg=f"{name}(axis={axis}, keepdims={keepdims})")
    gradcheck(lambda t: op(t, axis, keepdims), x)
    gradgradcheck(lambda t: op(t, axis, keepdims), x)


@given(args=reduction_args(min_dims=1), ddof=st.integers(0, 2))
def test_var_with_ddof(args, ddof):
    shape, axis, keepdims, seed = args
    x = leaf(uniform(np.random.default_rng(seed), shape))
    axes = as_tuple(axis, x.ndim)
    count = int(np.prod([shape[a] for a in (range(len(shape)) if axes is None else axes)]))
    if count - ddof <= 0:
        with pytest.raises(ValueError, match=f"var: {count} elements with ddof={ddof} leave no degrees of freedom"):
            x.var(axis, keepdims, ddof)
        return
    assert_close(x.var(axis, keepdims, ddof), np.var(x.data, axis=axes, keepdims=keepdims, ddof=ddof))
    gradcheck(lambda t: t.var(axis, keepdims, ddof), x)
    gradgradcheck(lambda t: t.var(axis, keepdims, ddof), x)


def test_max_ties_share_the_gradient_evenly():
    x = leaf([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    x.max(axis=1).sum().backward()
    assert_close(x.grad, [[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    x.grad = None
    x.max().backward()  # the overall maximum 3 appears twice
    assert_close(x.grad, [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]])
    x.grad = None
    x.min(axis=0, keepdims=True).sum().backward()
    assert_close(x.grad, [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])


def test_reductions_on_0d_tensors():
    x = leaf(2.5)
    for axis in (None, 0, -1, ()):
        for op in (S.sum, S.mean, S.max, S.min, S.logsumexp):
            y = op(x, axis)
            assert y.shape == () and y.item() == pytest.approx(2.5)
    assert x.var().item() == 0.0


def test_reduction_axis_errors():
    t = Tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="sum: axis 2 is out of range for a tensor with 2 dimensions"):
        t.sum(axis=2)
    with pytest.raises(ValueError, match="mean: axis -3 is out of range"):
        t.mean(axis=-3)
    with pytest.raises(ValueError, match=r"max: repeated axis in \(0, -2\)"):
        t.max(axis=(0, -2))
    with pytest.raises(TypeError, match="var: axis must be an int or a tuple of ints, got 1.0"):
        t.var(axis=1.0)
    with pytest.raises(TypeError, match="sum: axis must be an int or a tuple of ints"):
        t.sum(axis=(0, "1"))
    with pytest.raises(ValueError, match=r"max: cannot reduce an empty tensor of shape \(0, 2\)"):
        Tensor(np.ones((0, 2))).max()
    with pytest.raises(ValueError, match="mean: cannot average over an empty axis"):
        Tensor(np.ones((0, 2))).mean(axis=0)


@given(shape=nonscalar_shapes, seed=seeds, keepdims=st.booleans(), data=st.data())
def test_argmax_argmin(shape, seed, keepdims, data):
    x = leaf(distinct(np.random.default_rng(seed), shape))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    for ours, ref in ((S.argmax, np.argmax), (S.argmin, np.argmin)):
        got = ours(x, axis=axis, keepdims=keepdims)
        assert type(got) is np.ndarray or np.isscalar(got)  # plain indices: no gradient
        np.testing.assert_array_equal(got, ref(x.data, axis=axis, keepdims=keepdims))
    np.testing.assert_array_equal(x.argmax(axis), np.argmax(x.data, axis))
    assert x.grad_fn is None and x.grad is None


def test_argmax_takes_one_axis():
    with pytest.raises(TypeError, match=r"argmax: axis must be an int or None, got \(0, 1\)"):
        Tensor(np.ones((2, 2))).argmax(axis=(0, 1))
    with pytest.raises(ValueError, match="argmin: axis 2 is out of range"):
        Tensor(np.ones((2, 2))).argmin(axis=2)
    assert S.argmax(Tensor(3.0), axis=0) == 0


# --------------------------------------------------------------------------------------------
# Shape ops
# --------------------------------------------------------------------------------------------
def check_linear(op, x):
    """A shape op is linear: its gradient is checked, and its second derivative is 0."""
    gradcheck(op, x)
    gradgradcheck(lambda t: op(t) * op(t), x)  # a product, so the second derivative is not trivially 0


@given(shape=shapes, seed=seeds, data=st.data())
def test_reshape(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    dims = list(shape) + [1] * data.draw(st.integers(0, 2))
    target = tuple(data.draw(st.permutations(dims)))
    if target and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(target) - 1))
        target = target[:i] + (-1,) + target[i + 1:]  # let NumPy infer one size
    out = x.reshape(target)
    assert_close(out, x.data.reshape(target))
    assert x.reshape(*target).shape == out.shape
    check_linear(lambda t: t.reshape(target), x)


def test_reshape_error():
    with pytest.raises(ValueError,
                       match=r"reshape: cannot reshape a tensor of shape \(2, 3\) \(6 elements\) into \(4, 2\)"):
        Tensor(np.ones((2, 3))).reshape(4, 2)


@given(shape=shapes, seed=seeds, data=st.data())
def test_transpose_with_numpy_axes(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    if axes and data.draw(st.booleans()):
        axes = tuple(a - len(shape) for a in axes)  # negative axes mean the same
    assert_close(x.transpose(axes), np.transpose(x.data, axes))
    assert_close(x.transpose(*axes) if axes else x.transpose(), np.transpose(x.data, axes or None))
    assert_close(x.transpose(), np.transpose(x.data))
    assert_close(x.T, x.data.T)
    check_linear(lambda t: t.transpose(axes), x)
    check_linear(lambda t: t.permute(*axes) if axes else t.permute(()), x)


@pytest.mark.parametrize("axes", [(0, 0, 1), (0, 1), (0, 1, 3), (0, 1, -4), (0, 1, 2.0)])
def test_transpose_rejects_what_is_not_a_permutation(axes):
    with pytest.raises(ValueError,
                       match=r"transpose: axes .* are not a permutation of the 3 axes of shape \(2, 3, 4\)"):
        Tensor(np.ones((2, 3, 4))).transpose(axes)


@given(shape=nonscalar_shapes, seed=seeds, data=st.data())
def test_swapaxes_is_pytorch_transpose(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    n = len(shape)
    d0, d1 = data.draw(st.integers(-n, n - 1)), data.draw(st.integers(-n, n - 1))
    assert_close(x.swapaxes(d0, d1), np.swapaxes(x.data, d0, d1))
    check_linear(lambda t: S.swapaxes(t, d0, d1), x)


def test_swapaxes_errors():
    with pytest.raises(ValueError, match="swapaxes: axis 2 is out of range for a tensor with 2 dimensions"):
        Tensor(np.ones((2, 3))).swapaxes(0, 2)
    with pytest.raises(ValueError, match="swapaxes: a 0-d tensor has no axes to swap"):
        Tensor(1.0).swapaxes(0, 0)


@given(shape=shapes, seed=seeds, data=st.data())
def test_expand_dims_squeeze_unsqueeze(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    n = len(shape)
    axis = data.draw(st.integers(-n - 1, n))
    assert_close(x.expand_dims(axis), np.expand_dims(x.data, axis))
    assert x.unsqueeze(axis).shape == np.expand_dims(x.data, axis).shape
    check_linear(lambda t: t.expand_dims(axis), x)
    assert_close(x.squeeze(), np.squeeze(x.data))
    check_linear(lambda t: t.squeeze(), x)
    ones = [i for i, s in enumerate(shape) if s == 1]
    if ones:
        a = data.draw(st.sampled_from(ones))
        assert_close(x.squeeze(a), np.squeeze(x.data, a))
        check_linear(lambda t: t.squeeze(a), x)


def test_expand_dims_and_squeeze_errors():
    t = Tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"expand_dims: axis 3 is out of range for a tensor of shape \(2, 3\)"):
        t.expand_dims(3)
    with pytest.raises(ValueError, match=r"squeeze: axis 0 has size 2, not 1 \(shape \(2, 3\)\)"):
        t.squeeze(0)


@given(shape=shapes, seed=seeds, data=st.data())
def test_flatten_pytorch_semantics(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    n = len(shape)
    if n == 0:
        assert x.flatten().shape == (1,)
        return
    start = data.draw(st.integers(0, n - 1))
    end = data.draw(st.integers(start, n - 1))
    expected = shape[:start] + (int(np.prod(shape[start:end + 1])),) + shape[end + 1:]
    assert x.flatten(start, end).shape == expected
    assert x.flatten(start - n, end - n).shape == expected  # negative dims
    assert x.flatten().shape == (x.size,)
    check_linear(lambda t: t.flatten(start, end), x)


def test_flatten_error():
    with pytest.raises(ValueError, match=r"flatten: start_dim 1 comes after end_dim 0 for shape \(2, 3\)"):
        Tensor(np.ones((2, 3))).flatten(1, 0)


@given(shape=shapes, seed=seeds, data=st.data())
def test_flip(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    axis = data.draw(axes_for(len(shape)))
    assert_close(x.flip(axis), np.flip(x.data, as_tuple(axis, x.ndim)))
    check_linear(lambda t: t.flip(axis), x)


@given(shape=nonscalar_shapes, seed=seeds, data=st.data())
def test_pad(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    widths = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape)
    value = data.draw(st.sampled_from([0.0, -1.5]))
    assert_close(S.pad(x, widths, value), np.pad(x.data, widths, constant_values=value))
    check_linear(lambda t: S.pad(t, widths, value), x)
    assert_close(S.pad(x, 1), np.pad(x.data, 1))
    assert_close(S.pad(x, (1, 2)), np.pad(x.data, (1, 2)))


def test_pad_errors():
    with pytest.raises(ValueError, match=r"pad: pad_width \(\(1, 1\), \(1, 1\), \(1, 1\)\) "
                                         r"does not fit a tensor of shape \(2, 3\)"):
        S.pad(Tensor(np.ones((2, 3))), ((1, 1), (1, 1), (1, 1)))
    with pytest.raises(ValueError, match="pad: negative pad_width"):
        S.pad(Tensor(np.ones((2, 3))), -1)


@given(shape=nonscalar_shapes, seed=seeds, data=st.data())
def test_concatenate_and_stack(shape, seed, data):
    rng = np.random.default_rng(seed)
    n = len(shape)
    axis = data.draw(st.integers(-n, n - 1))
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    parts = []
    for k in sizes:
        s = list(shape)
        s[axis] = k
        parts.append(leaf(uniform(rng, s)))
    out = S.concatenate(parts, axis=axis)
    assert_close(out, np.concatenate([p.data for p in parts], axis=axis))
    gradcheck(lambda *ps: S.concatenate(ps, axis=axis), *parts)
    gradgradcheck(lambda *ps: S.concatenate(ps, axis=axis) ** 2, *parts)

    same = [leaf(uniform(rng, shape)) for _ in sizes]
    stack_axis = data.draw(st.integers(-n - 1, n))
    assert_close(S.stack(same, axis=stack_axis), np.stack([p.data for p in same], axis=stack_axis))
    gradcheck(lambda *ps: S.stack(ps, axis=stack_axis), *same)


def test_concatenate_mixes_constants_and_dtypes():
    a = leaf(np.ones((2, 2)))
    b = np.zeros((1, 2))  # a constant
    out = S.concatenate([a, b], axis=0)
    out.sum().backward()
    assert out.shape == (3, 2)
    assert_close(a.grad, np.ones((2, 2)))


def test_join_errors():
    with pytest.raises(ValueError, match=r"concatenate: shapes \(2, 3\), \(2, 2\) do not match except along axis 0"):
        S.concatenate([Tensor(np.ones((2, 3))), Tensor(np.ones((2, 2)))], axis=0)
    with pytest.raises(ValueError, match="concatenate: need at least one tensor"):
        S.concatenate([])
    with pytest.raises(ValueError, match="concatenate: 0-d tensors have no axis to join along"):
        S.concatenate([Tensor(1.0), Tensor(2.0)])
    with pytest.raises(ValueError, match=r"stack: all tensors must have the same shape, got \[\(2,\), \(3,\)\]"):
        S.stack([Tensor(np.ones(2)), Tensor(np.ones(3))])


# --------------------------------------------------------------------------------------------
# Indexing: basic, advanced (with repeats), boolean
# --------------------------------------------------------------------------------------------
@given(shape=nonscalar_shapes, seed=seeds, data=st.data())
def test_basic_indexing(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    assert_close(x[index], x.data[index])
    check_linear(lambda t: t[index], x)


@given(shape=nonscalar_shapes, seed=seeds, data=st.data())
def test_integer_array_indexing_with_repeats(shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape))
    index = data.draw(hnp.integer_array_indices(shape,
                                                result_shape=hnp.array_shapes(min_dims=1, max_dims=2, max_side=4)))
    assert_close(x[index], x.data[index])
    check_linear(lambda t: t[index], x)
    # Every selected element receives one unit of gradient per time it was selected.
    x.grad = None  # (gradcheck left its own gradient there)
    x[index].sum().backward()
    counts = np.zeros(shape)
    np.add.at(counts, index, 1.0)
    assert_close(x.grad, counts)


def test_repeated_indices_accumulate():
    x = leaf([10.0, 20.0, 30.0])
    y = x[[0, 0, 1, 0]]
    assert_close(y, [10.0, 10.0, 20.0, 10.0])
    y.backward(np.array([1.0, 2.0, 3.0, 4.0]))
    assert_close(x.grad, [7.0, 3.0, 0.0])


def test_mixed_advanced_and_basic_indexing():
    x = leaf(np.arange(24.0).reshape(2, 3, 4))
    for index in [(slice(None), [2, 0, 2]), (0, [1, 1], slice(1, 3)), (Ellipsis, [3, 3]),
                  ([1, 0], slice(None), [0, 3]), (np.array([[0], [1]]), [1, 2])]:
        assert_close(x[index], x.data[index])
        gradcheck(lambda t, index=index: t[index], x)
    idx = Tensor(np.array([1, 1]))  # an index may be a Tensor of ints
    assert_close(x[idx], x.data[[1, 1]])


@given(shape=nonscalar_shapes, seed=seeds)
def test_boolean_mask_indexing(shape, seed):
    rng = np.random.default_rng(seed)
    x = leaf(uniform(rng, shape))
    mask = rng.random(shape) < 0.5
    assert_close(x[mask], x.data[mask])
    check_linear(lambda t: t[mask], x)
    rows = rng.random(shape[0]) < 0.5
    assert_close(x[rows], x.data[rows])
    x.grad = None
    x[rows].sum().backward()
    assert_close(x.grad, np.broadcast_to(rows.reshape((-1,) + (1,) * (len(shape) - 1)), shape).astype(float))


def test_indexing_errors_name_the_shape_and_index():
    t = Tensor(np.ones((2, 3)))
    with pytest.raises(IndexError, match=r"getitem: index 5 is out of bounds .* \(tensor shape \(2, 3\), index 5\)"):
        t[5]
    with pytest.raises(IndexError, match=r"getitem: .*tensor shape \(2, 3\), index \[0, 3\]"):
        t[[0, 3]]


def test_scatter_add_is_the_adjoint_of_getitem():
    rng = np.random.default_rng(3)
    x, g = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    index = [3, 0, 3, 1, 3]
    lhs = np.sum(x[index] * g)
    rhs = np.sum(x * S.scatter_add(Tensor(g), index, x.shape).data)
    assert np.isclose(lhs, rhs)


# --------------------------------------------------------------------------------------------
# softmax, log_softmax, logsumexp
# --------------------------------------------------------------------------------------------
def _softmax_ref(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@given(shape=nonscalar_shapes, seed=seeds, data=st.data())
def test_softmax_family(name, shape, seed, data):
    x = leaf(uniform(np.random.default_rng(seed), shape, -3, 3))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    op = getattr(S, name)
    expected = _softmax_ref(x.data, axis)
    assert_close(op(x, axis), expected if name == "softmax" else np.log(expected))
    gradcheck(lambda t: op(t, axis), x)
    gradgradcheck(lambda t: op(t, axis), x)


def test_softmax_rows_sum_to_one_and_default_axis_is_last():
    x = Tensor(np.random.default_rng(0).standard_normal((3, 4)))
    assert_close(x.softmax().data.sum(axis=-1), np.ones(3))
    assert_close(x.softmax(), _softmax_ref(x.data, -1))
    assert_close(x.softmax(axis=0).data.sum(axis=0), np.ones(4))


def test_softmax_family_is_stable_at_large_logits():
    x = leaf([[1000.0, 1000.0, 990.0], [-1000.0, 0.0, 1000.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow, no invalid value
        s = x.softmax()
        ls = x.log_softmax()
        lse = x.logsumexp(axis=1)
        (s.sum() + ls.sum() + lse.sum()).backward()
    shifted = x.data - x.data.max(axis=1, keepdims=True)
    assert_close(s, _softmax_ref(shifted, -1))
    assert_close(ls, shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)))
    assert_close(lse, [1000.0 + np.log(2.0 + np.exp(-10.0)), 1000.0])
    assert np.all(np.isfinite(x.grad.data))


def test_logsumexp_handles_minus_infinity():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = leaf([[-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, np.log(3.0)]])
        y = x.logsumexp(axis=1)
        assert_close(y, [-np.inf, np.log(4.0)])  # not nan
        x.grad = None
        part = leaf([-np.inf, 0.0, np.log(3.0)])
        part.logsumexp().backward()
    assert_close(part.grad, [0.0, 0.25, 0.75])
    assert_close(Tensor(np.full(2, -np.inf)).logsumexp(), -np.inf)
    assert_close(Tensor([-np.inf, 0.0]).log_softmax(), [-np.inf, 0.0])


def test_softmax_errors():
    with pytest.raises(ValueError, match="softmax: needs at least one dimension, got a 0-d tensor"):
        Tensor(1.0).softmax()
    with pytest.raises(ValueError, match="log_softmax: axis 2 is out of range"):
        Tensor(np.ones((2, 2))).log_softmax(axis=2)


# --------------------------------------------------------------------------------------------
# Casts and comparisons
# --------------------------------------------------------------------------------------------
def test_astype_between_float_types_is_differentiable():
    x = Tensor(np.array([1.5, -2.0], dtype=np.float32), requires_grad=True)
    y = x.astype(np.float64)
    assert y.dtype == np.float64 and y.grad_fn is not None
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32
    assert_close(x.grad, [3.0, -4.0])
    assert x.astype(np.float32) is x


def test_comparisons_are_plain_boolean_arrays():
    x = leaf([1.0, 2.0, 3.0])
    y = leaf([3.0, 2.0, 1.0])
    for result, expected in ((x < y, [True, False, False]), (x <= y, [True, True, False]),
                             (x > 2.0, [False, False, True]), (x >= np.array([1.0, 3.0, 3.0]), [True, False, True]),
                             (x == y, [False, True, False]), (x != y, [True, False, True])):
        assert type(result) is np.ndarray and result.dtype == bool
        assert list(result) == expected
    # A comparison can feed where() as a condition, and gradients still flow through the branches.
    S.where(x > y, x, y).sum().backward()
    assert_close(x.grad, [0.0, 0.0, 1.0])
