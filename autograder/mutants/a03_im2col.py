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
        find="win.transpose(1, 4, 5, 0, 2, 3)",
        replace="win.transpose(4, 5, 1, 0, 2, 3)",
        why="rows ordered (kernel row, kernel col, channel), which does not match weight.reshape(K, -1)",
    ),
    Mutant(
        id="im2col-columns-pixel-major",
        exercise="a03-im2col",
        find="win.transpose(1, 4, 5, 0, 2, 3)",
        replace="win.transpose(1, 4, 5, 2, 3, 0)",
        why="columns ordered (output row, output col, image): the windows of the images interleaved",
    ),
    Mutant(
        id="im2col-no-padding",
        exercise="a03-im2col",
        find="win = windows(pad_hw(x, padding), kernel, stride, dilation)",
        replace="win = windows(x, kernel, stride, dilation)",
        why="the windows of the unpadded input",
    ),
    Mutant(
        id="col2im-assigns",
        exercise="a03-col2im",
        find="xp[:, :, rows, columns] += blocks[:, :, i, j]",
        replace="xp[:, :, rows, columns] = blocks[:, :, i, j]",
        why="overlapping receptive fields overwrite each other instead of adding up",
    ),
    Mutant(
        id="col2im-no-dilation",
        exercise="a03-col2im",
        find="rows, columns = offset_slice(i, j, (OH, OW), stride, dilation)",
        replace="rows, columns = offset_slice(i, j, (OH, OW), stride, (1, 1))",
        why="the kernel's taps sent back to adjacent pixels, as if the kernel were not dilated",
    ),
    Mutant(
        id="col2im-crop-swapped",
        exercise="a03-col2im",
        find="return xp[:, :, t : t + H, l : l + W]",
        replace="return xp[:, :, l : l + H, t : t + W]",
        why="the padding cropped with the widths of the other axis (top/left swapped)",
    ),
    Mutant(
        id="conv-reshape-not-transpose",
        exercise="a03-conv2d",
        find="z = z.reshape(K, N, OH, OW).transpose(1, 0, 2, 3)",
        replace="z = z.reshape(N, K, OH, OW)",
        why="the (K, N*OH*OW) GEMM result reshaped to (N, K, OH, OW) without a transpose",
    ),
    Mutant(
        id="conv-bias-forgotten",
        exercise="a03-conv2d",
        find="z = z + bias.reshape(1, K, 1, 1)",
        replace="z = z",
        why="the bias is never added",
    ),
    Mutant(
        id="input-grad-dz-not-transposed",
        exercise="a03-conv2d-input-grad",
        find="dz = grad.transpose(1, 0, 2, 3).reshape(G, K // G, N * OH * OW)",
        replace="dz = grad.reshape(G, K // G, N * OH * OW)",
        why="dZ made by reshaping grad (N, K, OH, OW) directly: images and channels mixed",
    ),
    Mutant(
        id="weight-grad-dz-not-transposed",
        exercise="a03-conv2d-weight-grad",
        find="dz = grad.transpose(1, 0, 2, 3).reshape(G, K // G, N * OH * OW)",
        replace="dz = grad.reshape(G, K // G, N * OH * OW)",
        why="dZ made by reshaping grad (N, K, OH, OW) directly: images and channels mixed",
    ),
    Mutant(
        id="max-pool-ties-last",
        exercise="a03-max-pool",
        find="take = (v > out) | np.isnan(v)",
        replace="take = (v >= out) | np.isnan(v)",
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
        id="max-pool-index-column-major",
        exercise="a03-max-pool",
        find="index = np.where(take, k, index)",
        replace="index = np.where(take, (k % kernel[1]) * kernel[0] + k // kernel[1], index)",
        why="the winner's offset counted column by column (j*KH + i): the backward sends the gradient to "
            "another pixel of the window",
    ),
    Mutant(
        id="max-pool-backward-assigns",
        exercise="a03-max-pool-backward",
        find="dxp[:, :, rows, cols] += np.where(index == k, grad, 0)",
        replace="dxp[:, :, rows, cols] = np.where(index == k, grad, 0)",
        why="a pixel that wins several overlapping windows keeps only one window's gradient",
    ),
    Mutant(
        id="avg-pool-ignores-padding-count",
        exercise="a03-avg-pool",
        find="return total / (kernel[0] * kernel[1])",
        replace=("return total / sum(pad_hw(np.ones((1, 1, H, W), x.dtype), _pad4(pad))[:, :, r, c]\n"
                 "                 for _, r, c in _offsets(kernel, (OH, OW), stride))"),
        why="divides by the number of real pixels (count_include_pad=False), not by KH*KW",
    ),
    Mutant(
        id="avg-pool-square-count",
        exercise="a03-avg-pool",
        find="return total / (kernel[0] * kernel[1])",
        replace="return total / (kernel[0] * kernel[0])",
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
    "im2col-columns-pixel-major": "(output pixel, image) order",
    "im2col-no-padding": "pad x first",
    "col2im-assigns": "assigns instead of adding",
    "col2im-no-dilation": "did you include dilation",
    "col2im-crop-swapped": "((top, bottom), (left, right))",
    "conv-reshape-not-transpose": "*transpose*",
    "conv-bias-forgotten": "the bias is missing",
    "input-grad-dz-not-transposed": "transpose grad (N, K, OH, OW)",
    "weight-grad-dz-not-transposed": "transpose grad (N, K, OH, OW)",
    "max-pool-ties-last": "pooling ties",
    "max-pool-pads-zero": "padding must never win",
    "max-pool-index-column-major": "row by row",
    "max-pool-backward-assigns": "add their gradients",
    "avg-pool-ignores-padding-count": "count_include_pad=True",
    "avg-pool-square-count": "non-square",
    "global-avg-pool-sums": "summed",
}
