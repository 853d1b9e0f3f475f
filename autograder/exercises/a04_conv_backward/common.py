"""What the checks of a04_conv_backward share: the modules, the result checks, the derived backward's
cases and the check of a kernel inside it."""
from __future__ import annotations

import functools
import importlib

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    judged,
    recorded_calls,
    reference_engine,
    run,
    student_module,
    too_slow,
    type_name,
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
# The derived backward's cases, and a kernel checked inside it
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


def _inside_the_derived_backward(name: str, f, rng) -> None:
    """dilate / erode as the derived backward calls them: the derived backward (and the gradient
    of its result) runs here, on the course's engine, and the student's ``f`` gets each of its
    calls of ``name``, one after the other (in the sandbox the derived backward is the course's,
    which would not call the student's kernel, and must not compute it for them)."""
    R = reference_engine()
    for k in (2, 3, 5, 6):
        pattern = DERIVED_PATTERNS[k]
        x_shape, w_shape, params = _derived_case(rng, pattern)
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        g = rng.standard_normal(R.ops.conv2d(x, w, None, **params).shape)

        def results():
            xt, wt, gt = (R.Tensor(a.copy(), requires_grad=True) for a in (x, w, g))
            dx, dw, _ = _cb().conv2d_backward_derived(xt, wt, gt, **params)
            R.grad((dx * dx).sum() + (dw * dw).sum(), [xt, wt, gt])

        label = f"{pattern[0]}, inside the derived backward"
        for args, kwargs, want in recorded_calls(judged().reference(), results):
            got = run(f"{label}, calling your {name}", lambda: f(*args, **kwargs))
            if not isinstance(got, np.ndarray) or got.shape != want.shape or not close(got, want):
                raise GradingFailure(f"{label}: your {name} gives a wrong result for one of its calls, although "
                                     "its own checks passed (is its result a view that the engine then writes "
                                     "into, or does it keep state between calls?)")
