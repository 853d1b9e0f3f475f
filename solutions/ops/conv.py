"""Convolution ops: conv2d, conv1d, and the two linear maps of their backward pass.

Book: chapter 3 (`book/03_im2col.md`) for the forward pass, chapter 4
(`book/04_conv_backward.md`) for the backward pass. Assignments: `assignments/source/a03_im2col/`,
`assignments/source/a04_conv_backward/`. Tests: `tests/test_conv_backward.py`,
`tests/test_conv_golden.py`. The form of the backward that chapter 4 derives (dilate, pad,
rotate180) is in `conv_backward.py`; this module holds the fast path and is tested equal to it.

A convolution is linear in its input and linear in its weight, so its backward is made of two
linear maps, each a convolution-like op of its own:

    Conv2d           (x, w)    -> z      forward: im2col, one GEMM per group
    Conv2dInputGrad  (dz, w)   -> dx     transposed convolution: GEMM, then col2im
    Conv2dWeightGrad (x, dz)   -> dw     GEMM of dz with x's columns

Each one's backward is written with the other two, so the three close into a family and
`create_graph=True` through a convolution gives differentiable gradients (grad-of-grad).
PyTorch semantics throughout: cross-correlation (the kernel is not flipped), NCHW batches,
weight (K, C/G, KH, KW), $OH = (H + 2p - d(KH-1) - 1)//s + 1$.

Memory layout: the GEMM produces (K, N*OH*OW); the output is returned as a transposed *view*
of it, shape (N, K, OH, OW) but channel-major in memory. That saves a copy of the output, and
the next convolution reads channel-major input at least as fast as NCHW. Shapes and values are
exactly PyTorch's; only `.data.strides` tell the difference (as with PyTorch's memory formats).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Function, Tensor, as_tensor, is_grad_enabled
from .im2col import (
    Pair, Padding, _is_int, as_padding, col2im_accumulate, conv_output_hw, empty, im2col_padded, offset_slice, pad_hw,
    parallel, positive_pair, recycle,
)


# --------------------------------------------------------------------------------------------
# The three kernels on raw arrays. Params are normalized: stride/dilation pairs,
# padding ((top, bottom), (left, right)), groups an int.
# --------------------------------------------------------------------------------------------
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
    the padded dz with the rotated kernel, costs one im2col of dz (K*KH*KW rows) and one GEMM.
    Otherwise GEMM + col2im, whose column matrix has C*KH*KW rows; a stride would also make the
    derived form multiply s*s times as many inserted zeros.
    """
    K, C = w.shape[0], x_shape[1]
    if stride == (1, 1) and K <= C:
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
    (t, b), (l, r) = padding
    eh, ew = dilation[0] * (KH - 1), dilation[1] * (KW - 1)  # kernel extent minus 1
    amounts = [eh - t, eh - b, ew - l, ew - r]
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
    (t, b), (l, r) = padding
    Hp, Wp = H + t + b, W + l + r
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
    return dxp[:, :, t : t + H, l : l + W].transpose(1, 0, 2, 3)


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
    (t, b), (l, r) = padding
    Hp, Wp = H + t + b, W + l + r
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

        def add(c0: int, c1: int) -> None:
            for i in range(KH):
                for j in range(KW):
                    rows, columns = offset_slice(i, j, (h1 - h0, OW), stride, dilation)
                    rows = slice(rows.start + h0 * stride[0], rows.stop + h0 * stride[0], rows.step)
                    dxp[c0:c1, rows, columns] += blocks[c0:c1, i, j]

        parallel(add, C, dcols.nbytes)
    del dcols, blocks
    recycle(buffer)
    return dxp[:, t : t + H, l : l + W].transpose(3, 0, 1, 2)


