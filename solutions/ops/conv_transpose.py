r"""conv_transpose2d: the transposed convolution, which is conv2d's input gradient run forward.

Book: chapter 4 (`book/04_conv_backward.md`), where dx of a convolution is derived.
Tests: `tests/engine/test_ops_more.py`, `tests/engine/test_golden.py`.

conv2d maps x (N, C, H, W) to z (N, K, OH, OW); its input gradient maps a (N, K, OH, OW) array
back to (N, C, H, W). A transposed convolution is that map applied to data: its input plays the
role of dz, and PyTorch's weight layout for it, (C_in, C_out/G, KH, KW), is exactly conv2d's
(K, C/G, KH, KW) read with K = C_in. So the op is `Conv2dInputGrad` (conv.py), whose backward
already exists: the gradient in x is conv2d, the gradient in the weight is conv2d's weight
gradient. Nothing new to differentiate, and create_graph works through it.

Output size: $OH = (H - 1)s - 2p + d(KH - 1) + \text{output\_padding} + 1$. Several output sizes
share one conv2d (a strided conv2d drops its last rows), and output_padding picks among them:
extra rows at the bottom/right. The uncropped result has $(H-1)s + d(KH-1) + 1$ rows; padding
crops p from the top and p - output_padding from the bottom, as a conv2d padding of
(p, p - output_padding). When output_padding > p the bottom rows beyond the uncropped result
are zeros (no input reaches them), added with `pad`.
"""
from __future__ import annotations

from ..graph import Tensor, as_tensor
from .conv import conv2d_input_grad
from .im2col import _is_int, as_pair, positive_pair
from .shape import pad


def _params(x_shape, w_shape, b_shape, stride, padding, output_padding, groups, dilation):
    op = "conv_transpose2d"
    if len(x_shape) != 4:
        hint = "; add a batch axis with x.unsqueeze(0)" if len(x_shape) == 3 else ""
        raise ValueError(f"{op}: expected a 4-D input (N, C_in, H, W), got shape {tuple(x_shape)}{hint}")
    if len(w_shape) != 4:
        raise ValueError(f"{op}: expected a 4-D weight (C_in, C_out/groups, KH, KW), got shape {tuple(w_shape)}")
    if not _is_int(groups) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    C, G = x_shape[1], int(groups)
    if w_shape[0] != C:
        raise ValueError(
            f"{op}: input has {C} channels but the weight {tuple(w_shape)} expects {w_shape[0]}; "
            "a transposed convolution's weight is (in_channels, out_channels // groups, KH, KW)"
        )
    if C % G:
        raise ValueError(f"{op}: groups={G} does not divide the {C} input channels (input shape {tuple(x_shape)})")
    K = w_shape[1] * G
    if b_shape is not None and tuple(b_shape) != (K,):
        raise ValueError(
            f"{op}: bias has shape {tuple(b_shape)} but the output has {K} channels; bias must have shape ({K},)"
        )
    stride_ = positive_pair(stride, "stride", op)
    dilation_ = positive_pair(dilation, "dilation", op)
    pad_ = as_pair(padding, "padding", op)
    out_pad = as_pair(output_padding, "output_padding", op)
    if min(pad_) < 0 or min(out_pad) < 0:
        raise ValueError(f"{op}: padding and output_padding must be >= 0, got {padding!r} and {output_padding!r}")
    for a in (0, 1):
        if out_pad[a] >= stride_[a] and out_pad[a] >= dilation_[a]:
            raise ValueError(
                f"{op}: output_padding {out_pad} must be smaller than either stride {stride_} or dilation "
                f"{dilation_} along each axis (PyTorch's rule: a larger one would only add rows no input reaches)"
            )
    H, W = x_shape[2:]
    out_hw = tuple((n - 1) * s - 2 * p + d * (k - 1) + o + 1
                   for n, s, p, d, k, o in zip((H, W), stride_, pad_, dilation_, w_shape[2:], out_pad, strict=True))
    if min(out_hw) < 1:
        raise ValueError(
            f"{op}: the output would have size {out_hw} (input {(H, W)}, kernel {tuple(w_shape[2:])}, "
            f"stride {stride_}, padding {pad_}, dilation {dilation_}, output_padding {out_pad}); use less padding"
        )
    return (x_shape[0], K) + out_hw, stride_, pad_, out_pad, dilation_, G


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1) -> Tensor:
    r"""Transposed 2-D convolution with PyTorch's semantics and argument order.

    x (N, C_in, H, W), weight (C_in, C_out/groups, KH, KW), bias (C_out,) or None ->
    (N, C_out, OH, OW), $OH = (H - 1)s - 2p + d(KH - 1) + \text{output\_padding} + 1$.
    It is the input gradient of `conv2d(y, weight, stride=s, padding=p, dilation=d, groups=g)`
    for a y of the output's shape; output_padding must be below stride or dilation.
    """
    x, weight = as_tensor(x), as_tensor(weight)
    b_shape = None if bias is None else as_tensor(bias).shape
    out_shape, stride_, (ph, pw), (oph, opw), dilation_, groups_ = _params(
        x.shape, weight.shape, b_shape, stride, padding, output_padding, groups, dilation)
    N, K, OH, OW = out_shape
    # The rows below the uncropped result (output_padding > padding) are zeros, added after.
    extra_h, extra_w = max(oph - ph, 0), max(opw - pw, 0)
    out = conv2d_input_grad(
        x, weight, (N, K, OH - extra_h, OW - extra_w), stride=stride_,
        padding=((ph, max(ph - oph, 0)), (pw, max(pw - opw, 0))), dilation=dilation_, groups=groups_,
    )
    if extra_h or extra_w:
        out = pad(out, ((0, 0), (0, 0), (0, extra_h), (0, extra_w)))
    if bias is not None:
        out = out + as_tensor(bias).reshape((1, K, 1, 1))
    return out
