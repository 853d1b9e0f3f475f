"""im2col / col2im: the column layout, adjointness, and their errors.

Module: `solutions/ops/im2col.py` (the teaching kernels; `tests/engine/test_kernels.py` checks the fast
ones equal to them). Book: chapter 3.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solutions.ops.im2col import col2im, im2col
from solutions.testing import assert_close


@st.composite
def geometries(draw):
    """x shape and (kernel, stride, padding, dilation) pairs such that at least one window fits."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    dilation = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    extent = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    H = max(1, extent[0] - 2 * padding[0]) + draw(st.integers(0, 4))
    W = max(1, extent[1] - 2 * padding[1]) + draw(st.integers(0, 4))
    x_shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), H, W)
    return x_shape, kernel, stride, padding, dilation


def naive_im2col(x, kernel, stride, padding, dilation):
    """The definition, one output pixel at a time."""
    N, C, H, W = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    OH = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    cols = np.zeros((C * kh * kw, N * OH * OW))
    for n in range(N):
        for oh in range(OH):
            for ow in range(OW):
                field = xp[n, :, oh * sh : oh * sh + dh * (kh - 1) + 1 : dh, ow * sw : ow * sw + dw * (kw - 1) + 1 : dw]
                cols[:, n * OH * OW + oh * OW + ow] = field.reshape(-1)
    return cols


@settings(deadline=None)
@given(geometries(), st.integers(0, 2**31 - 1))
def test_im2col_matches_definition(geometry, seed):
    x_shape, kernel, stride, padding, dilation = geometry
    x = np.random.default_rng(seed).standard_normal(x_shape)
    assert_close(im2col(x, kernel, stride, padding, dilation), naive_im2col(x, kernel, stride, padding, dilation))


@settings(deadline=None)
@given(geometries(), st.integers(0, 2**31 - 1))
def test_col2im_is_the_adjoint_of_im2col(geometry, seed):
    x_shape, kernel, stride, padding, dilation = geometry
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape)
    cols = im2col(x, kernel, stride, padding, dilation)
    c = rng.standard_normal(cols.shape)
    back = col2im(c, x_shape, kernel, stride, padding, dilation)
    assert back.shape == x_shape
    assert np.isclose(np.sum(cols * c), np.sum(x * back), rtol=1e-10, atol=1e-10)


def test_column_layout_is_one_column_per_output_pixel():
    x = np.arange(2 * 2 * 3 * 3, dtype=float).reshape(2, 2, 3, 3)
    cols = im2col(x, 2)
    assert cols.shape == (2 * 2 * 2, 2 * 2 * 2)  # (C*KH*KW, N*OH*OW)
    # column of image 1, output pixel (0, 1): channel 0's window, then channel 1's
    np.testing.assert_array_equal(cols[:, 1 * 4 + 0 * 2 + 1],
                                  np.r_[x[1, 0, 0:2, 1:3].ravel(), x[1, 1, 0:2, 1:3].ravel()])
    w = np.random.default_rng(0).standard_normal((3, 2, 2, 2))
    z = (w.reshape(3, -1) @ cols).reshape(3, 2, 2, 2).transpose(1, 0, 2, 3)
    expected = np.einsum("kcij,ncij->nk", w, x[:, :, 1:3, 0:2])  # output pixel (1, 0)
    assert_close(z[:, :, 1, 0], expected)


def test_col2im_counts_overlaps():
    """col2im of all-ones columns counts how many windows contain each pixel."""
    x_shape = (1, 1, 4, 5)
    ones = np.ones(im2col(np.zeros(x_shape), 3).shape)
    counts = col2im(ones, x_shape, 3)
    np.testing.assert_array_equal(counts[0, 0], [[1, 2, 3, 2, 1], [2, 4, 6, 4, 2], [2, 4, 6, 4, 2], [1, 2, 3, 2, 1]])


def test_col2im_gives_zero_to_pixels_no_window_reaches():
    """Stride 2 over 6 columns with a 3-wide kernel: the last column is never read."""
    x_shape = (1, 1, 3, 6)
    ones = np.ones(im2col(np.zeros(x_shape), 3, stride=2).shape)
    counts = col2im(ones, x_shape, 3, stride=2)
    np.testing.assert_array_equal(counts[0, 0, 0], [1, 1, 2, 1, 1, 0])


def test_parameters_take_ints_or_pairs():
    x = np.random.default_rng(1).standard_normal((1, 2, 6, 7))
    assert_close(im2col(x, 3, 2, 1, 1), im2col(x, (3, 3), (2, 2), (1, 1), (1, 1)))
    assert_close(im2col(x, (2, 3), (1, 2), (1, 0), (2, 1)), naive_im2col(x, (2, 3), (1, 2), (1, 0), (2, 1)))


def test_float32_stays_float32():
    x = np.ones((1, 1, 4, 4), dtype=np.float32)
    cols = im2col(x, 2)
    assert cols.dtype == np.float32
    assert col2im(cols, x.shape, 2).dtype == np.float32


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: im2col(np.zeros((3, 4, 4)), 2), r"im2col: expected a 4-D \(N, C, H, W\) shape, got \(3, 4, 4\)"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 5),
         r"im2col: kernel \(5, 5\) .* larger than the padded input \(4, 4\)"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 3, dilation=2), r"spans \(5, 5\), larger than the padded input"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 2, stride=0), r"im2col: stride must be positive, got 0"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 2, dilation=(1, -1)), r"im2col: dilation must be positive"),
        (lambda: im2col(np.zeros((1, 1, 4, 4)), 2, padding=-1), r"im2col: padding must be >= 0"),
        (lambda: col2im(np.zeros((4, 9)), (1, 1, 4), 2),
         r"col2im: expected a 4-D \(N, C, H, W\) shape, got \(1, 1, 4\)"),
        (lambda: col2im(np.zeros((4, 9)), (1, 1, 2, 2), 3), r"col2im: kernel \(3, 3\) .* larger than the padded input"),
    ],
)
def test_errors_name_the_op_and_shapes(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_kernel_size_must_be_int_or_pair():
    with pytest.raises(TypeError, match=r"im2col: kernel_size must be an int or a pair of ints, got \(1, 2, 3\)"):
        im2col(np.zeros((1, 1, 4, 4)), (1, 2, 3))