def conv2d_weight_grad_array(
    x: np.ndarray, grad: np.ndarray, w_shape: tuple[int, ...], stride: Pair, padding: Padding, dilation: Pair,
    groups: int, cols: np.ndarray | None = None,
) -> np.ndarray:
    """dw = dZ cols^T, one GEMM per group (x's columns are recomputed unless given)."""
    K, Cg, KH, KW = w_shape
    G = groups
    own = cols is None
    if own:
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
# Parameter checks shared by conv2d and conv1d: errors name the op, the shapes and the fix
# --------------------------------------------------------------------------------------------
def _ntuple(value: Any, n: int, name: str, op: str) -> tuple[int, ...]:
    if _is_int(value):
        return (int(value),) * n
    if isinstance(value, (tuple, list)) and len(value) == n and all(_is_int(v) for v in value):
        return tuple(int(v) for v in value)
    kind = "an int" if n == 1 else f"an int or a tuple of {n} ints"
    raise TypeError(f"{op}: {name} must be {kind}, got {value!r}")


def _conv_params(
    op: str, x_shape: tuple[int, ...], w_shape: tuple[int, ...], b_shape: tuple[int, ...] | None,
    stride: Any, padding: Any, dilation: Any, groups: Any,
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...], int]:
    """Check a conv call with d = 1 or 2 spatial axes; return stride, padding (before, after) per
    axis, dilation, groups."""
    d = 2 if op == "conv2d" else 1
    layout, wlayout = ("(N, C, H, W)", "(K, C/groups, KH, KW)") if d == 2 else ("(N, C, L)", "(K, C/groups, KL)")
    if len(x_shape) != d + 2:
        hint = "; add a batch axis with x.unsqueeze(0)" if len(x_shape) == d + 1 else ""
        raise ValueError(f"{op}: expected a {d + 2}-D input {layout}, got shape {x_shape}{hint}")
    if len(w_shape) != d + 2:
        raise ValueError(f"{op}: expected a {d + 2}-D weight {wlayout}, got shape {w_shape}")
    if not _is_int(groups) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    groups = int(groups)
    C, K, Cg = x_shape[1], w_shape[0], w_shape[1]
    if C % groups:
        raise ValueError(f"{op}: groups={groups} does not divide the {C} input channels (input shape {x_shape})")
    if K % groups:
        raise ValueError(f"{op}: groups={groups} does not divide the {K} output channels (weight shape {w_shape})")
    if Cg * groups != C:
        if groups == 1:
            raise ValueError(
                f"{op}: input has {C} channels but weight expects {Cg} (weight shape {w_shape}); check in_channels"
            )
        raise ValueError(
            f"{op}: input has {C} channels but weight expects {Cg} per group x {groups} groups = {Cg * groups} "
            f"(weight shape {w_shape}); the weight's axis 1 must be in_channels // groups = {C // groups}"
        )
    if b_shape is not None and tuple(b_shape) != (K,):
        raise ValueError(f"{op}: bias has shape {tuple(b_shape)} but the weight {w_shape} has {K} output channels; bias must have shape ({K},)")
    stride_ = _ntuple(stride, d, "stride", op)
    dilation_ = _ntuple(dilation, d, "dilation", op)
    if min(stride_) < 1:
        raise ValueError(f"{op}: stride must be positive, got {stride!r}")
    if min(dilation_) < 1:
        raise ValueError(f"{op}: dilation must be positive, got {dilation!r}")
    kernel = w_shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * d
        elif padding == "same":
            if max(stride_) != 1:
                raise ValueError(
                    f"{op}: padding='same' needs stride 1, got stride {stride!r} (as in PyTorch); "
                    "give the padding as numbers for a strided convolution"
                )
            # Total d(k-1) keeps the size; an odd total puts the extra row/column at the end (PyTorch).
            totals = [dl * (k - 1) for dl, k in zip(dilation_, kernel)]
            pads = tuple((t // 2, t - t // 2) for t in totals)
        else:
            raise ValueError(f"{op}: padding must be 'same', 'valid', an int or a tuple of ints, got {padding!r}")
    elif d == 2 and isinstance(padding, (tuple, list)) and len(padding) == 2 and all(isinstance(p, (tuple, list)) for p in padding):
        pads = as_padding(padding, op)
    else:
        pads = tuple((p, p) for p in _ntuple(padding, d, "padding", op))
        if min(min(p) for p in pads) < 0:
            raise ValueError(f"{op}: padding must be >= 0, got {padding!r}")
    spatial = x_shape[2:]
    padded = tuple(n + sum(p) for n, p in zip(spatial, pads))
    extent = tuple(dl * (k - 1) + 1 for dl, k in zip(dilation_, kernel))
    if any(e > n for e, n in zip(extent, padded)):
        what = f"kernel {tuple(kernel)}" + (f" with dilation {dilation_} spans {extent}," if max(dilation_) > 1 else " is")
        raise ValueError(
            f"{op}: {what} larger than the padded input {padded} (input {tuple(spatial)}, padding {pads}); "
            "use a smaller kernel or more padding"
        )
    return stride_, pads, dilation_, groups


# --------------------------------------------------------------------------------------------
# The ops
# --------------------------------------------------------------------------------------------
class Conv2d(Function):
    """$z[n,k] = b[k] + \\sum_{c,i,j} x_{pad}[n, c, s\\,oh + d\\,i, s\\,ow + d\\,j]\\, w[k, c, i, j]$ (per group).

    Backward: dx is the transposed convolution of dz (`Conv2dInputGrad`), dw correlates x with
    dz (`Conv2dWeightGrad`), db sums dz over N, OH, OW.
    """

    def __init__(self, stride: Pair, padding: Padding, dilation: Pair, groups: int):
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self._cols: np.ndarray | None = None

    def forward(self, x, weight, bias=None):
        z, cols = conv2d_array(x, weight, bias, self.stride, self.padding, self.dilation, self.groups)
        # dw needs x's columns again; keeping them saves a second im2col. They are handed back
        # for reuse after the first backward (or at once when nothing is being recorded).
        if is_grad_enabled():
            self._cols = cols
        else:
            recycle(cols)
        return z

    def backward(self, grad):
        x, weight = self.inputs[0], self.inputs[1]
        needs = self.needs_input_grad
        params = dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)
        cols, self._cols = self._cols, None
        if not grad.requires_grad:
            # Both gradients read dz as a (K, N*OH*OW) matrix: lay it out that way once, not
            # once per gradient. Only for a constant dz: same values, nothing to differentiate.
            grad = Tensor._wrap(channel_major(grad.data))
        dx = conv2d_input_grad(grad, weight, x.shape, **params) if needs[0] else None
        dw = conv2d_weight_grad(x, grad, weight.shape, cols=cols, **params) if needs[1] else None
        recycle(cols)
        if len(self.inputs) == 2:
            return dx, dw
        db = grad.sum(axis=(0, 2, 3)) if needs[2] else None
        return dx, dw, db


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """2-D convolution (cross-correlation) with PyTorch's semantics.

    x (N, C, H, W), weight (K, C/groups, KH, KW), bias (K,) or None -> (N, K, OH, OW).
    `stride`, `dilation`: int or pair. `padding`: int, pair, ((top, bottom), (left, right)),
    'valid' (none) or 'same' (stride 1 only; the output keeps H, W; an odd total padding puts
    the extra row/column at the bottom/right, as PyTorch). `groups` splits the channels into
    independent convolutions (groups = C is a depthwise convolution).
    """
    x, weight = as_tensor(x), as_tensor(weight)
    b_shape = None if bias is None else as_tensor(bias).shape
    stride_, pads, dilation_, groups_ = _conv_params("conv2d", x.shape, weight.shape, b_shape, stride, padding, dilation, groups)
    args = (x, weight) if bias is None else (x, weight, bias)
    return Conv2d.apply(*args, stride=stride_, padding=pads, dilation=dilation_, groups=groups_)


class Conv2dInputGrad(Function):
    """dx from dz: the transposed convolution (PyTorch's conv_transpose2d), shaped like x.

    Linear in dz and in w. Its adjoint in dz is the convolution itself, and its derivative in w
    is the weight gradient with the roles of x and dz swapped.
    """

    def __init__(self, x_shape: tuple[int, ...], stride: Pair, padding: Padding, dilation: Pair, groups: int):
        self.x_shape, self.stride, self.padding, self.dilation, self.groups = x_shape, stride, padding, dilation, groups

    def forward(self, grad, weight):
        return conv2d_input_grad_array(grad, weight, self.x_shape, self.stride, self.padding, self.dilation, self.groups)

    def backward(self, g):
        grad, weight = self.inputs
        params = dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)
        d_grad = conv2d(g, weight, **params) if self.needs_input_grad[0] else None
        d_weight = conv2d_weight_grad(g, grad, weight.shape, **params) if self.needs_input_grad[1] else None
        return d_grad, d_weight


