"""The derived backward: conv2d_backward_derived assembled from the pieces, on arrays and on Tensors."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    dtype_name,
    graded,
    judged,
    reference_engine,
    run,
    student_engine,
    time_limit,
    type_name,
)

from .common import DERIVED_PATTERNS, TIME_LIMIT, _cb, _derived_case, _slow


def _knobbed(x, w, g, params, rotate=True, swap=True):
    """The derived dx with one step left out (for hints), arrays only."""
    cb = _cb()
    (sh, sw), pads, dil, groups = cb.conv_params("conv2d", x.shape, w.shape, None, params["stride"],
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
    return cb.unpad2d(cb.correlate(full, k, groups), pads)


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
            _, pads, _, _ = cb.conv_params("conv2d", x_shape, w_shape, None, *params.values())
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
                                 "engine's ops (dilate, pad2d, correlate, ...) on the Tensors, not on their .data")
    _, got_second = run(f"{label} with create_graph: conv2d_backward_derived", results, S, f)
    _, want_second = results(R, judged().reference())
    for name, a, b in zip(("x", "w", "dz"), got_second, want_second, strict=False):
        if not close(a, b):
            raise GradingFailure(f"{label}: gradients of your gradients (with respect to {name}) are wrong: build "
                                 "dx, dw and db from the engine's ops on the input Tensors only")


def _tensor_outputs(S, f, x, w, g, params):
    xt, wt, gt = (S.Tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, g))
    return f(xt, wt, gt, *params.values())
