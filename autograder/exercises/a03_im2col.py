"""Hidden checks of a03_im2col: convolution as one matrix product, and pooling.

The exercises are the teaching kernels under the engine's conv and pool ops
(`solutions/ops/im2col.py`, `conv.py`, `pool.py`; the ops reach them through `kernels.py`). The
student's kernel runs in the sandbox, in the course kit's engine where every other exercise is the
reference and the kernel is plugged in wherever the engine calls it; the checks and the reference
run here, and only plain data crosses (arrays, numbers, tuples).

Each kernel is first called on its own, on seeded cases (strides 1-3, padding 0-2 and
asymmetric, dilation 1-3, groups, non-square kernels and odd sizes, a batch of one, one channel,
float32 and float64, parameters given as ints, pairs or ((top, bottom), (left, right))): its
arguments go over as copies and its result comes back as an array, compared with the
reference's. An argument the kernel must leave alone (windows' input) is created in the sandbox
and read back after the call. Then conv2d / max_pool2d / avg_pool2d run in the sandbox's engine,
which calls the student's kernel, and their forward, backward and gradients of gradients
(create_graph=True) must agree with the reference engine's here. Messages name the kind of
mistake and the pattern of the case, never the inputs or the expected values.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    graded,
    in_sandbox,
    judged,
    reference_engine,
    run,
    student_engine,
    time_limit,
    type_name,
)

TIME_LIMIT = 30.0


def _slow(name: str) -> str:
    return (f"{name}: the checks took more than {TIME_LIMIT:g} s on small arrays; is there an endless loop, "
            "or a Python loop over every pixel? Loop over the kernel offsets (KH*KW of them) at most")


def _im():
    return importlib.import_module("solutions.ops.im2col")


def _conv():
    return importlib.import_module("solutions.ops.conv")


def _pool():
    return importlib.import_module("solutions.ops.pool")


def _dtype_name(dtype) -> str:
    return np.dtype(dtype).name




def _in_sandbox(array: np.ndarray):
    """A copy of `array` that lives in the sandbox (a proxy): the student's code can write into it,
    and np.asarray(proxy) reads it back. An array passed by value would be copied over, so an
    in-place write there would never be seen here."""
    return in_sandbox(array)


def _array(label: str, name: str, got, shape: tuple, dtype, shape_hint=None) -> np.ndarray:
    """The student's result as an ndarray of the expected shape and dtype, or a GradingFailure."""
    if got is None:
        raise GradingFailure(f"{label}: {name} returned None; return the result array")
    if not isinstance(got, np.ndarray):
        raise GradingFailure(f"{label}: {name} returned {type_name(got)}; return a NumPy array")
    if got.shape != tuple(shape):
        message = shape_hint(got.shape) if shape_hint else None
        raise GradingFailure(f"{label}: " + (message or f"{name} returned an array of the wrong shape"))
    if np.dtype(dtype) != got.dtype:
        raise GradingFailure(f"{label}: {name} returned {got.dtype} for {_dtype_name(dtype)} input; "
                             "keep the input's dtype")
    return got


SPEED_LIMIT = 3.0
SPEED_SHAPE = (16, 16, 48, 48)


def _speed(name: str, fn, *args) -> None:
    """One larger call under a tight time limit: a Python loop over every pixel does not fit in it."""
    message = (f"{name} took more than {SPEED_LIMIT:g} s on a {SPEED_SHAPE} batch (a few milliseconds are "
               "enough): loop over the KH*KW kernel offsets at most, never over the pixels, and let NumPy "
               "(slicing, sliding_window_view, matmul) do the rest")
    with time_limit(SPEED_LIMIT, message):
        run(f"a {SPEED_SHAPE} batch: {name}", fn, *args)