def conv2d_input_grad(grad, weight, x_shape, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """dL/dx of `conv2d(x, weight, ...)` given dL/dz `grad`, for an input of shape `x_shape`."""
    x_shape = tuple(int(n) for n in x_shape)
    return Conv2dInputGrad.apply(
        grad, weight, x_shape=x_shape, stride=positive_pair(stride, "stride", "conv2d_input_grad"),
        padding=as_padding(padding, "conv2d_input_grad"), dilation=positive_pair(dilation, "dilation", "conv2d_input_grad"),
        groups=int(groups),
    )


class Conv2dWeightGrad(Function):
    """dw from x and dz: $dw[k, c, i, j] = \\sum_{n, oh, ow} dz[n, k, oh, ow]\\, x_{pad}[n, c, s\\,oh + d\\,i, s\\,ow + d\\,j]$.

    Bilinear in x and dz: its derivative in x is the transposed convolution of dz by the
    upstream kernel-shaped gradient, in dz the convolution of x by it.
    """

    def __init__(self, w_shape: tuple[int, ...], stride: Pair, padding: Padding, dilation: Pair, groups: int,
                 cols: np.ndarray | None = None):
        self.w_shape, self.stride, self.padding, self.dilation, self.groups = w_shape, stride, padding, dilation, groups
        self.cols = cols

    def forward(self, x, grad):
        cols, self.cols = self.cols, None  # use once; do not keep the big matrix alive on the graph
        return conv2d_weight_grad_array(x, grad, self.w_shape, self.stride, self.padding, self.dilation, self.groups, cols)

    def backward(self, g):
        x, grad = self.inputs
        params = dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)
        d_x = conv2d_input_grad(grad, g, x.shape, **params) if self.needs_input_grad[0] else None
        d_grad = conv2d(x, g, **params) if self.needs_input_grad[1] else None
        return d_x, d_grad


