"""Hidden checks of a03_im2col: convolution as one matrix product, and pooling.

The exercises are the teaching kernels under the engine's conv and pool ops
(`solutions/ops/im2col.py`, `conv.py`, `pool.py`; the ops reach them through `kernels.py`). The
student's kernel runs in the sandbox, in the course kit's engine where every other exercise is the
reference and the kernel is plugged in wherever the engine calls it; the checks and the reference
run here, and only plain data crosses (arrays, numbers, tuples).

Each kernel is first called on its own, on seeded cases (strides 1-3, padding 0-2 and
asymmetric, dilation 1-3, groups, non-square kernels and odd sizes, a batch of one, one channel,
float32 and float64, parameters given as ints, pairs or ((top, bottom), (left, right))): its
arguments go over as copies and its result comes back as an array, compared with the
reference's. An argument the kernel must leave alone (windows' input) is created in the sandbox
and read back after the call. Then conv2d / max_pool2d / avg_pool2d run in the sandbox's engine,
which calls the student's kernel, and their forward, backward and gradients of gradients
(create_graph=True) must agree with the reference engine's here. Messages name the kind of
mistake and the pattern of the case, never the inputs or the expected values.
"""
# The parts in the notebook's order: @graded declares each exercise as its module is imported.
from . import im2col, conv, pool  # noqa: F401, I001
