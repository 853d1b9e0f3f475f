"""Ops that move data without computing: reshape, transpose, broadcast, index, pad, flip, join.

Book: chapter 2 (`book/02_broadcasting.md`) for the dualities they teach:
sum <-> broadcast_to, reshape <-> reshape, transpose <-> transpose, getitem <-> scatter-add,
pad <-> crop, concatenate <-> split. Tests: `tests/engine/test_broadcasting.py`, `tests/engine/test_ops.py`.
Every op that takes an axis checks it here (`normalize_axis`): out of range is NumPy's AxisError,
both a ValueError and an IndexError, as NumPy raises it and PyTorch's IndexError is caught.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..graph import Function, Tensor, as_tensor


# --------------------------------------------------------------------------------------------
# Axis helpers shared by every op that takes an axis
# --------------------------------------------------------------------------------------------
def axis_error(op: str, axis: Any, ndim: int) -> np.exceptions.AxisError:
    """An axis out of range: NumPy's AxisError, so both a ValueError and an IndexError (as NumPy
    raises and as PyTorch's IndexError is caught), with a message naming the op, axis and ndim."""
    low, high = -(ndim or 1), (ndim or 1) - 1
    return np.exceptions.AxisError(
        f"{op}: axis {axis} is out of range for a tensor with {ndim} dimensions (valid axes: {low} to {high})"
    )


def normalize_axis(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    """`axis` (None, int or tuple, negatives allowed) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    try:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    except TypeError:
        raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r}") from None
    bound = ndim or 1  # a 0-d tensor accepts axis 0 and -1, as NumPy and PyTorch do
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)):
            raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r}")
        if not -bound <= a < bound:
            raise axis_error(op, a, ndim)
        out.append(int(a) % bound)
    if len(out) > 1:
        if len(set(out)) != len(out):
            raise ValueError(f"{op}: repeated axis in {axis!r}")
        out.sort()
    return tuple(out) if ndim else ()  # ...and a 0-d tensor has no axis to reduce


def kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape a reduction over `axes` has with keepdims=True."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


# --------------------------------------------------------------------------------------------
# Broadcasting and its dual
# --------------------------------------------------------------------------------------------
def unbroadcast(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum `grad` back to `shape`: the gradient of broadcasting `shape` up to `grad.shape`.

    Broadcasting copies an input along the leading axes it lacked and along its size-1 axes;
    each copy received gradient, so the input's gradient is the sum over those axes.
    """
    have = grad.data.shape
    if have == shape:  # nothing was broadcast: the common case, so test it first
        return grad
    shape = tuple(shape)
    if have == shape:
        return grad
    lead = len(have) - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, have[lead:], strict=True)):
        raise ValueError(f"unbroadcast: a gradient of shape {have} cannot be summed back to shape {shape}")
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and have[lead + i] != 1)
    if not stretched:  # only leading axes were added: one sum removes them
        return grad.sum(axis=tuple(range(lead)))
    summed = grad.sum(axis=tuple(range(lead)) + stretched, keepdims=True)
    return summed.reshape(shape) if lead else summed


class BroadcastTo(Function):
    """Copy x along new leading axes and its size-1 axes; the gradient sums the copies."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = tuple(shape)

    def forward(self, x):
        try:
            return np.broadcast_to(x, self.shape)
        except ValueError:
            raise ValueError(f"broadcast_to: cannot broadcast shape {x.shape} to {self.shape}") from None

    def backward(self, grad):
        (x,) = self.inputs
        return unbroadcast(grad, x.shape)


def broadcast_to(x, shape) -> Tensor:
    return BroadcastTo.apply(x, shape=shape)


# --------------------------------------------------------------------------------------------
# Reshape and transpose: their own adjoints
# --------------------------------------------------------------------------------------------
class Reshape(Function):
    def __init__(self, shape: tuple[int, ...]):
        self.shape = tuple(shape)

    def forward(self, x):
        try:
            return x.reshape(self.shape)
        except ValueError:
            raise ValueError(f"reshape: cannot reshape a tensor of shape {x.shape} ({x.size} elements) "
                             f"into {self.shape}") from None

    def backward(self, grad):
        (x,) = self.inputs
        return grad.reshape(x.shape)


def reshape(x, shape) -> Tensor:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return Reshape.apply(x, shape=shape)


class Transpose(Function):
    """Permute axes with NumPy's meaning: output axis i is input axis `axes[i]`."""

    def __init__(self, axes: tuple[int, ...]):
        self.axes = axes

    def forward(self, x):
        return np.transpose(x, self.axes)

    def backward(self, grad):
        return grad.transpose(tuple(np.argsort(self.axes)))


