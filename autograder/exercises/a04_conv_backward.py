"""Hidden checks of a04_conv_backward: the convolution's backward pass as chapter 4 derives it.

The exercises are the pieces of `solutions/ops/conv_backward.py` (dilate, erode, pad2d, unpad2d,
rotate180) and the formula that assembles them, `conv2d_backward_derived`. Every check runs in the
trusted judge: the student's answer runs in the sandbox's engine, where every other exercise is the
reference, and the reference runs here; only plain data (arrays, numbers, shapes) crosses. Each
piece is checked on its own on arrays and, where it takes Tensors (built with the sandbox's engine),
as a differentiable op; the student's dilate and erode kernels, plugged into the sandbox's engine,
must then leave the derived backward in agreement with the reference's. The derived backward is
compared with the reference on seeded geometries (strides 1-3, strides that do not divide the
input, padding 0-2 and asymmetric, dilation 1-3, groups, non-square kernels, a batch of one with
one channel), on arrays and on Tensors with gradients of gradients. Messages name the kind of
mistake, never the inputs or the expected values.
"""
from __future__ import annotations

import functools
import importlib

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    dtype_name,
    graded,
    judged,
    names_shape,
    reference_engine,
    run,
    student_engine,
    student_module,
    time_limit,
    too_slow,
    type_name,
    value_error_text,
)

TIME_LIMIT = 30.0


def _cb():
    """The reference's conv_backward module (here, in the judge)."""
    return importlib.import_module("solutions.ops.conv_backward")


def _student_cb():
    """The sandbox's conv_backward module: the student's answer plugged in, the rest the reference."""
    return student_module("solutions.ops.conv_backward")


_slow = functools.partial(too_slow, seconds=TIME_LIMIT, on="small arrays",
                          advice="is there an endless loop, or a Python loop over every pixel?")


def _result_array(label: str, name: str, got, want: np.ndarray, shape_hint=None) -> np.ndarray:
    if got is None:
        raise GradingFailure(f"{label}: {name} returned None; return the result")
    if not isinstance(got, np.ndarray):
        raise GradingFailure(f"{label}: {name} returned {type_name(got)} for an ndarray input; return an ndarray")
    if got.shape != want.shape:
        message = shape_hint(tuple(got.shape)) if shape_hint else None
        raise GradingFailure(f"{label}: " + (message or f"{name} returned an array of the wrong shape"))
    if got.dtype != want.dtype:
        raise GradingFailure(f"{label}: {name} returned {got.dtype} for {want.dtype} input; keep the input's dtype")
    return got


