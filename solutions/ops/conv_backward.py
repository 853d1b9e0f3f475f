"""The convolution backward pass in the form chapter 4 derives: dilate, pad, rotate180.

Book: chapter 4 (`book/04_conv_backward.md`). Assignment: `assignments/source/a04_conv_backward/`.
Tests: `tests/engine/test_conv_backward.py`.

For z = conv2d(x, w) with stride s, padding p and kernel dilation d, and upstream gradient dz:

    dx = unpad( conv( pad(dilate(dz, s)), rotate180(dilate(w, d)) with in/out channels swapped ) )
    dw = erode( conv( pad(x), dilate(dz, s) ), d )
    db = sum of dz over N, OH, OW

Why each piece is there:
- A stride-s convolution is the stride-1 convolution with all but every s-th output thrown
  away. The thrown-away outputs had zero gradient, so `dilate(dz, s)` puts them back as zeros
  (s - 1 zeros between neighbours) and the rest of the derivation is the stride-1 case.
- When the stride does not divide (H + 2p - d(KH-1) - 1), the stride-1 output is longer than
  the dilated dz by the remainder: those positions were thrown away too, so dz is dilated to
  the full stride-1 size, with zero rows/columns at the end. Without them the last input rows
  would get a gradient of the wrong shape (they get zeros of the right shape).
- In the stride-1 case every input pixel meets every kernel tap once, in reverse: dx is the
  "full" convolution of dz (padded by the kernel extent minus one) with the kernel rotated by
  180 degrees, summing over output channels instead of input channels.
- A dilated kernel is an ordinary kernel with zeros between its taps: use `dilate(w, d)`
  forward, and keep only the real taps of its gradient with `erode(., d)`.
- Padding: x_padded is what the kernel saw; its gradient is unpadded to give dx.

The helpers work on plain arrays (for the book's figures) and on Tensors (as differentiable
ops, so the derived form itself supports `create_graph=True`). The engine's own backward, in
`conv.py` (GEMM + col2im, chapter 3), is tested equal to `conv2d_backward_derived` on every
configuration. The correlation the derived form needs is written here tap by tap
(`correlate`), so that it shares no code with chapter 3's im2col convolution.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Function, Tensor
from . import kernels
from .conv import conv_params
from .im2col import Pair, as_padding, as_pair, positive_pair
from .shape import concatenate, flip, pad


# --------------------------------------------------------------------------------------------
# dilate / erode: insert zeros between rows and columns, and take them out again
# --------------------------------------------------------------------------------------------
def _dilated_hw(hw: tuple[int, int], stride: Pair, size: Any, op: str) -> tuple[int, int]:
    minimal = ((hw[0] - 1) * stride[0] + 1, (hw[1] - 1) * stride[1] + 1)
    if size is None:
        return minimal
    target = as_pair(size, "size", op)
    if target[0] < minimal[0] or target[1] < minimal[1]:
        raise ValueError(f"{op}: size {target} is smaller than the dilated size {minimal} of a {hw} image "
                         f"with stride {stride}")
    return target


def dilate_array(x: np.ndarray, stride: Pair, size: tuple[int, int]) -> np.ndarray:
    """Zeros of shape x.shape[:-2] + size with x[..., i, j] at [..., s_h*i, s_w*j]."""
    out = np.zeros(x.shape[:-2] + tuple(size), dtype=x.dtype)
    h, w = x.shape[-2:]
    out[..., : (h - 1) * stride[0] + 1 : stride[0], : (w - 1) * stride[1] + 1 : stride[1]] = x
    return out


def erode_array(x: np.ndarray, stride: Pair, size: tuple[int, int]) -> np.ndarray:
    """Samples [..., s_h*i, s_w*j] of x for i < size[0], j < size[1] (a view)."""
    return x[..., : (size[0] - 1) * stride[0] + 1 : stride[0], : (size[1] - 1) * stride[1] + 1 : stride[1]]


class Dilate(Function):
    """Spread the last two axes apart: out[..., s*i, s*j] = x[..., i, j], zeros elsewhere."""

    def __init__(self, stride: Pair, size: tuple[int, int]):
        self.stride, self.size = stride, size

    def forward(self, x):
        return kernels.dilate_array(x, self.stride, self.size)

    def backward(self, grad):
        (x,) = self.inputs
        return erode(grad, self.stride, x.shape[-2:])  # the zeros were constants: drop their gradient


class Erode(Function):
    """Keep every s-th row and column: out[..., i, j] = x[..., s*i, s*j]."""

    def __init__(self, stride: Pair, size: tuple[int, int]):
        self.stride, self.size = stride, size

    def forward(self, x):
        return kernels.erode_array(x, self.stride, self.size)

    def backward(self, grad):
        (x,) = self.inputs
        return dilate(grad, self.stride, x.shape[-2:])  # skipped positions get zero gradient


def dilate(x, stride, size=None):
    """Insert stride-1 zeros between the rows and between the columns of x (..., H, W).

    Output (..., (H-1)*SH + 1, (W-1)*SW + 1), or `size` with extra zeros at the bottom/right.
    stride 1 (PyTorch's "no dilation") changes nothing. An ndarray gives an ndarray; a Tensor
    gives a Tensor (the `Dilate` op, whose gradient is `erode`).
    """
    stride_ = positive_pair(stride, "stride", "dilate")
    if len(x.shape) < 2:
        raise ValueError(f"dilate: needs at least 2 axes (..., H, W), got shape {tuple(x.shape)}")
    target = _dilated_hw(tuple(x.shape[-2:]), stride_, size, "dilate")
    if isinstance(x, Tensor):
        return Dilate.apply(x, stride=stride_, size=target)
    return kernels.dilate_array(np.asarray(x), stride_, target)


def erode(x, stride, size=None):
    """Keep every stride-th row and column of x (..., H, W), starting at the first: the inverse of `dilate`.

    Output (..., ceil(H/SH), ceil(W/SW)), or the first `size` of them. An ndarray gives a view;
    a Tensor gives a Tensor (the `Erode` op, whose gradient is `dilate`).
    """
    stride_ = positive_pair(stride, "stride", "erode")
    if len(x.shape) < 2:
        raise ValueError(f"erode: needs at least 2 axes (..., H, W), got shape {tuple(x.shape)}")
    h, w = x.shape[-2:]
    available = (-(-h // stride_[0]), -(-w // stride_[1]))
    target = available if size is None else as_pair(size, "size", "erode")
    if target[0] > available[0] or target[1] > available[1] or min(target) < 1:
        raise ValueError(f"erode: cannot keep {target} samples from a {(h, w)} image with stride {stride_} "
                         f"(at most {available})")
    if isinstance(x, Tensor):
        return Erode.apply(x, stride=stride_, size=target)
    return kernels.erode_array(np.asarray(x), stride_, target)


undilate = erode


# --------------------------------------------------------------------------------------------
# pad2d / unpad2d / rotate180
# --------------------------------------------------------------------------------------------
def pad2d(x, padding):
    """Zero-pad the last two axes: padding is an int, (ph, pw) or ((top, bottom), (left, right)).

    On a Tensor this is the engine's `pad` op (its gradient crops the border off again).
    """
    (t, b), (l, r) = as_padding(padding, "pad2d")
    widths = ((0, 0),) * (len(x.shape) - 2) + ((t, b), (l, r))
    if isinstance(x, Tensor):
        return pad(x, widths)
    return np.pad(np.asarray(x), widths)


def unpad2d(x, padding):
    """Cut the border `pad2d` added (the inverse of pad2d, and its adjoint)."""
    (t, b), (l, r) = as_padding(padding, "unpad2d")
    h, w = x.shape[-2:]
    if t + b > h or l + r > w:
        raise ValueError(f"unpad2d: padding {((t, b), (l, r))} is more than the {(h, w)} image holds")
    return x[..., t : h - b, l : w - r]


def rotate180(w):
    """Turn each kernel half a circle: flip the last two axes (rows and columns)."""
    if len(w.shape) < 2:
        raise ValueError(f"rotate180: needs at least 2 axes (..., KH, KW), got shape {tuple(w.shape)}")
    axes = (len(w.shape) - 2, len(w.shape) - 1)
    if isinstance(w, Tensor):
        return flip(w, axes)
    return np.flip(np.asarray(w), axes)


# --------------------------------------------------------------------------------------------
# The derived backward
# --------------------------------------------------------------------------------------------
def correlate(a, k, groups: int):
    """Stride-1, unpadded cross-correlation: a (N, C, H, W), k (K, C/G, KH, KW) -> (N, K, H-KH+1, W-KW+1).

    One term per kernel tap (i, j): the slice of `a` that the tap meets at every output position,
    times the tap's (K/G, C/G) weights, a matrix product per group. The same lines serve arrays
    and Tensors (then every step is an engine op, and the result differentiates again).
    """
    N, C, H, W = a.shape
    K, Cg, KH, KW = k.shape
    G = groups
    OH, OW = H - KH + 1, W - KW + 1
    out = None
    for i in range(KH):
        for j in range(KW):
            seen = a[:, :, i : i + OH, j : j + OW].reshape((N, G, Cg, OH * OW))
            term = k[:, :, i, j].reshape((G, K // G, Cg)) @ seen  # (N, G, K/G, OH*OW)
            out = term if out is None else out + term
    return out.reshape((N, K, OH, OW))


def conv2d_backward_derived(x, weight, grad_out, stride=1, padding=0, dilation=1, groups=1):
    """(dx, dw, db) of `conv2d(x, weight, bias, stride, padding, dilation, groups)` given dL/dz.

    The textbook form (see the module docstring): every gradient is itself an ordinary
    stride-1 convolution of dilated, padded, rotated arrays. Arrays in, arrays out; with
    Tensors in, everything is built from engine ops and differentiable again.
    """
    x_shape, w_shape = tuple(x.shape), tuple(weight.shape)
    (sh, sw), pads, dil, groups = conv_params("conv2d", x_shape, w_shape, None, stride, padding, dilation, groups)
    N, C, H, W = x_shape
    K, Cg, KH, KW = w_shape
    Kg = K // groups
    xp = pad2d(x, pads)  # what the kernel saw
    Hp, Wp = xp.shape[-2:]
    wd = dilate(weight, dil)  # (K, Cg, KHd, KWd): the dilated kernel's zeros are real taps of value 0
    KHd, KWd = wd.shape[-2:]
    H1, W1 = Hp - KHd + 1, Wp - KWd + 1  # output size of the same convolution with stride 1
    expected = (N, K, (H1 - 1) // sh + 1, (W1 - 1) // sw + 1)
    if tuple(grad_out.shape) != expected:
        raise ValueError(f"conv2d_backward_derived: grad_out has shape {tuple(grad_out.shape)}, "
                         f"but the convolution's output has shape {expected}")
    g1 = dilate(grad_out, (sh, sw), size=(H1, W1))  # (N, K, H1, W1), stride-1 gradient

    # dx: full convolution of g1 with the rotated kernel, input and output channels swapped per group.
    g1_full = pad2d(g1, ((KHd - 1, KHd - 1), (KWd - 1, KWd - 1)))
    w_swapped = rotate180(wd).reshape((groups, Kg, Cg, KHd, KWd)).transpose((0, 2, 1, 3, 4)).reshape((C, Kg, KHd, KWd))
    dxp = correlate(g1_full, w_swapped, groups)  # (N, C, Hp, Wp)
    dx = unpad2d(dxp, pads)

    # dw: correlate x_padded with g1, summing over the batch: the batch becomes the channel axis.
    per_group = []
    for g in range(groups):
        xg = xp[:, g * Cg : (g + 1) * Cg].transpose((1, 0, 2, 3))  # (Cg, N, Hp, Wp)
        gg = g1[:, g * Kg : (g + 1) * Kg].transpose((1, 0, 2, 3))  # (Kg, N, H1, W1) as a kernel
        per_group.append(correlate(xg, gg, 1).transpose((1, 0, 2, 3)))  # (Kg, Cg, KHd, KWd)
    dwd = per_group[0] if groups == 1 else (
        concatenate(per_group, axis=0) if isinstance(per_group[0], Tensor) else np.concatenate(per_group, axis=0)
    )
    dw = erode(dwd, dil)

    db = grad_out.sum(axis=(0, 2, 3))
    return dx, dw, db


# Their names before they were public (issue 39): notebooks released earlier import them, and are
# still graded.
_correlate = correlate