def transpose(x, axes=None) -> Tensor:
    """NumPy semantics: `axes=None` reverses all axes; otherwise a full permutation."""
    x = as_tensor(x)
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    else:
        n = x.ndim
        in_range = all(isinstance(a, (int, np.integer)) and -n <= a < n for a in axes)
        axes = tuple(int(a) % n for a in axes) if in_range else tuple(axes)  # negative axes count from the end
        message = f"transpose: axes {axes} are not a permutation of the {x.ndim} axes of shape {x.shape}"
        bad = [a for a in axes if isinstance(a, (int, np.integer)) and not -n <= a < n]
        if bad:  # an axis out of range is NumPy's AxisError (a ValueError and an IndexError)
            raise np.exceptions.AxisError(f"{message} (axis {bad[0]} is out of range)")
        if not in_range or sorted(axes) != list(range(n)):
            raise ValueError(message)
    return Transpose.apply(x, axes=axes)


def permute(x, dims) -> Tensor:
    """PyTorch's name for a full permutation (same meaning as NumPy's `transpose(axes)`)."""
    return transpose(x, tuple(dims))


def swapaxes(x, dim0: int, dim1: int) -> Tensor:
    """Exchange two axes: PyTorch's `transpose(dim0, dim1)`, NumPy's `swapaxes`."""
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError("swapaxes: a 0-d tensor has no axes to swap")
    a, b = normalize_axis((dim0,), x.ndim, "swapaxes")[0], normalize_axis((dim1,), x.ndim, "swapaxes")[0]
    axes = list(range(x.ndim))
    axes[a], axes[b] = axes[b], axes[a]
    return Transpose.apply(x, axes=tuple(axes))


def expand_dims(x, axis: int) -> Tensor:
    x = as_tensor(x)
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise np.exceptions.AxisError(
            f"expand_dims: axis {axis} is out of range for a tensor of shape {x.shape} "
            f"(valid axes: {-x.ndim - 1} to {x.ndim})"
        )
    axis = axis % (x.ndim + 1)
    return reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])


unsqueeze = expand_dims


def squeeze(x, axis=None) -> Tensor:
    x = as_tensor(x)
    if axis is None:
        axes = tuple(i for i, n in enumerate(x.shape) if n == 1)
    else:
        axes = normalize_axis(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1 (shape {x.shape})")
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in axes))


def flatten(x, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """PyTorch semantics: merge axes start_dim..end_dim (inclusive) into one."""
    x = as_tensor(x)
    if x.ndim == 0:
        return reshape(x, (1,))
    s, e = normalize_axis((start_dim,), x.ndim, "flatten")[0], normalize_axis((end_dim,), x.ndim, "flatten")[0]
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for shape {x.shape}")
    return reshape(x, x.shape[:s] + (int(np.prod(x.shape[s : e + 1])),) + x.shape[e + 1 :])


# --------------------------------------------------------------------------------------------
# Indexing and its dual, scatter-add
# --------------------------------------------------------------------------------------------
def _plain_index(index: Any) -> Any:
    """Tensors inside an index become their arrays (indices are never differentiable)."""
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    return index.data if isinstance(index, Tensor) else index


def _is_basic(index: Any) -> bool:
    """Basic indexing (ints, slices, None, Ellipsis) never selects an element twice."""
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer)) for i in items)


class GetItem(Function):
    """x[index] with NumPy's basic and advanced indexing."""

    def __init__(self, index: Any):
        self.index = index

    def forward(self, x):
        try:
            return np.asarray(x[self.index])
        except IndexError as e:
            raise IndexError(f"getitem: {e} (tensor shape {x.shape}, index {self.index!r})") from None

    def backward(self, grad):
        (x,) = self.inputs
        return scatter_add(grad, self.index, x.shape)


def getitem(x, index) -> Tensor:
    return GetItem.apply(x, index=_plain_index(index))


class ScatterAdd(Function):
    """zeros(shape) with `values` added at `index`: the adjoint of x[index].

    An advanced index may name the same element twice (x[[0, 0]]); both copies send gradient
    back, so the values must be *added* (np.add.at), not assigned.
    """

    def __init__(self, index: Any, shape: tuple[int, ...]):
        self.index, self.shape = index, shape

    def forward(self, values):
        out = np.zeros(self.shape, dtype=values.dtype)
        if _is_basic(self.index):
            out[self.index] = values  # no repeats possible: plain assignment is exact and fast
        else:
            np.add.at(out, self.index, values)
        return out

    def backward(self, grad):
        return grad[self.index]