# --------------------------------------------------------------------------------------------
# dilate and erode (the array kernels)
# --------------------------------------------------------------------------------------------
def _spread(x: np.ndarray, step: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    """x placed at multiples of `step` inside zeros of `size`, as many samples as fit (for hints)."""
    out = np.zeros(x.shape[:-2] + tuple(size), dtype=x.dtype)
    nh = min(x.shape[-2], (size[0] - 1) // step[0] + 1)
    nw = min(x.shape[-1], (size[1] - 1) // step[1] + 1)
    out[..., : (nh - 1) * step[0] + 1: step[0], : (nw - 1) * step[1] + 1: step[1]] = x[..., :nh, :nw]
    return out


def _dilate_cases(rng):
    cases = []
    # (label, x shape, stride, extra rows/cols of size beyond the minimal one)
    specs = [
        ("a 4x5 image, stride 2, with room to spare at the end", (4, 5), (2, 2), "roomy"),
        ("a batch (2, 3, 3, 4), stride 3, with room to spare at the end", (2, 3, 3, 4), (3, 3), "roomy"),
        ("a (2, 2, 4, 3) batch, stride 2, minimal size", (2, 2, 4, 3), (2, 2), (0, 0)),
        ("a (1, 1, 3, 5) batch, stride (3, 2), minimal size", (1, 1, 3, 5), (3, 2), (0, 0)),
        ("a (2, 3, 4, 4) batch, stride 2, one extra row and column (a stride that does not divide)",
         (2, 3, 4, 4), (2, 2), (1, 1)),
        ("a 3x3 image, stride 1 (nothing to insert)", (3, 3), (1, 1), (0, 0)),
        ("a 3x3 image, stride 1 with two extra rows", (3, 3), (1, 1), (2, 0)),
        ("a single pixel, stride 3", (1, 1, 1, 1), (3, 3), (0, 0)),
    ]
    for k, (label, shape, stride, extra) in enumerate(specs):
        h, w = shape[-2:]
        minimal = ((h - 1) * stride[0] + 1, (w - 1) * stride[1] + 1)
        if extra == "roomy":
            size = ((h - 1) * (stride[0] + 1) + 1, (w - 1) * (stride[1] + 1) + 1)
        else:
            size = (minimal[0] + extra[0], minimal[1] + extra[1])
        dtype = np.float32 if k % 3 == 2 else np.float64
        cases.append((f"{label}, {dtype_name(dtype)}", rng.standard_normal(shape).astype(dtype), stride, size))
    return cases


@graded("a04-dilate", "solutions.ops.conv_backward:dilate_array", points=2, title="dilate_array (dilate)")
def check_dilate(dilate_array, rng):
    f = dilate_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("dilate_array")):
        for label, x, stride, size in _dilate_cases(rng):
            keep = x.copy()

            def hint(error):
                if "broadcast" in str(error):
                    return ("the slice you assign x to does not have x's shape: x[i, j] goes to (s*i, s*j), so there "
                            "are s - 1 zeros between neighbours and the last sample lands at s*(H-1)")
                return None

            got = run(f"{label}: dilate_array", f, x, stride, size, hint=hint)
            want = reference(keep, stride, size)

            def shape_hint(s):
                return f"the result must have shape x.shape[:-2] + size (the size is given: {len(want.shape)}-D)"

            out = _result_array(label, "dilate_array", got, want, shape_hint)
            if np.array_equal(out, want):
                continue
            wider = _spread(keep, (stride[0] + 1, stride[1] + 1), size)
            if np.array_equal(out, wider):
                raise GradingFailure(f"{label}: your dilation inserts s zeros instead of s-1: with stride s, "
                                         "x[i, j] goes to (s*i, s*j), so s - 1 zeros separate neighbours")
            narrower = _spread(keep, (max(stride[0] - 1, 1), max(stride[1] - 1, 1)), size)
            if stride != (1, 1) and np.array_equal(out, narrower):
                raise GradingFailure(f"{label}: your dilation inserts s - 2 zeros: with stride s, x[i, j] goes to "
                                     "(s*i, s*j)")
            if np.array_equal(out[..., : keep.shape[-2], : keep.shape[-1]], keep) and stride != (1, 1):
                raise GradingFailure(f"{label}: x was copied as a block: spread its samples out, x[i, j] to (s*i, s*j)")
            raise GradingFailure(f"{label}: wrong values; out[..., s*i, s*j] = x[..., i, j] and zeros everywhere "
                                 "else (extra rows and columns of `size` stay zero, at the end)")
        _inside_the_derived_backward("dilate_array", rng)


def _erode_cases(rng):
    specs = [
        ("a 7x9 image, stride 2", (7, 9), (2, 2), None),
        ("a (2, 3, 7, 7) batch, stride 3", (2, 3, 7, 7), (3, 3), None),
        ("a (2, 2, 8, 6) batch, stride (2, 3), one sample fewer than available", (2, 2, 8, 6), (2, 3), (-1, -1)),
        ("a (1, 1, 5, 5) batch, stride 1", (1, 1, 5, 5), (1, 1), None),
        ("a 6x6 image, stride 2, where the last row is not a sample", (6, 6), (2, 2), None),
    ]
    cases = []
    for k, (label, shape, stride, fewer) in enumerate(specs):
        h, w = shape[-2:]
        available = (-(-h // stride[0]), -(-w // stride[1]))
        size = available if fewer is None else (available[0] + fewer[0], available[1] + fewer[1])
        dtype = np.float32 if k % 2 else np.float64
        cases.append((f"{label}, {dtype_name(dtype)}", rng.standard_normal(shape).astype(dtype), stride, size))
    return cases


@graded("a04-erode", "solutions.ops.conv_backward:erode_array", points=1, title="erode_array (erode)")
def check_erode(erode_array, rng):
    f = erode_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("erode_array")):
        for label, x, stride, size in _erode_cases(rng):
            keep = x.copy()
            got = run(f"{label}: erode_array", f, x, stride, size)
            want = np.array(reference(keep, stride, size))
            late = keep[..., stride[0] - 1:: stride[0], stride[1] - 1:: stride[1]][..., : size[0], : size[1]]
            starts_late = ("erode keeps samples 0, s, 2s, ...: start at the first row and column, not at s - 1 "
                           "(it undoes dilate, which put x[i] at s*i)")

            def shape_hint(s):
                if stride != (1, 1) and s == late.shape:
                    return starts_late
                if s == keep[..., :: stride[0], :: stride[1]].shape:
                    return "keep only the first `size` samples along each axis (size may be smaller than available)"
                return "the result must have shape x.shape[:-2] + size"

            out = _result_array(label, "erode_array", got, want, shape_hint)
            if np.array_equal(out, want):
                continue
            if stride != (1, 1) and late.shape == out.shape and np.array_equal(out, late):
                raise GradingFailure(f"{label}: {starts_late}")
            raise GradingFailure(f"{label}: wrong values; out[..., i, j] = x[..., s*i, s*j]")
        _inside_the_derived_backward("erode_array", rng)


# --------------------------------------------------------------------------------------------
# pad2d, unpad2d, rotate180: arrays, and Tensors as differentiable ops
# --------------------------------------------------------------------------------------------
@graded("a04-pad2d", "solutions.ops.conv_backward:pad2d", points=1)
def check_pad2d(pad2d, rng):
    S = student_engine()
    Tensor, grad = S.Tensor, S.grad
    f = pad2d
    reference = judged().reference()
    specs = [
        ("an int padding of 1 on a (2, 3, 4, 5) batch", (2, 3, 4, 5), 1),
        ("a pair (2, 0) on a 3x4 image", (3, 4), (2, 0)),
        ("((top, bottom), (left, right)) = ((0, 2), (1, 3)) on a (1, 2, 3, 3) batch", (1, 2, 3, 3), ((0, 2), (1, 3))),
        ("((1, 0), (0, 2)) on a (2, 5, 4) stack", (2, 5, 4), ((1, 0), (0, 2))),
        ("no padding", (2, 2, 3, 3), 0),
    ]
    with time_limit(TIME_LIMIT, _slow("pad2d")):
        for k, (label, shape, padding) in enumerate(specs):
            dtype = np.float32 if k % 2 else np.float64
            label = f"{label}, {dtype_name(dtype)}"
            x = rng.standard_normal(shape).astype(dtype)
            got = run(f"{label}: pad2d", f, x.copy(), padding)
            want = np.asarray(reference(x.copy(), padding))
            (top, bottom), (left, right) = _cb().as_padding(padding, "pad2d")

            def shape_hint(s, top=top, bottom=bottom, left=left, right=right):
                if len(s) == len(shape) and s[:-2] != tuple(shape[:-2]):
                    return "pad only the last two axes (H and W), not the batch or channel axes"
                if s[-2:] == (shape[-2] + top + left, shape[-1] + bottom + right):
                    return ("np.pad takes one (before, after) pair per axis: ((top, bottom), (left, right)) for "
                            "the last two axes, not ((top, left), (bottom, right))")
                if s[-2:] == (shape[-2] + left + right, shape[-1] + top + bottom):
                    return ("the rows and the columns got each other's padding: rows take (top, bottom), columns "
                            "(left, right); the pad widths of the last two axes are swapped")
                return "the padded array must be (..., H + top + bottom, W + left + right)"

            out = _result_array(label, "pad2d", got, want, shape_hint)
            if np.array_equal(out, want):
                x_t = Tensor(x.copy(), requires_grad=True)
                tensor_out = run(f"{label} (a Tensor input): pad2d", f, x_t, padding)
                if not isinstance(tensor_out, Tensor):
                    raise GradingFailure(f"{label}: for a Tensor input pad2d must return a Tensor, built with the "
                                         "engine's pad op, so that gradients flow through it")
                if not np.array_equal(tensor_out.data, want) or not tensor_out.requires_grad:
                    raise GradingFailure(f"{label}: for a Tensor input pad2d must return the padded Tensor, in the "
                                         "graph (use the engine's pad(x, widths), not np.pad on x.data)")
                g = rng.standard_normal(want.shape)
                (dx,) = run(f"{label}: the gradient through pad2d", lambda: grad(tensor_out, [x_t], Tensor(g)))
                if not close(dx.data, g[..., top: g.shape[-2] - bottom, left: g.shape[-1] - right]):
                    raise GradingFailure(f"{label}: the gradient through your pad2d is wrong")
                continue
            if (top, bottom) != (left, right):
                other = np.pad(x, ((0, 0),) * (x.ndim - 2) + ((left, right), (top, bottom)))
                if other.shape == out.shape and np.array_equal(out, other):
                    raise GradingFailure(f"{label}: the rows and the columns got each other's padding: rows take "
                                         "(top, bottom), columns (left, right); the pad widths of the last two axes "
                                         "are swapped")
            if top != bottom or left != right:
                swapped = np.pad(x, ((0, 0),) * (x.ndim - 2) + ((top, left), (bottom, right)))
                if swapped.shape == out.shape and np.array_equal(out, swapped):
                    raise GradingFailure(f"{label}: np.pad takes one (before, after) pair per axis: ((top, bottom), "
                                         "(left, right)) for the last two axes, not ((top, left), (bottom, right))")
            raise GradingFailure(f"{label}: wrong values; x goes to rows top..top+H-1 and columns left..left+W-1 of "
                                 "zeros")


@graded("a04-unpad2d", "solutions.ops.conv_backward:unpad2d", points=1)
def check_unpad2d(unpad2d, rng):
    S = student_engine()
    Tensor, grad = S.Tensor, S.grad
    f = unpad2d
    reference = judged().reference()
    specs = [
        ("padding 1 on every side of a (2, 3, 6, 7) batch", (2, 3, 6, 7), 1),
        ("((1, 0), (2, 0)): nothing at the bottom and on the right", (2, 2, 5, 6), ((1, 0), (2, 0))),
        ("((0, 2), (0, 1)) on a 6x5 image", (6, 5), ((0, 2), (0, 1))),
        ("no padding", (2, 2, 3, 4), 0),
        ("(2, 1) on a (3, 7, 6) stack", (3, 7, 6), (2, 1)),
    ]
    with time_limit(TIME_LIMIT, _slow("unpad2d")):
        for k, (label, shape, padding) in enumerate(specs):
            dtype = np.float32 if k % 2 else np.float64
            label = f"{label}, {dtype_name(dtype)}"
            x = rng.standard_normal(shape).astype(dtype)
            got = run(f"{label}: unpad2d", f, x.copy(), padding)
            want = np.asarray(reference(x.copy(), padding))
            (top, bottom), (left, right) = _cb().as_padding(padding, "unpad2d")

            def shape_hint(s, bottom=bottom, right=right):
                if 0 in s[-2:] and (bottom == 0 or right == 0):
                    return ("with zero padding at the bottom or on the right, x[..., t:-b] is x[..., t:-0], which is "
                            "empty: write the end as H - b (and W - r)")
                return "the result must be (..., H - top - bottom, W - left - right)"

            out = _result_array(label, "unpad2d", np.asarray(got) if isinstance(got, np.ndarray) else got, want,
                                shape_hint)
            if not np.array_equal(out, want):
                raise GradingFailure(f"{label}: wrong values; keep rows top..H-bottom-1 and columns left..W-right-1")
            xt = Tensor(x.copy(), requires_grad=True)
            tensor_out = run(f"{label} (a Tensor input): unpad2d", f, xt, padding)
            if not isinstance(tensor_out, Tensor) or not tensor_out.requires_grad or \
                    not np.array_equal(tensor_out.data, want):
                raise GradingFailure(f"{label}: for a Tensor input unpad2d must return the cropped Tensor in the graph "
                                     "(slice the Tensor itself: x[..., t:H-b, l:W-r] is the engine's getitem)")
            g = rng.standard_normal(want.shape)
            (dx,) = run(f"{label}: the gradient through unpad2d", lambda: grad(tensor_out, [xt], Tensor(g)))
            if not close(dx.data, np.pad(g, ((0, 0),) * (x.ndim - 2) + ((top, bottom), (left, right)))):
                raise GradingFailure(f"{label}: the gradient through your unpad2d is wrong")
        refused = run("padding larger than the image: unpad2d", value_error_text, f, np.zeros((2, 3)), 2)
        if refused is None:
            raise GradingFailure("cropping more than the image holds (padding 2 from a 2x3 image) must raise a "
                                 "ValueError naming the padding and the shape")
        if not names_shape(refused, (2, 3)):
            raise GradingFailure("cropping more than the image holds (padding 2 from a 2x3 image): your ValueError "
                                 "must name the shape of the image (and the padding), so that the caller sees what "
                                 "did not fit")


@graded("a04-rotate180", "solutions.ops.conv_backward:rotate180", points=1)
def check_rotate180(rotate180, rng):
    S = student_engine()
    Tensor, grad = S.Tensor, S.grad
    f = rotate180
    specs = [("a 3x3 kernel", (3, 3)), ("a non-square 2x3 kernel", (2, 3)),
             ("a (4, 2, 3, 2) weight", (4, 2, 3, 2)), ("a (2, 1, 1, 4) weight (one kernel row)", (2, 1, 1, 4))]
    with time_limit(TIME_LIMIT, _slow("rotate180")):
        for k, (label, shape) in enumerate(specs):
            dtype = np.float32 if k % 2 else np.float64
            label = f"{label}, {dtype_name(dtype)}"
            w = rng.standard_normal(shape).astype(dtype)
            got = run(f"{label}: rotate180", f, w.copy())
            want = w[..., ::-1, ::-1]

            def shape_hint(s):
                if s == w.swapaxes(-1, -2).shape:
                    return "you transposed the kernel instead of rotating it: rotate180 flips the rows and the columns"
                return "rotate180 keeps the kernel's shape"

            out = _result_array(label, "rotate180", np.asarray(got) if isinstance(got, np.ndarray) else got,
                                np.ascontiguousarray(want), shape_hint)
            if np.array_equal(out, want):
                wt = Tensor(w.copy(), requires_grad=True)
                tensor_out = run(f"{label} (a Tensor input): rotate180", f, wt)
                if not isinstance(tensor_out, Tensor) or not tensor_out.requires_grad or \
                        not np.array_equal(tensor_out.data, want):
                    raise GradingFailure(f"{label}: for a Tensor input rotate180 must return the rotated Tensor in the "
                                         "graph (use the engine's flip op on the last two axes)")
                g = rng.standard_normal(shape)
                (dw,) = run(f"{label}: the gradient through rotate180", lambda: grad(tensor_out, [wt], Tensor(g)))
                if not close(dw.data, g[..., ::-1, ::-1]):
                    raise GradingFailure(f"{label}: the gradient through your rotate180 is wrong")
                continue
            if np.array_equal(out, w[..., ::-1, :]) or np.array_equal(out, w[..., :, ::-1]):
                raise GradingFailure(f"{label}: rotating by 180 degrees flips both the rows and the columns; yours "
                                     "flips only one of them")
            if w.shape[-1] == w.shape[-2] and np.array_equal(out, w.swapaxes(-1, -2)):
                raise GradingFailure(f"{label}: you transposed the kernel instead of rotating it: rotate180 flips the "
                                     "rows and the columns")
            if np.array_equal(out, w[::-1, ...]) or np.array_equal(out, w[::-1, ::-1, ...]):
                raise GradingFailure(f"{label}: flip the last two axes (kernel rows and columns), not the first ones")
            raise GradingFailure(f"{label}: wrong values; out[..., i, j] = w[..., KH-1-i, KW-1-j]")
        message = ("a 1-D array has no kernel rows and columns to flip: rotate180 must raise a ValueError for "
                   "fewer than two axes (check len(w.shape) first)")
        text = run("a 1-D array: rotate180", value_error_text, f, np.zeros(3), hint=lambda error: message)
        if text is None:
            raise GradingFailure(message)


# --------------------------------------------------------------------------------------------
# The derived backward
# --------------------------------------------------------------------------------------------
DERIVED_PATTERNS = [
    # label, kernel, stride, padding as given to conv2d, dilation, groups, N, C, K
    ("a 3x3 kernel, stride 1, no padding", (3, 3), 1, 0, 1, 1, 2, 3, 2),
    ("a 3x3 kernel, stride 1, padding 1, more output than input channels", (3, 3), 1, 1, 1, 1, 2, 2, 4),
    ("stride 2 with padding 1", (3, 3), 2, 1, 1, 1, 2, 2, 3),
    ("stride 2 that does not divide the padded input", (3, 3), 2, 0, 1, 1, 2, 3, 2),
    ("stride 3 that does not divide the padded input, padding 2", (2, 2), 3, 2, 1, 1, 1, 2, 2),
    ("dilation 2 with padding 2", (3, 3), 1, 2, 2, 1, 2, 2, 3),
    ("dilation 3, stride 2, a non-square 2x3 kernel", (2, 3), 2, (1, 0), 3, 1, 1, 2, 2),
    ("groups=2", (3, 3), 1, 1, 1, 2, 2, 4, 6),
    ("a depthwise convolution (groups = channels), stride 2, padding 1", (3, 3), 2, 1, 1, 3, 2, 3, 3),
    ("a batch of one image with one channel", (3, 3), 1, 0, 1, 1, 1, 1, 2),
    ("asymmetric padding ((0, 2), (1, 0)), stride (1, 2)", (3, 2), (1, 2), ((0, 2), (1, 0)), 1, 1, 2, 2, 3),
]


def _derived_case(rng, pattern):
    label, kernel, stride, padding, dilation, groups, N, C, K = pattern
    d = (dilation, dilation) if isinstance(dilation, int) else dilation
    s = (stride, stride) if isinstance(stride, int) else stride
    pads = _cb().as_padding(padding, "case")
    ext = (d[0] * (kernel[0] - 1) + 1, d[1] * (kernel[1] - 1) + 1)
    H = max(1, ext[0] - sum(pads[0]) + int(rng.integers(2, 5)))
    W = max(1, ext[1] - sum(pads[1]) + int(rng.integers(3, 6)))
    if H == W:
        W += 1
    if "does not divide" in label:
        while (H + sum(pads[0]) - ext[0]) % s[0] == 0:
            H += 1
        while (W + sum(pads[1]) - ext[1]) % s[1] == 0:
            W += 1
    params = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    return (N, C, H, W), (K, C // groups, *kernel), params


def _knobbed(x, w, g, params, rotate=True, swap=True):
    """The derived dx with one step left out (for hints), arrays only."""
    cb = _cb()
    (sh, sw), pads, dil, groups = cb._conv_params("conv2d", x.shape, w.shape, None, params["stride"],
                                                  params["padding"], params["dilation"], params["groups"])
    C, K, Cg = x.shape[1], w.shape[0], w.shape[1]
    Kg = K // groups
    xp = cb.pad2d(x, pads)
    wd = cb.dilate(w, dil)
    KHd, KWd = wd.shape[-2:]
    H1, W1 = xp.shape[-2] - KHd + 1, xp.shape[-1] - KWd + 1
    g1 = cb.dilate(g, (sh, sw), size=(H1, W1))
    full = cb.pad2d(g1, ((KHd - 1, KHd - 1), (KWd - 1, KWd - 1)))
    k = cb.rotate180(wd) if rotate else wd
    k = k.reshape((groups, Kg, Cg, KHd, KWd))
    k = (k.transpose((0, 2, 1, 3, 4)) if swap else k).reshape((C, Kg, KHd, KWd))
    return cb.unpad2d(cb._correlate(full, k, groups), pads)


def _dx_hint(label, dx, x_shape, pads, x, w, g, params):
    N, C, H, W = x_shape
    Hp, Wp = H + sum(pads[0]), W + sum(pads[1])
    shape = tuple(dx.shape)
    if shape == (N, C, Hp, Wp) and (Hp, Wp) != (H, W):
        return "your input gradient has the padded input's shape: did you crop the padding (unpad2d)?"
    KH, KW = w.shape[2:]
    d = params["dilation"]
    d = (d, d) if isinstance(d, int) else tuple(d)
    s = params["stride"]
    s = (s, s) if isinstance(s, int) else tuple(s)
    KHd, KWd = d[0] * (KH - 1) + 1, d[1] * (KW - 1) + 1
    OH, OW = g.shape[2:]
    # dz dilated to its minimal size: (OH-1)*s + 1 rows, padded by KHd-1, correlated, cropped
    minimal = (N, C, (OH - 1) * s[0] + KHd - sum(pads[0]), (OW - 1) * s[1] + KWd - sum(pads[1]))
    # g1 padded by the undilated kernel size KH-1 instead of KHd-1
    undilated = (N, C, H - 2 * (KHd - KH), W - 2 * (KWd - KW))
    if d != (1, 1) and shape == undilated:
        return ("your input gradient is too small: pad g1 by the dilated kernel's extent minus one (KHd - 1 = "
                "d(KH-1)) on every side for the full convolution, not by KH - 1")
    if shape == minimal and minimal != (N, C, H, W):
        return ("the last rows of your input gradient are missing (wrong shape): when the stride does not divide "
                "H + 2p - d(KH-1) - 1, dilate dz to the stride-1 output size (H1, W1), with zero rows and columns "
                "at the end; the input rows under them get zero gradient")
    if len(shape) == 4 and shape[:2] == (N, C) and (shape[2] > H or shape[3] > W):
        return "your input gradient is larger than x: crop exactly the padding (top, bottom, left, right) off"
    if len(shape) == 4 and shape[1] != C:
        return ("your input gradient has the wrong number of channels: swap the kernel's in/out channels "
                "(per group) so that the transposed convolution maps K channels back to C")
    return None


@graded("a04-conv-backward", "solutions.ops.conv_backward:conv2d_backward_derived", points=4)
def check_conv_backward(conv2d_backward_derived, rng):
    f = conv2d_backward_derived
    reference = judged().reference()
    cb = _cb()
    with time_limit(TIME_LIMIT, _slow("conv2d_backward_derived")):
        for k, pattern in enumerate(DERIVED_PATTERNS):
            x_shape, w_shape, params = _derived_case(rng, pattern)
            dtype = np.float32 if k % 4 == 3 else np.float64
            label = f"{pattern[0]}, {dtype_name(dtype)}"
            x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
            from solutions import ops
            z_shape = ops.conv2d(x, w, None, **params).shape
            g = rng.standard_normal(z_shape).astype(dtype)
            keep = (x.copy(), w.copy(), g.copy())
            got = run(f"{label}: conv2d_backward_derived", f, x, w, g, *params.values())
            if not isinstance(got, (tuple, list)) or len(got) != 3:
                raise GradingFailure(f"{label}: conv2d_backward_derived returns a tuple (dx, dw, db)")
            want = [np.asarray(a) for a in reference(*keep, **params)]
            _, pads, _, _ = cb._conv_params("conv2d", x_shape, w_shape, None, *params.values())
            _compare_derived(label, [np.asarray(a) if isinstance(a, np.ndarray) else a for a in got], want, keep,
                             params, pads, dtype)
            if k in (0, 2, 3, 5, 7, 10):
                _tensor_derived(label, f, keep, params, rng)


def _compare_derived(label, got, want, keep, params, pads, dtype):
    x, w, g = keep
    names = ("dx", "dw", "db")
    for name, a in zip(names, got, strict=False):
        if not isinstance(a, np.ndarray):
            raise GradingFailure(f"{label}: {name} is {type_name(a)}; for array inputs return arrays")
    dx, dw, db = got
    if dx.shape != want[0].shape:
        message = _dx_hint(label, dx, x.shape, pads, x, w, g, params)
        raise GradingFailure(f"{label}: " + (message or "dx must have x's shape"))
    if not close(dx, want[0], dtype):
        if close(dx, _knobbed(x, w, g, params, rotate=False), dtype):
            raise GradingFailure(f"{label}: dx is a full convolution of dz with the kernel rotated by 180 degrees: "
                                 "your kernel was not rotated (rotate180)")
        if close(dx, _knobbed(x, w, g, params, swap=False), dtype):
            raise GradingFailure(f"{label}: dx sums over the output channels: swap the kernel's in/out channels "
                                 "(per group, (K, C/G, ...) -> (C, K/G, ...)) before the convolution")
        if close(dx, _knobbed(x, w, g, params, rotate=False, swap=False), dtype):
            raise GradingFailure(f"{label}: the kernel of dx's convolution must be rotated by 180 degrees and have "
                                 "its in/out channels swapped")
        rows = np.any(~np.isclose(dx, want[0], rtol=1e-4, atol=1e-6), axis=(0, 1, 3))
        s = params["stride"]
        s = (s, s) if isinstance(s, int) else tuple(s)
        if s != (1, 1) and rows.any() and rows[: len(rows) // 2].sum() == 0:
            raise GradingFailure(f"{label}: the last rows of your input gradient are wrong: the outputs the stride "
                                 "skipped had zero gradient, so dilate dz to the stride-1 output size with zeros at "
                                 "the end")
        raise GradingFailure(f"{label}: dx has wrong values: pad the dilated dz by the kernel extent minus one, "
                             "correlate with the rotated, channel-swapped kernel, and crop the padding")
    if dw.shape != want[1].shape:
        d = params["dilation"]
        d = (d, d) if isinstance(d, int) else d
        KH, KW = want[1].shape[2:]
        if dw.shape[:2] == want[1].shape[:2] and dw.shape[2:] == (d[0] * (KH - 1) + 1, d[1] * (KW - 1) + 1):
            raise GradingFailure(f"{label}: your weight gradient has the dilated kernel's shape: keep only its real "
                                 "taps (erode by the dilation)")
        raise GradingFailure(f"{label}: dw must have the weight's shape (K, C/G, KH, KW)")
    if not close(dw, want[1], dtype):
        raise GradingFailure(f"{label}: dw has wrong values: correlate the padded x with the dilated dz, the batch "
                             "axis playing the role of the channels, per group, then erode by the dilation")
    if db.shape != want[2].shape or not close(db, want[2], dtype):
        raise GradingFailure(f"{label}: db sums dz over N, OH and OW (every axis but the channels): shape (K,)")


def _tensor_derived(label, f, keep, params, rng):
    """With Tensors: the gradients are Tensors of the graph, and their own gradients are right."""
    S, R = student_engine(), reference_engine()
    x, w, g = keep

    def results(E, fn):
        """fn's (dx, dw, db) on engine E's Tensors, and the gradients of <(dx, dw, db), v>."""
        xt, wt, gt = (E.Tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, g))
        dx, dw, db = fn(xt, wt, gt, *params.values())
        out = [dx, dw, db]
        total = None
        vs = np.random.default_rng(11)
        for t in out:
            term = (t * E.Tensor(vs.standard_normal(t.shape))).sum()
            total = term if total is None else total + term
        seconds = E.grad(total, [xt, wt, gt], allow_unused=True)
        return out, [np.zeros(a.shape) if s is None else np.array(s.data)
                     for s, a in zip(seconds, (x, w, g), strict=False)]

    label = f"{label.rsplit(', ', 1)[0]}, Tensor inputs"
    got = run(f"{label}: conv2d_backward_derived", lambda: _tensor_outputs(S, f, x, w, g, params))
    for name, t in zip(("dx", "dw", "db"), got, strict=False):
        if not isinstance(t, S.Tensor):
            raise GradingFailure(f"{label}: with Tensor inputs, {name} must be a Tensor built with the engine's ops "
                                 f"(got {type_name(t)}), so that it can be differentiated again")
        if not t.requires_grad:
            raise GradingFailure(f"{label}: with Tensor inputs, {name} is not part of the graph: build it with the "
                                 "engine's ops (dilate, pad2d, _correlate, ...) on the Tensors, not on their .data")
    _, got_second = run(f"{label} with create_graph: conv2d_backward_derived", results, S, f)
    _, want_second = results(R, judged().reference())
    for name, a, b in zip(("x", "w", "dz"), got_second, want_second, strict=False):
        if not close(a, b):
            raise GradingFailure(f"{label}: gradients of your gradients (with respect to {name}) are wrong: build "
                                 "dx, dw and db from the engine's ops on the input Tensors only")


def _tensor_outputs(S, f, x, w, g, params):
    xt, wt, gt = (S.Tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, g))
    return f(xt, wt, gt, *params.values())


def _inside_the_derived_backward(name: str, rng) -> None:
    """dilate / erode inside the sandbox's engine (the student's kernel plugged in, the rest the
    reference): the derived backward there must agree with the reference's here."""
    S, R = student_engine(), reference_engine()
    for k in (2, 3, 5, 6):
        pattern = DERIVED_PATTERNS[k]
        x_shape, w_shape, params = _derived_case(rng, pattern)
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        g = rng.standard_normal(R.ops.conv2d(x, w, None, **params).shape)

        def results(E, cb):
            xt, wt, gt = (E.Tensor(a.copy(), requires_grad=True) for a in (x, w, g))
            dx, dw, db = cb.conv2d_backward_derived(xt, wt, gt, **params)
            total = (dx * dx).sum() + (dw * dw).sum()
            ddx, ddw, ddg = E.grad(total, [xt, wt, gt])
            return [np.array(t.data) for t in (dx, dw, db, ddx, ddw, ddg)]

        label = f"{pattern[0]}, inside the derived backward"
        got = run(f"{label} using your {name}", results, S, _student_cb())
        want = results(R, _cb())
        for a, b in zip(got, want, strict=False):
            if not close(a, b):
                raise GradingFailure(f"{label}: the convolution's gradients come out wrong with your {name}, "
                                     "although its own checks passed (is its result a view that the engine "
                                     "then writes into, or does it keep state between calls?)")
