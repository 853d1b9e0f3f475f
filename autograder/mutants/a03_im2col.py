"""Classic student bugs in a03_im2col (convolution as a matrix product, pooling), one solution region each.

`autograder check a03_im2col` plants each one in the source notebook and expects it to lose points
on its own exercise only; `tests/grader/test_exercises.py` plants each one in the solutions/ source and
expects the hidden check to fail with a message containing its `expect` phrase.
"""
from autograder.mutants import Mutant

MUTANTS = [
    Mutant(
        id="output-size-no-dilation",
        expect="did you include dilation",
        exercise="a03-output-size",
        find="dilation * (kernel - 1)",
        replace="(kernel - 1)",
        why="the output size of an undilated kernel: a dilated kernel spans d(k-1)+1 pixels",
    ),
    Mutant(
        id="windows-extent-no-dilation",
        expect="did you include dilation",
        exercise="a03-windows",
        find="extent = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)",
        replace="extent = (kh, kw)",
        why="the sliding window has the kernel's size, not the dilated kernel's extent",
    ),
    Mutant(
        id="windows-stride-dilation-swapped",
        expect="swapped stride and dilation",
        exercise="a03-windows",
        find="view[:, :, ::sh, ::sw, ::dh, ::dw]",
        replace="view[:, :, ::dh, ::dw, ::sh, ::sw]",
        why="the stride applied to the taps and the dilation to the positions",
    ),
    Mutant(
        id="im2col-rows-kernel-major",
        expect="(kernel row, kernel col, channel) order",
        exercise="a03-im2col",
        find="win.transpose(1, 4, 5, 0, 2, 3)",
        replace="win.transpose(4, 5, 1, 0, 2, 3)",
        why="rows ordered (kernel row, kernel col, channel), which does not match weight.reshape(K, -1)",
    ),
    Mutant(
        id="im2col-columns-pixel-major",
        expect="(output pixel, image) order",
        exercise="a03-im2col",
        find="win.transpose(1, 4, 5, 0, 2, 3)",
        replace="win.transpose(1, 4, 5, 2, 3, 0)",
        why="columns ordered (output row, output col, image): the windows of the images interleaved",
    ),
    Mutant(
        id="im2col-no-padding",
        expect="pad x first",
        exercise="a03-im2col",
        find="win = windows(pad_hw(x, padding), kernel, stride, dilation)",
        replace="win = windows(x, kernel, stride, dilation)",
        why="the windows of the unpadded input",
    ),
    Mutant(
        id="col2im-assigns",
        expect="assigns instead of adding",
        exercise="a03-col2im",
        find="xp[:, :, rows, columns] += blocks[:, :, i, j]",
        replace="xp[:, :, rows, columns] = blocks[:, :, i, j]",
        why="overlapping receptive fields overwrite each other instead of adding up",
    ),
    Mutant(
        id="col2im-no-dilation",
        expect="did you include dilation",
        exercise="a03-col2im",
        find="rows, columns = offset_slice(i, j, (OH, OW), stride, dilation)",
        replace="rows, columns = offset_slice(i, j, (OH, OW), stride, (1, 1))",
        why="the kernel's taps sent back to adjacent pixels, as if the kernel were not dilated",
    ),
    Mutant(
        id="col2im-crop-swapped",
        expect="((top, bottom), (left, right))",
        exercise="a03-col2im",
        find="return xp[:, :, t : t + H, l : l + W]",
        replace="return xp[:, :, l : l + H, t : t + W]",
        why="the padding cropped with the widths of the other axis (top/left swapped)",
    ),
    Mutant(
        id="conv-reshape-not-transpose",
        expect="*transpose*",
        exercise="a03-conv2d",
        find="z = z.reshape(K, N, OH, OW).transpose(1, 0, 2, 3)",
        replace="z = z.reshape(N, K, OH, OW)",
        why="the (K, N*OH*OW) GEMM result reshaped to (N, K, OH, OW) without a transpose",
    ),
    Mutant(
        id="conv-bias-forgotten",
        expect="the bias is missing",
        exercise="a03-conv2d",
        find="z = z + bias.reshape(1, K, 1, 1)",
        replace="z = z",
        why="the bias is never added",
    ),
    Mutant(
        id="conv-groups-interleaved",
        expect="groups interleaved",
        exercise="a03-conv2d",
        find="z = w.reshape(G, K // G, Cg * KH * KW) @ cols",
        replace="z = w.reshape(K // G, G, Cg * KH * KW).transpose(1, 0, 2) @ cols",
        why="group g takes every G-th output channel (g, g+G, ...) instead of the contiguous block g*K/G ...",
    ),
    Mutant(
        id="input-grad-dz-not-transposed",
        expect="transpose grad (N, K, OH, OW)",
        exercise="a03-conv2d-input-grad",
        find="dz = grad.transpose(1, 0, 2, 3).reshape(G, K // G, N * OH * OW)",
        replace="dz = grad.reshape(G, K // G, N * OH * OW)",
        why="dZ made by reshaping grad (N, K, OH, OW) directly: images and channels mixed",
    ),
    Mutant(
        id="weight-grad-dz-not-transposed",
        expect="transpose grad (N, K, OH, OW)",
        exercise="a03-conv2d-weight-grad",
        find="dz = grad.transpose(1, 0, 2, 3).reshape(G, K // G, N * OH * OW)",
        replace="dz = grad.reshape(G, K // G, N * OH * OW)",
        why="dZ made by reshaping grad (N, K, OH, OW) directly: images and channels mixed",
    ),
    Mutant(
        id="max-pool-ties-last",
        expect="pooling ties",
        exercise="a03-max-pool",
        find="take = (v > out) | np.isnan(v)",
        replace="take = (v >= out) | np.isnan(v)",
        why="a later equal value takes over the window: ties go to the last maximum, not the first",
    ),
    Mutant(
        id="max-pool-pads-zero",
        expect="padding must never win",
        exercise="a03-max-pool",
        find="xp = pad_hw(x, pad4(pad), value=lowest(x.dtype))",
        replace="xp = pad_hw(x, pad4(pad))",
        why="zero padding wins over negative inputs",
    ),
    Mutant(
        id="max-pool-index-column-major",
        expect="row by row",
        exercise="a03-max-pool",
        find="index = np.where(take, k, index)",
        replace="index = np.where(take, (k % kernel[1]) * kernel[0] + k // kernel[1], index)",
        why="the winner's offset counted column by column (j*KH + i): the backward sends the gradient to "
            "another pixel of the window",
    ),
    Mutant(
        id="max-pool-backward-assigns",
        expect="add their gradients",
        exercise="a03-max-pool-backward",
        find="dxp[:, :, rows, cols] += np.where(index == k, grad, 0)",
        replace="dxp[:, :, rows, cols] = np.where(index == k, grad, 0)",
        why="a pixel that wins several overlapping windows keeps only one window's gradient",
    ),
    Mutant(
        id="max-pool-nan-ignored",
        expect="a NaN must win its window",
        exercise="a03-max-pool",
        find="take = (v > out) | np.isnan(v)",
        replace="take = v > out",
        why="a NaN never compares greater, so it never wins its window: the max pool swallows NaN",
    ),
    Mutant(
        id="max-pool-pads-with-minus-inf",
        expect="smallest integer of its dtype",
        exercise="a03-max-pool",
        find="xp = pad_hw(x, pad4(pad), value=lowest(x.dtype))",
        replace="xp = pad_hw(x, pad4(pad), value=-np.inf)",
        why="pads with -inf whatever the dtype: an integer image cannot hold it",
    ),
    Mutant(
        id="max-pool-backward-cropped-top-left",
        expect="cropped from the wrong side",
        exercise="a03-max-pool-backward",
        find="return dxp[:, :, pad[0] : pad[0] + H, pad[1] : pad[1] + W]",
        replace="return dxp[:, :, :H, :W]",
        why="the padded gradient cropped from one side only: the top-left padding kept, twice the bottom-right cut",
    ),
    Mutant(
        id="avg-pool-ignores-padding-count",
        expect="count_include_pad=True",
        exercise="a03-avg-pool",
        find="return total / (kernel[0] * kernel[1])",
        replace=("return total / sum(pad_hw(np.ones((1, 1, H, W), x.dtype), pad4(pad))[:, :, r, c]\n"
                 "                 for _, r, c in kernel_offsets(kernel, (OH, OW), stride))"),
        why="divides by the number of real pixels (count_include_pad=False), not by KH*KW",
    ),
    Mutant(
        id="avg-pool-square-count",
        expect="non-square",
        exercise="a03-avg-pool",
        find="return total / (kernel[0] * kernel[1])",
        replace="return total / (kernel[0] * kernel[0])",
        why="assumes a square kernel when dividing",
    ),
    Mutant(
        id="global-avg-pool-error-without-shape",
        expect="must name the shape",
        exercise="a03-global-avg-pool",
        find='raise ValueError(f"global_avg_pool2d: expected a 4-D input (N, C, H, W), got shape {x.shape}")',
        replace='raise ValueError("global_avg_pool2d: expected a 4-D input")',
        why="the contract asks for a ValueError naming the shape; this one does not",
    ),
    Mutant(
        id="global-avg-pool-no-as-tensor",
        expect="as_tensor",
        exercise="a03-global-avg-pool",
        find="    x = as_tensor(x)\n",
        replace="",
        why=("an ndarray input is averaged with NumPy and an ndarray returned: the contract accepts what "
             "as_tensor accepts"),
    ),
    Mutant(
        id="global-avg-pool-sums",
        expect="summed",
        exercise="a03-global-avg-pool",
        find="return x.mean(axis=(2, 3))",
        replace="return x.sum(axis=(2, 3))",
        why="a sum instead of a mean",
    ),
    Mutant(
        id="conv-kernel-flipped",
        expect="kernel is flipped",
        exercise="a03-conv2d",
        find="z = w.reshape(G, K // G, Cg * KH * KW) @",
        replace="z = w[:, :, ::-1, ::-1].reshape(G, K // G, Cg * KH * KW) @",
        why="the kernel rotated by 180 degrees (the textbook convolution) instead of a cross-correlation",
    ),
    Mutant(
        id="input-grad-kernel-flipped",
        expect="kernel is flipped",
        exercise="a03-conv2d-input-grad",
        find="w_t = w.reshape(G, K // G, Cg * KH * KW)",
        replace="w_t = w[:, :, ::-1, ::-1].reshape(G, K // G, Cg * KH * KW)",
        why="the kernel rotated by 180 degrees, as in the 'full convolution' form of dx, but on top of col2im",
    ),
    Mutant(
        id="input-grad-wrong-sign",
        expect="wrong sign",
        exercise="a03-conv2d-input-grad",
        find="return col2im(dcols, x_shape,",
        replace="return -col2im(dcols, x_shape,",
        why="the gradient with the wrong sign",
    ),
    Mutant(
        id="weight-grad-kernel-flipped",
        expect="flipped",
        exercise="a03-conv2d-weight-grad",
        find="return dw.reshape(w_shape)",
        replace="return dw.reshape(w_shape)[:, :, ::-1, ::-1]",
        why="the weight gradient rotated by 180 degrees",
    ),
]