def scatter_add(values, index, shape) -> Tensor:
    return ScatterAdd.apply(values, index=_plain_index(index), shape=tuple(shape))


# --------------------------------------------------------------------------------------------
# Joining, padding, flipping
# --------------------------------------------------------------------------------------------
class Concatenate(Function):
    def __init__(self, axis: int):
        self.axis = axis

    def forward(self, *xs):
        try:
            return np.concatenate(xs, axis=self.axis)
        except ValueError:
            shapes = ", ".join(str(x.shape) for x in xs)
            raise ValueError(f"concatenate: shapes {shapes} do not match except along axis {self.axis}") from None

    def backward(self, grad):
        grads, start = [], 0
        for x in self.inputs:
            stop = start + x.shape[self.axis]
            index = (slice(None),) * self.axis + (slice(start, stop),)
            grads.append(grad[index])
            start = stop
        return tuple(grads)


def concatenate(xs: Sequence, axis: int = 0) -> Tensor:
    xs = [as_tensor(x) for x in xs]
    if not xs:
        raise ValueError("concatenate: need at least one tensor")
    if xs[0].ndim == 0:
        raise ValueError("concatenate: 0-d tensors have no axis to join along; use stack")
    axis = normalize_axis((axis,), xs[0].ndim, "concatenate")[0]
    return Concatenate.apply(*xs, axis=axis)


def stack(xs: Sequence, axis: int = 0) -> Tensor:
    xs = [as_tensor(x) for x in xs]
    if not xs:
        raise ValueError("stack: need at least one tensor")
    if len({x.shape for x in xs}) != 1:
        raise ValueError(f"stack: all tensors must have the same shape, got {[x.shape for x in xs]}")
    n = xs[0].ndim
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"stack: axis must be an int, got {axis!r}")
    if not -n - 1 <= axis <= n:
        raise np.exceptions.AxisError(
            f"stack: axis {axis} is out of range for stacking tensors with {n} dimensions (valid axes: {-n - 1} to {n})"
        )
    return concatenate([expand_dims(x, axis) for x in xs], axis=axis % (xs[0].ndim + 1))


class Pad(Function):
    """Constant padding; the gradient crops the padding away again."""

    def __init__(self, pad_width: tuple[tuple[int, int], ...], value: float):
        self.pad_width, self.value = pad_width, value

    def forward(self, x):
        return np.pad(x, self.pad_width, mode="constant", constant_values=self.value)

    def backward(self, grad):
        index = tuple(slice(before, grad.shape[i] - after) for i, (before, after) in enumerate(self.pad_width))
        return grad[index]


def pad(x, pad_width, value: float = 0.0) -> Tensor:
    """NumPy's `pad_width`: an int, a pair, or one pair per axis."""
    x = as_tensor(x)
    try:
        widths = np.broadcast_to(np.asarray(pad_width, dtype=int), (x.ndim, 2))
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width!r} does not fit a tensor of shape {x.shape}") from None
    if (widths < 0).any():
        raise ValueError(f"pad: negative pad_width {pad_width!r}")
    return Pad.apply(x, pad_width=tuple((int(a), int(b)) for a, b in widths), value=value)


class Flip(Function):
    def __init__(self, axes: tuple[int, ...]):
        self.axes = axes

    def forward(self, x):
        return np.flip(x, self.axes)

    def backward(self, grad):
        return grad.flip(self.axes)


def flip(x, axis=None) -> Tensor:
    x = as_tensor(x)
    return Flip.apply(x, axes=normalize_axis(axis, x.ndim, "flip"))


# --------------------------------------------------------------------------------------------
# Rolling, triangles, and selecting along an axis (beyond the chapters: what a PyTorch or NumPy
# user reaches for). Each gradient is its op's adjoint: roll back, the same triangle, scatter-add.
# --------------------------------------------------------------------------------------------
class Roll(Function):
    """np.roll: elements shifted along axes, wrapping around; the gradient rolls back."""

    def __init__(self, shift: Any, axis: Any):
        self.shift, self.axis = shift, axis

    def forward(self, x):
        return np.roll(x, self.shift, self.axis)

    def backward(self, grad):
        back = tuple(-s for s in self.shift) if isinstance(self.shift, tuple) else -self.shift
        return roll(grad, back, self.axis)


