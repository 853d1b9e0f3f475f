"""Convolution ops: conv2d, conv1d, and the two linear maps of their backward pass.

Book: chapter 3 (`book/03_im2col.md`) for the forward pass, chapter 4
(`book/04_conv_backward.md`) for the backward pass. Assignments: `assignments/source/a03_im2col/`,
`assignments/source/a04_conv_backward/`. Tests: `tests/engine/test_conv_backward.py`,
`tests/engine/test_conv_golden.py`, `tests/engine/test_kernels.py`. The form of the backward that chapter 4
derives (dilate, pad, rotate180) is in `conv_backward.py`, tested equal to this one.

A convolution is linear in its input and linear in its weight, so its backward is made of two
linear maps, each a convolution-like op of its own:

    Conv2d           (x, w)    -> z      forward: im2col, one GEMM per group
    Conv2dInputGrad  (dz, w)   -> dx     transposed convolution: GEMM, then col2im
    Conv2dWeightGrad (x, dz)   -> dw     GEMM of dz with x's columns

Each one's backward is written with the other two, so the three close into a family and
`create_graph=True` through a convolution gives differentiable gradients (grad-of-grad).
PyTorch semantics throughout: cross-correlation (the kernel is not flipped), NCHW batches,
weight (K, C/G, KH, KW), $OH = (H + 2p - d(KH-1) - 1)//s + 1$.

The ops do their arithmetic in three array kernels, called through `kernels.py`: the teaching
kernels below (a03's model answers), or the reference engine's faster equal ones (`_fast.py`).
Memory layout: the GEMM produces (K, N*OH*OW); the output is a transposed *view* of it, shape
(N, K, OH, OW) but channel-major in memory. That saves a copy of the output, and the next
convolution reads channel-major input at least as fast as NCHW. Shapes and values are exactly
PyTorch's; only `.data.strides` tell the difference (as with PyTorch's memory formats).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Function, Tensor, _new_tensor, as_tensor, is_grad_enabled
from . import kernels
from .im2col import Padding, Pair, _is_int, as_padding, col2im, conv_output_hw, im2col, positive_pair


# --------------------------------------------------------------------------------------------
# The three kernels on raw arrays, as chapter 3 explains them. Params are normalized:
# stride/dilation pairs, padding ((top, bottom), (left, right)), groups an int.
# --------------------------------------------------------------------------------------------
def conv2d_array(x, w, bias, stride, padding, dilation, groups):
    """z = conv2d(x, w) + bias on arrays: z (N, K, OH, OW), and x's columns (C*KH*KW, N*OH*OW) for dw."""
    N, C, H, W = x.shape
    K, Cg, KH, KW = w.shape
    G = groups
    cols = im2col(x, (KH, KW), stride, padding, dilation)  # (C*KH*KW, N*OH*OW)
    OH, OW = conv_output_hw((H, W), (KH, KW), stride, padding, dilation)
    # One GEMM per group: group g's K/G kernels see only its block of C/G*KH*KW rows.
    z = w.reshape(G, K // G, Cg * KH * KW) @ cols.reshape(G, Cg * KH * KW, N * OH * OW)
    z = z.reshape(K, N, OH, OW).transpose(1, 0, 2, 3)  # (N, K, OH, OW)
    if bias is not None:
        z = z + bias.reshape(1, K, 1, 1)
    return z, cols


def conv2d_input_grad_array(grad, w, x_shape, stride, padding, dilation, groups):
    """dx = col2im(W^T dZ): grad (N, K, OH, OW) -> dx of shape x_shape (N, C, H, W)."""
    K, Cg, KH, KW = w.shape
    G = groups
    N, _, OH, OW = grad.shape
    dz = grad.transpose(1, 0, 2, 3).reshape(G, K // G, N * OH * OW)  # dZ (K, N*OH*OW), per group
    w_t = w.reshape(G, K // G, Cg * KH * KW).transpose(0, 2, 1)  # W^T (C/G*KH*KW, K/G), per group
    dcols = (w_t @ dz).reshape(G * Cg * KH * KW, N * OH * OW)  # the columns' gradient
    return col2im(dcols, x_shape, (KH, KW), stride, padding, dilation)


def conv2d_weight_grad_array(x, grad, w_shape, stride, padding, dilation, groups, cols=None):
    """dw = dZ cols^T per group: (K, C/G, KH, KW). x's columns are recomputed unless given."""
    K, Cg, KH, KW = w_shape
    G = groups
    if cols is None:
        cols = im2col(x, (KH, KW), stride, padding, dilation)  # (C*KH*KW, N*OH*OW)
    N, _, OH, OW = grad.shape
    dz = grad.transpose(1, 0, 2, 3).reshape(G, K // G, N * OH * OW)  # dZ (K, N*OH*OW), per group
    dw = dz @ cols.reshape(G, Cg * KH * KW, N * OH * OW).transpose(0, 2, 1)  # (G, K/G, C/G*KH*KW)
    return dw.reshape(w_shape)


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


def conv_params(
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
        raise ValueError(f"{op}: bias has shape {tuple(b_shape)} but the weight {w_shape} has {K} output channels; "
                         f"bias must have shape ({K},)")
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
            totals = [dl * (k - 1) for dl, k in zip(dilation_, kernel, strict=True)]
            pads = tuple((t // 2, t - t // 2) for t in totals)
        else:
            raise ValueError(f"{op}: padding must be 'same', 'valid', an int or a tuple of ints, got {padding!r}")
    elif (d == 2 and isinstance(padding, (tuple, list)) and len(padding) == 2
          and all(isinstance(p, (tuple, list)) for p in padding)):
        pads = as_padding(padding, op)
    else:
        pads = tuple((p, p) for p in _ntuple(padding, d, "padding", op))
        if min(min(p) for p in pads) < 0:
            raise ValueError(f"{op}: padding must be >= 0, got {padding!r}")
    spatial = x_shape[2:]
    padded = tuple(n + sum(p) for n, p in zip(spatial, pads, strict=True))
    extent = tuple(dl * (k - 1) + 1 for dl, k in zip(dilation_, kernel, strict=True))
    if any(e > n for e, n in zip(extent, padded, strict=True)):
        spans = f" with dilation {dilation_} spans {extent}," if max(dilation_) > 1 else " is"
        what = f"kernel {tuple(kernel)}{spans}"
        raise ValueError(
            f"{op}: {what} larger than the padded input {padded} (input {tuple(spatial)}, padding {pads}); "
            "use a smaller kernel or more padding"
        )
    return stride_, pads, dilation_, groups


# --------------------------------------------------------------------------------------------
# The ops
# --------------------------------------------------------------------------------------------
class Conv2d(Function):
    r"""$z[n,k] = b[k] + \sum_{c,i,j} x_{pad}[n, c, s\,oh + d\,i, s\,ow + d\,j]\, w[k, c, i, j]$ (per group).

    Backward: dx is the transposed convolution of dz (`Conv2dInputGrad`), dw correlates x with
    dz (`Conv2dWeightGrad`), db sums dz over N, OH, OW.
    """

    def __init__(self, stride: Pair, padding: Padding, dilation: Pair, groups: int):
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self._cols: np.ndarray | None = None

    def forward(self, x, weight, bias=None):
        z, cols = kernels.conv2d_array(x, weight, bias, self.stride, self.padding, self.dilation, self.groups)
        # dw needs x's columns again; keeping them saves a second im2col. They are handed back
        # for reuse after the first backward (or at once when nothing is being recorded).
        if is_grad_enabled():
            self._cols = cols
        else:
            kernels.recycle(cols)
        return z

    def backward(self, grad):
        x, weight = self.inputs[0], self.inputs[1]
        needs = self.needs_input_grad
        params = dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)
        cols, self._cols = self._cols, None
        if not grad.requires_grad:
            # Both gradients read dz as a (K, N*OH*OW) matrix: lay it out that way once, not
            # once per gradient. Only for a constant dz: same values, nothing to differentiate.
            grad = _new_tensor(kernels.channel_major(grad.data))
        dx = conv2d_input_grad(grad, weight, x.shape, **params) if needs[0] else None
        dw = conv2d_weight_grad(x, grad, weight.shape, cols=cols, **params) if needs[1] else None
        kernels.recycle(cols)
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
    stride_, pads, dilation_, groups_ = conv_params("conv2d", x.shape, weight.shape, b_shape, stride, padding,
                                                     dilation, groups)
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
        return kernels.conv2d_input_grad_array(grad, weight, self.x_shape, self.stride, self.padding, self.dilation,
                                               self.groups)

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
        padding=as_padding(padding, "conv2d_input_grad"),
        dilation=positive_pair(dilation, "dilation", "conv2d_input_grad"),
        groups=int(groups),
    )


class Conv2dWeightGrad(Function):
    r"""dw from x and dz:
    $dw[k, c, i, j] = \sum_{n, oh, ow} dz[n, k, oh, ow]\, x_{pad}[n, c, s\,oh + d\,i, s\,ow + d\,j]$.

    Bilinear in x and dz: its derivative in x is the transposed convolution of dz by the
    upstream kernel-shaped gradient, in dz the convolution of x by it.
    """

    def __init__(self, w_shape: tuple[int, ...], stride: Pair, padding: Padding, dilation: Pair, groups: int,
                 cols: np.ndarray | None = None):
        self.w_shape, self.stride, self.padding, self.dilation, self.groups = w_shape, stride, padding, dilation, groups
        self.cols = cols

    def forward(self, x, grad):
        cols, self.cols = self.cols, None  # use once; do not keep the big matrix alive on the graph
        return kernels.conv2d_weight_grad_array(x, grad, self.w_shape, self.stride, self.padding, self.dilation,
                                                self.groups, cols)

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
        padding=as_padding(padding, "conv2d_weight_grad"),
        dilation=positive_pair(dilation, "dilation", "conv2d_weight_grad"),
        groups=int(groups), cols=cols,
    )


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """1-D convolution: x (N, C, L), weight (K, C/groups, KL) -> (N, K, OL).

    A sequence is an image of height 1: reshape to (N, C, 1, L), run conv2d with a (1, KL)
    kernel, reshape back. The reshapes are engine ops, so the gradient needs no new code.
    """
    x, weight = as_tensor(x), as_tensor(weight)
    b_shape = None if bias is None else as_tensor(bias).shape
    (s,), (p,), (d,), groups_ = conv_params("conv1d", x.shape, weight.shape, b_shape, stride, padding, dilation,
                                             groups)
    N, C, L = x.shape
    K, Cg, KL = weight.shape
    x4, w4 = x.reshape((N, C, 1, L)), weight.reshape((K, Cg, 1, KL))
    args = (x4, w4) if bias is None else (x4, w4, bias)
    z = Conv2d.apply(*args, stride=(1, s), padding=((0, 0), p), dilation=(1, d), groups=groups_)
    return z.reshape((N, K, z.shape[3]))


# Their names before they were public (issue 39): notebooks released earlier import them, and are
# still graded.
_conv_params = conv_params
