"""Pooling: max_pool2d (with PyTorch's `dilation` too), avg_pool2d, global_avg_pool2d, with PyTorch's semantics.

Book: chapter 3 (`book/03_im2col.md`). Assignment: `assignments/source/a03_im2col/`.
Tests: `tests/engine/test_pool.py`, `tests/engine/test_conv_golden.py`, `tests/engine/test_kernels.py`; dilation in
`tests/engine/test_ops_more.py` (its path, at the end of this file, leaves a03's kernels untouched).

Both pools loop over the KH*KW kernel offsets, never over pixels: offset (i, j) of every
window at once is one strided slice of the padded input, shape (N, C, OH, OW). Combining
KH*KW such slices elementwise is the whole pool, for overlapping windows too.

Max pool sends the whole gradient of a window to one element, the first maximum in row-major
order inside the window (a later NaN wins over everything, so NaN propagates), exactly as
PyTorch's CPU kernel. Forward saves which offset won (`index`, (N, C, OH, OW)); backward
scatters through it and the scatter's own backward gathers through it, so create_graph works.
Average pool counts padding zeros in the divisor (PyTorch's count_include_pad=True); its
backward spreads each gradient evenly over its window, and that spreading's adjoint is the
average pool again.

The array kernels below are the teaching kernels (a03's model answers); the ops call them
through `kernels.py`, which runs the reference engine's faster, equal ones when it has them.
One difference, in a corner no network reaches: where a padded window's real pixels are all
-inf, the teaching max pool names the window's first position (padding) as the winner, and
the fast one, like PyTorch, its first real pixel.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Function, Tensor, as_tensor
from . import kernels
from .im2col import Pair, as_pair, col2im, im2col, offset_slice, output_size, pad_hw, positive_pair, windows


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------
def _pool_params(op: str, x_shape: tuple[int, ...], kernel_size: Any, stride: Any, padding: Any,
                 dilation: Any = 1) -> tuple[Pair, Pair, Pair, Pair]:
    if len(x_shape) != 4:
        hint = "; add a batch axis with x.unsqueeze(0)" if len(x_shape) == 3 else ""
        raise ValueError(f"{op}: expected a 4-D input (N, C, H, W), got shape {tuple(x_shape)}{hint}")
    kernel = positive_pair(kernel_size, "kernel_size", op)
    stride_ = kernel if stride is None else positive_pair(stride, "stride", op)
    pad = as_pair(padding, "padding", op)
    if min(pad) < 0:
        raise ValueError(f"{op}: padding must be >= 0, got {padding!r}")
    if pad[0] > kernel[0] // 2 or pad[1] > kernel[1] // 2:
        # A window made only of padding would have no input to take its value from.
        raise ValueError(
            f"{op}: padding {pad} is more than half the kernel {kernel}; PyTorch allows at most kernel_size // 2"
        )
    dilation_ = positive_pair(dilation, "dilation", op)
    extent = (dilation_[0] * (kernel[0] - 1) + 1, dilation_[1] * (kernel[1] - 1) + 1)
    H, W = x_shape[2:]
    if extent[0] > H + 2 * pad[0] or extent[1] > W + 2 * pad[1]:
        what = f"kernel {kernel} is"
        if dilation_ != (1, 1):
            what = f"kernel {kernel} with dilation {dilation_} spans {extent},"
        raise ValueError(
            f"{op}: {what} larger than the padded input ({H + 2 * pad[0]}, {W + 2 * pad[1]}) "
            f"(input {(H, W)}, padding {pad}); use a smaller kernel or more padding"
        )
    return kernel, stride_, pad, dilation_


def pool_out_hw(hw: tuple[int, int], kernel: Pair, stride: Pair, pad: Pair) -> Pair:
    """(OH, OW) of a pool padded by `pad` on both sides of each axis: the convolution's formula, d = 1."""
    return (output_size(hw[0], kernel[0], stride[0], 2 * pad[0], 1),
            output_size(hw[1], kernel[1], stride[1], 2 * pad[1], 1))


def pad4(pad: Pair) -> tuple[Pair, Pair]:
    return (pad[0], pad[0]), (pad[1], pad[1])


def kernel_offsets(kernel: Pair, out_hw: Pair, stride: Pair):
    """(k, rows, cols) for every kernel offset, k counting row-major as PyTorch scans a window."""
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            rows, cols = offset_slice(i, j, out_hw, stride, (1, 1))
            yield i * kernel[1] + j, rows, cols


