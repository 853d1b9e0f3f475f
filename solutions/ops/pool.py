"""Pooling: max_pool2d, avg_pool2d, global_avg_pool2d, with PyTorch's semantics.

Book: chapter 3 (`book/03_im2col.md`). Tests: `tests/test_pool.py`, `tests/test_conv_golden.py`.

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
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Function, Tensor, as_tensor
from .im2col import Pair, as_pair, offset_slice, pad_hw, parallel, positive_pair


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------
def _pool_params(op: str, x_shape: tuple[int, ...], kernel_size: Any, stride: Any, padding: Any) -> tuple[Pair, Pair, Pair]:
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
    H, W = x_shape[2:]
    if kernel[0] > H + 2 * pad[0] or kernel[1] > W + 2 * pad[1]:
        raise ValueError(
            f"{op}: kernel {kernel} is larger than the padded input ({H + 2 * pad[0]}, {W + 2 * pad[1]}) "
            f"(input {(H, W)}, padding {pad}); use a smaller kernel or more padding"
        )
    return kernel, stride_, pad


def _out_hw(hw: tuple[int, int], kernel: Pair, stride: Pair, pad: Pair) -> Pair:
    return (hw[0] + 2 * pad[0] - kernel[0]) // stride[0] + 1, (hw[1] + 2 * pad[1] - kernel[1]) // stride[1] + 1


def _pad4(pad: Pair) -> tuple[Pair, Pair]:
    return (pad[0], pad[0]), (pad[1], pad[1])


def _offsets(kernel: Pair, out_hw: Pair, stride: Pair):
    """(k, rows, cols) for every kernel offset, k counting row-major as PyTorch scans a window."""
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            rows, cols = offset_slice(i, j, out_hw, stride, (1, 1))
            yield i * kernel[1] + j, rows, cols


def _overlapping(kernel: Pair, stride: Pair) -> bool:
    return stride[0] < kernel[0] or stride[1] < kernel[1]


# --------------------------------------------------------------------------------------------
# Max pool
# --------------------------------------------------------------------------------------------
def _lowest(dtype: np.dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def max_pool2d_array(x: np.ndarray, kernel: Pair, stride: Pair, pad: Pair) -> tuple[np.ndarray, np.ndarray]:
    """(out, index): the pooled (N, C, OH, OW) array and, per output, the row-major offset of the winner."""
    N, C, H, W = x.shape
    OH, OW = _out_hw((H, W), kernel, stride, pad)
    xp = pad_hw(x, _pad4(pad), value=_lowest(x.dtype))  # padding never wins: it is never > the running max
    out = np.empty((N, C, OH, OW), dtype=x.dtype)
    index = np.empty((N, C, OH, OW), dtype=np.uint8 if kernel[0] * kernel[1] <= 256 else np.int32)
    first = _first_inside(kernel, stride, pad, (OH, OW))

    def pool(n0: int, n1: int, nan_aware: bool) -> None:
        best, idx = out[n0:n1], index[n0:n1]
        offsets = _offsets(kernel, (OH, OW), stride)
        take = np.empty(best.shape, dtype=bool)
        if pad == (0, 0):  # offset 0 of every window is a real pixel: start from it
            _, rows, cols = next(offsets)
            v0 = xp[n0:n1, :, rows, cols]
            following = next(offsets, None)
            if following is None:  # a 1x1 kernel
                best[...], idx[...] = v0, 0
                return
            _, rows, cols = following
            v = xp[n0:n1, :, rows, cols]
            np.greater(v, v0, out=take)
            if nan_aware:
                take |= np.isnan(v)
            np.maximum(v0, v, out=best)
            np.copyto(idx, take, casting="unsafe")  # offset 1 where it won, else 0
        else:
            best[...], idx[...] = _lowest(x.dtype), first
        for k, rows, cols in offsets:
            v = xp[n0:n1, :, rows, cols]
            np.greater(v, best, out=take)  # strict: on a tie the earlier offset keeps the gradient
            if nan_aware:
                take |= np.isnan(v)
            np.maximum(best, v, out=best)  # NaN propagates, as the winner's value would
            # idx = where(take, k, idx), as integer arithmetic: far faster than a masked copy.
            step = np.subtract(k, idx, dtype=idx.dtype)
            step *= take
            idx += step

    parallel(lambda n0, n1: pool(n0, n1, False), N, x.nbytes)
    # A NaN anywhere in x shows in out (maximum propagates it), but the index above does not
    # follow it. NaNs are rare, so only then pay the extra isnan pass per offset.
    if np.issubdtype(x.dtype, np.floating) and out.size and np.isnan(np.max(out)):
        parallel(lambda n0, n1: pool(n0, n1, True), N, x.nbytes)
    return out, index


def _first_inside(kernel: Pair, stride: Pair, pad: Pair, out_hw: Pair) -> np.ndarray:
    """(OH, OW) row-major offset of the first non-padding pixel of each window.

    Where a window's real pixels are all -inf, none is > the running max: PyTorch then reports
    the window's first real pixel, so that is where the index starts.
    """
    i0 = np.maximum(pad[0] - stride[0] * np.arange(out_hw[0]), 0)
    j0 = np.maximum(pad[1] - stride[1] * np.arange(out_hw[1]), 0)
    return i0[:, None] * kernel[1] + j0[None, :]


def _covers_once(x_shape: tuple[int, ...], kernel: Pair, stride: Pair, pad: Pair) -> bool:
    """Do the windows tile the input exactly (every pixel in exactly one window)?"""
    H, W = x_shape[2:]
    return stride == kernel and pad == (0, 0) and H % kernel[0] == 0 and W % kernel[1] == 0


def max_pool2d_scatter_array(
    grad: np.ndarray, index: np.ndarray, x_shape: tuple[int, ...], kernel: Pair, stride: Pair, pad: Pair
) -> np.ndarray:
    """Each window's gradient to the element `index` names: (N, C, OH, OW) -> x_shape."""
    N, C, H, W = x_shape
    OH, OW = index.shape[2:]
    shape = (N, C, H + 2 * pad[0], W + 2 * pad[1])
    tiled = _covers_once(x_shape, kernel, stride, pad)
    # Multiplying by the 0/1 mask writes every pixel of a tiling (no zero-fill needed), but
    # 0 * inf is nan: with a non-finite gradient, copy through the mask instead.
    finite = bool(np.isfinite(np.sum(grad)))
    dxp = np.empty(shape, dtype=grad.dtype) if tiled and finite else np.zeros(shape, dtype=grad.dtype)
    overlap = _overlapping(kernel, stride)

    def scatter(n0: int, n1: int) -> None:
        g = grad[n0:n1]
        for k, rows, cols in _offsets(kernel, (OH, OW), stride):
            hit = index[n0:n1] == k
            target = dxp[n0:n1, :, rows, cols]
            if overlap:  # a pixel can win several windows: add
                np.add(target, g, out=target, where=hit)
            elif finite:  # disjoint windows: each pixel is written once, 0 where it lost
                np.multiply(g, hit, out=target)
            else:
                np.copyto(target, g, where=hit)

    parallel(scatter, N, dxp.nbytes)
    return dxp[:, :, pad[0] : pad[0] + H, pad[1] : pad[1] + W]


