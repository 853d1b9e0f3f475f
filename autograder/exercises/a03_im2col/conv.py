"""Hidden checks of a03_im2col: the convolution and its gradients, on the student's kernel."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    dtype_name,
    graded,
    judged,
    run,
    time_limit,
)

from .common import (
    CONV_PATTERNS,
    TIME_LIMIT,
    _array,
    _conv,
    _conv_shapes,
    _im,
    _inside_the_engine,
    _slow,
)


# --------------------------------------------------------------------------------------------
# conv2d_array, conv2d_input_grad_array and conv2d_weight_grad_array
# --------------------------------------------------------------------------------------------
def _matmul_hint(error):
    text = str(error)
    if "matmul" in text or "mismatch" in text or "shapes" in text or "broadcast" in text:
        return ("the shapes of a matrix product do not line up: with groups, group g's K/G output channels see "
                "only its C/G input channels, one GEMM per group (np.matmul of (G, ...) stacks)")
    return None


def _args(params):
    return (params["stride"], params["padding"], params["dilation"], params["groups"])


@graded("a03-conv2d", "solutions.ops.conv:conv2d_array", points=3, diagnose=("conv2d",))
def check_conv2d(conv2d_array, rng):
    f = conv2d_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("conv2d_array")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            dtype = np.float32 if k % 4 == 1 else np.float64
            with_bias = k % 3 != 2
            label = f"{pattern[0]}, {'with' if with_bias else 'without'} bias, {dtype_name(dtype)}"
            x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
            b = rng.standard_normal(w_shape[0]).astype(dtype) if with_bias else None
            keep = (x.copy(), w.copy(), None if b is None else b.copy())
            got = run(f"{label}: conv2d_array", f, x, w, b, *_args(params), hint=_matmul_hint)
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                raise GradingFailure(f"{label}: conv2d_array returns a pair (z, cols): the output and x's column "
                                     "matrix (the weight gradient reuses it)")
            z_ref, cols_ref = reference(*keep, *_args(params))
            z_ref = np.array(z_ref)
            N, K, OH, OW = z_ref.shape

            def shape_hint(s):
                if tuple(s) == (K, N, OH, OW):
                    return "z must be (N, K, OH, OW): transpose the (K, N, OH, OW) result of the GEMM"
                if len(s) == 2:
                    return "z must be 4-D (N, K, OH, OW): reshape the GEMM's (K, N*OH*OW) result"
                return "z has the wrong shape (N, K, OH, OW)"

            z = _array(label, "conv2d_array (z)", got[0], z_ref.shape, dtype, shape_hint)
            if not close(z, z_ref, dtype):
                if b is not None and close(z, z_ref - b.reshape(1, -1, 1, 1), dtype):
                    raise GradingFailure(f"{label}: the bias is missing: add bias[k] to every output of channel k")
                bias = 0 if b is None else b.reshape(1, -1, 1, 1)
                scrambled = (z_ref - bias).transpose(1, 0, 2, 3).reshape(z_ref.shape) + bias
                if N > 1 and close(z, scrambled, dtype):
                    raise GradingFailure(f"{label}: the GEMM gives (K, N*OH*OW): reshape it to (K, N, OH, OW) and "
                                         "*transpose* to (N, K, OH, OW); a reshape alone mixes images and channels")
                flipped = np.array(reference(keep[0], keep[1][:, :, ::-1, ::-1].copy(), keep[2], *_args(params))[0])
                if close(z, flipped, dtype):
                    raise GradingFailure(f"{label}: the kernel is flipped (rotated by 180 degrees): conv2d in deep "
                                         "learning is a cross-correlation, z = W cols with the weight as it is")
                G = params["groups"]
                if 1 < G < K and any(close(z, v, dtype) for v in _groups_interleaved(*keep, params)):
                    raise GradingFailure(f"{label}: groups interleaved: group g owns a contiguous block of channels, "
                                         "output channels g*K/G ... (g+1)*K/G - 1 and input channels g*C/G ... "
                                         "(g+1)*C/G - 1, not every G-th one: reshape the weights to (G, K/G, "
                                         "C/G*KH*KW) and the columns to (G, C/G*KH*KW, N*OH*OW)")
                raise GradingFailure(f"{label}: wrong output values (compute im2col of x, then one GEMM per group "
                                     "with weight.reshape(G, K/G, C/G*KH*KW))")
            cols = got[1]
            if not isinstance(cols, np.ndarray) or cols.shape != cols_ref.shape or not close(cols, cols_ref, dtype):
                raise GradingFailure(f"{label}: the second value must be x's column matrix (C*KH*KW, N*OH*OW), "
                                     "exactly what im2col returns")
        _inside_the_engine("conv2d_array", rng, "the convolution (forward and backward) using your conv2d_array")


def _groups_interleaved(x, w, bias, params):
    """The convolution with every G-th output channel, or every G-th input channel, in a group (for hints)."""
    stride, padding, dilation, G = _args(params)
    N, C, H, W = x.shape
    K, Cg, KH, KW = w.shape
    cols = _im().im2col(x, (KH, KW), stride, padding, dilation)
    P = cols.shape[1]
    OH, OW = _im().conv_output_hw((H, W), (KH, KW), stride, padding, dilation)
    blocked_w = w.reshape(G, K // G, Cg * KH * KW)
    blocked_c = cols.reshape(G, Cg * KH * KW, P)
    strided_w = w.reshape(K // G, G, Cg * KH * KW).transpose(1, 0, 2)
    strided_c = cols.reshape(Cg, G, KH * KW, P).transpose(1, 0, 2, 3).reshape(G, Cg * KH * KW, P)
    bias = 0 if bias is None else bias.reshape(1, K, 1, 1)
    return [(a @ b).reshape(K, N, OH, OW).transpose(1, 0, 2, 3) + bias
            for a, b in ((strided_w, blocked_c), (blocked_w, strided_c), (strided_w, strided_c))]


def _dz_not_transposed(grad, w, x_shape, params):
    """The input gradient with dZ made by a reshape of grad alone (for hints)."""
    stride, padding, dilation, G = _args(params)
    K, Cg, KH, KW = w.shape
    N, _, OH, OW = grad.shape
    dz = grad.reshape(G, K // G, N * OH * OW)
    w_t = w.reshape(G, K // G, Cg * KH * KW).transpose(0, 2, 1)
    return _im().col2im((w_t @ dz).reshape(G * Cg * KH * KW, -1), x_shape, (KH, KW), stride, padding, dilation)


@graded("a03-conv2d-input-grad", "solutions.ops.conv:conv2d_input_grad_array", points=2, diagnose=("conv2d",))
def check_conv2d_input_grad(conv2d_input_grad_array, rng):
    f = conv2d_input_grad_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("conv2d_input_grad_array")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            dtype = np.float32 if k % 4 == 1 else np.float64
            label = f"{pattern[0]}, {dtype_name(dtype)}"
            w = rng.standard_normal(w_shape).astype(dtype)
            z_shape = _conv().conv2d_array(np.zeros(x_shape, dtype), w, None, *_args(params))[0].shape
            g = rng.standard_normal(z_shape).astype(dtype)
            keep = (g.copy(), w.copy())
            got = run(f"{label}: conv2d_input_grad_array", f, g, w, x_shape, *_args(params), hint=_matmul_hint)
            want = reference(*keep, x_shape, *_args(params))
            dx = _array(label, "conv2d_input_grad_array", got, x_shape, dtype,
                        lambda s: "dx must have x's shape x_shape (col2im of the columns' gradient)")
            if close(dx, want, dtype):
                continue
            if close(dx, -np.asarray(want), dtype):
                raise GradingFailure(f"{label}: dx has the wrong sign: the columns' gradient is +W^T dZ")
            if close(dx, reference(keep[0], keep[1][:, :, ::-1, ::-1].copy(), x_shape, *_args(params)), dtype):
                raise GradingFailure(f"{label}: the kernel is flipped (rotated by 180 degrees): with im2col the "
                                     "columns' gradient is W^T dZ with W as it is; the rotation belongs to the "
                                     "'full convolution' form of dx, not to col2im")
            if z_shape[0] > 1 and w_shape[0] > 1 and close(dx, _dz_not_transposed(*keep, x_shape, params), dtype):
                raise GradingFailure(f"{label}: dZ is the (K, N*OH*OW) matrix of grad: transpose grad (N, K, OH, OW) "
                                     "to (K, N, OH, OW) before flattening; a reshape alone mixes images and channels")
            raise GradingFailure(f"{label}: wrong values; the columns' gradient is W^T dZ per group, (C*KH*KW, "
                                 "N*OH*OW), and dx is its col2im")
        _inside_the_engine("conv2d_input_grad_array", rng,
                           "the convolution's input gradient using your conv2d_input_grad_array")


@graded("a03-conv2d-weight-grad", "solutions.ops.conv:conv2d_weight_grad_array", points=2, diagnose=("conv2d",))
def check_conv2d_weight_grad(conv2d_weight_grad_array, rng):
    f = conv2d_weight_grad_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("conv2d_weight_grad_array")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            dtype = np.float32 if k % 4 == 1 else np.float64
            given = k % 2 == 0
            label = f"{pattern[0]}, {'with' if given else 'without'} x's columns given, {dtype_name(dtype)}"
            x = rng.standard_normal(x_shape).astype(dtype)
            z_shape = _conv().conv2d_array(x, np.zeros(w_shape, dtype), None, *_args(params))[0].shape
            g = rng.standard_normal(z_shape).astype(dtype)
            cols = _im().im2col(x, w_shape[2:], params["stride"], params["padding"], params["dilation"]) \
                if given else None
            keep = (x.copy(), g.copy(), None if cols is None else cols.copy())
            got = run(f"{label}: conv2d_weight_grad_array", f, x, g, w_shape, *_args(params), cols, hint=_matmul_hint)
            want = reference(keep[0], keep[1], w_shape, *_args(params), keep[2])
            K, G = w_shape[0], params["groups"]

            def shape_hint(s):
                if int(np.prod(s)) == int(np.prod(w_shape)):
                    return "reshape the result to the weight's shape (K, C/G, KH, KW)"
                return "dw must have the weight's shape (K, C/G, KH, KW)"

            dw = _array(label, "conv2d_weight_grad_array", got, w_shape, dtype, shape_hint)
            if close(dw, want, dtype):
                continue
            if close(dw, np.asarray(want)[:, :, ::-1, ::-1], dtype):
                raise GradingFailure(f"{label}: dw is flipped (rotated by 180 degrees): dw = dZ cols^T reshaped to "
                                     "(K, C/G, KH, KW), with no rotation")
            rows = int(np.prod(w_shape[1:]))
            unturned = want.reshape(G, K // G, rows).transpose(0, 2, 1).reshape(w_shape)
            if close(dw, unturned, dtype):
                raise GradingFailure(f"{label}: you reshaped the (C*KH*KW, K) product to the weight's shape without "
                                     "transposing it first: dw = dZ cols^T is (K, C*KH*KW) per group")
            N, _, OH, OW = z_shape
            full_cols = keep[2] if keep[2] is not None else _im().im2col(keep[0], w_shape[2:], params["stride"],
                                                                         params["padding"], params["dilation"])
            mixed = (keep[1].reshape(G, K // G, N * OH * OW)
                     @ full_cols.reshape(G, rows, N * OH * OW).transpose(0, 2, 1)).reshape(w_shape)
            if N > 1 and K > 1 and close(dw, mixed, dtype):
                raise GradingFailure(f"{label}: dZ is the (K, N*OH*OW) matrix of grad: transpose grad (N, K, OH, OW) "
                                     "to (K, N, OH, OW) before flattening; a reshape alone mixes images and channels")
            raise GradingFailure(f"{label}: wrong values; dw = dZ cols^T per group, with dZ the (K, N*OH*OW) "
                                 "matrix of grad and cols x's column matrix")
        _inside_the_engine("conv2d_weight_grad_array", rng,
                           "the convolution's weight gradient using your conv2d_weight_grad_array")
