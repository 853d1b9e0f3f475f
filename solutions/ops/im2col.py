"""im2col and col2im: convolution as one matrix product, on plain NumPy arrays.

Book: chapter 3 (`book/03_im2col.md`), which draws the column matrix, and chapter 4
(`book/04_conv_backward.md`). Assignment: `assignments/source/a03_im2col/`.
Tests: `tests/test_im2col.py`.

A convolution multiplies every receptive field of the input by the same kernel. `im2col`
copies each receptive field into one column of a matrix; the convolution is then a single
matrix product with the flattened kernel. `col2im` is its adjoint: it sums columns back into
an image, adding wherever receptive fields overlap, which is exactly what the gradient of the
copy must do.

Everything here works on raw ndarrays: the differentiable ops in `conv.py` call these kernels
in their `forward`, and the book calls them directly to draw figures.

The column layout (one column per output pixel):

    cols (C*KH*KW, N*OH*OW)     row    c*KH*KW + i*KW + j   (channel, kernel row, kernel col)
                                column n*OH*OW + oh*OW + ow  (image, output row, output col)
    cols[row, column] = x_padded[n, c, oh*SH + i*DH, ow*SW + j*DW]

Rows follow `weight.reshape(K, C*KH*KW)`, so `weight.reshape(K, -1) @ cols` is the whole
convolution. Putting the huge N*OH*OW axis last keeps every matrix product contiguous and
gives one product per group: group g owns a contiguous block of rows.

Two things make the copies cheaper, neither visible in the results:
- Threads. NumPy's BLAS runs a matrix product on every core, but a copy or a `+=` on one. The
  big copies here are split by image over `THREADS` threads (NumPy releases the GIL while it
  copies). `importlib.import_module("solutions.ops.im2col").THREADS = 1` turns that off (the
  package exports the function `im2col` under this module's name).
- Recycled buffers. A fresh multi-megabyte array costs a page fault per 4 KB the first time it
  is written, which can cost as much as the copy itself; column matrices are as large as
  anything in a network. A column matrix nobody refers to any more goes back to a small pool
  (`recycle`) and the next one of the same shape reuses its pages.
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

Pair = tuple[int, int]
Padding = tuple[Pair, Pair]  # ((top, bottom), (left, right))


# --------------------------------------------------------------------------------------------
# Splitting big copies over cores
# --------------------------------------------------------------------------------------------
def _default_threads() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):  # follow a limit set for the BLAS
        if os.environ.get(var, "").isdigit() and int(os.environ[var]) > 0:
            cores = min(cores, int(os.environ[var]))
    return max(1, cores)


THREADS = _default_threads()
PARALLEL_MIN_BYTES = 1 << 20  # below this, starting threads costs more than it saves
_executor: ThreadPoolExecutor | None = None
_workers = 0


def _forget_executor() -> None:
    """A forked child inherits the executor but not its threads: start a new one there."""
    global _executor, _workers
    _executor, _workers = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_executor)


def parallel(fn: Callable[[int, int], None], n: int, nbytes: int) -> None:
    """Run fn(lo, hi) over [0, n), split into THREADS contiguous pieces when the job is big.

    fn must touch disjoint memory for disjoint ranges (here: different images of the batch).
    The calling thread runs the first piece itself.
    """
    global _executor, _workers
    parts = min(THREADS, n)
    if parts < 2 or nbytes < PARALLEL_MIN_BYTES:
        fn(0, n)
        return
    if _executor is None or _workers < parts - 1:
        _executor, _workers = ThreadPoolExecutor(max_workers=parts - 1, thread_name_prefix="solutions-copy"), parts - 1
    bounds = [n * k // parts for k in range(parts + 1)]
    futures = [_executor.submit(fn, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
    fn(bounds[0], bounds[1])
    for f in futures:
        f.result()


# --------------------------------------------------------------------------------------------
# Recycling big scratch arrays
# --------------------------------------------------------------------------------------------
RECYCLE_MIN_BYTES = 1 << 20  # smaller arrays come from malloc's free lists cheaply anyway
POOL_MAX_BYTES = 512 << 20  # spare arrays kept for reuse, at most
_spares: dict[tuple[tuple[int, ...], np.dtype], list[np.ndarray]] = {}
_spare_bytes = 0


def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """np.empty(shape, dtype), reusing a recycled array of that shape and dtype when there is one."""
    global _spare_bytes
    try:
        a = _spares[(tuple(shape), np.dtype(dtype))].pop()
    except (KeyError, IndexError):  # none spare (pop is atomic: safe if another thread got there first)
        return np.empty(shape, dtype=dtype)
    _spare_bytes -= a.nbytes
    return a


def recycle(a: np.ndarray | None) -> None:
    """Offer `a` for reuse by `empty`; kept only if nothing else can see it.

    An array nobody else holds has three references here: the caller's variable, this
    function's parameter and getrefcount's argument. A count of 3 proves that no view, Tensor
    or saved node can read it again.
    """
    global _spare_bytes
    if a is None or a.base is not None or not a.flags.c_contiguous or sys.getrefcount(a) > 3:
        return
    if a.nbytes < RECYCLE_MIN_BYTES or _spare_bytes + a.nbytes > POOL_MAX_BYTES:
        return
    stack = _spares.setdefault((a.shape, a.dtype), [])
    if len(stack) < 2:
        stack.append(a)
        _spare_bytes += a.nbytes


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
    return (
        output_size(hw[0], kernel[0], stride[0], sum(padding[0]), dilation[0]),
        output_size(hw[1], kernel[1], stride[1], sum(padding[1]), dilation[1]),
    )


# --------------------------------------------------------------------------------------------
# Padding and windows
# --------------------------------------------------------------------------------------------
def pad_hw(x: np.ndarray, padding: Padding, value: float = 0.0) -> np.ndarray:
    """x (N, C, H, W) padded to (N, C, H+t+b, W+l+r) with `value`; x itself when no padding.

    The buffer is allocated channel-major, (C, N, Hp, Wp) in memory, because im2col reads it
    one channel at a time: each channel is then one contiguous block.
    """
    (t, b), (l, r) = padding
    if t == b == l == r == 0:
        return x
    N, C, H, W = x.shape
    shape = (C, N, H + t + b, W + l + r)
    xp = np.zeros(shape, x.dtype) if value == 0 else np.full(shape, value, x.dtype)
    xp = xp.transpose(1, 0, 2, 3)

    def copy(n0: int, n1: int) -> None:
        xp[n0:n1, :, t : t + H, l : l + W] = x[n0:n1]

    parallel(copy, N, x.nbytes)
    return xp


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


def offset_slice(i: int, j: int, out_hw: Pair, stride: Pair, dilation: Pair) -> tuple[slice, slice]:
    """The rows and columns of a padded image that kernel offset (i, j) touches, one per output pixel.

    xp[:, :, rows, cols] is the (N, C, OH, OW) array of the inputs that offset (i, j) of the
    kernel meets at every output position. col2im and the pools loop over the KH*KW offsets
    (never over pixels) with these slices.
    """
    (oh, ow), (sh, sw), (dh, dw) = out_hw, stride, dilation
    r0, c0 = i * dh, j * dw
    return slice(r0, r0 + sh * (oh - 1) + 1, sh), slice(c0, c0 + sw * (ow - 1) + 1, sw)


# --------------------------------------------------------------------------------------------
# im2col / col2im
# --------------------------------------------------------------------------------------------
def im2col_padded(xp: np.ndarray, kernel: Pair, stride: Pair, dilation: Pair) -> np.ndarray:
    """im2col of an already padded xp (N, C, Hp, Wp) -> cols (C*KH*KW, N*OH*OW)."""
    N, C = xp.shape[:2]
    win = windows(xp, kernel, stride, dilation)  # (N, C, OH, OW, KH, KW), a view
    OH, OW, KH, KW = win.shape[2:]
    # The one copy of the convolution: the destination is laid out (C, KH, KW, N, OH, OW), so
    # each inner run is a row of OW pixels read from one input row.
    cols = empty((C * KH * KW, N * OH * OW), xp.dtype)
    blocks = cols.reshape(C, KH, KW, N, OH, OW)
    source = win.transpose(1, 4, 5, 0, 2, 3)

    def copy(n0: int, n1: int) -> None:
        np.copyto(blocks[:, :, :, n0:n1], source[:, :, :, n0:n1])

    parallel(copy, N, cols.nbytes)
    return cols


def col2im_accumulate(cols: np.ndarray, target: np.ndarray, kernel: Pair, stride: Pair, dilation: Pair) -> None:
    """target += col2im(cols), in place: cols (C*KH*KW, n*OH*OW), target (C, n, Hp, Wp) (channel-major).

    Loops over the KH*KW kernel offsets only; each adds one whole (C, n, OH, OW) block with a
    strided-slice `+=`. Within one offset no two output pixels read the same input, so the
    slice `+=` never collides with itself (which is why it is safe here and much faster than
    `np.add.at`); overlaps between offsets are summed by the loop.
    """
    C, n, Hp, Wp = target.shape
    (kh, kw), (dh, dw) = kernel, dilation
    OH = (Hp - dh * (kh - 1) - 1) // stride[0] + 1
    OW = (Wp - dw * (kw - 1) - 1) // stride[1] + 1
    blocks = cols.reshape(C, kh, kw, n, OH, OW)

    def add(n0: int, n1: int) -> None:
        for i in range(kh):
            for j in range(kw):
                rows, columns = offset_slice(i, j, (OH, OW), stride, dilation)
                target[:, n0:n1, rows, columns] += blocks[:, i, j, n0:n1]

    parallel(add, n, cols.nbytes)


def col2im_padded(
    cols: np.ndarray, padded_shape: tuple[int, int, int, int], kernel: Pair, stride: Pair, dilation: Pair
) -> np.ndarray:
    """Adjoint of `im2col_padded`: cols (C*KH*KW, N*OH*OW) -> xp (N, C, Hp, Wp)."""
    N, C, Hp, Wp = padded_shape
    xp = np.zeros((C, N, Hp, Wp), dtype=cols.dtype)  # channel-major like the columns
    col2im_accumulate(cols, xp, kernel, stride, dilation)
    return xp.transpose(1, 0, 2, 3)


def _geometry(x_shape: tuple[int, ...], kernel_size: Any, stride: Any, padding: Any, dilation: Any, op: str):
    if len(x_shape) != 4:
        raise ValueError(f"{op}: expected a 4-D (N, C, H, W) shape, got {tuple(x_shape)}")
    kernel = positive_pair(kernel_size, "kernel_size", op)
    stride_ = positive_pair(stride, "stride", op)
    dilation_ = positive_pair(dilation, "dilation", op)
    pad = as_padding(padding, op)
    N, C, H, W = x_shape
    Hp, Wp = H + sum(pad[0]), W + sum(pad[1])
    extent = (dilation_[0] * (kernel[0] - 1) + 1, dilation_[1] * (kernel[1] - 1) + 1)
    if extent[0] > Hp or extent[1] > Wp:
        raise ValueError(
            f"{op}: kernel {kernel} with dilation {dilation_} spans {extent}, larger than the padded input "
            f"({Hp}, {Wp}) (input {(H, W)} + padding {pad}); use a smaller kernel or more padding"
        )
    return kernel, stride_, pad, dilation_, (N, C, Hp, Wp)


def im2col(x: np.ndarray, kernel_size: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1) -> np.ndarray:
    """Receptive fields of a batch as columns: x (N, C, H, W) -> cols (C*KH*KW, N*OH*OW).

    Column n*OH*OW + oh*OW + ow holds the receptive field of output pixel (oh, ow) of image n,
    flattened in (channel, kernel row, kernel column) order, so that
    `weight.reshape(K, C*KH*KW) @ cols` is the convolution, shaped (K, N*OH*OW).
    `kernel_size`, `stride`, `padding`, `dilation` are each an int or a pair (padding may also
    be ((top, bottom), (left, right))). Zero padding; $OH = (H + 2p - d(KH-1) - 1)//s + 1$.
    """
    x = np.asarray(x)
    kernel, stride_, pad, dilation_, _ = _geometry(x.shape, kernel_size, stride, padding, dilation, "im2col")
    return im2col_padded(pad_hw(x, pad), kernel, stride_, dilation_)


def col2im(
    cols: np.ndarray, x_shape: tuple[int, ...], kernel_size: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1
) -> np.ndarray:
    """Sum columns back into images: cols (C*KH*KW, N*OH*OW) -> (N, C, H, W).

    The adjoint of `im2col` with the same parameters: <im2col(x), c> == <x, col2im(c)> for
    every x and c. An input pixel inside several receptive fields receives the sum of their
    entries; padding positions are dropped; a pixel in no receptive field (the last rows when
    the stride does not divide the input) receives 0.
    """
    cols = np.asarray(cols)
    kernel, stride_, pad, dilation_, padded = _geometry(tuple(x_shape), kernel_size, stride, padding, dilation, "col2im")
    N, C, Hp, Wp = padded
    OH, OW = conv_output_hw((Hp, Wp), kernel, stride_, ((0, 0), (0, 0)), dilation_)
    expected = (C * kernel[0] * kernel[1], N * OH * OW)
    if cols.shape != expected:
        raise ValueError(
            f"col2im: cols has shape {cols.shape} but x_shape {tuple(x_shape)} with kernel {kernel} needs "
            f"{expected} (C*KH*KW, N*OH*OW); pass the x_shape and parameters im2col was called with"
        )
    xp = col2im_padded(cols, padded, kernel, stride_, dilation_)
    (t, _), (l, _) = pad
    return xp[:, :, t : t + x_shape[2], l : l + x_shape[3]]