def max_pool2d_gather_array(g: np.ndarray, index: np.ndarray, kernel: Pair, stride: Pair, pad: Pair) -> np.ndarray:
    """The adjoint of the scatter: read g (N, C, H, W) at each window's winner -> (N, C, OH, OW)."""
    gp = pad_hw(g, _pad4(pad))
    out = np.empty(index.shape, dtype=g.dtype)
    for k, rows, cols in _offsets(kernel, index.shape[2:], stride):
        np.copyto(out, gp[:, :, rows, cols], where=index == k)
    return out


class MaxPool2d(Function):
    """$z = \\max$ over each window; the gradient goes to the first maximum of each window."""

    def __init__(self, kernel_size: Pair, stride: Pair, padding: Pair):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        out, self.index = max_pool2d_array(x, self.kernel_size, self.stride, self.padding)
        return out

    def backward(self, grad):
        (x,) = self.inputs
        return max_pool2d_scatter(grad, self.index, x.shape, self.kernel_size, self.stride, self.padding)


def max_pool2d(x, kernel_size, stride=None, padding=0) -> Tensor:
    """Max over each (KH, KW) window: x (N, C, H, W) -> (N, C, OH, OW), $OH = (H + 2p - KH)//s + 1$.

    `stride` defaults to the kernel size (non-overlapping windows); padding counts as -inf and
    may be at most half the kernel.
    """
    x = as_tensor(x)
    kernel, stride_, pad = _pool_params("max_pool2d", x.shape, kernel_size, stride, padding)
    return MaxPool2d.apply(x, kernel_size=kernel, stride=stride_, padding=pad)


class MaxPool2dScatter(Function):
    """Route each window's gradient to its saved winner. Linear; its adjoint is the gather."""

    def __init__(self, index: np.ndarray, x_shape: tuple[int, ...], kernel_size: Pair, stride: Pair, padding: Pair):
        self.index, self.x_shape = index, x_shape
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, grad):
        return max_pool2d_scatter_array(grad, self.index, self.x_shape, self.kernel_size, self.stride, self.padding)

    def backward(self, g):
        return max_pool2d_gather(g, self.index, self.kernel_size, self.stride, self.padding)


def max_pool2d_scatter(grad, index, x_shape, kernel_size, stride, padding) -> Tensor:
    return MaxPool2dScatter.apply(grad, index=index, x_shape=tuple(x_shape), kernel_size=kernel_size, stride=stride, padding=padding)