# --------------------------------------------------------------------------------------------
# Seeded convolution geometries
# --------------------------------------------------------------------------------------------
CONV_PATTERNS = [
    # label, kernel, stride, padding ((top, bottom), (left, right)), dilation, groups, N, C, K
    ("a 3x3 kernel, stride 1, no padding", (3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), 1, 2, 3, 4),
    ("a 3x3 kernel, stride 2, padding 1", (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 1, 2, 2, 3),
    ("stride 3 that does not divide the padded input", (2, 2), (3, 3), ((0, 0), (0, 0)), (1, 1), 1, 2, 2, 2),
    ("dilation 2 with padding 2", (3, 3), (1, 1), ((2, 2), (2, 2)), (2, 2), 1, 2, 2, 3),
    ("dilation 3 and stride 2", (2, 3), (2, 2), ((1, 1), (0, 0)), (3, 3), 1, 1, 2, 2),
    ("a non-square 2x3 kernel, stride (1, 2), dilation (2, 1)", (2, 3), (1, 2), ((1, 1), (2, 2)), (2, 1), 1, 2, 3, 2),
    ("groups=2", (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 2, 2, 4, 6),
    ("a depthwise convolution (groups = channels), stride 2", (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 3, 2, 3, 3),
    ("a batch of one image with one channel", (3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), 1, 1, 1, 2),
    ("a 1x1 kernel with stride 2", (1, 1), (2, 2), ((0, 0), (0, 0)), (1, 1), 1, 2, 3, 2),
    ("asymmetric padding ((0, 2), (1, 0))", (3, 2), (1, 1), ((0, 2), (1, 0)), (1, 1), 1, 2, 2, 2),
]


def _conv_shapes(rng, pattern, odd: bool = True):
    """(x_shape, w_shape, params) for a pattern, with a non-square, odd-ish input size."""
    label, kernel, stride, pad, dil, groups, N, C, K = pattern
    ext = (dil[0] * (kernel[0] - 1) + 1, dil[1] * (kernel[1] - 1) + 1)
    H = max(1, ext[0] - sum(pad[0]) + int(rng.integers(2, 6)))
    W = max(1, ext[1] - sum(pad[1]) + int(rng.integers(3, 7)))
    if H == W:
        W += 1
    if odd and "does not divide" in label:
        while (H + sum(pad[0]) - ext[0]) % stride[0] == 0:
            H += 1
    params = dict(stride=stride, padding=pad, dilation=dil, groups=groups)
    return (N, C, H, W), (K, C // groups, *kernel), params


def _padded(x: np.ndarray, pad) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, 0), *pad))


# --------------------------------------------------------------------------------------------
# output_size
# --------------------------------------------------------------------------------------------
def _formula(size, kernel, stride, pad, dilation):
    return (size + pad - dilation * (kernel - 1) - 1) // stride + 1


@graded("a03-output-size", "solutions.ops.im2col:output_size", points=1)
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


@graded("a03-windows", "solutions.ops.im2col:windows", points=2)
def check_windows(windows, rng):
    f = windows
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("windows")):
        for k, (label, kernel, stride, dilation, shape) in enumerate(_window_cases(rng)):
            dtype = np.float32 if k % 3 == 2 else np.float64
            label = f"{label}, input {shape}, {_dtype_name(dtype)}"
            xp = rng.standard_normal(shape).astype(dtype)
            keep = xp.copy()
            there = _in_sandbox(xp)
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


@graded("a03-im2col", "solutions.ops.im2col:im2col", points=3)
def check_im2col(im2col, rng):
    f = im2col
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("im2col")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            kernel, stride, padding, dilation = w_shape[2:], params["stride"], params["padding"], params["dilation"]
            dtype = np.float32 if k % 4 == 1 else np.float64
            label = f"{pattern[0]}, {_dtype_name(dtype)}"
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
        _inside_the_engine("im2col", rng, "the convolution (forward and backward) using your im2col")
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


@graded("a03-col2im", "solutions.ops.im2col:col2im", points=3)
def check_col2im(col2im, rng):
    f = col2im
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("col2im")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            kernel, stride, padding, dilation = w_shape[2:], params["stride"], params["padding"], params["dilation"]
            dtype = np.float32 if k % 4 == 1 else np.float64
            label = f"{pattern[0]}, {_dtype_name(dtype)}"
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
        _inside_the_engine("col2im", rng,
                           "the convolution's input gradient (transposed convolution) using your col2im")
    N, C, H, W = SPEED_SHAPE
    _speed("col2im", f, np.zeros((C * 9, N * H * W), np.float32), SPEED_SHAPE, 3, 1, 1, 1)