def roll(x, shift, axis=None) -> Tensor:
    """NumPy's `roll` (PyTorch's `roll(shifts, dims)`): with axis None the flattened tensor rolls."""
    x = as_tensor(x)
    if axis is None:
        if not isinstance(shift, (int, np.integer)):
            raise TypeError(f"roll: with axis=None the shift must be one int, got {shift!r}")
        return Roll.apply(x, shift=int(shift), axis=None)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    shifts = (shift,) if isinstance(shift, (int, np.integer)) else tuple(shift)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shift(s) {shift!r} for {len(axes)} axis/axes {axis!r}")
    axes = tuple(normalize_axis((a,), x.ndim, "roll")[0] for a in axes)  # repeats allowed, as in NumPy
    return Roll.apply(x, shift=tuple(int(s) for s in shifts), axis=axes)


class Triangle(Function):
    """The lower (tril) or upper (triu) triangle of the last two axes, from diagonal k; the rest 0.
    Keeping a fixed set of elements is its own adjoint: the gradient is the same triangle of grad."""

    def __init__(self, k: int, lower: bool):
        self.k, self.lower = k, lower

    def forward(self, x):
        return np.tril(x, self.k) if self.lower else np.triu(x, self.k)

    def backward(self, grad):
        return Triangle.apply(grad, k=self.k, lower=self.lower)


def _triangle(x, k, lower: bool, op: str) -> Tensor:
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"{op}: needs a tensor with at least 2 dimensions (a matrix or a batch of them), "
                         f"got shape {x.shape}")
    if not isinstance(k, (int, np.integer)):
        raise TypeError(f"{op}: the diagonal k must be an int, got {k!r}")
    return Triangle.apply(x, k=int(k), lower=lower)


def tril(x, k: int = 0) -> Tensor:
    return _triangle(x, k, True, "tril")


def triu(x, k: int = 0) -> Tensor:
    return _triangle(x, k, False, "triu")