class MaxPool2dGather(Function):
    """Read each window's saved winner. Linear; its adjoint is the scatter."""

    def __init__(self, index: np.ndarray, kernel_size: Pair, stride: Pair, padding: Pair):
        self.index, self.kernel_size, self.stride, self.padding = index, kernel_size, stride, padding

    def forward(self, g):
        return max_pool2d_gather_array(g, self.index, self.kernel_size, self.stride, self.padding)

    def backward(self, grad):
        (g,) = self.inputs
        return max_pool2d_scatter(grad, self.index, g.shape, self.kernel_size, self.stride, self.padding)


def max_pool2d_gather(g, index, kernel_size, stride, padding) -> Tensor:
    return MaxPool2dGather.apply(g, index=index, kernel_size=kernel_size, stride=stride, padding=padding)


# --------------------------------------------------------------------------------------------
# Average pool
# --------------------------------------------------------------------------------------------
def avg_pool2d_array(x: np.ndarray, kernel: Pair, stride: Pair, pad: Pair) -> np.ndarray:
    N, C, H, W = x.shape
    OH, OW = _out_hw((H, W), kernel, stride, pad)
    xp = pad_hw(x, _pad4(pad))
    count = kernel[0] * kernel[1]
    floating = np.issubdtype(x.dtype, np.floating)
    total = np.empty((N, C, OH, OW), dtype=x.dtype if floating else np.float64)

    def pool(n0: int, n1: int) -> None:
        acc = total[n0:n1]
        offsets = _offsets(kernel, (OH, OW), stride)
        _, rows, cols = next(offsets)
        acc[...] = xp[n0:n1, :, rows, cols]
        for _, rows, cols in offsets:
            acc += xp[n0:n1, :, rows, cols]
        acc /= count  # in place: float32 stays float32

    parallel(pool, N, x.nbytes)
    return total


def avg_pool2d_scatter_array(grad: np.ndarray, x_shape: tuple[int, ...], kernel: Pair, stride: Pair, pad: Pair) -> np.ndarray:
    """Spread each window's gradient evenly over it: (N, C, OH, OW) -> x_shape."""
    N, C, H, W = x_shape
    OH, OW = grad.shape[2:]
    share = grad / (kernel[0] * kernel[1])
    shape = (N, C, H + 2 * pad[0], W + 2 * pad[1])
    dxp = np.empty(shape, dtype=share.dtype) if _covers_once(x_shape, kernel, stride, pad) else np.zeros(shape, dtype=share.dtype)
    overlap = _overlapping(kernel, stride)

    def scatter(n0: int, n1: int) -> None:
        for _, rows, cols in _offsets(kernel, (OH, OW), stride):
            if overlap:
                dxp[n0:n1, :, rows, cols] += share[n0:n1]
            else:
                dxp[n0:n1, :, rows, cols] = share[n0:n1]

    parallel(scatter, N, dxp.nbytes)
    return dxp[:, :, pad[0] : pad[0] + H, pad[1] : pad[1] + W]


class AvgPool2d(Function):
    """$z = \\frac{1}{KH\\,KW} \\sum$ over each window (padding zeros included in the count)."""

    def __init__(self, kernel_size: Pair, stride: Pair, padding: Pair):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return avg_pool2d_array(x, self.kernel_size, self.stride, self.padding)

    def backward(self, grad):
        (x,) = self.inputs
        return avg_pool2d_scatter(grad, x.shape, self.kernel_size, self.stride, self.padding)


def avg_pool2d(x, kernel_size, stride=None, padding=0) -> Tensor:
    """Mean of each (KH, KW) window: x (N, C, H, W) -> (N, C, OH, OW), $OH = (H + 2p - KH)//s + 1$.

    `stride` defaults to the kernel size; padding counts as zeros in the mean
    (PyTorch's default count_include_pad=True) and may be at most half the kernel.
    """
    x = as_tensor(x)
    kernel, stride_, pad = _pool_params("avg_pool2d", x.shape, kernel_size, stride, padding)
    return AvgPool2d.apply(x, kernel_size=kernel, stride=stride_, padding=pad)


class AvgPool2dScatter(Function):
    """Spread gradients evenly over their windows. Linear; its adjoint is the average pool."""

    def __init__(self, x_shape: tuple[int, ...], kernel_size: Pair, stride: Pair, padding: Pair):
        self.x_shape, self.kernel_size, self.stride, self.padding = x_shape, kernel_size, stride, padding

    def forward(self, grad):
        return avg_pool2d_scatter_array(grad, self.x_shape, self.kernel_size, self.stride, self.padding)

    def backward(self, g):
        return avg_pool2d(g, self.kernel_size, self.stride, self.padding)


def avg_pool2d_scatter(grad, x_shape, kernel_size, stride, padding) -> Tensor:
    return AvgPool2dScatter.apply(grad, x_shape=tuple(x_shape), kernel_size=kernel_size, stride=stride, padding=padding)


def global_avg_pool2d(x) -> Tensor:
    """Mean over each whole feature map: (N, C, H, W) -> (N, C). A composite of `mean`."""
    x = as_tensor(x)
    if x.ndim != 4:
        raise ValueError(f"global_avg_pool2d: expected a 4-D input (N, C, H, W), got shape {x.shape}")
    return x.mean(axis=(2, 3))