# --------------------------------------------------------------------------------------------
# The convolution inside the sandbox's engine, which calls the student's kernel
# --------------------------------------------------------------------------------------------
ENGINE_CASES = [0, 1, 2, 3, 6, 8]  # indices into CONV_PATTERNS


def _conv_results(E, x, w, b, params, g, vx, vw):
    """z, dx, dw, db, and the gradients of <dx, vx> + <dw, vw> with respect to x and w, in engine E
    (the student's, in the sandbox, or the reference)."""
    xt, wt, bt = (E.Tensor(a.copy(), requires_grad=True) for a in (x, w, b))
    z = E.ops.conv2d(xt, wt, bt, **params)
    dx, dw, db = E.grad(z, [xt, wt, bt], E.Tensor(g), create_graph=True)
    total = (dx * E.Tensor(vx)).sum() + (dw * E.Tensor(vw)).sum()
    ddx, ddw = E.grad(total, [xt, wt])
    return [np.array(t.data) for t in (z, dx, dw, db, ddx, ddw)]


WHAT = ["the output", "the input gradient dx", "the weight gradient dw", "the bias gradient db",
        "a gradient of a gradient (create_graph=True) with respect to x",
        "a gradient of a gradient (create_graph=True) with respect to w"]


def _inside_the_engine(name: str, rng, what: str) -> None:
    S, R = student_engine(), reference_engine()
    for k in ENGINE_CASES:
        pattern = CONV_PATTERNS[k]
        x_shape, w_shape, params = _conv_shapes(rng, pattern)
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        b = rng.standard_normal(w_shape[0])
        out_shape = R.ops.conv2d(x, w, b, **params).shape
        g, vx, vw = rng.standard_normal(out_shape), rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        label = f"{pattern[0]}, inside conv2d"
        got = run(f"{label}: {what}", _conv_results, S, x, w, b, params, g, vx, vw)
        want = _conv_results(R, x, w, b, params, g, vx, vw)
        for a, b_, text in zip(got, want, WHAT, strict=False):
            if not close(a, b_):
                raise GradingFailure(f"{label}: {what}: {text} comes out wrong, although the checks of "
                                     f"{name} on its own passed (does it depend on its inputs' memory layout, "
                                     "e.g. a transposed view, or keep state between calls?)")


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


@graded("a03-conv2d", "solutions.ops.conv:conv2d_array", points=3)
def check_conv2d(conv2d_array, rng):
    f = conv2d_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("conv2d_array")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            dtype = np.float32 if k % 4 == 1 else np.float64
            with_bias = k % 3 != 2
            label = f"{pattern[0]}, {'with' if with_bias else 'without'} bias, {_dtype_name(dtype)}"
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


@graded("a03-conv2d-input-grad", "solutions.ops.conv:conv2d_input_grad_array", points=2)
def check_conv2d_input_grad(conv2d_input_grad_array, rng):
    f = conv2d_input_grad_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("conv2d_input_grad_array")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            dtype = np.float32 if k % 4 == 1 else np.float64
            label = f"{pattern[0]}, {_dtype_name(dtype)}"
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


@graded("a03-conv2d-weight-grad", "solutions.ops.conv:conv2d_weight_grad_array", points=2)
def check_conv2d_weight_grad(conv2d_weight_grad_array, rng):
    f = conv2d_weight_grad_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("conv2d_weight_grad_array")):
        for k, pattern in enumerate(CONV_PATTERNS):
            x_shape, w_shape, params = _conv_shapes(rng, pattern)
            dtype = np.float32 if k % 4 == 1 else np.float64
            given = k % 2 == 0
            label = f"{pattern[0]}, {'with' if given else 'without'} x's columns given, {_dtype_name(dtype)}"
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


