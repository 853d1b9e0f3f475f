"""Hidden checks of a03_im2col: pooling: max (and its backward), average, global average."""
from __future__ import annotations

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
    time_limit,
    type_name,
    value_error_text,
)

from .common import (
    SPEED_SHAPE,
    TIME_LIMIT,
    _array,
    _im,
    _pool,
    _slow,
    _speed,
)

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


@graded("a03-max-pool", "solutions.ops.pool:max_pool2d_array", points=3, diagnose=("conv2d", "max_pool2d"))
def check_max_pool(max_pool2d_array, rng):
    f = max_pool2d_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("max_pool2d_array")):
        for k, pattern in enumerate(POOL_PATTERNS):
            for ties in (False, True):
                dtype = np.float32 if k % 3 == 1 else np.float64
                x = _pool_input(rng, pattern, dtype, ties, k)
                label = f"{pattern[0]}{', many ties' if ties else ''}{', all values negative' if k % 2 else ''}, " \
                        f"{dtype_name(dtype)}"
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
                                         "order of kernel_offsets), not column by column")
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
               "lowest(x.dtype) gives): -inf is not an integer, and the result keeps the integer dtype")
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


@graded("a03-max-pool-backward", "solutions.ops.pool:max_pool2d_scatter_array", points=2,
        diagnose=("conv2d", "max_pool2d"))
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
            label = f"{pattern[0]}, {dtype_name(dtype)}"
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


@graded("a03-avg-pool", "solutions.ops.pool:avg_pool2d_array", points=2, diagnose=("conv2d", "avg_pool2d"))
def check_avg_pool(avg_pool2d_array, rng):
    f = avg_pool2d_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("avg_pool2d_array")):
        for k, pattern in enumerate(POOL_PATTERNS):
            dtype = np.float32 if k % 3 == 1 else np.float64
            kernel, stride, pad = pattern[1:]
            x = _pool_input(rng, pattern, dtype, False, 0)
            label = f"{pattern[0]}, {dtype_name(dtype)}"
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


@graded("a03-global-avg-pool", "solutions.ops.pool:global_avg_pool2d", points=1, diagnose=("conv2d",))
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
    text = run("a 3-D input: global_avg_pool2d", value_error_text, f, Tensor(np.zeros((2, 3, 5))))
    if text is None:
        raise GradingFailure("a 3-D input (N, C, L) must be refused with a ValueError naming the expected "
                             "(N, C, H, W) shape, not averaged over the wrong axes")
    if not names_shape(text, (2, 3, 5)):
        raise GradingFailure("a 3-D input (N, C, L): your ValueError must name the shape it got, so that the "
                             "caller sees what was wrong")
