"""dilate and erode: the array kernels that spread and pick the samples of a strided convolution."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    dtype_name,
    graded,
    judged,
    run,
    time_limit,
)

from .common import TIME_LIMIT, _inside_the_derived_backward, _result_array, _slow


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
        _inside_the_derived_backward("dilate_array", f, rng)


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
        _inside_the_derived_backward("erode_array", f, rng)