# --------------------------------------------------------------------------------------------
# Max pool
# --------------------------------------------------------------------------------------------
def lowest(dtype: np.dtype):
    """The value that never wins a max: -inf, or the smallest integer of an integer dtype."""
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def max_pool2d_array(x, kernel, stride, pad):
    """(out, index): the max of each window (N, C, OH, OW) and the offset i*KW + j of its winner."""
    N, C, H, W = x.shape
    OH, OW = pool_out_hw((H, W), kernel, stride, pad)
    xp = pad_hw(x, pad4(pad), value=lowest(x.dtype))  # the padding never wins
    out = np.full((N, C, OH, OW), lowest(x.dtype), dtype=x.dtype)
    index = np.zeros((N, C, OH, OW), dtype=np.int64)
    for k, rows, cols in kernel_offsets(kernel, (OH, OW), stride):
        v = xp[:, :, rows, cols]  # offset k of every window
        # Strictly greater: on a tie the earlier offset keeps the window (PyTorch's first maximum).
        # A NaN always takes over, so it propagates as in PyTorch.
        take = (v > out) | np.isnan(v)
        out = np.where(take, v, out)
        index = np.where(take, k, index)
    return out, index


def max_pool2d_scatter_array(grad, index, x_shape, kernel, stride, pad):
    """Each window's gradient to the pixel its `index` names: (N, C, OH, OW) -> x_shape."""
    N, C, H, W = x_shape
    OH, OW = index.shape[2:]
    dxp = np.zeros((N, C, H + 2 * pad[0], W + 2 * pad[1]), dtype=grad.dtype)
    for k, rows, cols in kernel_offsets(kernel, (OH, OW), stride):
        # The windows whose winner is offset k; add, since overlapping windows can share a winner.
        dxp[:, :, rows, cols] += np.where(index == k, grad, 0)
    return dxp[:, :, pad[0] : pad[0] + H, pad[1] : pad[1] + W]


def max_pool2d_gather_array(g, index, kernel, stride, pad):
    """The adjoint of the scatter: read g (N, C, H, W) at each window's winner -> (N, C, OH, OW)."""
    gp = pad_hw(g, pad4(pad))
    out = np.zeros(index.shape, dtype=g.dtype)
    for k, rows, cols in kernel_offsets(kernel, index.shape[2:], stride):
        out = np.where(index == k, gp[:, :, rows, cols], out)
    return out


class MaxPool2d(Function):
    r"""$z = \max$ over each window; the gradient goes to the first maximum of each window."""

    def __init__(self, kernel_size: Pair, stride: Pair, padding: Pair):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        out, self.index = kernels.max_pool2d_array(x, self.kernel_size, self.stride, self.padding)
        return out

    def backward(self, grad):
        (x,) = self.inputs
        return max_pool2d_scatter(grad, self.index, x.shape, self.kernel_size, self.stride, self.padding)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1) -> Tensor:
    """Max over each (KH, KW) window: x (N, C, H, W) -> (N, C, OH, OW), $OH = (H + 2p - d(KH-1) - 1)//s + 1$.

    `stride` defaults to the kernel size (non-overlapping windows); padding counts as -inf and
    may be at most half the kernel; `dilation` d spaces the window's taps d apart (PyTorch's).
    """
    x = as_tensor(x)
    kernel, stride_, pad, dilation_ = _pool_params("max_pool2d", x.shape, kernel_size, stride, padding, dilation)
    if dilation_ != (1, 1):
        return MaxPool2dDilated.apply(x, kernel_size=kernel, stride=stride_, padding=pad, dilation=dilation_)
    return MaxPool2d.apply(x, kernel_size=kernel, stride=stride_, padding=pad)


class MaxPool2dScatter(Function):
    """Route each window's gradient to its saved winner. Linear; its adjoint is the gather."""

    def __init__(self, index: np.ndarray, x_shape: tuple[int, ...], kernel_size: Pair, stride: Pair, padding: Pair):
        self.index, self.x_shape = index, x_shape
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, grad):
        return kernels.max_pool2d_scatter_array(grad, self.index, self.x_shape, self.kernel_size, self.stride,
                                                self.padding)

    def backward(self, g):
        return max_pool2d_gather(g, self.index, self.kernel_size, self.stride, self.padding)


def max_pool2d_scatter(grad, index, x_shape, kernel_size, stride, padding) -> Tensor:
    return MaxPool2dScatter.apply(grad, index=index, x_shape=tuple(x_shape), kernel_size=kernel_size, stride=stride,
                                  padding=padding)


