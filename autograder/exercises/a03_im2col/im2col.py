"""Hidden checks of a03_im2col: the array kernels: output_size, windows, im2col, col2im."""
from __future__ import annotations

import math

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    dtype_name,
    graded,
    in_sandbox,
    judged,
    run,
    time_limit,
    type_name,
)

from .common import (
    CONV_PATTERNS,
    SPEED_SHAPE,
    TIME_LIMIT,
    _array,
    _as_the_convolution_calls,
    _conv_shapes,
    _im,
    _slow,
    _speed,
)


# --------------------------------------------------------------------------------------------
# output_size
# --------------------------------------------------------------------------------------------
def _formula(size, kernel, stride, pad, dilation):
    return (size + pad - dilation * (kernel - 1) - 1) // stride + 1


@graded("a03-output-size", "solutions.ops.im2col:output_size", points=1, diagnose=("conv2d",))
def check_output_size(output_size, rng):
    f = output_size
    cases = []
    for size in (1, 2, 5, 7, 10, 11):
        for kernel in (1, 2, 3, 5):
            for stride in (1, 2, 3):
                for pad in (0, 1, 2, 4):
                    for dilation in (1, 2, 3):
                        if dilation * (kernel - 1) + 1 <= size + pad:
                            cases.append((size, kernel, stride, pad, dilation))
    order = rng.permutation(len(cases))
    for k in order:
        size, kernel, stride, pad, dilation = cases[k]
        label = (f"size {size}, kernel {kernel}, stride {stride}, total padding {pad}, dilation {dilation}")
        got = run(f"{label}: output_size", f, size, kernel, stride, pad, dilation)
        want = _formula(size, kernel, stride, pad, dilation)
        if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, np.integer)):
            if isinstance(got, (float, np.floating)) and float(got).is_integer() and int(got) == want:
                raise GradingFailure(f"{label}: output_size returned a float; return an int (use // for the division)")
            raise GradingFailure(f"{label}: output_size returned {type_name(got)}; return an int")
        if got == want:
            continue
        if got == _formula(size, kernel, stride, pad, 1):
            raise GradingFailure(f"{label}: output size: did you include dilation? A kernel of k taps with "
                                 "dilation d spans d(k-1)+1 pixels, so OH = (H + pad - d(k-1) - 1) // s + 1")
        if got == _formula(size, kernel, stride, 2 * pad, dilation):
            raise GradingFailure(f"{label}: `pad` is already the total of both sides (top + bottom): do not double it")
        if got == math.ceil((size + pad - dilation * (kernel - 1) - 1) / stride) + 1:
            raise GradingFailure(f"{label}: round down (//): a window that does not fit entirely is dropped")
        if got == (size + pad - dilation * (kernel - 1)) // stride + 1:
            raise GradingFailure(f"{label}: off by one: the last window starts at the last position where the whole "
                                 "kernel still fits, OH = (H + pad - d(k-1) - 1) // s + 1")
        raise GradingFailure(f"{label}: wrong output size; OH = (H + pad - d(k-1) - 1) // s + 1")


# --------------------------------------------------------------------------------------------
# windows
# --------------------------------------------------------------------------------------------
def _window_cases(rng):
    cases = []
    for label, kernel, stride, dilation in [
        ("a 3x3 kernel, stride 1", (3, 3), (1, 1), (1, 1)),
        ("a 2x2 kernel, stride 2", (2, 2), (2, 2), (1, 1)),
        ("a 3x2 kernel, stride (2, 1), dilation (1, 2)", (3, 2), (2, 1), (1, 2)),
        ("a 2x3 kernel, stride 3, dilation 2", (2, 3), (3, 3), (2, 2)),
        ("a 3x3 kernel, stride 1, dilation 3", (3, 3), (1, 1), (3, 3)),
        ("a 1x1 kernel, stride 2", (1, 1), (2, 2), (1, 1)),
    ]:
        ext = (dilation[0] * (kernel[0] - 1) + 1, dilation[1] * (kernel[1] - 1) + 1)
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), ext[0] + int(rng.integers(1, 5)),
                 ext[1] + int(rng.integers(2, 6)))
        cases.append((label, kernel, stride, dilation, shape))
    return cases