# --------------------------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------------------------
POOL_PATTERNS = [
    # label, kernel, stride, padding
    ("2x2 windows, stride 2", (2, 2), (2, 2), (0, 0)),
    ("overlapping 3x3 windows, stride 1", (3, 3), (1, 1), (0, 0)),
    ("overlapping 3x3 windows, stride 2, padding 1", (3, 3), (2, 2), (1, 1)),
    ("non-square 2x3 windows, stride (1, 2), padding (1, 0)", (2, 3), (1, 2), (1, 0)),
    ("3x3 windows, stride 3 that does not divide the input", (3, 3), (3, 3), (0, 0)),
    ("2x2 windows, stride 1, a batch of one image with one channel", (2, 2), (1, 1), (0, 0)),
    ("4x4 windows, stride 3, padding 2", (4, 4), (3, 3), (2, 2)),
]


def _pool_input(rng, pattern, dtype, ties: bool, k: int):
    label, kernel, stride, pad = pattern
    N, C = (1, 1) if "batch of one" in label else (2, 3)
    H = kernel[0] + int(rng.integers(2, 5))
    W = kernel[1] + int(rng.integers(3, 6))
    if "does not divide" in label:
        while (H - kernel[0]) % stride[0] == 0:
            H += 1
    if ties:  # few distinct values: most windows have several maxima
        x = rng.integers(-2, 2, size=(N, C, H, W)).astype(dtype)
    else:
        x = rng.standard_normal((N, C, H, W)).astype(dtype)
    if k % 2 == 1:
        x = -np.abs(x) - 1  # every value negative: a zero from padding would win
    return x


def _window_values(x, kernel, stride, pad):
    """(N, C, OH, OW, KH*KW) of each window's values, padding as -inf (for hints)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])), constant_values=-np.inf)
    win = _im().windows(xp, kernel, stride, (1, 1))
    return win.reshape(*win.shape[:4], -1)


def _max_zero_padded(x, kernel, stride, pad):
    """The max pool of an input padded with zeros instead of -inf (for hints)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    return _im().windows(xp, kernel, stride, (1, 1)).max(axis=(-2, -1))


@graded("a03-max-pool", "solutions.ops.pool:max_pool2d_array", points=3)
def check_max_pool(max_pool2d_array, rng):
    f = max_pool2d_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("max_pool2d_array")):
        for k, pattern in enumerate(POOL_PATTERNS):
            for ties in (False, True):
                dtype = np.float32 if k % 3 == 1 else np.float64
                x = _pool_input(rng, pattern, dtype, ties, k)
                label = f"{pattern[0]}{', many ties' if ties else ''}{', all values negative' if k % 2 else ''}, " \
                        f"{_dtype_name(dtype)}"
                kernel, stride, pad = pattern[1:]
                keep = x.copy()
                got = run(f"{label}: max_pool2d_array", f, x, kernel, stride, pad)
                if not isinstance(got, (tuple, list)) or len(got) != 2:
                    raise GradingFailure(f"{label}: max_pool2d_array returns a pair (out, index)")
                out_ref, index_ref = reference(keep, kernel, stride, pad)
                out = _array(label, "max_pool2d_array (out)", got[0], out_ref.shape, dtype,
                             lambda s: "out has the wrong shape: OH = (H + 2p - KH) // s + 1")
                if not close(out, out_ref, dtype):
                    if pad != (0, 0) and close(out, _max_zero_padded(keep, kernel, stride, pad), dtype):
                        raise GradingFailure(f"{label}: padding must never win a max: pad with -inf (the lowest "
                                             "value), not 0")
                    raise GradingFailure(f"{label}: wrong maxima")
                index = got[1]
                if not isinstance(index, np.ndarray) or index.shape != index_ref.shape:
                    raise GradingFailure(f"{label}: index must be an integer array of out's shape (N, C, OH, OW)")
                if not np.issubdtype(index.dtype, np.integer):
                    raise GradingFailure(f"{label}: index must hold integers (the winning offset i*KW + j)")
                if np.array_equal(index, index_ref):
                    continue
                values = _window_values(keep, kernel, stride, pad)
                inside = np.take_along_axis(values, np.clip(index, 0, values.shape[-1] - 1)[..., None].astype(np.int64),
                                            axis=-1)[..., 0]
                valid = np.all((index >= 0) & (index < values.shape[-1]))
                if valid and np.any(np.isneginf(inside)):
                    raise GradingFailure(f"{label}: padding must never win a max, not even a tie: pad with -inf "
                                         "(the lowest value), not 0")
                KH, KW = kernel
                column_major = (index_ref % KW) * KH + index_ref // KW
                if KH * KW > 1 and np.array_equal(index, column_major):
                    raise GradingFailure(f"{label}: index counts the window's offsets row by row, k = i*KW + j (the "
                                         "order of _offsets), not column by column")
                if valid and np.allclose(inside, out_ref):
                    last = values.shape[-1] - 1 - np.argmax(values[..., ::-1], axis=-1)
                    which = "the last one" if np.array_equal(index, last) else "another one"
                    raise GradingFailure(f"{label}: pooling ties: PyTorch sends the gradient to the first max of a "
                                         f"window (row-major order), yours picks {which}: update the winner only "
                                         "when a value is strictly greater (>)")
                raise GradingFailure(f"{label}: index must be the offset of the winner inside its window, "
                                     "i*KW + j (row-major), not a position in the image")
        _nan_propagates(f, reference, rng)
        _integer_image(f, reference, rng)
        _inside_the_pool_engine("max_pool2d_array", rng)
    _speed("max_pool2d_array", f, rng.standard_normal(SPEED_SHAPE).astype(np.float32), (3, 3), (1, 1), (1, 1))