class MaxPool2dGather(Function):
    """Read each window's saved winner. Linear; its adjoint is the scatter."""

    def __init__(self, index: np.ndarray, kernel_size: Pair, stride: Pair, padding: Pair):
        self.index, self.kernel_size, self.stride, self.padding = index, kernel_size, stride, padding

    def forward(self, g):
        return kernels.max_pool2d_gather_array(g, self.index, self.kernel_size, self.stride, self.padding)

    def backward(self, grad):
        (g,) = self.inputs
        return max_pool2d_scatter(grad, self.index, g.shape, self.kernel_size, self.stride, self.padding)


def max_pool2d_gather(g, index, kernel_size, stride, padding) -> Tensor:
    return MaxPool2dGather.apply(g, index=index, kernel_size=kernel_size, stride=stride, padding=padding)


# --------------------------------------------------------------------------------------------
# Average pool
# --------------------------------------------------------------------------------------------
def avg_pool2d_array(x, kernel, stride, pad):
    """The mean of each window of the zero-padded x, divided by KH*KW: (N, C, H, W) -> (N, C, OH, OW)."""
    N, C, H, W = x.shape
    OH, OW = pool_out_hw((H, W), kernel, stride, pad)
    xp = pad_hw(x, pad4(pad))  # zeros, counted in every mean (count_include_pad=True)
    total = 0
    for _, rows, cols in kernel_offsets(kernel, (OH, OW), stride):
        total = total + xp[:, :, rows, cols]  # offset (i, j) of every window
    return total / (kernel[0] * kernel[1])


def avg_pool2d_scatter_array(grad, x_shape, kernel, stride, pad):
    """Spread each window's gradient evenly over it: (N, C, OH, OW) -> x_shape."""
    N, C, H, W = x_shape
    share = grad / (kernel[0] * kernel[1])
    padded = np.zeros((N, C, H + 2 * pad[0], W + 2 * pad[1]), dtype=share.dtype)
    for _, rows, cols in kernel_offsets(kernel, grad.shape[2:], stride):
        padded[:, :, rows, cols] += share
    return padded[:, :, pad[0] : H + pad[0], pad[1] : W + pad[1]]


class AvgPool2d(Function):
    r"""$z = \frac{1}{KH\,KW} \sum$ over each window (padding zeros included in the count)."""

    def __init__(self, kernel_size: Pair, stride: Pair, padding: Pair):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return kernels.avg_pool2d_array(x, self.kernel_size, self.stride, self.padding)

    def backward(self, grad):
        (x,) = self.inputs
        return avg_pool2d_scatter(grad, x.shape, self.kernel_size, self.stride, self.padding)


def avg_pool2d(x, kernel_size, stride=None, padding=0) -> Tensor:
    """Mean of each (KH, KW) window: x (N, C, H, W) -> (N, C, OH, OW), $OH = (H + 2p - KH)//s + 1$.

    `stride` defaults to the kernel size; padding counts as zeros in the mean
    (PyTorch's default count_include_pad=True) and may be at most half the kernel.
    """
    x = as_tensor(x)
    kernel, stride_, pad, _ = _pool_params("avg_pool2d", x.shape, kernel_size, stride, padding)
    return AvgPool2d.apply(x, kernel_size=kernel, stride=stride_, padding=pad)


class AvgPool2dScatter(Function):
    """Spread gradients evenly over their windows. Linear; its adjoint is the average pool."""

    def __init__(self, x_shape: tuple[int, ...], kernel_size: Pair, stride: Pair, padding: Pair):
        self.x_shape, self.kernel_size, self.stride, self.padding = x_shape, kernel_size, stride, padding

    def forward(self, grad):
        return kernels.avg_pool2d_scatter_array(grad, self.x_shape, self.kernel_size, self.stride, self.padding)

    def backward(self, g):
        return avg_pool2d(g, self.kernel_size, self.stride, self.padding)


def avg_pool2d_scatter(grad, x_shape, kernel_size, stride, padding) -> Tensor:
    return AvgPool2dScatter.apply(grad, x_shape=tuple(x_shape), kernel_size=kernel_size, stride=stride, padding=padding)


# --------------------------------------------------------------------------------------------
# Max pool with dilation: the window's taps d apart (PyTorch's `dilation`)
# --------------------------------------------------------------------------------------------
# Built on chapter 3's kernels, not on the offset loops above: the windows are `windows` with
# a dilation, the gradient's scatter is `col2im` of one-hot columns and its adjoint is `im2col`.
# (Average pooling has no dilation in PyTorch.)
def _dilated_taps(x, kernel, stride, pad, dilation):
    """Every window's KH*KW taps, in row-major order: (N, C, OH, OW, KH*KW), padding as -inf."""
    win = windows(pad_hw(x, pad4(pad), value=lowest(x.dtype)), kernel, stride, dilation)
    return win.reshape(win.shape[:4] + (kernel[0] * kernel[1],))


