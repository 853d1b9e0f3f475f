"""pad2d, unpad2d, rotate180: on arrays, and on Tensors as differentiable ops."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    dtype_name,
    graded,
    judged,
    names_shape,
    run,
    student_engine,
    time_limit,
    value_error_text,
)

from .common import TIME_LIMIT, _cb, _result_array, _slow


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