def _nan_propagates(f, reference, rng) -> None:
    """A NaN in a window wins it (PyTorch propagates NaN): one NaN per image, so no window holds two."""
    for label, kernel, stride, pad in [POOL_PATTERNS[0], POOL_PATTERNS[2]]:
        x = rng.standard_normal((2, 2, 6, 7))
        for n in range(2):
            for c in range(2):
                x[n, c, int(rng.integers(0, 6)), int(rng.integers(0, 7))] = np.nan
        label = f"{label}, a NaN in each image"
        got = run(f"{label}: max_pool2d_array", f, x.copy(), kernel, stride, pad)
        out_ref, index_ref = reference(x.copy(), kernel, stride, pad)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise GradingFailure(f"{label}: max_pool2d_array returns a pair (out, index)")
        out, index = (np.asarray(a) for a in got)
        if out.shape != out_ref.shape or not np.array_equal(np.isnan(out), np.isnan(out_ref)) or \
                index.shape != index_ref.shape or not np.array_equal(index[np.isnan(out_ref)],
                                                                     index_ref[np.isnan(out_ref)]):
            raise GradingFailure(f"{label}: a NaN must win its window (out NaN, index its offset), so that it "
                                 "propagates as in PyTorch: comparisons with NaN are False, so let it take over "
                                 "explicitly (| np.isnan(v))")
        if not close(out[~np.isnan(out_ref)], out_ref[~np.isnan(out_ref)]) or not np.array_equal(index, index_ref):
            raise GradingFailure(f"{label}: the windows without a NaN come out wrong when the image holds a NaN")


def _integer_image(f, reference, rng) -> None:
    """An integer image with padding: the padding is the smallest integer (-inf is no integer)."""
    x = rng.integers(-5, 5, size=(2, 2, 5, 6))
    label = "an integer image, 3x3 windows, stride 2, padding 1"
    message = (f"{label}: pad an integer image with the smallest integer of its dtype (np.iinfo(dtype).min, what "
               "_lowest(x.dtype) gives): -inf is not an integer, and the result keeps the integer dtype")
    got = run(f"{label}: max_pool2d_array", f, x.copy(), (3, 3), (2, 2), (1, 1),
              hint=lambda error: message if isinstance(error, (OverflowError, ValueError, TypeError)) else None)
    out_ref, index_ref = reference(x.copy(), (3, 3), (2, 2), (1, 1))
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise GradingFailure(f"{label}: max_pool2d_array returns a pair (out, index)")
    out, index = got
    if not isinstance(out, np.ndarray) or out.dtype != x.dtype or not np.array_equal(out, out_ref):
        raise GradingFailure(message)
    if not isinstance(index, np.ndarray) or not np.array_equal(index, index_ref):
        raise GradingFailure(f"{label}: index must be the offset of the winner inside its window, i*KW + j")