def conv2d_weight_grad(x, grad, weight_shape, stride=1, padding=0, dilation=1, groups=1, cols=None) -> Tensor:
    """dL/dweight of `conv2d(x, weight, ...)` given dL/dz `grad`. `cols`: x's im2col, if already at hand."""
    weight_shape = tuple(int(n) for n in weight_shape)
    return Conv2dWeightGrad.apply(
        x, grad, w_shape=weight_shape, stride=positive_pair(stride, "stride", "conv2d_weight_grad"),
        padding=as_padding(padding, "conv2d_weight_grad"), dilation=positive_pair(dilation, "dilation", "conv2d_weight_grad"),
        groups=int(groups), cols=cols,
    )


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """1-D convolution: x (N, C, L), weight (K, C/groups, KL) -> (N, K, OL).

    A sequence is an image of height 1: reshape to (N, C, 1, L), run conv2d with a (1, KL)
    kernel, reshape back. The reshapes are engine ops, so the gradient needs no new code.
    """
    x, weight = as_tensor(x), as_tensor(weight)
    b_shape = None if bias is None else as_tensor(bias).shape
    (s,), (p,), (d,), groups_ = _conv_params("conv1d", x.shape, weight.shape, b_shape, stride, padding, dilation, groups)
    N, C, L = x.shape
    K, Cg, KL = weight.shape
    x4, w4 = x.reshape((N, C, 1, L)), weight.reshape((K, Cg, 1, KL))
    args = (x4, w4) if bias is None else (x4, w4, bias)
    z = Conv2d.apply(*args, stride=(1, s), padding=((0, 0), p), dilation=(1, d), groups=groups_)
    return z.reshape((N, K, z.shape[3]))
