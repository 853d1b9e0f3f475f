"""The reference engine's fast array kernels: the same results as the teaching kernels, sooner.

PRIVATE: the course kit ships without this module (`autograder.kit.ENGINE_EXCLUDE`), so the
students' engine runs the teaching kernels of `im2col.py`, `conv.py` and `pool.py`, which are
also the model answers of a03. `kernels.py` is the one place that picks these when they are
here. `tests/engine/test_kernels.py` checks every one of them equal to its teaching twin on drawn
shapes; `benchmarks/bench_conv.py` times them. After a change here, check the training step
before and after: `benchmarks/bench_train.py --baseline main` (and `--instructions`; see
`benchmarks/PROFILE.md`).

What makes them faster, none of it visible in the results:
- Threads. NumPy's BLAS runs a matrix product on every core, but a copy or a `+=` on one. The
  big copies here are split by image over `THREADS` threads (NumPy releases the GIL while it
  copies). `solutions.ops._fast.THREADS = 1` turns that off.
- Recycled buffers. A fresh multi-megabyte array costs a page fault per 4 KB the first time it
  is written, which can cost as much as the copy itself; column matrices are as large as
  anything in a network. A column matrix nobody refers to any more goes back to a small pool
  (`recycle`) and the next one of the same shape reuses its pages.
- Channel-major layouts. Padded inputs and column gradients are allocated (C, N, H, W) in
  memory, so that every channel is one contiguous block for im2col and col2im, and the
  convolution's output is a transposed view of its GEMM result, (N, K, OH, OW) in shape but
  (K, N, OH, OW) in memory (a copy saved; only `.strides` tell the difference).
- Cheaper formulas for the same numbers: the stride-1 input gradient as a convolution with the
  rotated kernel (chapter 4) when that moves less memory, col2im in cache-sized chunks or with
  the batch innermost for narrow outputs, the max pool's winner index as uint8 arithmetic with
  a NaN-aware second pass only when a NaN is there.
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from ..graph import Function, Tensor, _new_tensor, is_grad_enabled
from .im2col import Padding, Pair, conv_output_hw, offset_slice, output_size, windows
from .pool import kernel_offsets, lowest, pad4, pool_out_hw


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
    futures = [_executor.submit(fn, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:], strict=True)]
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


def channel_major(a: np.ndarray) -> np.ndarray:
    """a (N, K, H, W), same values, stored in (K, N, H, W) order: a itself if it already is."""
    t = a.transpose(1, 0, 2, 3)
    if t.flags.c_contiguous:
        return a
    out = np.empty(t.shape, dtype=a.dtype)

    def copy(n0: int, n1: int) -> None:
        np.copyto(out[:, n0:n1], t[:, n0:n1])

    parallel(copy, a.shape[0], a.nbytes)
    return out.transpose(1, 0, 2, 3)


# --------------------------------------------------------------------------------------------
# Padding, im2col, col2im
# --------------------------------------------------------------------------------------------
def pad_hw(x: np.ndarray, padding: Padding, value: float = 0.0) -> np.ndarray:
    """x (N, C, H, W) padded to (N, C, H+t+b, W+l+r) with `value`; x itself when no padding.

    The buffer is allocated channel-major, (C, N, Hp, Wp) in memory, because im2col reads it
    one channel at a time: each channel is then one contiguous block.
    """
    (t, b), (left, r) = padding
    if t == b == left == r == 0:
        return x
    N, C, H, W = x.shape
    shape = (C, N, H + t + b, W + left + r)
    xp = np.zeros(shape, x.dtype) if value == 0 else np.full(shape, value, x.dtype)
    xp = xp.transpose(1, 0, 2, 3)

    def copy(n0: int, n1: int) -> None:
        xp[n0:n1, :, t : t + H, left : left + W] = x[n0:n1]

    parallel(copy, N, x.nbytes)
    return xp


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
    OH, OW = output_size(Hp, kh, stride[0], 0, dh), output_size(Wp, kw, stride[1], 0, dw)
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


# --------------------------------------------------------------------------------------------
# The convolution's three kernels. Params are normalized: stride/dilation pairs,
# padding ((top, bottom), (left, right)), groups an int.
# --------------------------------------------------------------------------------------------
def _grad_matrix(grad: np.ndarray) -> np.ndarray:
    """dz (N, K, OH, OW) as the (K, N*OH*OW) matrix of the GEMMs (a view when dz is channel-major)."""
    N, K, OH, OW = grad.shape
    return channel_major(grad).transpose(1, 0, 2, 3).reshape(K, N * OH * OW)


def conv2d_array(
    x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, stride: Pair, padding: Padding, dilation: Pair, groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """z = conv2d(x, w) + bias on arrays. Returns z (N, K, OH, OW) and x's columns (for dw)."""
    N, C, H, W = x.shape
    K, Cg, KH, KW = w.shape
    G = groups
    cols = im2col_padded(pad_hw(x, padding), (KH, KW), stride, dilation)  # (C*KH*KW, N*OH*OW)
    OH, OW = conv_output_hw((H, W), (KH, KW), stride, padding, dilation)
    if G == 1:
        z = w.reshape(K, Cg * KH * KW) @ cols  # (K, N*OH*OW)
    else:
        # One GEMM per group: group g's output channels see only its block of rows.
        z = np.matmul(w.reshape(G, K // G, Cg * KH * KW), cols.reshape(G, Cg * KH * KW, N * OH * OW))
        z = z.reshape(K, N * OH * OW)
    if bias is not None:
        if np.can_cast(bias.dtype, z.dtype, "same_kind"):
            z += bias.reshape(K, 1)  # in place: no second output-sized array
        else:
            z = z + bias.reshape(K, 1)  # integer input, float bias: promote as NumPy does
    return z.reshape(K, N, OH, OW).transpose(1, 0, 2, 3), cols


# Bytes of column gradient computed at a time in the input gradient: small enough to stay in
# the shared cache between the GEMM that writes it and the col2im that reads it back, large
# enough that the few GEMM calls keep every BLAS thread busy.
CHUNK_BYTES = 16 << 20


def conv2d_input_grad_array(
    grad: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...], stride: Pair, padding: Padding, dilation: Pair,
    groups: int,
) -> np.ndarray:
    """dx = J_x^T dz, by whichever of two equal computations moves less memory.

    Stride 1 with no more output than input channels: chapter 4's derived form, a convolution of
    the padded dz with the rotated kernel, costs one im2col of dz (K*KH*KW rows) and one GEMM;
    unless dz's rows are narrow, where that im2col copies a few pixels at a time and the
    batch-innermost col2im below was 1.3-1.7x faster (8x8 and 4x4 images).
    Otherwise GEMM + col2im, whose column matrix has C*KH*KW rows; a stride would also make the
    derived form multiply s*s times as many inserted zeros.
    """
    K, C = w.shape[0], x_shape[1]
    if stride == (1, 1) and K <= C and grad.shape[3] >= NARROW:
        return _input_grad_by_correlation(grad, w, x_shape, padding, dilation, groups)
    return _input_grad_by_col2im(grad, w, x_shape, stride, padding, dilation, groups)


def _input_grad_by_correlation(
    grad: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...], padding: Padding, dilation: Pair, groups: int
) -> np.ndarray:
    """Stride 1: dx = correlate(dz padded by the kernel extent minus 1, rotate180(w), in/out swapped).

    Padding dz by (extent - 1 - p) instead of (extent - 1) and cropping p afterwards are the
    same thing; a negative amount (padding wider than the kernel) crops dz instead, because
    those outputs only ever saw padding.
    """
    N, C, H, W = x_shape
    K, Cg, KH, KW = w.shape
    G, Kg = groups, K // groups
    (t, b), (left, r) = padding
    eh, ew = dilation[0] * (KH - 1), dilation[1] * (KW - 1)  # kernel extent minus 1
    amounts = [eh - t, eh - b, ew - left, ew - r]
    OH, OW = grad.shape[2:]
    g = grad[:, :, max(0, -amounts[0]) : OH - max(0, -amounts[1]), max(0, -amounts[2]) : OW - max(0, -amounts[3])]
    pad = ((max(0, amounts[0]), max(0, amounts[1])), (max(0, amounts[2]), max(0, amounts[3])))
    # rotate180, then swap in/out channels within each group: (C, K/G, KH, KW)
    w_t = w.reshape(G, Kg, Cg, KH, KW)[..., ::-1, ::-1].transpose(0, 2, 1, 3, 4).reshape(C, Kg, KH, KW)
    dx, cols = conv2d_array(channel_major(g), w_t, None, (1, 1), pad, dilation, groups)
    recycle(cols)
    return dx