@graded("a03-max-pool-backward", "solutions.ops.pool:max_pool2d_scatter_array", points=2)
def check_max_pool_backward(max_pool2d_scatter_array, rng):
    f = max_pool2d_scatter_array
    reference = judged().reference()
    forward = _pool().max_pool2d_array
    with time_limit(TIME_LIMIT, _slow("max_pool2d_scatter_array")):
        for k, pattern in enumerate(POOL_PATTERNS):
            dtype = np.float32 if k % 3 == 1 else np.float64
            kernel, stride, pad = pattern[1:]
            x = _pool_input(rng, pattern, dtype, True, k)
            _, index = forward(x, kernel, stride, pad)
            grad = rng.standard_normal(index.shape).astype(dtype)
            label = f"{pattern[0]}, {_dtype_name(dtype)}"
            keep = (grad.copy(), index.copy())
            got = run(f"{label}: max_pool2d_scatter_array", f, grad, index, x.shape, kernel, stride, pad)
            want = reference(*keep, x.shape, kernel, stride, pad)

            def shape_hint(s):
                if tuple(s) == (x.shape[0], x.shape[1], x.shape[2] + 2 * pad[0], x.shape[3] + 2 * pad[1]):
                    return "the gradient has the padded input's shape: crop the padding off (it has no gradient)"
                return "the gradient must have the input's shape x_shape"

            dx = _array(label, "max_pool2d_scatter_array", got, x.shape, dtype, shape_hint)
            if close(dx, want, dtype):
                continue
            if pad != (0, 0):
                full = _scatter_assigning(grad, index, x.shape, kernel, stride, pad, adding=True, crop=False)
                H, W = x.shape[2:]
                for r0 in (0, 2 * pad[0]):
                    for c0 in (0, 2 * pad[1]):
                        if (r0, c0) != pad and close(dx, full[:, :, r0:r0 + H, c0:c0 + W], dtype):
                            raise GradingFailure(f"{label}: the padding was cropped from the wrong side: it sits on "
                                                 "both sides, so drop pad[0] rows at the top and pad[0] at the "
                                                 "bottom (pad[1] columns on the left and on the right)")
            assigned = _scatter_assigning(grad, index, x.shape, kernel, stride, pad)
            overwritten = _scatter_assigning(grad, index, x.shape, kernel, stride, pad, zeros_too=True)
            if close(dx, assigned, dtype) or close(dx, overwritten, dtype):
                raise GradingFailure(f"{label}: a pixel can be the max of several overlapping windows: add their "
                                     "gradients (np.add with where=, or +=), do not overwrite them")
            raise GradingFailure(f"{label}: wrong values; each window's gradient goes to the pixel its index "
                                 "names (offset i*KW + j of the window), every other pixel gets 0")
        _inside_the_pool_engine("max_pool2d_scatter_array", rng)
    x = rng.standard_normal(SPEED_SHAPE).astype(np.float32)
    _, index = forward(x, (3, 3), (1, 1), (1, 1))
    _speed("max_pool2d_scatter_array", f, np.ones(index.shape, np.float32), index, x.shape, (3, 3), (1, 1), (1, 1))


def _scatter_assigning(grad, index, x_shape, kernel, stride, pad, zeros_too=False, adding=False, crop=True):
    """The scatter with overlapping windows overwriting each other (for hints): each offset copies
    its winners' gradients (and, with zeros_too, zeros where it did not win) over what was there.
    With adding, the right scatter; without crop, the padded gradient."""
    N, C, H, W = x_shape
    OH, OW = index.shape[2:]
    dxp = np.zeros((N, C, H + 2 * pad[0], W + 2 * pad[1]))
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            rows, cols = _im().offset_slice(i, j, (OH, OW), stride, (1, 1))
            hit = index == i * kernel[1] + j
            if adding:
                dxp[:, :, rows, cols] += np.where(hit, grad, 0)
            elif zeros_too:
                dxp[:, :, rows, cols] = np.where(hit, grad, 0)
            else:
                np.copyto(dxp[:, :, rows, cols], grad, where=hit)
    return dxp[:, :, pad[0]:pad[0] + H, pad[1]:pad[1] + W] if crop else dxp


