"""im2col and col2im: convolution as one matrix product, on plain NumPy arrays.

Book: chapter 3 (`book/03_im2col.md`), which draws the column matrix, and chapter 4
(`book/04_conv_backward.md`). Assignment: `assignments/source/a03_im2col/`.
Tests: `tests/engine/test_im2col.py`, `tests/engine/test_kernels.py`.

A convolution multiplies every receptive field of the input by the same kernel. `im2col`
copies each receptive field into one column of a matrix; the convolution is then a single
matrix product with the flattened kernel. `col2im` is its adjoint: it sums columns back into
an image, adding wherever receptive fields overlap, which is exactly what the gradient of the
copy must do.

These are the teaching kernels, written the way chapter 3 explains them (and the model answers
of a03). The ops of `conv.py` reach them through `kernels.py`, which runs the reference
engine's faster, equal versions instead when it has them.

The column layout (one column per output pixel):

    cols (C*KH*KW, N*OH*OW)     row    c*KH*KW + i*KW + j   (channel, kernel row, kernel col)
                                column n*OH*OW + oh*OW + ow  (image, output row, output col)
    cols[row, column] = x_padded[n, c, oh*SH + i*DH, ow*SW + j*DW]

Rows follow `weight.reshape(K, C*KH*KW)`, so `weight.reshape(K, -1) @ cols` is the whole
convolution. Putting the huge N*OH*OW axis last keeps every matrix product contiguous and
gives one product per group: group g owns a contiguous block of rows.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

Pair = tuple[int, int]
Padding = tuple[Pair, Pair]  # ((top, bottom), (left, right))


# --------------------------------------------------------------------------------------------
# Parameters: an int or a pair, as in PyTorch
# --------------------------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def as_pair(value: Any, name: str, op: str) -> Pair:
    """`3` -> (3, 3); `(2, 3)` -> (2, 3); anything else is a TypeError naming the op."""
    if _is_int(value):
        return int(value), int(value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(_is_int(v) for v in value):
        return int(value[0]), int(value[1])
    raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")


def positive_pair(value: Any, name: str, op: str) -> Pair:
    pair = as_pair(value, name, op)
    if min(pair) < 1:
        raise ValueError(f"{op}: {name} must be positive, got {value!r}")
    return pair


def as_padding(value: Any, op: str) -> Padding:
    """`p`, `(ph, pw)` or `((top, bottom), (left, right))` as the last form, all >= 0."""
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, (tuple, list)) for v in value):
        (t, b), (l, r) = as_pair(value[0], "padding", op), as_pair(value[1], "padding", op)
    else:
        (ph, pw) = as_pair(value, "padding", op)
        (t, b), (l, r) = (ph, ph), (pw, pw)
    if min(t, b, l, r) < 0:
        raise ValueError(f"{op}: padding must be >= 0, got {value!r}")
    return (t, b), (l, r)


def output_size(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """Output length along one axis: $(size + pad - d(k-1) - 1) // s + 1$, `pad` = both sides."""
    return (size + pad - dilation * (kernel - 1) - 1) // stride + 1


def conv_output_hw(hw: Pair, kernel: Pair, stride: Pair, padding: Padding, dilation: Pair) -> Pair:
    """(OH, OW) of a convolution of an (H, W) input: `output_size` along each axis."""
    return (
        output_size(hw[0], kernel[0], stride[0], sum(padding[0]), dilation[0]),
        output_size(hw[1], kernel[1], stride[1], sum(padding[1]), dilation[1]),
    )


def conv_geometry(
    x_shape: tuple[int, ...], kernel_size: Any, stride: Any, padding: Any, dilation: Any, op: str
) -> tuple[Pair, Pair, Padding, Pair]:
    """(kernel, stride, padding, dilation) as pairs and ((top, bottom), (left, right)), checked.

    Each parameter may be an int or a pair (padding also ((top, bottom), (left, right))). A
    non-4-D shape, a non-positive stride or dilation, a negative padding, or a kernel wider than
    the padded input is a clear error naming `op`.
    """
    if len(x_shape) != 4:
        raise ValueError(f"{op}: expected a 4-D (N, C, H, W) shape, got {tuple(x_shape)}")
    kernel = positive_pair(kernel_size, "kernel_size", op)
    stride_ = positive_pair(stride, "stride", op)
    dilation_ = positive_pair(dilation, "dilation", op)
    pad = as_padding(padding, op)
    H, W = x_shape[2:]
    Hp, Wp = H + sum(pad[0]), W + sum(pad[1])
    extent = (dilation_[0] * (kernel[0] - 1) + 1, dilation_[1] * (kernel[1] - 1) + 1)
    if extent[0] > Hp or extent[1] > Wp:
        raise ValueError(
            f"{op}: kernel {kernel} with dilation {dilation_} spans {extent}, larger than the padded input "
            f"({Hp}, {Wp}) (input {(H, W)} + padding {pad}); use a smaller kernel or more padding"
        )
    return kernel, stride_, pad, dilation_


