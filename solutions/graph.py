"""The dynamic computation graph: `Tensor`, `Function` and reverse-mode backward.

Book: chapter 1 (`book/01_graphs.md`). Tests: `tests/engine/test_graphs.py`. Assignment
`assignments/source/a01_graphs/` builds the same ideas on scalars first (`solutions/scalar.py`),
then has students write this module's graph walk: `toposort`, `run_backward` and `no_grad`.

Every op is a `Function` subclass with `forward` (raw ndarrays in, ndarray out) and `backward`
(a `Tensor` gradient in, one gradient per input out). `Function.apply` runs forward and, when
gradients are being recorded, links the output to its inputs. That link is the whole graph: a
tensor's `grad_fn` knows its `inputs`, and `backward()` walks those links in reverse topological
order.

`backward` is written with the engine's own ops, so when `create_graph=True` the gradient
computation is recorded too (the "extended graph") and gradients of gradients work. The walk
itself uses only this module (`input_grads`, `add_grads`, `Tensor.clone`), never an op's
backward, so it runs before any op exercise is done.
"""
from __future__ import annotations

import functools
import weakref
from typing import Any, Sequence

import numpy as np

# --------------------------------------------------------------------------------------------
# Grad mode: one global switch, as in PyTorch. Backward runs with it off unless create_graph.
# --------------------------------------------------------------------------------------------
_grad_enabled = True


def is_grad_enabled() -> bool:
    """Whether ops record the graph right now."""
    return _grad_enabled


class set_grad_enabled:
    """Switch recording on (`True`) or off (`False`) at once, as `torch.set_grad_enabled` does;
    used as `with set_grad_enabled(mode):`, the previous mode comes back at the end of the block."""

    def __init__(self, mode: bool) -> None:
        global _grad_enabled
        self.previous, _grad_enabled = _grad_enabled, bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        global _grad_enabled
        _grad_enabled = self.previous


class GradMode:
    """What `no_grad` and `enable_grad` share: used as a decorator, `@no_grad()` runs the function
    inside a fresh `with no_grad():` block at every call."""

    def __call__(self, func):
        mode = type(self)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with mode():
                return func(*args, **kwargs)

        return wrapper


class no_grad(GradMode):
    """Context manager (and decorator) in which ops record nothing: no graph, no saved inputs.

    Entering switches recording off; leaving restores the mode that was on before, also when the
    block raises, so that `no_grad` blocks nest."""

    def __enter__(self) -> None:
        self.previous = is_grad_enabled()
        set_grad_enabled(False)

    def __exit__(self, *exc: object) -> None:
        set_grad_enabled(self.previous)


class enable_grad(GradMode):
    """Turn recording back on inside a `no_grad` block."""

    def __enter__(self) -> None:
        self.switch = set_grad_enabled(True)

    def __exit__(self, *exc: object) -> None:
        self.switch.__exit__(*exc)


# --------------------------------------------------------------------------------------------
# Tensor
# --------------------------------------------------------------------------------------------
_SCALARS = (int, float, bool, np.number, np.bool_)


def _is_float(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.floating)


