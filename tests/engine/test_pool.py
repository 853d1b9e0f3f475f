"""max_pool2d, avg_pool2d, global_avg_pool2d: forward against the definition, gradients, ties
(the first maximum in row-major order wins, as PyTorch's CPU kernel), second derivatives, errors.
Every test runs twice: on the reference engine's fast kernels and on the teaching kernels (the
students' engine).

Module: `solutions/ops/pool.py`. Book: chapter 3.
"""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import solutions as S
from solutions import Tensor
from solutions.ops import kernels
from solutions.testing import assert_close, gradcheck, gradgradcheck


@pytest.fixture(scope="module", params=["fast", "teaching"], autouse=True)
def kernel_set(request):
    with nullcontext() if request.param == "fast" else kernels.teaching_kernels():
        yield request.param


def naive_pool(x, kernel, stride=None, padding=0, kind="max"):
    """The definition, window by window. Max: value and flat index of the first maximum."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    stride = (kh, kw) if stride is None else stride
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    N, C, H, W = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    OH, OW = (H + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
    out = np.zeros((N, C, OH, OW))
    winner = np.zeros((N, C, OH, OW, 2), dtype=int)  # (row, col) in x
    for n in range(N):
        for c in range(C):
            for i in range(OH):
                for j in range(OW):
                    window = xp[n, c, i * sh : i * sh + kh, j * sw : j * sw + kw]
                    if kind == "avg":
                        out[n, c, i, j] = window.mean()
                        continue
                    best, where = -np.inf, None
                    for a in range(kh):  # row-major scan, strict >: the first maximum wins
                        for b in range(kw):
                            r, q = i * sh + a - ph, j * sw + b - pw
                            if not (0 <= r < H and 0 <= q < W):
                                continue
                            v = window[a, b]
                            if where is None or v > best or np.isnan(v):
                                best, where = v, (r, q)
                    out[n, c, i, j] = best
                    winner[n, c, i, j] = where
    return out, winner


@st.composite
def pool_configs(draw):
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = draw(st.one_of(st.none(), st.tuples(st.integers(1, 3), st.integers(1, 3))))
    padding = (draw(st.integers(0, kernel[0] // 2)), draw(st.integers(0, kernel[1] // 2)))
    H = max(1, kernel[0] - 2 * padding[0]) + draw(st.integers(0, 4))
    W = max(1, kernel[1] - 2 * padding[1]) + draw(st.integers(0, 4))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 2)), H, W), kernel, stride, padding


SEEDS = st.integers(0, 2**31 - 1)


@settings(deadline=None)
@given(pool_configs(), SEEDS, st.booleans())
def test_max_pool_forward_and_gradient_match_the_definition(config, seed, ties):
    shape, kernel, stride, padding = config
    rng = np.random.default_rng(seed)
    x = rng.integers(-1, 2, shape).astype(float) if ties else rng.standard_normal(shape)
    out, winner = naive_pool(x, kernel, stride, padding)
    xt = Tensor(x, requires_grad=True)
    z = S.max_pool2d(xt, kernel, stride, padding)
    assert_close(z, out)
    g = rng.standard_normal(out.shape)
    z.backward(g)
    expected = np.zeros_like(x)
    for idx in np.ndindex(out.shape):
        n, c = idx[:2]
        r, q = winner[idx]
        expected[n, c, r, q] += g[idx]
    assert_close(xt.grad, expected)


@settings(deadline=None)
@given(pool_configs(), SEEDS)
def test_avg_pool_forward_matches_the_definition_and_gradchecks(config, seed):
    shape, kernel, stride, padding = config
    x = np.random.default_rng(seed).standard_normal(shape)
    assert_close(S.avg_pool2d(x, kernel, stride, padding), naive_pool(x, kernel, stride, padding, "avg")[0])
    assert gradcheck(lambda t: S.avg_pool2d(t, kernel, stride, padding), Tensor(x, requires_grad=True))


@settings(deadline=None)
@given(pool_configs(), SEEDS)
def test_max_pool_gradcheck_without_ties(config, seed):
    shape, kernel, stride, padding = config
    # distinct, well-separated values: finite differences never cross a tie
    x = np.random.default_rng(seed).permutation(np.prod(shape)).reshape(shape) * 0.1
    assert gradcheck(lambda t: S.max_pool2d(t, kernel, stride, padding), Tensor(x, requires_grad=True))


def test_ties_send_the_whole_gradient_to_the_first_maximum_in_row_major_order():
    x = np.array([[[[1.0, 3.0], [3.0, 3.0]]]])
    xt = Tensor(x, requires_grad=True)
    S.max_pool2d(xt, 2).backward(np.array([[[[5.0]]]]))
    np.testing.assert_array_equal(xt.grad.data, [[[[0.0, 5.0], [0.0, 0.0]]]])


def test_overlapping_windows_add_gradients_on_a_shared_maximum():
    x = np.zeros((1, 1, 3, 3))
    x[0, 0, 1, 1] = 1.0  # the centre is the maximum of all four 2x2 windows
    xt = Tensor(x, requires_grad=True)
    S.max_pool2d(xt, 2, stride=1).sum().backward()
    assert xt.grad.data[0, 0, 1, 1] == 4.0 and xt.grad.data.sum() == 4.0


def test_nan_as_pytorch():
    """NaN wins (the last NaN of a window, since any NaN beats the running max)."""
    x = np.array([[[[1.0, np.nan, 2.0, np.nan], [-np.inf, -np.inf, 0.0, 0.0]]]])
    xt = Tensor(x, requires_grad=True)
    z = S.max_pool2d(xt, (2, 2))
    assert np.isnan(z.data[0, 0, 0, 0]) and np.isnan(z.data[0, 0, 0, 1])
    z.backward(np.ones(z.shape))
    np.testing.assert_array_equal(xt.grad.data, [[[[0, 1, 0, 1], [0, 0, 0, 0]]]])


def test_minus_infinity_as_pytorch(kernel_set):
    """A padded window whose real pixels are all -inf sends its gradient to its first real pixel,
    never into the padding (the fast kernel; the teaching one names the window's first position)."""
    if kernel_set == "teaching":
        pytest.skip("the teaching max pool does not single out this corner (see solutions/ops/pool.py)")
    y = Tensor(np.full((1, 1, 3, 3), -np.inf), requires_grad=True)
    S.max_pool2d(y, 3, stride=2, padding=1).backward(np.ones((1, 1, 2, 2)))
    # windows start at rows/cols -1 and 1: their first real pixels are (0,0), (0,1), (1,0), (1,1)
    np.testing.assert_array_equal(y.grad.data[0, 0], [[1, 1, 0], [1, 1, 0], [0, 0, 0]])


def test_default_stride_is_the_kernel_size():
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6))
    assert_close(S.max_pool2d(x, 3), S.max_pool2d(x, 3, 3))
    assert S.avg_pool2d(x, (2, 3)).shape == (1, 2, 3, 2)