def _steps_swapped(xp, kernel, stride, dilation):
    """The windows with the stride stepping through the taps and the dilation through the positions."""
    from numpy.lib.stride_tricks import sliding_window_view
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    view = sliding_window_view(xp, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(2, 3))
    return view[:, :, ::dh, ::dw, ::sh, ::sw]


@graded("a03-windows", "solutions.ops.im2col:windows", points=2, diagnose=("conv2d",))
def check_windows(windows, rng):
    f = windows
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("windows")):
        for k, (label, kernel, stride, dilation, shape) in enumerate(_window_cases(rng)):
            dtype = np.float32 if k % 3 == 2 else np.float64
            label = f"{label}, input {shape}, {dtype_name(dtype)}"
            xp = rng.standard_normal(shape).astype(dtype)
            keep = xp.copy()
            there = in_sandbox(xp)
            got = run(f"{label}: windows", f, there, kernel, stride, dilation)
            if not np.array_equal(np.asarray(there), keep):
                raise GradingFailure(f"{label}: windows changed its input; it only reads it")
            want = reference(keep, kernel, stride, dilation)
            swapped = _steps_swapped(keep, kernel, stride, dilation) if stride != dilation else None

            def shape_hint(got_shape, want=want, kernel=kernel, dilation=dilation, stride=stride, swapped=swapped):
                got_shape = tuple(got_shape)
                if swapped is not None and got_shape == swapped.shape:
                    return ("you swapped stride and dilation: the stride moves the window (positions oh*SH), the "
                            "dilation spaces the taps inside it (i*DH)")
                if len(got_shape) != 6:
                    return "windows returns a 6-D array (N, C, OH, OW, KH, KW)"
                if got_shape[4:] != tuple(kernel):
                    return ("the last two axes must be the kernel's (KH, KW) taps; did you include dilation? The "
                            "window of a dilated kernel spans d(k-1)+1 pixels, of which every d-th is a tap")
                no_dilation = tuple((n - k) // s + 1 for n, k, s in zip(shape[2:], kernel, stride, strict=False))
                if got_shape[2:4] == no_dilation and dilation != (1, 1):
                    return ("output size: did you include dilation? The window of a dilated kernel spans "
                            "d(k-1)+1 pixels, so there are fewer positions than for an undilated one")
                return "the number of window positions (OH, OW) is wrong: OH = (Hp - d(KH-1) - 1) // s + 1"

            out = _array(label, "windows", got, want.shape, dtype, shape_hint)
            if np.array_equal(out, want):
                continue
            if swapped is not None and swapped.shape == out.shape and np.array_equal(out, swapped):
                raise GradingFailure(f"{label}: you swapped stride and dilation: the stride moves the window "
                                     "(positions oh*SH), the dilation spaces the taps inside it (i*DH)")
            raise GradingFailure(f"{label}: wrong values; window [n, c, oh, ow, i, j] holds "
                                 "xp[n, c, oh*SH + i*DH, ow*SW + j*DW]")
    _speed("windows", f, np.zeros(SPEED_SHAPE, np.float32), (3, 3), (1, 1), (1, 1))


# --------------------------------------------------------------------------------------------
# im2col
# --------------------------------------------------------------------------------------------
def _given_forms(k: int, kernel, stride, padding, dilation):
    """The parameters as a caller may give them: ints where a pair repeats (every third case),
    pairs, or padding as ((top, bottom), (left, right))."""
    (top, bottom), (left, right) = padding
    if k % 3 == 0:
        def squash(p):
            return p[0] if p[0] == p[1] else tuple(p)

        pad = top if top == bottom == left == right else ((top, bottom), (left, right))
        return squash(kernel), squash(stride), pad, squash(dilation)
    if k % 3 == 1 and top == bottom and left == right:
        return tuple(kernel), tuple(stride), (top, left), tuple(dilation)
    return tuple(kernel), tuple(stride), ((top, bottom), (left, right)), tuple(dilation)


@graded("a03-im2col", "solutions.ops.im2col:im2col", points=3, diagnose=("im2col / col2im", "conv2d"))
def check_im2col(im2col, rng):
    f = im2col
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("im2col")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            kernel, stride, padding, dilation = w_shape[2:], params["stride"], params["padding"], params["dilation"]
            dtype = np.float32 if k % 4 == 1 else np.float64
            label = f"{pattern[0]}, {dtype_name(dtype)}"
            x = rng.standard_normal(x_shape).astype(dtype)
            keep = x.copy()
            args = _given_forms(k, kernel, stride, padding, dilation)
            got = run(f"{label}: im2col", f, x, *args)
            want = reference(keep, *args)
            N, C = x_shape[:2]
            KH, KW = kernel
            P = want.shape[1] // N
            unpadded = reference(keep, kernel, stride, 0, dilation) if sum(map(sum, padding)) and \
                min(keep.shape[2] - dilation[0] * (KH - 1), keep.shape[3] - dilation[1] * (KW - 1)) >= 1 else None

            def shape_hint(s, want=want, unpadded=unpadded):
                if tuple(s) == want.shape[::-1]:
                    return ("rows and columns are swapped: one *column* per output pixel (N*OH*OW of them), one "
                            "*row* per (channel, kernel row, kernel col) (C*KH*KW of them)")
                if unpadded is not None and tuple(s) == unpadded.shape:
                    return ("the matrix has as many columns as an unpadded input gives: pad x first "
                            "(pad_hw(x, padding)), then take the windows of the padded input")
                if len(s) != 2:
                    return "return a 2-D matrix (C*KH*KW, N*OH*OW)"
                return ("the matrix has the wrong shape: (C*KH*KW, N*OH*OW) with OH = (H + top + bottom - d(KH-1) - 1) "
                        "// s + 1, the dilation included")

            cols = _array(label, "im2col", got, want.shape, dtype, shape_hint)
            if close(cols, want, dtype):
                continue
            by_offset = want.reshape(C, KH * KW, -1).transpose(1, 0, 2).reshape(want.shape)
            if close(cols, by_offset, dtype) and C > 1:
                raise GradingFailure(f"{label}: the rows are in (kernel row, kernel col, channel) order; the "
                                     "convolution needs (channel, kernel row, kernel col), the order of "
                                     "weight.reshape(K, C*KH*KW)")
            pixel_major = want.reshape(-1, N, P).transpose(0, 2, 1).reshape(want.shape)
            if close(cols, pixel_major, dtype) and N > 1:
                raise GradingFailure(f"{label}: the columns are in (output pixel, image) order; column "
                                     "n*OH*OW + oh*OW + ow belongs to image n, output pixel (oh, ow)")
            if np.allclose(np.sort(cols, axis=None), np.sort(want, axis=None)):
                raise GradingFailure(f"{label}: the right numbers in the wrong places: row c*KH*KW + i*KW + j, "
                                     "column n*OH*OW + oh*OW + ow holds xp[n, c, oh*SH + i*DH, ow*SW + j*DW]")
            raise GradingFailure(f"{label}: wrong values; cols[c*KH*KW + i*KW + j, n*OH*OW + oh*OW + ow] = "
                                 "xp[n, c, oh*SH + i*DH, ow*SW + j*DW], xp the zero-padded input")
        _as_the_convolution_calls("im2col", f, rng, "the convolution (forward and backward) calling your im2col")
    _speed("im2col", f, np.zeros(SPEED_SHAPE, np.float32), 3, 1, 1, 1)


# --------------------------------------------------------------------------------------------
# col2im
# --------------------------------------------------------------------------------------------
def _col2im_variant(cols, x_shape, kernel, stride, padding, dilation, assign=False, taps_dilation=None):
    """col2im into the padded image (N, C, Hp, Wp), optionally with a classic bug (for hints):
    overlaps assigned instead of added, or the taps read without the dilation."""
    N, C, H, W = x_shape
    (kh, kw), ((top, bottom), (left, right)) = kernel, padding
    OH, OW = _im().conv_output_hw((H, W), kernel, stride, padding, dilation)
    blocks = cols.reshape(C, kh, kw, N, OH, OW).transpose(3, 0, 1, 2, 4, 5)
    xp = np.zeros((N, C, H + top + bottom, W + left + right), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            rows, columns = _im().offset_slice(i, j, (OH, OW), stride, taps_dilation or dilation)
            if assign:
                xp[:, :, rows, columns] = blocks[:, :, i, j]
            else:
                xp[:, :, rows, columns] += blocks[:, :, i, j]
    return xp


def _crop(xp, padding, H, W, swapped=False):
    (top, bottom), (left, right) = padding
    return xp[:, :, left:left + H, top:top + W] if swapped else xp[:, :, top:top + H, left:left + W]


@graded("a03-col2im", "solutions.ops.im2col:col2im", points=3, diagnose=("im2col / col2im", "conv2d"))
def check_col2im(col2im, rng):
    f = col2im
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("col2im")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            kernel, stride, padding, dilation = w_shape[2:], params["stride"], params["padding"], params["dilation"]
            dtype = np.float32 if k % 4 == 1 else np.float64
            label = f"{pattern[0]}, {dtype_name(dtype)}"
            N, C, H, W = x_shape
            OH, OW = _im().conv_output_hw((H, W), kernel, stride, padding, dilation)
            cols = rng.standard_normal((C * kernel[0] * kernel[1], N * OH * OW)).astype(dtype)
            keep = cols.copy()
            args = _given_forms(k, kernel, stride, padding, dilation)
            got = run(f"{label}: col2im", f, cols, x_shape, *args)
            want = reference(keep, x_shape, *args)
            full = _col2im_variant(keep, x_shape, kernel, stride, padding, dilation)
            swapped = _crop(full, padding, H, W, swapped=True)
            crop_hint = ("the padding is cropped with the wrong widths: rows lose (top, bottom) and columns (left, "
                         "right), padding = ((top, bottom), (left, right))")

            def shape_hint(s, full=full, swapped=swapped):
                if tuple(s) == full.shape and full.shape != tuple(x_shape):
                    return ("the result has the padded input's shape: crop the padding off (entries that came from "
                            "the padding have no pixel to go back to)")
                if tuple(s) == swapped.shape:
                    return crop_hint
                return "col2im returns an array of x_shape (N, C, H, W)"

            dx = _array(label, "col2im", got, x_shape, dtype, shape_hint)
            if close(dx, want, dtype):
                continue
            if swapped.shape == dx.shape and close(dx, swapped, dtype):
                raise GradingFailure(f"{label}: {crop_hint}")
            assigned = _crop(_col2im_variant(keep, x_shape, kernel, stride, padding, dilation, assign=True),
                             padding, H, W)
            if close(dx, assigned, dtype):
                raise GradingFailure(f"{label}: col2im assigns instead of adding: where receptive fields overlap, "
                                     "every column entry that came from a pixel sends its value back to it, so "
                                     "use +=, not =")
            if dilation != (1, 1):
                undilated = _crop(_col2im_variant(keep, x_shape, kernel, stride, padding, dilation,
                                                  taps_dilation=(1, 1)), padding, H, W)
                if close(dx, undilated, dtype):
                    raise GradingFailure(f"{label}: did you include dilation? Kernel offset (i, j) meets the pixels "
                                         "oh*SH + i*DH, ow*SW + j*DW of the padded input")
            raise GradingFailure(f"{label}: wrong values; entry [c*KH*KW + i*KW + j, n*OH*OW + oh*OW + ow] of cols "
                                 "is added to pixel [n, c, oh*SH + i*DH, ow*SW + j*DW] of the padded image, whose "
                                 "padding is then cropped off")
        _as_the_convolution_calls("col2im", f, rng,
                                  "the convolution's input gradient (transposed convolution) calling your col2im")
    N, C, H, W = SPEED_SHAPE
    _speed("col2im", f, np.zeros((C * 9, N * H * W), np.float32), SPEED_SHAPE, 3, 1, 1, 1)