def _pool_results(E, x, params, g, v, op):
    """z, dx, and the gradient of <dx, v> with respect to the upstream gradient, in engine E."""
    xt = E.Tensor(x.copy(), requires_grad=True)
    z = getattr(E.ops, op)(xt, **params)
    (dx,) = E.grad(z, [xt], E.Tensor(g), create_graph=True)
    gt = E.Tensor(g.copy(), requires_grad=True)
    (dx2,) = E.grad(getattr(E.ops, op)(xt, **params), [xt], gt, create_graph=True)
    (dg,) = E.grad((dx2 * E.Tensor(v)).sum(), [gt])
    return [np.array(t.data) for t in (z, dx, dg)]


def _inside_the_pool_engine(name: str, rng) -> None:
    S, R = student_engine(), reference_engine()
    op = "avg_pool2d" if name.startswith("avg") else "max_pool2d"
    for k in (1, 2, 3):
        label, kernel, stride, pad = POOL_PATTERNS[k]
        x = _pool_input(rng, POOL_PATTERNS[k], np.float64, False, 0)
        params = dict(kernel_size=kernel, stride=stride, padding=pad)
        out_shape = getattr(R.ops, op)(x, **params).shape
        g, v = rng.standard_normal(out_shape), rng.standard_normal(x.shape)
        label = f"{label}, inside {op}"
        got = run(f"{label}: the forward and backward of {op} using your {name}", _pool_results, S, x, params, g, v, op)
        want = _pool_results(R, x, params, g, v, op)
        for a, b, text in zip(got, want, ["the output", "the input gradient",
                                          "a gradient of the gradient (create_graph=True)"], strict=False):
            if not close(a, b):
                raise GradingFailure(f"{label}: {text} of {op} comes out wrong with your {name}, although its own "
                                     "checks passed (does it depend on its inputs' memory layout or keep state?)")


def _avg_excluding_padding(x, kernel, stride, pad):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    ones = np.pad(np.ones(x.shape[2:]), ((pad[0], pad[0]), (pad[1], pad[1])))
    total = _im().windows(xp, kernel, stride, (1, 1)).sum(axis=(-2, -1))
    count = _im().windows(ones[None, None], kernel, stride, (1, 1)).sum(axis=(-2, -1))
    return total / count


@graded("a03-avg-pool", "solutions.ops.pool:avg_pool2d_array", points=2)
def check_avg_pool(avg_pool2d_array, rng):
    f = avg_pool2d_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("avg_pool2d_array")):
        for k, pattern in enumerate(POOL_PATTERNS):
            dtype = np.float32 if k % 3 == 1 else np.float64
            kernel, stride, pad = pattern[1:]
            x = _pool_input(rng, pattern, dtype, False, 0)
            label = f"{pattern[0]}, {_dtype_name(dtype)}"
            keep = x.copy()
            got = run(f"{label}: avg_pool2d_array", f, x, kernel, stride, pad)
            want = reference(keep, kernel, stride, pad)
            out = _array(label, "avg_pool2d_array", got, want.shape, dtype,
                         lambda s: "the output has the wrong shape: OH = (H + 2p - KH) // s + 1")
            if close(out, want, dtype):
                continue
            if pad != (0, 0) and close(out, _avg_excluding_padding(keep, kernel, stride, pad), dtype):
                raise GradingFailure(f"{label}: PyTorch's avg_pool2d counts the padding zeros in the divisor "
                                     "(count_include_pad=True): divide every window by KH*KW")
            if close(out, want * kernel[0] * kernel[1], dtype):
                raise GradingFailure(f"{label}: you summed the window; divide by its size KH*KW for the mean")
            if kernel[0] != kernel[1]:
                for count in (kernel[0] ** 2, kernel[1] ** 2):
                    if close(out, want * kernel[0] * kernel[1] / count, dtype):
                        raise GradingFailure(f"{label}: divide by KH*KW: the kernel may be non-square")
            raise GradingFailure(f"{label}: wrong values; each output is the mean of its KH x KW window of the "
                                 "zero-padded input")
        # an integer image: the mean is a float (float64), as NumPy's mean
        x = rng.integers(0, 5, size=(2, 2, 5, 6))
        label = "an integer image, 2x2 windows"
        got = run(f"{label}: avg_pool2d_array", f, x.copy(), (2, 2), (2, 2), (0, 0))
        want = reference(x, (2, 2), (2, 2), (0, 0))
        if not isinstance(got, np.ndarray) or got.dtype != np.float64 or not close(got, want):
            raise GradingFailure(f"{label}: the mean of integers is a float: return float64 for an integer input")
        _inside_the_pool_engine("avg_pool2d_array", rng)
    _speed("avg_pool2d_array", f, np.zeros(SPEED_SHAPE, np.float32), (3, 3), (1, 1), (1, 1))


