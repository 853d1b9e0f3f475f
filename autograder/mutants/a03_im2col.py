"""Classic student bugs in a03_im2col (convolution as a matrix product, pooling), one solution region each.

`autograder check a03_im2col` plants each one in the source notebook and expects it to lose points
on its own exercise only; `tests/test_exercises.py` plants each one in the solutions/ source and
expects the hidden check to fail with a message containing `EXPECTED[mutant id]`.
"""
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(
        id="output-size-no-dilation",
        exercise="a03-output-size",
        find="dilation * (kernel - 1)",
        replace="(kernel - 1)",
        why="the output size of an undilated kernel: a dilated kernel spans d(k-1)+1 pixels",
    ),
    Mutant(
        id="windows-extent-no-dilation",
        exercise="a03-windows",
        find="extent = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)",
        replace="extent = (kh, kw)",
        why="the sliding window has the kernel's size, not the dilated kernel's extent",
    ),
    Mutant(
        id="windows-stride-dilation-swapped",
        exercise="a03-windows",
        find="view[:, :, ::sh, ::sw, ::dh, ::dw]",
        replace="view[:, :, ::dh, ::dw, ::sh, ::sw]",
        why="the stride applied to the taps and the dilation to the positions",
    ),
    Mutant(
        id="im2col-rows-kernel-major",
        exercise="a03-im2col",
        find="blocks = cols.reshape(C, KH, KW, N, OH, OW)\n    source = win.transpose(1, 4, 5, 0, 2, 3)",
        replace="blocks = cols.reshape(KH, KW, C, N, OH, OW)\n    source = win.transpose(4, 5, 1, 0, 2, 3)",
        why="rows ordered (kernel row, kernel col, channel), which does not match weight.reshape(K, -1)",
    ),
    Mutant(
        id="col2im-assigns",
        exercise="a03-col2im",
        find="target[:, n0:n1, rows, columns] += blocks[:, i, j, n0:n1]",
        replace="target[:, n0:n1, rows, columns] = blocks[:, i, j, n0:n1]",
        why="overlapping receptive fields overwrite each other instead of adding up",
    ),
    Mutant(
        id="conv-reshape-not-transpose",
        exercise="a03-conv2d",
        find="return z.reshape(K, N, OH, OW).transpose(1, 0, 2, 3), cols",
        replace="return z.reshape(N, K, OH, OW), cols",
        why="the (K, N*OH*OW) GEMM result reshaped to (N, K, OH, OW) without a transpose",
    ),
    Mutant(
        id="weight-grad-not-transposed",
        exercise="a03-conv2d-weight-grad",
        find="return np.ascontiguousarray(dw_t.swapaxes(-1, -2)).reshape(w_shape)",
        replace="return dw_t.reshape(w_shape)",
        why="the (C*KH*KW, K) product reshaped to (K, C, KH, KW) as it is",
    ),
    Mutant(
        id="max-pool-ties-last",
        exercise="a03-max-pool",
        find="np.greater(v, best, out=take)",
        replace="np.greater_equal(v, best, out=take)",
        why="a later equal value takes over the window: ties go to the last maximum, not the first",
    ),
    Mutant(
        id="max-pool-pads-zero",
        exercise="a03-max-pool",
        find="xp = pad_hw(x, _pad4(pad), value=_lowest(x.dtype))",
        replace="xp = pad_hw(x, _pad4(pad))",
        why="zero padding wins over negative inputs",
    ),
    Mutant(
        id="max-pool-backward-assigns",
        exercise="a03-max-pool-backward",
        find="np.add(target, g, out=target, where=hit)",
        replace="np.copyto(target, g, where=hit)",
        why="a pixel that wins several overlapping windows keeps only one window's gradient",
    ),
    Mutant(
        id="avg-pool-ignores-padding-count",
        exercise="a03-avg-pool",
        find="acc /= count  # in place: float32 stays float32",
        replace=("acc /= sum(pad_hw(np.ones((1, 1, H, W), acc.dtype), _pad4(pad))[:, :, r, c]\n"
                 "                   for _, r, c in _offsets(kernel, (OH, OW), stride))"),
        why="divides by the number of real pixels (count_include_pad=False), not by KH*KW",
    ),
    Mutant(
        id="avg-pool-square-count",
        exercise="a03-avg-pool",
        find="count = kernel[0] * kernel[1]",
        replace="count = kernel[0] * kernel[0]",
        why="assumes a square kernel when dividing",
    ),
    Mutant(
        id="global-avg-pool-sums",
        exercise="a03-global-avg-pool",
        find="return x.mean(axis=(2, 3))",
        replace="return x.sum(axis=(2, 3))",
        why="a sum instead of a mean",
    ),
]

# The kind of mistake each mutant's hidden-test message must name (checked by tests/test_exercises.py).
EXPECTED = {
    "output-size-no-dilation": "did you include dilation",
    "windows-extent-no-dilation": "did you include dilation",
    "windows-stride-dilation-swapped": "swapped stride and dilation",
    "im2col-rows-kernel-major": "(kernel row, kernel col, channel) order",
    "col2im-assigns": "assigns instead of adding",
    "conv-reshape-not-transpose": "*transpose*",
    "weight-grad-not-transposed": "without transposing",
    "max-pool-ties-last": "pooling ties",
    "max-pool-pads-zero": "padding must never win",
    "max-pool-backward-assigns": "add their gradients",
    "avg-pool-ignores-padding-count": "count_include_pad=True",
    "avg-pool-square-count": "non-square",
    "global-avg-pool-sums": "summed",
}