# Correct answers in other legitimate styles: each must keep full marks (checked like the mutants).
ALTERNATIVES = [
    Mutant(
        id="output-size-while-loop",
        exercise="a03-output-size",
        find="return (size + pad - dilation * (kernel - 1) - 1) // stride + 1",
        replace=("count, start = 0, 0\n"
                 "    while start + dilation * (kernel - 1) < size + pad:  # the window still fits\n"
                 "        count, start = count + 1, start + stride\n"
                 "    return count"),
        why="counting the windows in a loop instead of the formula",
    ),
    Mutant(
        id="output-size-numpy-int",
        exercise="a03-output-size",
        find="return (size + pad - dilation * (kernel - 1) - 1) // stride + 1",
        replace="return np.int64(np.floor_divide(size + pad - dilation * (kernel - 1) - 1, stride) + 1)",
        why="a NumPy integer instead of a Python int",
    ),
    Mutant(
        id="windows-as-strided",
        exercise="a03-windows",
        find=("    extent = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)\n"
              "    view = sliding_window_view(xp, extent, axis=(2, 3))\n"
              "    return view[:, :, ::sh, ::sw, ::dh, ::dw]"),
        replace=("    N, C, Hp, Wp = xp.shape\n"
                 "    OH, OW = (Hp - dh * (kh - 1) - 1) // sh + 1, (Wp - dw * (kw - 1) - 1) // sw + 1\n"
                 "    s0, s1, s2, s3 = xp.strides\n"
                 "    return np.lib.stride_tricks.as_strided(\n"
                 "        xp, (N, C, OH, OW, kh, kw), (s0, s1, s2 * sh, s3 * sw, s2 * dh, s3 * dw), writeable=False)"),
        why="as_strided with the strides written out, instead of sliding_window_view",
    ),
    Mutant(
        id="windows-copy",
        exercise="a03-windows",
        find="return view[:, :, ::sh, ::sw, ::dh, ::dw]",
        replace="return view[:, :, ::sh, ::sw, ::dh, ::dw].copy()",
        why="a copy instead of a view: the contract recommends a view, the values are the same",
    ),
    Mutant(
        id="im2col-offset-loop-and-print",
        exercise="a03-im2col",
        find=("    win = windows(pad_hw(x, padding), kernel, stride, dilation)  # (N, C, OH, OW, KH, KW), a view\n"
              "    N, C, OH, OW, KH, KW = win.shape\n"
              "    # Rows (c, i, j), columns (n, oh, ow): move the axes there (still a view), then copy once.\n"
              "    return win.transpose(1, 4, 5, 0, 2, 3).reshape(C * KH * KW, N * OH * OW)"),
        replace=("    def taps(xp):  # a helper defined inside the answer: every offset's slice, in (i, j) order\n"
                 "        OH, OW = conv_output_hw(x.shape[2:], kernel, stride, padding, dilation)\n"
                 "        for i in range(kernel[0]):\n"
                 "            for j in range(kernel[1]):\n"
                 "                yield i, j, xp[(slice(None), slice(None)) "
                 "+ offset_slice(i, j, (OH, OW), stride, dilation)]\n"
                 "    N, C = x.shape[:2]\n"
                 "    KH, KW = kernel\n"
                 "    OH, OW = conv_output_hw(x.shape[2:], kernel, stride, padding, dilation)\n"
                 "    out = np.empty((C, KH, KW, N, OH, OW), dtype=x.dtype)\n"
                 "    for i, j, tap in taps(pad_hw(x, padding)):\n"
                 "        out[:, i, j] = tap.transpose(1, 0, 2, 3)\n"
                 "    print('im2col:', x.shape, '->', (C * KH * KW, N * OH * OW))\n"
                 "    return out.reshape(C * KH * KW, N * OH * OW)"),
        why="a loop over the kernel offsets into a preallocated array, a helper inside the cell, and a print",
    ),
    Mutant(
        id="col2im-add-at-and-copy",
        exercise="a03-col2im",
        find="xp[:, :, rows, columns] += blocks[:, :, i, j]",
        replace="np.add.at(xp, (slice(None), slice(None), rows, columns), blocks[:, :, i, j])",
        why="np.add.at instead of a slice +=",
    ),
    Mutant(
        id="col2im-crop-copy",
        exercise="a03-col2im",
        find="return xp[:, :, t : t + H, l : l + W]",
        replace="return np.ascontiguousarray(xp[:, :, t : xp.shape[2] - b, l : xp.shape[3] - r])",
        why="the crop written with the bottom/right widths, returned as a contiguous copy",
    ),
    Mutant(
        id="conv-einsum-bias-broadcast",
        exercise="a03-conv2d",
        find="z = w.reshape(G, K // G, Cg * KH * KW) @ cols.reshape(G, Cg * KH * KW, N * OH * OW)",
        replace=("z = np.einsum('gkr,grp->gkp', w.reshape(G, K // G, Cg * KH * KW),\n"
                 "                  cols.reshape(G, Cg * KH * KW, N * OH * OW))"),
        why="np.einsum for the grouped GEMM",
    ),
    Mutant(
        id="conv-bias-as-column",
        exercise="a03-conv2d",
        find="z = z + bias.reshape(1, K, 1, 1)",
        replace="z = z + bias[:, None, None]",
        why="the bias broadcast as (K, 1, 1)",
    ),
    Mutant(
        id="input-grad-loop-over-groups",
        exercise="a03-conv2d-input-grad",
        find="(w_t @ dz).reshape(G * Cg * KH * KW, N * OH * OW)",
        replace="np.concatenate([w_t[g] @ dz[g] for g in range(G)], axis=0)",
        why="one matrix product per group in a loop, stacked with np.concatenate",
    ),
    Mutant(
        id="weight-grad-einsum",
        exercise="a03-conv2d-weight-grad",
        find="dz @ cols.reshape(G, Cg * KH * KW, N * OH * OW).transpose(0, 2, 1)",
        replace="np.einsum('gkp,grp->gkr', dz, cols.reshape(G, Cg * KH * KW, N * OH * OW))",
        why="np.einsum instead of a product with a transposed view",
    ),
    Mutant(
        id="max-pool-stack-and-argmax",
        exercise="a03-max-pool",
        find=("    out = np.full((N, C, OH, OW), lowest(x.dtype), dtype=x.dtype)\n"
              "    index = np.zeros((N, C, OH, OW), dtype=np.int64)\n"),
        replace=("    taps = np.stack([xp[:, :, rows, cols] for _, rows, cols in "
                 "kernel_offsets(kernel, (OH, OW), stride)], -1)\n"
                 "    index = np.argmax(taps, axis=-1)  # the first maximum; a NaN counts as the maximum\n"
                 "    return np.take_along_axis(taps, index[..., None], axis=-1)[..., 0], index\n"),
        why="all offsets stacked, np.argmax (first maximum, NaN wins) and take_along_axis",
    ),
    Mutant(
        id="max-pool-backward-add-at",
        exercise="a03-max-pool-backward",
        find=("    for k, rows, cols in kernel_offsets(kernel, (OH, OW), stride):\n"
              "        # The windows whose winner is offset k; add, since overlapping windows can share a winner.\n"
              "        dxp[:, :, rows, cols] += np.where(index == k, grad, 0)\n"),
        replace=("    n, c, oh, ow = np.indices(index.shape)\n"
                 "    np.add.at(dxp, (n, c, oh * stride[0] + index // kernel[1], "
                 "ow * stride[1] + index % kernel[1]), grad)\n"),
        why="the winners' pixel coordinates computed from index, and np.add.at",
    ),
    Mutant(
        id="avg-pool-sliding-window-mean",
        exercise="a03-avg-pool",
        find="return total / (kernel[0] * kernel[1])",
        replace=("return sliding_window_view(xp, kernel, axis=(2, 3))[:, :, :: stride[0], :: stride[1]]"
                 ".mean(axis=(-2, -1))"),
        why="the mean of sliding_window_view windows (np.mean: float32 stays, integers give float64)",
    ),
    Mutant(
        id="global-avg-pool-two-means",
        exercise="a03-global-avg-pool",
        find="return x.mean(axis=(2, 3))",
        replace="return x.mean(axis=3).mean(axis=2)",
        why="two means, one axis at a time",
    ),
    Mutant(
        id="global-avg-pool-sum-over-size",
        exercise="a03-global-avg-pool",
        find="return x.mean(axis=(2, 3))",
        replace="return x.sum(axis=(2, 3)) / (x.shape[2] * x.shape[3])",
        why="a sum divided by the Python int H*W",
    ),
    Mutant(
        id="max-pool-returns-a-list",
        exercise="a03-max-pool",
        find="return out, index",
        replace="return [out, index]",
        why="the pair returned as a list: the op unpacks it all the same",
    ),
    Mutant(
        id="conv-returns-a-list",
        exercise="a03-conv2d",
        find="return z, cols",
        replace="return [z, cols]",
        why="the pair returned as a list: the op unpacks it all the same",
    ),
]