@graded("a03-global-avg-pool", "solutions.ops.pool:global_avg_pool2d", points=1)
def check_global_avg_pool(global_avg_pool2d, rng):
    S = student_engine()
    Tensor, grad = S.Tensor, S.grad
    f = global_avg_pool2d
    for shape, dtype, label in [((2, 3, 4, 5), np.float64, "a (2, 3, 4, 5) batch, float64"),
                                ((1, 1, 3, 3), np.float64, "one image with one channel"),
                                ((3, 2, 5, 2), np.float32, "a (3, 2, 5, 2) batch, float32")]:
        x = rng.standard_normal(shape).astype(dtype)
        xt = Tensor(x.copy(), requires_grad=True)
        out = run(f"{label}: global_avg_pool2d", f, xt)
        if not isinstance(out, Tensor):
            raise GradingFailure(f"{label}: global_avg_pool2d returned {type_name(out)}; return a Tensor built "
                                 "with Tensor operations (x.mean(...))")
        want = x.astype(np.float64).mean(axis=(2, 3))
        if out.shape != want.shape:
            raise GradingFailure(f"{label}: the result must be (N, C): average over the two spatial axes (2, 3)")
        if not close(out.data, want, dtype):
            if close(out.data, want * shape[2] * shape[3], dtype):
                raise GradingFailure(f"{label}: you summed the feature maps; the global average divides by H*W")
            raise GradingFailure(f"{label}: wrong values; each output is the mean of one whole H x W feature map")
        if out.dtype != dtype:
            raise GradingFailure(f"{label}: keep the input's dtype")
        if not out.requires_grad:
            raise GradingFailure(f"{label}: the result is not part of the graph: build it with Tensor operations "
                                 "on x, not on x.data")
        g = rng.standard_normal(want.shape).astype(dtype)
        (dx,) = run(f"{label}: the gradient through global_avg_pool2d", lambda: grad(out, [xt], Tensor(g)))
        if not close(dx.data, np.broadcast_to(g[:, :, None, None] / (shape[2] * shape[3]), shape), dtype):
            raise GradingFailure(f"{label}: the gradient through your global_avg_pool2d is wrong")
    x = rng.standard_normal((2, 3, 4, 5))
    label = "an ndarray input (2, 3, 4, 5)"
    out = run(f"{label}: global_avg_pool2d", f, x.copy())
    if not isinstance(out, Tensor) or out.shape != (2, 3) or not close(out.data, x.mean(axis=(2, 3))):
        raise GradingFailure(f"{label}: accept anything as_tensor accepts (an ndarray too): start with "
                             "x = as_tensor(x), and return a Tensor")
    text = run("a 3-D input: global_avg_pool2d", _value_error_text, f, Tensor(np.zeros((2, 3, 5))))
    if text is None:
        raise GradingFailure("a 3-D input (N, C, L) must be refused with a ValueError naming the expected "
                             "(N, C, H, W) shape, not averaged over the wrong axes")
    if not _names_shape(text, (2, 3, 5)):
        raise GradingFailure("a 3-D input (N, C, L): your ValueError must name the shape it got, so that the "
                             "caller sees what was wrong")


def _value_error_text(f, *args):
    """The text of the ValueError f(*args) raises, or None when it raises none."""
    try:
        f(*args)
    except ValueError as error:
        return str(error)
    return None


def _names_shape(text: str, shape: tuple) -> bool:
    """Whether an error message names `shape`, as (2, 3, 5), [2, 3, 5], 2x3x5 or 2 x 3 x 5."""
    import re
    return bool(re.search(r"\D" + r"\s*[,x×]\s*".join(str(n) for n in shape) + r"\D", f" {text} "))
