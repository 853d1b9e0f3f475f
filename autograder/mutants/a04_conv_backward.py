"""Classic student bugs in a04_conv_backward (the derived convolution backward), one solution region each.

`autograder check a04_conv_backward` plants each one in the source notebook and expects it to lose
points on its own exercise only; `tests/grader/test_exercises.py` plants each one in the solutions/ source
and expects the hidden check to fail with a message containing its `expect` phrase.
"""
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(
        id="dilate-s-zeros",
        expect="inserts s zeros instead of s-1",
        exercise="a04-dilate",
        find="out[..., : (h - 1) * stride[0] + 1 : stride[0], : (w - 1) * stride[1] + 1 : stride[1]] = x",
        replace=("out[..., : (h - 1) * (stride[0] + 1) + 1 : stride[0] + 1, "
                 ": (w - 1) * (stride[1] + 1) + 1 : stride[1] + 1] = x"),
        why="stride dilation off by one: s zeros between samples instead of s - 1",
    ),
    Mutant(
        id="erode-starts-late",
        expect="start at the first row",
        exercise="a04-erode",
        find="x[..., : (size[0] - 1) * stride[0] + 1 : stride[0], : (size[1] - 1) * stride[1] + 1 : stride[1]]",
        replace="x[..., stride[0] - 1 :: stride[0], stride[1] - 1 :: stride[1]][..., : size[0], : size[1]]",
        why="keeps samples s-1, 2s-1, ... instead of 0, s, 2s, ...",
    ),
    Mutant(
        id="pad2d-widths-order",
        expect="((top, bottom), (left, right))",
        exercise="a04-pad2d",
        find="((t, b), (l, r))",
        replace="((t, l), (b, r))",
        why="np.pad's widths given as ((top, left), (bottom, right))",
    ),
    Mutant(
        id="unpad2d-negative-end",
        expect="H - b",
        exercise="a04-unpad2d",
        find="return x[..., t : h - b, l : w - r]",
        replace="return x[..., t : -b, l : -r]",
        why="x[..., t:-b] is empty when b = 0",
    ),
    Mutant(
        id="rotate180-one-axis",
        expect="flips both the rows and the columns",
        exercise="a04-rotate180",
        find="axes = (len(w.shape) - 2, len(w.shape) - 1)",
        replace="axes = (len(w.shape) - 1,)",
        why="flips the columns only: a mirror image, not a rotation",
    ),
    Mutant(
        id="pad2d-axes-swapped",
        expect="pad widths of the last two axes are swapped",
        exercise="a04-pad2d",
        find="((t, b), (l, r))",
        replace="((l, r), (t, b))",
        why="the pad widths of the two axes swapped: the rows padded by (left, right), the columns by (top, bottom)",
    ),
    Mutant(
        id="unpad2d-error-without-shape",
        expect="must name the shape",
        exercise="a04-unpad2d",
        find='raise ValueError(f"unpad2d: padding {((t, b), (l, r))} is more than the {(h, w)} image holds")',
        replace='raise ValueError("unpad2d: the padding is too large")',
        why="the contract asks for a ValueError naming the padding and the shape; this one names neither",
    ),
    Mutant(
        id="derived-full-pad-undilated",
        expect="dilated kernel's extent minus one",
        exercise="a04-conv-backward",
        find="g1_full = pad2d(g1, ((KHd - 1, KHd - 1), (KWd - 1, KWd - 1)))",
        replace="g1_full = pad2d(g1, ((KH - 1, KH - 1), (KW - 1, KW - 1)))",
        why="the full convolution padded by the undilated kernel size KH-1 instead of the dilated extent KHd-1",
    ),
    Mutant(
        id="rotate180-no-guard",
        expect="must raise a ValueError for fewer than two axes",
        exercise="a04-rotate180",
        find=("if len(w.shape) < 2:\n"
              "        raise ValueError(f\"rotate180: needs at least 2 axes (..., KH, KW), "
              "got shape {tuple(w.shape)}\")\n"
              "    axes = (len(w.shape) - 2, len(w.shape) - 1)\n"
              "    if isinstance(w, Tensor):\n"
              "        return flip(w, axes)\n"
              "    return np.flip(np.asarray(w), axes)"),
        replace=("axes = (len(w.shape) - 2, len(w.shape) - 1)\n"
                 "    if isinstance(w, Tensor):\n"
                 "        return flip(w, axes)\n"
                 "    return np.asarray(w)[..., ::-1, ::-1]"),
        why="no guard for fewer than two axes: a 1-D array fails with an IndexError instead of the stated ValueError",
    ),
    Mutant(
        id="derived-padding-not-cropped",
        expect="did you crop the padding",
        exercise="a04-conv-backward",
        find="dx = unpad2d(dxp, pads)",
        replace="dx = dxp",
        why="the gradient of the padded input returned as the input's gradient",
    ),
    Mutant(
        id="derived-kernel-not-rotated",
        expect="not rotated",
        exercise="a04-conv-backward",
        find="w_swapped = rotate180(wd).reshape(",
        replace="w_swapped = wd.reshape(",
        why="the full convolution uses the kernel as it is, not rotated by 180 degrees",
    ),
    Mutant(
        id="derived-channels-not-swapped",
        expect="swap the kernel's in/out channels",
        exercise="a04-conv-backward",
        find=".transpose((0, 2, 1, 3, 4)).reshape((C, Kg, KHd, KWd))",
        replace=".reshape((C, Kg, KHd, KWd))",
        why="the kernel reshaped to (C, K/G, ...) without swapping its in/out channels",
    ),
    Mutant(
        id="derived-dz-minimal-size",
        expect="the last rows of your input gradient",
        exercise="a04-conv-backward",
        find="g1 = dilate(grad_out, (sh, sw), size=(H1, W1))",
        replace="g1 = dilate(grad_out, (sh, sw))",
        why="dz dilated to its minimal size: when the stride does not divide, the last input rows are lost",
    ),
    Mutant(
        id="derived-dw-not-eroded",
        expect="erode by the dilation",
        exercise="a04-conv-backward",
        find="dw = erode(dwd, dil)",
        replace="dw = dwd",
        why="the gradient of the dilated kernel (zeros included) returned as the kernel's gradient",
    ),
    Mutant(
        id="derived-db-keeps-batch",
        expect="db sums dz over N, OH and OW",
        exercise="a04-conv-backward",
        find="db = grad_out.sum(axis=(0, 2, 3))",
        replace="db = grad_out.sum(axis=(2, 3))",
        why="the bias gradient not summed over the batch",
    ),
]


