"""Hidden checks of a04_conv_backward: the convolution's backward pass as chapter 4 derives it.

The exercises are the pieces of `solutions/ops/conv_backward.py` (dilate, erode, pad2d, unpad2d,
rotate180) and the formula that assembles them, `conv2d_backward_derived`. Every check runs in the
trusted judge: the student's answer runs in the sandbox's engine, where every other exercise is the
reference, and the reference runs here; only plain data (arrays, numbers, shapes) crosses. Each
piece is checked on its own on arrays and, where it takes Tensors (built with the sandbox's engine),
as a differentiable op; the student's dilate and erode kernels, plugged into the sandbox's engine,
must then leave the derived backward in agreement with the reference's. The derived backward is
compared with the reference on seeded geometries (strides 1-3, strides that do not divide the
input, padding 0-2 and asymmetric, dilation 1-3, groups, non-square kernels, a batch of one with
one channel), on arrays and on Tensors with gradients of gradients. Messages name the kind of
mistake, never the inputs or the expected values.
"""
# The parts in the notebook's order: @graded declares each exercise as its module is imported.
from . import spread, padding, derived  # noqa: F401, I001
