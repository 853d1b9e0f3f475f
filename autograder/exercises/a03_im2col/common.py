"""What the checks of a03_im2col share."""
from __future__ import annotations

import functools
import importlib

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    dtype_name,
    judged,
    recorded_calls,
    reference_engine,
    run,
    student_engine,
    time_limit,
    too_slow,
    type_name,
)

TIME_LIMIT = 30.0


_slow = functools.partial(too_slow, seconds=TIME_LIMIT, on="small arrays",
                          advice="is there an endless loop, or a Python loop over every pixel? Loop over the kernel "
                                 "offsets (KH*KW of them) at most")


def _im():
    return importlib.import_module("solutions.ops.im2col")


def _conv():
    return importlib.import_module("solutions.ops.conv")


def _pool():
    return importlib.import_module("solutions.ops.pool")


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
        raise GradingFailure(f"{label}: {name} returned {got.dtype} for {dtype_name(dtype)} input; "
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


def _engine_cases(rng):
    """(label, the arguments of _conv_results after its engine) of the convolutions run inside the
    engine: x, w, b, params, then the upstream gradient g and the directions vx, vw of the second order."""
    R = reference_engine()
    for k in ENGINE_CASES:
        pattern = CONV_PATTERNS[k]
        x_shape, w_shape, params = _conv_shapes(rng, pattern)
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        b = rng.standard_normal(w_shape[0])
        out_shape = R.ops.conv2d(x, w, b, **params).shape
        g, vx, vw = rng.standard_normal(out_shape), rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        yield f"{pattern[0]}, inside conv2d", (x, w, b, params, g, vx, vw)


def _inside_the_engine(name: str, rng, what: str) -> None:
    S, R = student_engine(), reference_engine()
    for label, args in _engine_cases(rng):
        got = run(f"{label}: {what}", _conv_results, S, *args)
        want = _conv_results(R, *args)
        for a, b_, text in zip(got, want, WHAT, strict=False):
            if not close(a, b_):
                raise GradingFailure(f"{label}: {what}: {text} comes out wrong, although the checks of "
                                     f"{name} on its own passed (does it depend on its inputs' memory layout, "
                                     "e.g. a transposed view, or keep state between calls?)")


def _as_the_convolution_calls(name: str, f, rng, what: str) -> None:
    """The student's ``f`` (im2col or col2im) driven as the convolution's forward and gradients call
    it: the convolution runs here, on the course's engine, and ``f`` gets each of its calls of
    ``name``, one after the other (in the sandbox the convolution is the course's, which would not
    call the student's ``f``, and must not compute it for them)."""
    R = reference_engine()
    for label, case in _engine_cases(rng):
        for args, kwargs, want in recorded_calls(judged().reference(), lambda: _conv_results(R, *case)):
            got = run(f"{label}: {what}", lambda: f(*args, **kwargs))
            if not isinstance(got, np.ndarray) or got.shape != want.shape or not close(got, want):
                raise GradingFailure(f"{label}: {what}: {name} gives a wrong result for one of the convolution's "
                                     f"calls, although the checks of {name} on its own passed (does it depend on "
                                     "its inputs' memory layout, e.g. a transposed view, or keep state between "
                                     "calls?)")