def _input_grad_by_col2im(
    grad: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...], stride: Pair, padding: Padding, dilation: Pair,
    groups: int,
) -> np.ndarray:
    """dx = col2im(W^T dZ).

    The columns' gradient W^T dZ is (C*KH*KW, N*OH*OW), as large as x's columns. It is made a
    few images at a time into one reused buffer, and each piece is summed into dx by col2im at
    once, while it is still in cache: the same GEMM and the same sums as one big GEMM followed by
    `col2im_padded`, without a large fresh array (fresh pages cost more than the arithmetic).
    """
    N, C, H, W = x_shape
    K, Cg, KH, KW = w.shape
    G, Kg = groups, K // groups
    OH, OW = grad.shape[2:]
    if OW < NARROW:
        return _input_grad_by_col2im_batch_last(grad, w, x_shape, stride, padding, dilation, groups)
    P = OH * OW
    (t, b), (left, r) = padding
    Hp, Wp = H + t + b, W + left + r
    gm = _grad_matrix(grad).reshape(G, Kg, N * P)  # (G, K/G, N*OH*OW)
    wt = w.reshape(G, Kg, Cg * KH * KW).transpose(0, 2, 1)  # (G, C/G*KH*KW, K/G): W^T per group
    dtype = np.result_type(grad, w)
    dxp = np.zeros((C, N, Hp, Wp), dtype=dtype)  # channel-major, like the columns
    per_image = C * KH * KW * P * dtype.itemsize
    step = max(1, min(N, CHUNK_BYTES // max(per_image, 1)))
    buffer = dcols = empty((G, Cg * KH * KW, step * P), dtype)
    for n0 in range(0, N, step):
        n1 = min(N, n0 + step)
        dcols = buffer[:, :, : (n1 - n0) * P]
        np.matmul(wt, gm[:, :, n0 * P : n1 * P], out=dcols)
        col2im_accumulate(dcols.reshape(C * KH * KW, -1), dxp[:, n0:n1], (KH, KW), stride, dilation)
    del dcols
    recycle(buffer)
    # Input rows that no window reaches (stride not dividing the size) were never added to: 0.
    return dxp[:, :, t : t + H, left : left + W].transpose(1, 0, 2, 3)


# Output rows narrower than this make col2im's strided `+=` run a few pixels at a time, so the
# per-run overhead dominates: then the batch axis goes innermost instead (runs of OW*N).
NARROW = 16


def _input_grad_by_col2im_batch_last(
    grad: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...], stride: Pair, padding: Padding, dilation: Pair,
    groups: int,
) -> np.ndarray:
    """col2im with the columns ordered (oh, ow, n) and dx laid out (C, H, W, N) in memory.

    Each kernel offset's block then lands on rows of OW*N contiguous numbers (OW*N apart from
    the stride), instead of OW. The pieces are a few output rows at a time.
    """
    N, C, H, W = x_shape
    K, Cg, KH, KW = w.shape
    G, Kg = groups, K // groups
    OH, OW = grad.shape[2:]
    (t, b), (left, r) = padding
    Hp, Wp = H + t + b, W + left + r
    dtype = np.result_type(grad, w)
    gm = np.empty((K, OH, OW, N), dtype=grad.dtype)  # dz with the batch innermost
    parallel(lambda k0, k1: np.copyto(gm[k0:k1], grad[:, k0:k1].transpose(1, 2, 3, 0)), K, grad.nbytes)
    gm = gm.reshape(G, Kg, OH * OW * N)
    wt = w.reshape(G, Kg, Cg * KH * KW).transpose(0, 2, 1)
    dxp = np.zeros((C, Hp, Wp, N), dtype=dtype)
    per_row = C * KH * KW * OW * N * dtype.itemsize
    step = max(1, min(OH, CHUNK_BYTES // max(per_row, 1)))
    buffer = dcols = empty((G, Cg * KH * KW, step * OW * N), dtype)
    for h0 in range(0, OH, step):
        h1 = min(OH, h0 + step)
        dcols = buffer[:, :, : (h1 - h0) * OW * N]
        np.matmul(wt, gm[:, :, h0 * OW * N : h1 * OW * N], out=dcols)
        blocks = dcols.reshape(C, KH, KW, h1 - h0, OW, N)

        def add(c0: int, c1: int, h0: int = h0, h1: int = h1, blocks: np.ndarray = blocks) -> None:
            for i in range(KH):
                for j in range(KW):
                    rows, columns = offset_slice(i, j, (h1 - h0, OW), stride, dilation)
                    rows = slice(rows.start + h0 * stride[0], rows.stop + h0 * stride[0], rows.step)
                    dxp[c0:c1, rows, columns] += blocks[c0:c1, i, j]

        parallel(add, C, dcols.nbytes)
    del dcols, blocks
    recycle(buffer)
    return dxp[:, t : t + H, left : left + W].transpose(3, 0, 1, 2)


def conv2d_weight_grad_array(
    x: np.ndarray, grad: np.ndarray, w_shape: tuple[int, ...], stride: Pair, padding: Padding, dilation: Pair,
    groups: int, cols: np.ndarray | None = None,
) -> np.ndarray:
    """dw = dZ cols^T, one GEMM per group (x's columns are recomputed unless given)."""
    K, Cg, KH, KW = w_shape
    G = groups
    own = cols is None
    if cols is None:
        cols = im2col_padded(pad_hw(x, padding), (KH, KW), stride, dilation)
    gm = _grad_matrix(grad)
    # dw^T = cols dZ^T rather than dw = dZ cols^T: the same product, but OpenBLAS splits this
    # orientation (many rows, few columns, long inner dimension) over threads far better.
    if G == 1:
        dw_t = cols @ gm.T  # (C*KH*KW, K)
    else:
        P = gm.shape[1]
        dw_t = np.matmul(cols.reshape(G, Cg * KH * KW, P), gm.reshape(G, K // G, P).transpose(0, 2, 1))
    if own:
        recycle(cols)
    return np.ascontiguousarray(dw_t.swapaxes(-1, -2)).reshape(w_shape)


# --------------------------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------------------------
def _overlapping(kernel: Pair, stride: Pair) -> bool:
    return stride[0] < kernel[0] or stride[1] < kernel[1]


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


def max_pool2d_array(x: np.ndarray, kernel: Pair, stride: Pair, pad: Pair) -> tuple[np.ndarray, np.ndarray]:
    """(out, index): the pooled (N, C, OH, OW) array and, per output, the row-major offset of the winner."""
    N, C, H, W = x.shape
    OH, OW = pool_out_hw((H, W), kernel, stride, pad)
    xp = pad_hw(x, pad4(pad), value=lowest(x.dtype))  # padding never wins: it is never > the running max
    out = np.empty((N, C, OH, OW), dtype=x.dtype)
    index = np.empty((N, C, OH, OW), dtype=np.uint8 if kernel[0] * kernel[1] <= 256 else np.int32)
    first = _first_inside(kernel, stride, pad, (OH, OW))
    halving = kernel == stride == (2, 2) and pad == (0, 0)

    def pool(n0: int, n1: int, nan_aware: bool) -> None:
        best, idx = out[n0:n1], index[n0:n1]
        if halving and not nan_aware:
            _max_pool_2x2(xp[n0:n1], best, idx)
            return
        offsets = kernel_offsets(kernel, (OH, OW), stride)
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
            best[...], idx[...] = lowest(x.dtype), first
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


def _max_pool_2x2(x: np.ndarray, best: np.ndarray, idx: np.ndarray) -> None:
    """2x2 windows, stride 2: the max and the offset of its first occurrence, as a tournament.

    Offsets 0 1 / 2 3: the winner of each row pair (a strict > keeps the earlier on a tie), then of
    the two rows (the top row wins a tie): the same index as the sequential scan, in 10 ufunc calls
    instead of 13 (on small feature maps each call costs more than its arithmetic). NaN-free x only.
    """
    OH, OW = best.shape[2:]
    v0, v1 = x[:, :, 0 : 2 * OH : 2, 0 : 2 * OW : 2], x[:, :, 0 : 2 * OH : 2, 1 : 2 * OW : 2]
    v2, v3 = x[:, :, 1 : 2 * OH : 2, 0 : 2 * OW : 2], x[:, :, 1 : 2 * OH : 2, 1 : 2 * OW : 2]
    top, bottom = np.maximum(v0, v1), np.maximum(v2, v3)
    np.maximum(top, bottom, out=best)
    left_or_right = np.greater(v1, v0)                         # 0 or 1: the top row's winner
    np.add(np.greater(v3, v2), 2, out=idx, casting="unsafe")   # 2 or 3: the bottom row's
    idx -= left_or_right
    idx *= np.greater(bottom, top)                             # bottom row's offset - top's, or 0
    idx += left_or_right


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
        for k, rows, cols in kernel_offsets(kernel, (OH, OW), stride):
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


def avg_pool2d_array(x: np.ndarray, kernel: Pair, stride: Pair, pad: Pair) -> np.ndarray:
    """The mean of each window of the zero-padded x, divided by KH*KW: (N, C, H, W) -> (N, C, OH, OW)."""
    N, C, H, W = x.shape
    OH, OW = pool_out_hw((H, W), kernel, stride, pad)
    xp = pad_hw(x, pad4(pad))
    count = kernel[0] * kernel[1]
    floating = np.issubdtype(x.dtype, np.floating)
    total = np.empty((N, C, OH, OW), dtype=x.dtype if floating else np.float64)

    def pool(n0: int, n1: int) -> None:
        acc = total[n0:n1]
        offsets = kernel_offsets(kernel, (OH, OW), stride)
        _, rows, cols = next(offsets)
        acc[...] = xp[n0:n1, :, rows, cols]
        for _, rows, cols in offsets:
            acc += xp[n0:n1, :, rows, cols]
        acc /= count  # in place: float32 stays float32

    parallel(pool, N, x.nbytes)
    return total


def avg_pool2d_scatter_array(
    grad: np.ndarray, x_shape: tuple[int, ...], kernel: Pair, stride: Pair, pad: Pair
) -> np.ndarray:
    """Spread each window's gradient evenly over it: (N, C, OH, OW) -> x_shape."""
    N, C, H, W = x_shape
    OH, OW = grad.shape[2:]
    share = grad / (kernel[0] * kernel[1])
    shape = (N, C, H + 2 * pad[0], W + 2 * pad[1])
    tiled = _covers_once(x_shape, kernel, stride, pad)
    dxp = np.empty(shape, dtype=share.dtype) if tiled else np.zeros(shape, dtype=share.dtype)
    overlap = _overlapping(kernel, stride)

    def scatter(n0: int, n1: int) -> None:
        for _, rows, cols in kernel_offsets(kernel, (OH, OW), stride):
            if overlap:
                dxp[n0:n1, :, rows, cols] += share[n0:n1]
            else:
                dxp[n0:n1, :, rows, cols] = share[n0:n1]

    parallel(scatter, N, dxp.nbytes)
    return dxp[:, :, pad[0] : pad[0] + H, pad[1] : pad[1] + W]


# --------------------------------------------------------------------------------------------
# BatchNorm in training mode, one node instead of a dozen
# --------------------------------------------------------------------------------------------
class BatchNormTrain(Function):
    r"""$y = \\gamma (x - \\mu_B) / \\sqrt{\\sigma_B^2 + \\epsilon} + \beta$ with the batch's statistics.

    The same numbers as `nn.functional.batch_norm(training=True)` (a05's composite of about ten
    engine ops), as one graph node: on the small tensors of a training step each op's node and
    its backward cost as much as the arithmetic. Backward with $\\hat x = (x - \\mu_B)\\,s$,
    $s = 1/\\sqrt{\\sigma_B^2 + \\epsilon}$, n values per channel:
    $d\beta = \\sum g$, $d\\gamma = \\sum g \\hat x$,
    $dx = \\gamma s\\,(g - d\beta/n - \\hat x\\, d\\gamma/n)$. When the backward pass is itself
    recorded (create_graph), the same formula is built from engine ops, so it differentiates again.
    """

    def __init__(self, eps: float, stats: dict[str, np.ndarray]):
        self.eps, self.stats = eps, stats

    def forward(self, x, weight, bias):
        C = x.shape[1]
        self.axes, self.shape = (0,) + tuple(range(2, x.ndim)), (1, C) + (1,) * (x.ndim - 2)
        mean = x.mean(axis=self.axes, keepdims=True)
        centered = x - mean
        var = np.mean(centered * centered, axis=self.axes, keepdims=True)
        inv_std = (var + self.eps) ** -0.5
        self.stats.update(mean=mean, var=var)
        if is_grad_enabled():
            self.centered, self.inv_std = centered, inv_std
        y = centered * (inv_std * weight.reshape(self.shape))  # gamma/sigma first: one full-size multiply
        y += bias.reshape(self.shape)
        return y

    def backward(self, grad):
        x, weight, bias = self.inputs
        axes, shape = self.axes, self.shape
        n = x.data.size // x.shape[1]
        if is_grad_enabled():  # create_graph: the gradient as engine ops of x, weight and grad
            centered = x - x.mean(axis=axes, keepdims=True)
            xhat = centered * ((centered * centered).mean(axis=axes, keepdims=True) + self.eps) ** -0.5
            db, dw = grad.sum(axis=axes), (grad * xhat).sum(axis=axes)
            inner = grad - db.reshape(shape) / n - xhat * dw.reshape(shape) / n
            scale = weight.reshape(shape) * ((centered * centered).mean(axis=axes, keepdims=True) + self.eps) ** -0.5
            return scale * inner, dw, db
        g, centered, inv_std = grad.data, self.centered, self.inv_std
        db = g.sum(axis=axes, keepdims=True)
        dw_centered = (g * centered).sum(axis=axes, keepdims=True)  # sum g (x - mu); times s it is d gamma
        dx = g - db / n
        dx -= centered * (inv_std * inv_std * dw_centered / n)
        dx *= inv_std * weight.data.reshape(shape)
        dw = (dw_centered * inv_std).reshape(weight.shape)
        return _new_tensor(dx), _new_tensor(dw.astype(weight.dtype, copy=False)), _new_tensor(db.reshape(bias.shape))


def batch_norm_train(x: Tensor, running_mean: np.ndarray | None, running_var: np.ndarray | None, weight: Tensor,
                     bias: Tensor, momentum: float, eps: float) -> Tensor:
    """`nn.functional.batch_norm(x, ..., weight, bias, training=True)` as one `BatchNormTrain` node."""
    stats: dict[str, np.ndarray] = {}
    y = BatchNormTrain.apply(x, weight, bias, eps=eps, stats=stats)
    if running_mean is not None and running_var is not None:
        C, n = x.shape[1], x.data.size // x.shape[1]
        running_mean *= 1.0 - momentum
        running_mean += momentum * stats["mean"].reshape(C)
        running_var *= 1.0 - momentum
        running_var += momentum * stats["var"].reshape(C) * (n / (n - 1))
    return y


# --------------------------------------------------------------------------------------------
# Attention: the embedding's scatter-add, and attention's backward on arrays
# --------------------------------------------------------------------------------------------
ONE_HOT_MAX_ROWS = 128  # up to this vocabulary a one-hot GEMM is fastest; past it, the sorted sums


def embedding_backward_array(grad: np.ndarray, indices: np.ndarray, num_embeddings: int) -> np.ndarray:
    """The teaching `embedding_backward_array`'s result (each row of G added to its token's row of
    dW) without `np.add.at`'s per-element loop (40x slower here on (1024, 48) float32):

    - a small vocabulary: one GEMM, $dW = \text{onehot}^T G$, (V, N*T) @ (N*T, E). A one-hot column
      has a single 1, so row v sums the rows of G whose token is v; but the product also multiplies
      every row of G by the zeros of the other tokens, and 0 * inf = nan, so it serves only a
      finite G (an inf or nan upstream must stay in the row of the token that read it, as PyTorch
      keeps it);
    - otherwise, the positions sorted by token and each token's run of rows summed
      (`np.add.reduceat`): it touches only the rows a token read, and beats the one-hot product
      past about 128 rows (measured with one BLAS thread, 1024-4096 tokens, E = 48-64).
    """
    E = grad.shape[-1]
    g = grad.reshape(-1, E)
    flat = indices.reshape(-1)
    if num_embeddings <= ONE_HOT_MAX_ROWS and np.isfinite(g).all():
        one_hot = np.zeros((num_embeddings, flat.size), dtype=grad.dtype)
        one_hot[flat, np.arange(flat.size)] = 1
        return one_hot @ g
    dw = np.zeros((num_embeddings, E), dtype=grad.dtype)
    if flat.size == 0:
        return dw
    order = np.argsort(flat, kind="stable")
    tokens = flat[order]
    starts = np.flatnonzero(np.r_[True, tokens[1:] != tokens[:-1]])  # where each token's run begins
    dw[tokens[starts]] = np.add.reduceat(g[order], starts, axis=0)
    return dw


def attention_backward_array(grad: Tensor, q: Tensor, k: Tensor, v: Tensor, p: np.ndarray, scale: float,
                             needs: tuple[bool, ...]) -> tuple[Tensor | None, ...]:
    """`ops.attention.attention_backward` on arrays, with the weights P its op kept from the forward
    pass: three matrix products and one elementwise pass, instead of recomputing P and a dozen
    graph nodes. First derivatives only: the op calls it when the backward records no graph."""
    from .shape import unbroadcast

    g = grad.data
    out: list[Tensor | None] = [None, None, None]  # dQ, dK, dV: None where not wanted
    if needs[2]:
        out[2] = unbroadcast(_new_tensor(np.swapaxes(p, -1, -2) @ g), v.shape)
    if needs[0] or needs[1]:
        ds = g @ np.swapaxes(v.data, -1, -2)                     # dP (..., L, S)
        ds -= np.sum(ds * p, axis=-1, keepdims=True)
        ds *= p
        ds *= scale
        if needs[0]:
            out[0] = unbroadcast(_new_tensor(ds @ k.data), q.shape)
        if needs[1]:
            out[1] = unbroadcast(_new_tensor(np.swapaxes(ds, -1, -2) @ q.data), k.shape)
    return tuple(out)