# Correct answers in other legitimate styles: each must keep full marks (checked like the mutants).
ALTERNATIVES = [
    Mutant(
        id="dilate-fancy-index",
        exercise="a04-dilate",
        find="out[..., : (h - 1) * stride[0] + 1 : stride[0], : (w - 1) * stride[1] + 1 : stride[1]] = x",
        replace="out[..., (np.arange(h) * stride[0])[:, None], np.arange(w) * stride[1]] = x",
        why="integer-array (fancy) indexing instead of strided slices",
    ),
    Mutant(
        id="erode-copy-of-every-sample",
        exercise="a04-erode",
        find="return x[..., : (size[0] - 1) * stride[0] + 1 : stride[0], : (size[1] - 1) * stride[1] + 1 : stride[1]]",
        replace="return x[..., :: stride[0], :: stride[1]][..., : size[0], : size[1]].copy()",
        why="every s-th sample, then the first `size` of them, as a copy (the contract allows a view, not requires it)",
    ),
    Mutant(
        id="pad2d-widths-as-a-list",
        exercise="a04-pad2d",
        find="widths = ((0, 0),) * (len(x.shape) - 2) + ((t, b), (l, r))",
        replace="widths = [(0, 0)] * (x.ndim - 2) + [(t, b), (l, r)]\n    print('pad2d widths', widths)",
        why="the widths as a list of pairs, x.ndim, and a print in the body",
    ),
    Mutant(
        id="unpad2d-none-ends",
        exercise="a04-unpad2d",
        find="return x[..., t : h - b, l : w - r]",
        replace="return x[..., t : (-b if b else None), l : (-r if r else None)]",
        why="negative ends, with None where nothing is cut at the end",
    ),
    Mutant(
        id="rotate180-slicing",
        exercise="a04-rotate180",
        find="return np.flip(np.asarray(w), axes)",
        replace="return np.asarray(w)[..., ::-1, ::-1]",
        why="reversed slices instead of np.flip (a view either way)",
    ),
    Mutant(
        id="derived-db-two-sums-and-concatenate-always",
        exercise="a04-conv-backward",
        find="db = grad_out.sum(axis=(0, 2, 3))",
        replace="db = grad_out.sum(axis=(2, 3)).sum(axis=0)",
        why="the bias gradient as two sums",
    ),
    Mutant(
        id="derived-concatenate-one-group-too",
        exercise="a04-conv-backward",
        find="dwd = per_group[0] if groups == 1 else (",
        replace="dwd = (",
        why="the groups concatenated even when there is one",
    ),
    Mutant(
        id="derived-returns-a-list",
        exercise="a04-conv-backward",
        find="return dx, dw, db",
        replace="return [dx, dw, db]",
        why="(dx, dw, db) returned as a list: unpacked all the same",
    ),
]