def _index_array(indices: Any, op: str) -> np.ndarray:
    idx = np.asarray(indices.data if isinstance(indices, Tensor) else indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be integers, got dtype {idx.dtype}")
    return idx


def _check_bounds(idx: np.ndarray, size: int, axis: int, op: str) -> None:
    bad = idx[(idx < -size) | (idx >= size)]
    if bad.size:
        raise IndexError(f"{op}: index {int(bad.flat[0])} is out of bounds for axis {axis} with size {size}")


def take(x, indices, axis=None) -> Tensor:
    """NumPy's `take`: the elements at `indices` along `axis` (of the flattened tensor if None).
    An index may repeat; its gradient is then summed (getitem's scatter-add)."""
    x = as_tensor(x)
    idx = _index_array(indices, "take")
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    else:
        axis = normalize_axis((axis,), x.ndim, "take")[0]
    _check_bounds(idx, x.shape[axis], axis, "take")
    return getitem(x, (slice(None),) * axis + (idx,))


def _checked_along_axis(x: Tensor, indices: Any, axis: int, op: str) -> tuple[np.ndarray, int]:
    """take_along_axis's and gather's index array and axis, checked: integers, one index axis per
    tensor axis, the axis in range."""
    idx = _index_array(indices, op)
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d tensor has no axis to select along")
    if idx.ndim != x.ndim:
        raise ValueError(f"{op}: the index has {idx.ndim} dimensions, the tensor {x.ndim} "
                         f"(shapes {idx.shape} and {x.shape})")
    return idx, normalize_axis((axis,), x.ndim, op)[0]


def _along_axis(x: Tensor, idx: np.ndarray, axis: int, op: str) -> Tensor:
    """out[..., i, ...] = x[..., idx[..., i, ...], ...] along `axis`; idx has x's number of axes and
    gives the output's shape; on the other axes it picks the same position."""
    _check_bounds(idx, x.shape[axis], axis, op)
    index = tuple(idx if d == axis else np.arange(n).reshape((1,) * d + (n,) + (1,) * (idx.ndim - d - 1))
                  for d, n in enumerate(idx.shape))
    return getitem(x, index)


def take_along_axis(x, indices, axis: int) -> Tensor:
    """NumPy's `take_along_axis`: indices with x's number of axes, broadcast against x off `axis`."""
    x = as_tensor(x)
    idx, axis = _checked_along_axis(x, indices, axis, "take_along_axis")
    shape = tuple(idx.shape[d] if d == axis else n for d, n in enumerate(x.shape))
    try:
        idx = np.broadcast_to(idx, np.broadcast_shapes(idx.shape, shape))
    except ValueError:
        raise ValueError(f"take_along_axis: indices of shape {idx.shape} do not broadcast against the tensor's "
                         f"shape {x.shape} off axis {axis}") from None
    return _along_axis(x, idx, axis, "take_along_axis")


def gather(x, dim: int, index) -> Tensor:
    """PyTorch's `gather(input, dim, index)`: out[i][j] = x[i][index[i][j]] for dim=1. `index` has x's
    number of axes and may be smaller than x off `dim` (it then reads the leading part)."""
    x = as_tensor(x)
    idx, dim = _checked_along_axis(x, index, dim, "gather")
    if any(m > n for d, (m, n) in enumerate(zip(idx.shape, x.shape, strict=True)) if d != dim):
        raise ValueError(f"gather: index of shape {idx.shape} is larger than the tensor's shape {x.shape} "
                         f"off dim {dim}")
    return _along_axis(x, idx, dim, "gather")


def repeat(x, repeats, axis=None) -> Tensor:
    """NumPy's `repeat`: each element `repeats` times in a row along `axis` (flattened if None);
    `repeats` is an int or one count per element. (PyTorch's `Tensor.repeat` is `tile`.)"""
    x = as_tensor(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    else:
        axis = normalize_axis((axis,), x.ndim, "repeat")[0]
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iu" or (counts < 0).any():
        raise ValueError(f"repeat: repeats must be non-negative integers, got {repeats!r}")
    try:
        idx = np.repeat(np.arange(x.shape[axis]), counts)
    except ValueError:
        raise ValueError(f"repeat: {counts.size} repeat counts for an axis of size {x.shape[axis]}") from None
    return getitem(x, (slice(None),) * axis + (idx,))


def tile(x, reps) -> Tensor:
    """NumPy's `tile` (PyTorch's `Tensor.repeat`): the whole tensor copied `reps` times per axis.
    A broadcast between interleaved axes, so the gradient is broadcast's: a sum over the copies."""
    x = as_tensor(x)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    if any(not isinstance(r, (int, np.integer)) or r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative integers, got {reps!r}")
    d = max(x.ndim, len(reps))
    shape = (1,) * (d - x.ndim) + x.shape
    reps = (1,) * (d - len(reps)) + reps
    interleaved = reshape(x, tuple(v for n in shape for v in (1, n)))  # (1, n0, 1, n1, ...)
    copies = broadcast_to(interleaved, tuple(v for r, n in zip(reps, shape, strict=True) for v in (r, n)))
    return reshape(copies, tuple(r * n for r, n in zip(reps, shape, strict=True)))


def split(x, indices_or_sections, axis: int = 0) -> list[Tensor]:
    """NumPy's `split`: an int n gives n equal parts (an error if they cannot be equal), a list of
    indices gives the parts between them. Each part is a slice, so the gradient is getitem's."""
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError("split: a 0-d tensor has no axis to split")
    axis = normalize_axis((axis,), x.ndim, "split")[0]
    n = x.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            raise ValueError(f"split: axis {axis} of size {n} cannot be split into {sections} equal parts "
                             "(give a list of split points for unequal parts)")
        cuts = [n // sections * i for i in range(1, sections)]
    elif isinstance(indices_or_sections, (list, tuple, np.ndarray)) and all(
            isinstance(c, (int, np.integer)) for c in indices_or_sections):
        cuts = [int(c) for c in indices_or_sections]
    else:
        raise TypeError(f"split: indices_or_sections must be an int or a list of ints, got {indices_or_sections!r}")
    bounds = [0, *cuts, n]
    return [getitem(x, (slice(None),) * axis + (slice(a, b),)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def chunk(x, chunks: int, axis: int = 0) -> list[Tensor]:
    """PyTorch's `chunk`: parts of ceil(n / chunks) elements along `axis`, the last one smaller
    (so there may be fewer than `chunks` parts)."""
    x = as_tensor(x)
    if not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
    if x.ndim == 0:
        raise ValueError("chunk: a 0-d tensor has no axis to split")
    axis = normalize_axis((axis,), x.ndim, "chunk")[0]
    n = x.shape[axis]
    size = -(-n // int(chunks)) or 1
    return split(x, list(range(size, n, size)), axis)