class Tensor:
    """An n-dimensional array that remembers how it was computed.

    NumPy semantics for dtypes, shapes and broadcasting (the data *is* an ndarray);
    PyTorch semantics for autograd (`requires_grad`, `backward`, `grad`, `no_grad`).
    """

    __slots__ = ("data", "grad", "_requires_grad", "grad_fn", "retains_grad", "name", "__weakref__")
    # Make `ndarray <op> Tensor` call Tensor's reflected operator instead of broadcasting
    # the Tensor as an object array.
    __array_ufunc__ = None

    def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None, name: str | None = None):
        if isinstance(data, Tensor):
            data = data.data
        self.data: np.ndarray = np.asarray(data, dtype=dtype)
        self.grad: Tensor | None = None
        self._requires_grad = False
        self.grad_fn: Function | None = None  # the op that made it (None: a leaf)
        self.retains_grad = False  # keep .grad after backward (see retain_grad)
        self.name = name
        if requires_grad:
            self.requires_grad = True

    # -- autograd attributes -------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self.grad_fn is not None:
            raise RuntimeError(
                f"requires_grad can only be changed on leaf tensors; this tensor was made by "
                f"{self.grad_fn.name}. Use .detach() to get a leaf."
            )
        if value and not _is_float(self.data.dtype):
            raise TypeError(
                f"Tensor: only floating-point tensors can require gradients, got dtype {self.data.dtype} "
                f"(shape {self.shape}); pass dtype=np.float64 or write 1.0 instead of 1"
            )
        self._requires_grad = bool(value)

    def requires_grad_(self, value: bool = True) -> "Tensor":
        self.requires_grad = value
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def retain_grad(self) -> None:
        """Keep `.grad` on a non-leaf tensor after backward (leaves always keep theirs)."""
        if not self._requires_grad:
            raise RuntimeError("retain_grad: this tensor does not require grad, so it will never have one")
        if self.grad_fn is not None:
            self.retains_grad = True

    def zero_grad(self) -> None:
        self.grad = None

    def detach(self) -> "Tensor":
        """Same data, cut from the graph."""
        return _new_tensor(self.data)

    def clone(self) -> "Tensor":
        """A copy that owns its data, still in the graph (the gradient passes through)."""
        return Clone.apply(self)

    def backward(self, grad: Any = None, retain_graph: bool | None = None, create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's `.grad`.

        `grad` is the upstream gradient (required unless self has one element);
        `retain_graph` keeps the graph for another backward (default: `create_graph`);
        `create_graph` records the backward pass itself, for higher-order gradients.
        """
        if retain_graph is None:
            retain_graph = create_graph
        run_backward([self], _seeds([self], None if grad is None else [grad], "backward"), retain_graph, create_graph)

    # -- array attributes ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def item(self) -> float:
        if self.data.size != 1:
            raise ValueError("item: only one-element tensors can be converted to a Python scalar, "
                             f"got shape {self.shape}")
        return self.data.item()

    def numpy(self) -> np.ndarray:
        """The underlying ndarray (shared, not copied: like `torch.Tensor.numpy`)."""
        return self.data

    def __len__(self) -> int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return len(self.data)

    def __bool__(self) -> bool:
        if self.data.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous; "
                             "use .any() or .all() on .data")
        return bool(self.data)

    def __float__(self) -> float:
        return float(self.item())

    __hash__ = object.__hash__  # == is elementwise, so identity is the hash

    def __repr__(self) -> str:
        body = np.array2string(self.data, separator=", ", prefix="Tensor(", precision=4)
        extras = []
        if self.data.dtype != np.float64:
            extras.append(f"dtype={self.data.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "Tensor(" + ", ".join([body, *extras]) + ")"

    # -- operators: each forwards to the op's lowercase function in `solutions.ops` --------
    def __add__(self, other): return _ops.add(self, other)
    def __radd__(self, other): return _ops.add(other, self)
    def __sub__(self, other): return _ops.sub(self, other)
    def __rsub__(self, other): return _ops.sub(other, self)
    def __mul__(self, other): return _ops.mul(self, other)
    def __rmul__(self, other): return _ops.mul(other, self)
    def __truediv__(self, other): return _ops.div(self, other)
    def __rtruediv__(self, other): return _ops.div(other, self)
    def __pow__(self, other): return _ops.pow(self, other)
    def __rpow__(self, other): return _ops.pow(other, self)
    def __matmul__(self, other): return _ops.matmul(self, other)
    def __rmatmul__(self, other): return _ops.matmul(other, self)
    def __neg__(self): return _ops.neg(self)
    def __abs__(self): return _ops.abs(self)
    def __getitem__(self, index): return _ops.getitem(self, index)

    # Comparisons are not differentiable: they return plain boolean ndarrays.
    def __lt__(self, other): return self.data < _raw(other)
    def __le__(self, other): return self.data <= _raw(other)
    def __gt__(self, other): return self.data > _raw(other)
    def __ge__(self, other): return self.data >= _raw(other)
    def __eq__(self, other): return self.data == _raw(other)  # type: ignore[override]
    def __ne__(self, other): return self.data != _raw(other)  # type: ignore[override]

    # -- methods ----------------------------------------------------------------------------
    def exp(self): return _ops.exp(self)
    def log(self): return _ops.log(self)
    def sqrt(self): return _ops.sqrt(self)
    def abs(self): return _ops.abs(self)
    def relu(self): return _ops.relu(self)
    def sigmoid(self): return _ops.sigmoid(self)
    def tanh(self): return _ops.tanh(self)
    def clip(self, min=None, max=None): return _ops.clip(self, min, max)
    def maximum(self, other): return _ops.maximum(self, other)
    def minimum(self, other): return _ops.minimum(self, other)
    def astype(self, dtype): return _ops.astype(self, dtype)
    def sin(self): return _ops.sin(self)
    def cos(self): return _ops.cos(self)
    def sign(self): return _ops.sign(self)
    def floor(self): return _ops.floor(self)
    def ceil(self): return _ops.ceil(self)
    def round(self, decimals=0): return _ops.round(self, decimals)
    def __round__(self, ndigits=None): return _ops.round(self, ndigits or 0)
    def __floor__(self): return _ops.floor(self)
    def __ceil__(self): return _ops.ceil(self)
    def trunc(self): return _ops.trunc(self)
    def tan(self): return _ops.tan(self)
    def sinh(self): return _ops.sinh(self)
    def cosh(self): return _ops.cosh(self)
    def arcsin(self): return _ops.arcsin(self)
    def arccos(self): return _ops.arccos(self)
    def arctan(self): return _ops.arctan(self)
    asin, acos, atan = arcsin, arccos, arctan
    def log1p(self): return _ops.log1p(self)
    def expm1(self): return _ops.expm1(self)
    def erf(self): return _ops.erf(self)
    def square(self): return _ops.square(self)
    def reciprocal(self): return _ops.reciprocal(self)
    def rsqrt(self): return _ops.rsqrt(self)

    def sum(self, axis=None, keepdims=False): return _ops.sum(self, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return _ops.mean(self, axis, keepdims)
    def max(self, axis=None, keepdims=False): return _ops.max(self, axis, keepdims)
    def min(self, axis=None, keepdims=False): return _ops.min(self, axis, keepdims)
    def var(self, axis=None, keepdims=False, ddof=0): return _ops.var(self, axis, keepdims, ddof)
    def std(self, axis=None, keepdims=False, correction=1, *, ddof=None):
        return _ops.std(self, axis, keepdims, correction, ddof=ddof)
    def prod(self, axis=None, keepdims=False): return _ops.prod(self, axis, keepdims)
    def cumsum(self, axis=None): return _ops.cumsum(self, axis)
    def argmax(self, axis=None, keepdims=False): return _ops.argmax(self, axis, keepdims)
    def argmin(self, axis=None, keepdims=False): return _ops.argmin(self, axis, keepdims)

    def reshape(self, *shape): return _ops.reshape(self, _varargs(shape))
    def transpose(self, *axes): return _ops.transpose(self, _varargs(axes) or None)
    def permute(self, *dims): return _ops.permute(self, _varargs(dims))
    def swapaxes(self, dim0, dim1): return _ops.swapaxes(self, dim0, dim1)
    def broadcast_to(self, shape): return _ops.broadcast_to(self, shape)
    def expand_dims(self, axis): return _ops.expand_dims(self, axis)
    def unsqueeze(self, dim): return _ops.unsqueeze(self, dim)
    def squeeze(self, axis=None): return _ops.squeeze(self, axis)
    def flatten(self, start_dim=0, end_dim=-1): return _ops.flatten(self, start_dim, end_dim)
    def flip(self, axis=None): return _ops.flip(self, axis)
    def roll(self, shift, axis=None): return _ops.roll(self, shift, axis)
    def tril(self, k=0): return _ops.tril(self, k)
    def triu(self, k=0): return _ops.triu(self, k)
    def take(self, indices, axis=None): return _ops.take(self, indices, axis)
    def gather(self, dim, index): return _ops.gather(self, dim, index)
    def repeat(self, repeats, axis=None): return _ops.repeat(self, repeats, axis)  # NumPy's; PyTorch's is tile
    def tile(self, reps): return _ops.tile(self, reps)
    def split(self, indices_or_sections, axis=0): return _ops.split(self, indices_or_sections, axis)
    def chunk(self, chunks, axis=0): return _ops.chunk(self, chunks, axis)
    def matmul(self, other): return _ops.matmul(self, other)

    def softmax(self, axis=-1): return _ops.softmax(self, axis)
    def log_softmax(self, axis=-1): return _ops.log_softmax(self, axis)
    def logsumexp(self, axis=None, keepdims=False): return _ops.logsumexp(self, axis, keepdims)

    @property
    def T(self) -> "Tensor":
        """All axes reversed, as NumPy's `.T`."""
        return _ops.transpose(self, None)


def _new_tensor(data: np.ndarray) -> Tensor:
    """A Tensor around an array the engine produced itself, without `Tensor.__init__`'s validation:
    the engine's hot paths call it for every node."""
    t = object.__new__(Tensor)
    t.data = data if type(data) is np.ndarray else np.asarray(data)
    t.grad = None
    t._requires_grad = False
    t.grad_fn = None
    t.retains_grad = False
    t.name = None
    return t


def _raw(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


def _varargs(args: tuple) -> tuple:
    """Accept both `t.reshape(2, 3)` and `t.reshape((2, 3))`."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _check_broadcast(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    """Raise the ValueError naming `op` if shapes a and b do not broadcast."""
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        raise ValueError(f"{op}: shapes {a} and {b} cannot be broadcast together "
                         "(aligned from the right, each pair of sizes must be equal or contain a 1)") from None


def as_tensor(value: Any, like: Tensor | None = None) -> Tensor:
    """`value` as a Tensor. Python scalars take `like`'s dtype where NumPy would (`2 * t` stays float32)."""
    if isinstance(value, Tensor):
        return value
    if like is not None:
        kind = type(value)
        if kind is float or kind is int or kind is bool:
            # A Python number is "weak" (NEP 50): next to a float tensor it takes that tensor's
            # dtype. np.result_type costs more than the op itself, so only ask it otherwise.
            dtype = like.data.dtype
            if dtype.kind != "f":
                dtype = np.result_type(dtype, value)
            return _new_tensor(np.array(value, dtype=dtype))
        if isinstance(value, _SCALARS):  # NumPy scalars (not weak) and subclasses of the numbers
            return _new_tensor(np.array(value, dtype=np.result_type(like.data.dtype, value)))
    return _new_tensor(np.asarray(value))


# --------------------------------------------------------------------------------------------
# Function: one op = one subclass, forward and backward side by side.
# --------------------------------------------------------------------------------------------
class Function:
    """Base class of every differentiable op.

    Subclasses define `forward(*arrays) -> ndarray` and `backward(grad) -> gradients`, and take
    their non-tensor parameters (axis, shape, stride, ...) in `__init__`. In `backward`,
    `self.inputs` are the input tensors, `self.output` the output tensor and
    `self.needs_input_grad[i]` says whether input i wants a gradient (return None to skip it).
    """

    inputs: tuple[Tensor, ...] = ()
    needs_input_grad: tuple[bool, ...] = ()
    # An elementwise op of two broadcast operands: when its forward fails on shapes that do not
    # broadcast, `apply` raises the error that names the op (NumPy's does not) for all of them.
    broadcasts = False
    _output_ref: "weakref.ref[Tensor] | None" = None
    _freed = False

    def forward(self, *arrays: Any) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__}.forward is not implemented")

    def backward(self, grad: Tensor) -> Tensor | None | Sequence[Tensor | None]:
        raise NotImplementedError(f"{type(self).__name__}.backward is not implemented")

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def output(self) -> Tensor:
        out = self._output_ref() if self._output_ref is not None else None
        if out is None:
            raise RuntimeError(f"{self.name}: the output tensor is no longer alive")
        return out

    def __repr__(self) -> str:
        return f"<{self.name}>"

    def free(self) -> None:
        """Mark this node as used by a backward that did not keep the graph (PyTorch frees the
        node's saved tensors here): running its backward again raises an error that says so."""
        self._freed = True

    @classmethod
    def apply(cls, *args: Any, **params: Any) -> Tensor:
        """Run the op on tensors (or scalars/arrays, which become constants) and record it."""
        fn = cls(**params) if params else cls()
        # Almost every op takes one or two tensors. Spelling those cases out, rather than looping
        # and building lists, makes recording a node about a third cheaper.
        if len(args) == 2:
            x, y = args
            if not (isinstance(x, Tensor) and isinstance(y, Tensor)):
                args = _coerce(args)
                x, y = args
            needs: tuple[bool, ...] = (x._requires_grad, y._requires_grad)
            try:
                data = fn.forward(x.data, y.data)
            except ValueError:
                if fn.broadcasts:
                    _check_broadcast(type(fn).__name__.lower(), x.data.shape, y.data.shape)
                raise
        elif len(args) == 1:
            (x,) = args
            if not isinstance(x, Tensor):
                args = _coerce(args)
                (x,) = args
            data, needs = fn.forward(x.data), (x._requires_grad,)
        else:
            if not all(isinstance(a, Tensor) for a in args):
                args = _coerce(args)
            data = fn.forward(*[t.data for t in args])
            needs = tuple([t._requires_grad for t in args])
        out = _new_tensor(data)
        if _grad_enabled and True in needs:
            fn.inputs = args
            fn.needs_input_grad = needs
            fn._output_ref = weakref.ref(out)
            out.grad_fn = fn
            out._requires_grad = True
        return out

def _coerce(args: tuple) -> tuple[Tensor, ...]:
    """Non-tensor arguments become constants; numbers take the first tensor's dtype (as_tensor)."""
    if len(args) == 2:  # the usual case, `t * 2.0` or `1 - t`, spelled out
        x, y = args
        if isinstance(x, Tensor):
            return x, as_tensor(y, x)
        return as_tensor(x, y if isinstance(y, Tensor) else None), as_tensor(y)
    like = None
    for a in args:
        if isinstance(a, Tensor):
            like = a
            break
    return tuple([as_tensor(a, like) for a in args])


# --------------------------------------------------------------------------------------------
# Backward: reverse topological order, gradients accumulated on shared nodes.
# --------------------------------------------------------------------------------------------
def toposort(roots: Sequence[Tensor]) -> list[Tensor]:
    """Every tensor that requires grad and that `roots` depend on (the roots included), each
    after all of its inputs.

    Iterative depth-first search, so a 100 000-op chain needs no recursion, and each node is
    visited once, so shared subgraphs cost linear time (a naive recursion revisits them and
    explodes exponentially on a diamond ladder).
    """
    order, visited = [], set()
    stack = [(root, False) for root in reversed(roots)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)  # every input of node is already in order
        elif id(node) not in visited:  # Tensor's == is elementwise: compare identities
            visited.add(id(node))
            stack.append((node, True))
            if node.grad_fn is not None:
                for x in node.grad_fn.inputs:
                    if x.requires_grad:
                        stack.append((x, False))
    return order


def topological_order(roots: Sequence[Tensor]) -> list[Tensor]:
    """`toposort` under the name chapter 1 gives it."""
    return toposort(roots)


class Clone(Function):
    """A copy of x that owns its data; the gradient passes through unchanged."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        return np.array(x)

    def backward(self, grad: Tensor) -> Tensor:
        return grad


class GradSum(Function):
    """a + b for two gradients of one tensor (same shape, same dtype)."""

    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def backward(self, grad: Tensor) -> tuple[Tensor, Tensor]:
        return grad, grad


def add_grads(total: Tensor, g: Tensor) -> Tensor:
    """`total + g` for two gradients of one tensor: how the backward pass sums them.

    While recording (a backward with create_graph=True) the sum is a node of the graph, so it can
    be differentiated; otherwise it is a plain new array. (Not `+`, which is `Add`: its backward
    is an exercise of a02, and the graph walk must not depend on it.)
    """
    if _grad_enabled:
        return GradSum.apply(total, g)
    return _new_tensor(total.data + g.data)


def _check_grad(fn: Function, x: Tensor, g: Any) -> Tensor:
    """The engine's contract: a gradient is a Tensor of exactly its input's shape (and dtype)."""
    i = next(k for k, t in enumerate(fn.inputs) if t is x)
    if not isinstance(g, Tensor):
        raise TypeError(
            f"{fn.name}.backward returned {type(g).__name__} for input {i}; gradients must be Tensors "
            "(build them with Tensor operations so that create_graph works)"
        )
    if g.shape != x.shape:
        raise RuntimeError(
            f"{fn.name}.backward returned a gradient of shape {g.shape} for input {i} of shape {x.shape}; "
            "a gradient must have its input's shape (did you unbroadcast?)"
        )
    return g.astype(x.dtype)


def _as_grad_tuple(fn: Function, grads: Any) -> tuple:
    """A single-input op may return its gradient bare; anything else must be one per input."""
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)
    if len(grads) != len(fn.inputs):
        raise RuntimeError(f"{fn.name}.backward returned {len(grads)} gradients for {len(fn.inputs)} inputs")
    return tuple(grads)


def input_grads(fn: Function, grad: Tensor) -> list[tuple[Tensor, Tensor]]:
    """Run `fn.backward(grad)` and return what it sends on: `(input, gradient)` pairs, one for each
    input of `fn` that requires grad and received a gradient (backward returns None to send none).

    The engine checks every gradient here and names the op when one is wrong: it must be a
    Tensor of its input's shape (a gradient of another dtype is cast to the input's). A node whose
    graph a backward has freed refuses to run again.
    """
    if fn._freed:
        raise RuntimeError(
            f"backward: trying to backward through the graph a second time ({fn.name} was already "
            "used by a backward that did not keep the graph); pass retain_graph=True to the first "
            "backward if you need to"
        )
    grads = fn.backward(grad)
    inputs, needs = fn.inputs, fn.needs_input_grad
    if type(grads) is not tuple or len(grads) != len(inputs):
        grads = _as_grad_tuple(fn, grads)
    # _check_grad raises on a wrong shape and casts a wrong dtype. This runs once per node: the
    # one- and two-input cases (almost every op) are spelled out, which saves a tenth of the
    # backward pass's time on small tensors.
    pairs = []
    if len(inputs) <= 2:
        x, g = inputs[0], grads[0]
        if needs[0] and g is not None:
            if not (type(g) is Tensor and g.data.shape == x.data.shape and g.data.dtype == x.data.dtype):
                g = _check_grad(fn, x, g)
            pairs.append((x, g))
        if len(inputs) == 2:
            x, g = inputs[1], grads[1]
            if needs[1] and g is not None:
                if not (type(g) is Tensor and g.data.shape == x.data.shape and g.data.dtype == x.data.dtype):
                    g = _check_grad(fn, x, g)
                pairs.append((x, g))
        return pairs
    for x, g, needed in zip(inputs, grads, needs, strict=True):
        if g is not None and needed:
            if not (isinstance(g, Tensor) and g.data.shape == x.data.shape and g.data.dtype == x.data.dtype):
                g = _check_grad(fn, x, g)
            pairs.append((x, g))
    return pairs


def run_backward(
    roots: Sequence[Tensor],
    grads: Sequence[Tensor] | None = None,
    retain_graph: bool = False,
    create_graph: bool = False,
) -> None:
    """Accumulate d(roots)/d(t) into `t.grad` for every leaf t the roots depend on.

    `grads[i]` is the gradient of `roots[i]` (a Tensor of its shape); None means ones (every root
    then has one element). Non-leaf tensors keep their gradient in `.grad` only if `retain_grad()`
    was called on them. Each Function is freed after its backward unless `retain_graph`. With
    `create_graph`, the backward pass is itself recorded, so the gradients can be differentiated.
    """
    pending: dict[int, Any] = {}  # id(tensor) -> the sum of the gradients it has received so far
    for k, root in enumerate(roots):
        g = Tensor(np.ones_like(root.data)) if grads is None else grads[k]
        total = pending.get(id(root))
        pending[id(root)] = g if total is None else add_grads(total, g)
    with set_grad_enabled(create_graph):  # record the backward pass only to differentiate it
        for node in reversed(toposort(roots)):
            g = pending.pop(id(node), None)
            if g is None:  # no consumer sent it a gradient
                continue
            fn = node.grad_fn
            if fn is None or node.retains_grad:  # a leaf, or a tensor asked to keep its gradient
                # .grad accumulates across backward calls; a clone, so that it owns its data
                node.grad = g.clone() if node.grad is None else add_grads(node.grad, g)
            if fn is None:
                continue
            for x, gx in input_grads(fn, g):
                total = pending.get(id(x))
                pending[id(x)] = gx if total is None else add_grads(total, gx)
            if not retain_graph:
                fn.free()


def _seeds(roots: Sequence[Tensor], grads: Sequence[Any] | None, caller: str) -> list[Tensor] | None:
    """Check the roots and their gradients for `caller` and return the gradients as Tensors of the
    roots' shapes and dtypes (None stays None: then every root has one element)."""
    for root in roots:
        if not root._requires_grad:
            raise RuntimeError(
                f"{caller}: this tensor (shape {root.shape}) does not require grad and has no grad_fn; "
                "did you forget requires_grad=True on a leaf, or compute it under no_grad()?"
            )
        if grads is None and root.data.size != 1:
            raise RuntimeError(
                f"{caller}: grad can be implicitly created only for outputs with one element, "
                f"got shape {root.shape}; pass grad= of that shape (e.g. ones) or reduce with .sum()"
            )
    if grads is None:
        return None
    seeds = []
    for root, grad in zip(roots, grads, strict=True):
        g = as_tensor(grad, like=root)
        if g.shape != root.shape:
            raise ValueError(f"{caller}: grad has shape {g.shape} but the output has shape {root.shape}")
        seeds.append(g if g.dtype == root.dtype else g.astype(root.dtype))
    return seeds


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple[Tensor | None, ...]:
    """Gradients of `outputs` with respect to `inputs`, returned instead of stored in `.grad`.

    Like `torch.autograd.grad`; with `create_graph=True` the results are themselves
    differentiable (Hessian-vector products, second derivatives).
    """
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is not None and isinstance(outputs, Tensor):
        grad_outputs = [grad_outputs]
    for i, t in enumerate(ins):
        if not t._requires_grad:
            raise RuntimeError(f"grad: input {i} (shape {t.shape}) does not require grad")
    seeds = _seeds(outs, grad_outputs, "grad")
    if retain_graph is None:
        retain_graph = create_graph
    # run_backward delivers gradients into .grad: lend the inputs an empty .grad (kept on a
    # non-leaf input too) and give every other tensor its own .grad back afterwards.
    lent = {id(t) for t in ins}
    saved = [(t, t.grad, t.retains_grad) for t in [*ins, *toposort(outs)]
             if t.is_leaf or t.retains_grad or id(t) in lent]
    for t in ins:
        t.grad, t.retains_grad = None, not t.is_leaf
    try:
        run_backward(outs, seeds, retain_graph, create_graph)
        result = tuple(t.grad for t in ins)
    finally:
        for t, g, retains in reversed(saved):  # an input listed twice gets its first state back
            t.grad, t.retains_grad = g, retains
    for i, (t, g) in enumerate(zip(ins, result, strict=True)):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"grad: input {i} (shape {t.shape}) was not used to compute the outputs; "
                "pass allow_unused=True if that is expected"
            )
    return result


from . import ops as _ops  # noqa: E402  (the ops import Tensor and Function from this module)