# --------------------------------------------------------------------------------------------
# Padding, kernel offsets and windows
# --------------------------------------------------------------------------------------------
def pad_hw(x: np.ndarray, padding: Padding, value: float = 0.0) -> np.ndarray:
    """x (N, C, H, W) padded to (N, C, H+t+b, W+l+r) with `value`; x itself when no padding."""
    (t, b), (l, r) = padding
    if t == b == l == r == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def offset_slice(i: int, j: int, out_hw: Pair, stride: Pair, dilation: Pair) -> tuple[slice, slice]:
    """The rows and columns of a padded image that kernel offset (i, j) touches, one per output pixel.

    xp[:, :, rows, cols] is the (N, C, OH, OW) array of the inputs that offset (i, j) of the
    kernel meets at every output position. col2im and the pools loop over the KH*KW offsets
    (never over pixels) with these slices.
    """
    (oh, ow), (sh, sw), (dh, dw) = out_hw, stride, dilation
    r0, c0 = i * dh, j * dw
    return slice(r0, r0 + sh * (oh - 1) + 1, sh), slice(c0, c0 + sw * (ow - 1) + 1, sw)


def windows(xp: np.ndarray, kernel: Pair, stride: Pair, dilation: Pair) -> np.ndarray:
    """Every receptive field of an already padded xp, as a read-only view (no copy).

    xp (N, C, Hp, Wp) -> (N, C, OH, OW, KH, KW), where [n, c, oh, ow, i, j] is
    xp[n, c, oh*SH + i*DH, ow*SW + j*DW]. NumPy slides a window of the dilated kernel's extent
    over every position; keeping every SH-th position applies the stride, every DH-th element
    inside the window applies the dilation.
    """
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    extent = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    view = sliding_window_view(xp, extent, axis=(2, 3))
    return view[:, :, ::sh, ::sw, ::dh, ::dw]


# --------------------------------------------------------------------------------------------
# im2col / col2im
# --------------------------------------------------------------------------------------------
def im2col(x: np.ndarray, kernel_size: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1) -> np.ndarray:
    """Receptive fields of a batch as columns: x (N, C, H, W) -> cols (C*KH*KW, N*OH*OW).

    Column n*OH*OW + oh*OW + ow holds the receptive field of output pixel (oh, ow) of image n,
    flattened in (channel, kernel row, kernel column) order, so that
    `weight.reshape(K, C*KH*KW) @ cols` is the convolution, shaped (K, N*OH*OW).
    `kernel_size`, `stride`, `padding`, `dilation` are each an int or a pair (padding may also
    be ((top, bottom), (left, right))). Zero padding; $OH = (H + 2p - d(KH-1) - 1)//s + 1$.
    """
    kernel, stride, padding, dilation = conv_geometry(x.shape, kernel_size, stride, padding, dilation, "im2col")
    win = windows(pad_hw(x, padding), kernel, stride, dilation)  # (N, C, OH, OW, KH, KW), a view
    N, C, OH, OW, KH, KW = win.shape
    # Rows (c, i, j), columns (n, oh, ow): move the axes there (still a view), then copy once.
    return win.transpose(1, 4, 5, 0, 2, 3).reshape(C * KH * KW, N * OH * OW)


def col2im(
    cols: np.ndarray, x_shape: tuple[int, ...], kernel_size: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1
) -> np.ndarray:
    """Sum columns back into images: cols (C*KH*KW, N*OH*OW) -> (N, C, H, W).

    The adjoint of `im2col` with the same parameters: <im2col(x), c> == <x, col2im(c)> for
    every x and c. An input pixel inside several receptive fields receives the sum of their
    entries; padding positions are dropped; a pixel in no receptive field (the last rows when
    the stride does not divide the input) receives 0.
    """
    kernel, stride, padding, dilation = conv_geometry(x_shape, kernel_size, stride, padding, dilation, "col2im")
    N, C, H, W = x_shape
    (KH, KW), ((t, b), (l, r)) = kernel, padding
    OH, OW = conv_output_hw((H, W), kernel, stride, padding, dilation)
    blocks = cols.reshape(C, KH, KW, N, OH, OW).transpose(3, 0, 1, 2, 4, 5)  # (N, C, KH, KW, OH, OW)
    xp = np.zeros((N, C, H + t + b, W + l + r), dtype=cols.dtype)
    for i in range(KH):
        for j in range(KW):
            # Offset (i, j) of every window: no two windows share a pixel within one offset, so
            # one slice += is safe; across offsets they overlap, and the loop adds them up.
            rows, columns = offset_slice(i, j, (OH, OW), stride, dilation)
            xp[:, :, rows, columns] += blocks[:, :, i, j]
    return xp[:, :, t : t + H, l : l + W]