def test_avg_pool_counts_padding_zeros():
    x = np.ones((1, 1, 2, 2))
    z = S.avg_pool2d(x, 2, stride=2, padding=1)
    np.testing.assert_allclose(z.data, np.full((1, 1, 2, 2), 0.25))  # one real pixel per window of 4


def test_global_avg_pool():
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5))
    assert_close(S.global_avg_pool2d(x), x.mean(axis=(2, 3)))
    assert gradcheck(S.global_avg_pool2d, Tensor(x, requires_grad=True))


@pytest.mark.parametrize("op", ["max", "avg"])
def test_pool_gradgradcheck(op):
    x = Tensor(np.random.default_rng(2).permutation(2 * 2 * 7 * 6).reshape(2, 2, 7, 6) * 0.1, requires_grad=True)
    pool = S.max_pool2d if op == "max" else S.avg_pool2d
    assert gradgradcheck(lambda t: pool(t, 3, 2, 1) * pool(t, 3, 2, 1), x)
    assert gradgradcheck(lambda t: pool(t, 2), x)


def test_pools_keep_float32():
    x = Tensor(np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32), requires_grad=True)
    for pool in (S.max_pool2d, S.avg_pool2d):
        z = pool(x, 2)
        assert z.dtype == np.float32
        x.grad = None
        z.backward(np.ones(z.shape, dtype=np.float32))
        assert x.grad.dtype == np.float32
    assert S.global_avg_pool2d(x).dtype == np.float32


def test_max_pool_of_integers():
    x = np.arange(16).reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(S.max_pool2d(x, 2, padding=1).data[0, 0], [[0, 2, 3], [8, 10, 11], [12, 14, 15]])


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize(
    "args, message",
    [
        (((3, 8, 8), 2), r"{op}: expected a 4-D input \(N, C, H, W\), got shape \(3, 8, 8\); add a batch axis"),
        (((1, 1, 4, 4), 5), r"{op}: kernel \(5, 5\) is larger than the padded input \(4, 4\)"),
        (((1, 1, 4, 4), 2, 0), r"{op}: stride must be positive, got 0"),
        (((1, 1, 4, 4), 0), r"{op}: kernel_size must be positive, got 0"),
        (((1, 1, 4, 4), 3, 1, 2), r"{op}: padding \(2, 2\) is more than half the kernel \(3, 3\)"),
        (((1, 1, 4, 4), 3, 1, -1), r"{op}: padding must be >= 0"),
    ],
)
def test_errors(op, args, message):
    shape, *rest = args
    with pytest.raises(ValueError, match=message.format(op=op)):
        getattr(S, op)(np.zeros(shape), *rest)


def test_global_avg_pool_error():
    with pytest.raises(ValueError, match=r"global_avg_pool2d: expected a 4-D input \(N, C, H, W\), got shape \(2, 3\)"):
        S.global_avg_pool2d(np.zeros((2, 3)))


def test_override_swaps_the_pool_classes():
    calls = []

    class MaxSpy(S.MaxPool2d):
        def forward(self, x):
            calls.append("max")
            return super().forward(x)

    class AvgSpy(S.AvgPool2d):
        def forward(self, x):
            calls.append("avg")
            return super().forward(x)

    with S.override(MaxPool2d=MaxSpy, AvgPool2d=AvgSpy):
        S.max_pool2d(np.ones((1, 1, 4, 4)), 2)
        S.avg_pool2d(np.ones((1, 1, 4, 4)), 2)
    assert calls == ["max", "avg"]