def _first_max(taps):
    """The tap that wins each window, as PyTorch picks it: the first maximum, or the last NaN."""
    if taps.dtype.kind != "f":
        return np.argmax(taps, axis=-1)
    nan = np.isnan(taps)
    index = np.argmax(np.where(nan, -np.inf, taps), axis=-1)
    if nan.any():  # a NaN takes over from everything before it, so the last one wins
        last_nan = taps.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
        index = np.where(nan.any(axis=-1), last_nan, index)
    return index


def _taps_to_cols(taps, kernel):
    """(N, C, OH, OW, KH*KW) -> im2col's layout (C*KH*KW, N*OH*OW)."""
    N, C, OH, OW, _ = taps.shape
    taps = taps.reshape(N, C, OH, OW, *kernel).transpose(1, 4, 5, 0, 2, 3)  # (C, KH, KW, N, OH, OW)
    return taps.reshape(C * kernel[0] * kernel[1], N * OH * OW)


class MaxPool2dDilated(Function):
    r"""$z = \max$ over each dilated window; the gradient goes to each window's winning tap."""

    def __init__(self, kernel_size: Pair, stride: Pair, padding: Pair, dilation: Pair):
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation

    def forward(self, x):
        taps = _dilated_taps(x, self.kernel_size, self.stride, self.padding, self.dilation)
        self.index = _first_max(taps)  # (N, C, OH, OW): the winning tap i*KW + j
        return np.take_along_axis(taps, self.index[..., None], axis=-1)[..., 0]

    def backward(self, grad):
        (x,) = self.inputs
        return MaxPool2dDilatedScatter.apply(grad, index=self.index, x_shape=x.shape, kernel_size=self.kernel_size,
                                             stride=self.stride, padding=self.padding, dilation=self.dilation)


class MaxPool2dDilatedScatter(Function):
    """Each window's gradient to its winning tap: col2im of one-hot columns. Its adjoint is the gather."""

    def __init__(self, index, x_shape, kernel_size: Pair, stride: Pair, padding: Pair, dilation: Pair):
        self.index, self.x_shape = index, tuple(x_shape)
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation

    def forward(self, grad):
        won = self.index[..., None] == np.arange(self.kernel_size[0] * self.kernel_size[1])  # one-hot taps
        taps = np.where(won, grad[..., None], 0)
        cols = _taps_to_cols(taps.astype(grad.dtype, copy=False), self.kernel_size)
        return col2im(cols, self.x_shape, self.kernel_size, self.stride, self.padding, self.dilation)

    def backward(self, g):
        return MaxPool2dDilatedGather.apply(g, index=self.index, kernel_size=self.kernel_size, stride=self.stride,
                                            padding=self.padding, dilation=self.dilation)


class MaxPool2dDilatedGather(Function):
    """Read g at each window's winning tap: im2col, then pick. Its adjoint is the scatter."""

    def __init__(self, index, kernel_size: Pair, stride: Pair, padding: Pair, dilation: Pair):
        self.index, self.kernel_size, self.stride = index, kernel_size, stride
        self.padding, self.dilation = padding, dilation

    def forward(self, g):
        cols = im2col(g, self.kernel_size, self.stride, self.padding, self.dilation)  # (C*KH*KW, N*OH*OW)
        N, C, OH, OW = self.index.shape
        taps = cols.reshape(C, self.kernel_size[0] * self.kernel_size[1], N, OH, OW).transpose(2, 0, 3, 4, 1)
        return np.take_along_axis(taps, self.index[..., None], axis=-1)[..., 0]

    def backward(self, grad):
        (g,) = self.inputs
        return MaxPool2dDilatedScatter.apply(grad, index=self.index, x_shape=g.shape, kernel_size=self.kernel_size,
                                             stride=self.stride, padding=self.padding, dilation=self.dilation)


def global_avg_pool2d(x) -> Tensor:
    """Mean over each whole feature map: (N, C, H, W) -> (N, C). A composite of `mean`."""
    x = as_tensor(x)
    if x.ndim != 4:
        raise ValueError(f"global_avg_pool2d: expected a 4-D input (N, C, H, W), got shape {x.shape}")
    return x.mean(axis=(2, 3))


# Their names before they were public (issue 39): notebooks released earlier import them, and are
# still graded.
_pad4, _lowest, _out_hw, _offsets = pad4, lowest, pool_out_hw, kernel_offsets
