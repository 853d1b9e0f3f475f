"""Which array kernels the engine's ops run: the one place that decides.

Book: chapters 3 and 4 (`book/03_im2col.md`, `book/04_conv_backward.md`). Tests: `tests/engine/test_kernels.py`.

The ops that work on whole images (conv2d and its two gradients, the pools, dilate and erode)
do their arithmetic on plain arrays, in kernels they call as `kernels.<name>(...)`: a name of
this module, looked up each time an op runs. Two sets of kernels fill these names:

- the teaching kernels, written the way chapters 3 and 4 explain them, which are also the
  model answers of a03 and a04: `conv.py`, `pool.py`, `conv_backward.py` (with `im2col.py`
  under them);
- the fast kernels of `_fast.py` (threads, recycled buffers, channel-major layouts), private to
  the reference engine: the course kit ships without that module.

The fast set is used when `_fast` can be imported and the teaching set otherwise, so the
reference engine runs fast and the students' kit runs the teaching kernels.
`tests/engine/test_kernels.py` checks the two sets equal on drawn shapes. To run the teaching set in
the reference engine (for tests, or for the book): `use_fast(False)`, the context manager
`teaching_kernels()`, or the environment variable `SOLUTIONS_KERNELS=teaching` set before the
engine is imported.

In the kit, `coursekit.use(conv2d_array)` replaces every module global that holds the kit's
`conv2d_array`, the one here included, so the engine's conv2d then runs the student's kernel.
"""
from __future__ import annotations

import importlib
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator

# Every kernel an op calls, and the module that holds its teaching version. The names are bound
# by `use_fast` (called once the whole ops package is imported, at the end of ops/__init__.py).
TEACHING = {
    "conv2d_array": "conv",                  # z and x's columns          (Conv2d)
    "conv2d_input_grad_array": "conv",       # dx from dz                 (Conv2dInputGrad)
    "conv2d_weight_grad_array": "conv",      # dw from x and dz           (Conv2dWeightGrad)
    "max_pool2d_array": "pool",              # the max and its window offset (MaxPool2d)
    "max_pool2d_scatter_array": "pool",      # gradient to each window's winner
    "max_pool2d_gather_array": "pool",       # its adjoint (the scatter's backward)
    "avg_pool2d_array": "pool",              # the mean of each window    (AvgPool2d)
    "avg_pool2d_scatter_array": "pool",      # its adjoint
    "dilate_array": "conv_backward",         # zeros between the samples (Dilate)
    "erode_array": "conv_backward",          # every s-th sample         (Erode)
    "embedding_backward_array": "attention",  # rows scatter-added by token id (EmbeddingBackward)
}
# The kernels `_fast.py` does faster; the others are the teaching ones in both sets.
FAST = ("conv2d_array", "conv2d_input_grad_array", "conv2d_weight_grad_array", "max_pool2d_array",
        "max_pool2d_scatter_array", "avg_pool2d_array", "avg_pool2d_scatter_array", "embedding_backward_array")

conv2d_array = conv2d_input_grad_array = conv2d_weight_grad_array = None
max_pool2d_array = max_pool2d_scatter_array = max_pool2d_gather_array = None
avg_pool2d_array = avg_pool2d_scatter_array = None
dilate_array = erode_array = None
embedding_backward_array = None


def _keep(a: Any) -> None:
    """The teaching kernels allocate every array afresh: there is nothing to hand back."""


def _as_is(a: Any) -> Any:
    return a


# Two hooks only the fast kernels need, no-ops with the teaching ones:
recycle: Callable[[Any], None] = _keep            # a scratch array (x's columns) nobody needs any more
channel_major: Callable[[Any], Any] = _as_is      # dz laid out once for both of its gradients' products
# And one op the fast set fuses: BatchNorm in training mode as one node (`_fast.batch_norm_train`),
# None with the teaching kernels, where the layer calls a05's composite `nn.functional.batch_norm`.
batch_norm_train: Callable[..., Any] | None = None
# Likewise attention's first derivatives on arrays, from the weights its forward pass kept
# (`_fast.attention_backward_array`), None with the teaching kernels, where
# `ops.attention.ScaledDotProductAttention` runs `attention_backward` (a07's) on recomputed weights.
attention_backward_array: Callable[..., Any] | None = None


def _fast_module():
    """The `_fast` module, or None where it is not shipped (the course kit)."""
    try:
        return importlib.import_module(f"{__package__}._fast")
    except ModuleNotFoundError as error:
        if error.name != f"{__package__}._fast":
            raise  # _fast is there but broken: say so, never fall back silently
        return None


def fast_available() -> bool:
    return _fast_module() is not None


def fast_enabled() -> bool:
    """Whether the ops run the fast kernels now."""
    fast = _fast_module()
    return fast is not None and conv2d_array is fast.conv2d_array


def use_fast(on: bool = True) -> None:
    """Bind every kernel name to the fast kernels (on) or to the teaching ones (off)."""
    chosen: dict[str, Any] = {name: getattr(importlib.import_module(f".{home}", __package__), name)
                              for name, home in TEACHING.items()}
    chosen.update(recycle=_keep, channel_major=_as_is, batch_norm_train=None, attention_backward_array=None)
    if on:
        fast = _fast_module()
        if fast is None:
            raise RuntimeError("use_fast: the fast kernels (ops/_fast.py) are not part of this engine; "
                               "it runs the teaching kernels only")
        chosen.update({name: getattr(fast, name) for name in FAST}, recycle=fast.recycle,
                      channel_major=fast.channel_major, batch_norm_train=fast.batch_norm_train,
                      attention_backward_array=fast.attention_backward_array)
    globals().update(chosen)


@contextmanager
def teaching_kernels() -> Iterator[None]:
    """`with teaching_kernels():` the ops run the teaching kernels inside the block."""
    was = fast_enabled()
    use_fast(False)
    try:
        yield
    finally:
        use_fast(was)


def default_fast() -> bool:
    """Fast when `_fast` is here, unless SOLUTIONS_KERNELS=teaching."""
    wanted = os.environ.get("SOLUTIONS_KERNELS", "fast").strip().lower()
    if wanted not in ("fast", "teaching"):
        raise ValueError(f"SOLUTIONS_KERNELS must be 'fast' or 'teaching', got {wanted!r}")
    return wanted == "fast" and fast_available()
