"""Numerical gradient checking: the test every op in this course must pass.

Students get a copy of this module with their assignments (`coursekit.testing`). It relies only
on the Tensor interface and on the graph module's given code, never on an op's backward that
an assignment asks for.

Two ways to check gradients:

- `gradcheck(fn, *inputs)` differentiates any function of tensors with the whole engine: the
  graph walk (`Tensor.backward`) and the backward of every op `fn` uses;
- `gradcheck(Op, *inputs, **params)` checks one op class on its own: its `backward` is called
  directly on the node its `forward` made, and compared with central differences of the
  forward. `op_grads(Op, *inputs, grad=g, **params)` returns those gradients. Neither walks the
  graph, so they test an op before (or without) a working `backward()`.

    >>> from solutions import Tensor
    >>> from solutions.ops import Mul
    >>> x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> gradcheck(lambda t: (t * t).sum(axis=0), x)
    True
    >>> y = Tensor([10.0, 20.0], requires_grad=True)
    >>> gx, gy = op_grads(Mul, x, y, grad=[[1.0, 1.0], [1.0, 1.0]])
    >>> gy.data.tolist()
    [4.0, 6.0]
    >>> gradcheck(Mul, x, y)
    True
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence, cast

import numpy as np

from .graph import Function, Tensor, set_grad_enabled

__all__ = ["GradcheckError", "assert_close", "gradcheck", "gradgradcheck", "numerical_grad", "op_grads"]


class GradcheckError(AssertionError):
    """An analytic gradient disagrees with the central-difference one."""


def assert_close(actual: Any, expected: Any, rtol: float = 1e-7, atol: float = 1e-9, msg: str = "") -> None:
    """Assert two arrays (or tensors) have the same shape and values within tolerance.

    Unlike `np.testing.assert_allclose`, a shape mismatch is reported as such, not broadcast away.
    """
    a, e = np.asarray(getattr(actual, "data", actual)), np.asarray(getattr(expected, "data", expected))
    prefix = f"{msg}: " if msg else ""
    if a.shape != e.shape:
        raise AssertionError(f"{prefix}shape {a.shape} != expected shape {e.shape}")
    if not np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
        err = np.abs(a - e)
        i = np.unravel_index(np.nanargmax(np.where(np.isnan(err), np.inf, err)), err.shape) if err.size else ()
        raise AssertionError(
            f"{prefix}values differ (max abs diff {np.nanmax(err):.3g} at index {tuple(int(k) for k in i)}: "
            f"got {a[i]!r}, expected {e[i]!r}; rtol={rtol}, atol={atol})"
        )


def _as_array_fn(fn: Callable, inputs: Sequence[Any], which: int) -> Callable[[np.ndarray], np.ndarray]:
    """x -> fn(...) with input `which` replaced by x, evaluated without building a graph."""
    tensor_type = type(inputs[which])

    def f(x: np.ndarray) -> np.ndarray:
        args = list(inputs)
        args[which] = tensor_type(x, requires_grad=bool(inputs[which].requires_grad))
        out = fn(*args)
        return np.asarray(getattr(out, "data", out), dtype=np.float64)

    return f


def numerical_grad(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, upstream: np.ndarray,
                   eps: float = 1e-6) -> np.ndarray:
    """Central differences of <upstream, f(x)> with respect to every element of x (float64)."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        flat[k] = old + eps
        plus = np.sum(upstream * f(x))
        flat[k] = old - eps
        minus = np.sum(upstream * f(x))
        flat[k] = old
        gflat[k] = (plus - minus) / (2 * eps)
    return g


def _is_op(fn: Any) -> bool:
    return isinstance(fn, type) and issubclass(fn, Function)


def _op_node(op: type[Function], inputs: Sequence[Any], params: dict) -> Tensor:
    """`op.apply(*inputs, **params)`, recorded (even inside no_grad) so that its node can be used."""
    if not _is_op(op):
        raise TypeError(f"op_grads: expected a Function class such as Mul, got {op!r}")
    with set_grad_enabled(True):
        out = op.apply(*inputs, **params)
    if out.grad_fn is None:
        raise ValueError(f"op_grads: no input of {op.__name__} requires grad, so its backward has nothing to "
                         "compute; create the inputs with requires_grad=True")
    return out


def _forward_only(op: type[Function], params: dict, *inputs: Any) -> Tensor:
    """The op's output, without recording a node (what central differences evaluate)."""
    with set_grad_enabled(False):
        return op.apply(*inputs, **params)


def _backward_of(out: Tensor, grad: Any) -> tuple[Tensor | None, ...]:
    """The node's `backward(grad)`, one gradient per input (None for an input that needs none),
    each checked to be a Tensor of its input's shape."""
    fn = out.grad_fn
    assert fn is not None, "_op_node made sure the output has a node"
    name = type(fn).__name__
    g = Tensor(np.ones_like(out.data) if grad is None else grad, dtype=out.dtype)
    if g.shape != out.shape:
        raise ValueError(f"op_grads: grad has shape {g.shape} but {name}'s output has shape {out.shape}")
    with set_grad_enabled(False):  # as in a backward pass without create_graph
        raw = fn.backward(g)
    grads = tuple(raw) if isinstance(raw, (tuple, list)) else (raw,)
    if len(grads) != len(fn.inputs):
        raise GradcheckError(f"{name}.backward returned {len(grads)} gradients for {len(fn.inputs)} inputs")
    result: list[Tensor | None] = []
    for i, (x, gx, needed) in enumerate(zip(fn.inputs, grads, fn.needs_input_grad, strict=True)):
        if gx is None or not needed:
            result.append(None)
            continue
        if not isinstance(gx, Tensor):
            raise GradcheckError(f"{name}.backward returned {type(gx).__name__} for input {i}; gradients must be "
                                 "Tensors (build them with Tensor operations so that create_graph works)")
        if gx.shape != x.shape:
            raise GradcheckError(f"{name}.backward returned a gradient of shape {gx.shape} for input {i} of shape "
                                 f"{x.shape}; a gradient must have its input's shape (did you unbroadcast?)")
        result.append(gx)
    return tuple(result)


def op_grads(op: type[Function], *inputs: Any, grad: Any = None, **params: Any) -> tuple[Tensor | None, ...]:
    """One op's gradients with respect to its inputs, for the upstream gradient `grad`, from its
    backward alone: `op.apply(*inputs, **params)` makes one node and its `backward(grad)` runs
    once (no graph walk, no `.grad` touched).

    `grad` defaults to ones of the output's shape. Returns one gradient per input, None for an
    input that does not require grad; raises, naming the op, when backward returns the wrong
    number of gradients or one that is not a Tensor of its input's shape.
    """
    return _backward_of(_op_node(op, inputs, params), grad)


def gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    seed: int = 0,
    **params: Any,
) -> bool:
    """Check `fn`'s analytic gradients against central differences, for every input that requires grad.

    `fn` is a function of the inputs (its gradients come from `backward()`, the whole engine), or
    a Function class, `gradcheck(Mul, x, y)`: then `params` are the op's parameters
    (`gradcheck(Sum, x, axes=(0,), keepdims=False)`) and its backward is called directly on the
    node its forward made, as `op_grads` does, without walking a graph.

    Inputs must be float64 tensors (float32 has too few digits for finite differences). A
    non-scalar output is contracted with a fixed random upstream gradient, which tests the whole
    vector-Jacobian product rather than only its sum. Raises `GradcheckError` naming the input,
    the worst index, and both values; returns True when everything agrees.
    """
    if params and not _is_op(fn):
        raise TypeError(f"gradcheck: unexpected keyword arguments {sorted(params)}; only a Function class "
                        "(gradcheck(Mul, x, y)) takes the op's parameters")
    checked = [i for i, t in enumerate(inputs) if getattr(t, "requires_grad", False)]
    if not checked:
        raise ValueError("gradcheck: no input has requires_grad=True, so there is nothing to check")
    for i in checked:
        if np.asarray(inputs[i].data).dtype != np.float64:
            raise ValueError(f"gradcheck: input {i} is {inputs[i].data.dtype}; use float64 for numerical gradients")

    if _is_op(fn):
        op = cast("type[Function]", fn)
        out = _op_node(op, inputs, params)
        upstream = np.random.default_rng(seed).standard_normal(np.shape(out.data))
        grads = _backward_of(out, upstream)
        analytics = {i: None if (gi := grads[i]) is None else np.array(gi.data, dtype=np.float64) for i in checked}
        fn = functools.partial(_forward_only, op, params)
    else:
        out = fn(*inputs)
        out_data = np.asarray(out.data, dtype=np.float64)
        upstream = np.random.default_rng(seed).standard_normal(out_data.shape)
        for i in checked:
            inputs[i].grad = None
        if getattr(out, "requires_grad", False):
            out.backward(type(out)(upstream.astype(np.asarray(out.data).dtype)))
        # else: the output is constant in every input (e.g. the second derivative of x - y), so
        # every analytic gradient is zero, and the numerical one below must agree.
        # Read every analytic gradient before the numerical passes run fn again.
        analytics = {i: None if inputs[i].grad is None else np.array(inputs[i].grad.data, dtype=np.float64)
                     for i in checked}

    for i in checked:
        x = inputs[i]
        analytic = analytics[i]
        numeric = numerical_grad(_as_array_fn(fn, inputs, i), x.data, upstream, eps)
        if analytic is None:
            if np.allclose(numeric, 0, atol=atol):
                continue
            raise GradcheckError(f"gradcheck: input {i} (shape {x.data.shape}) received no gradient, "
                                 "but its numerical gradient is non-zero")
        if analytic.shape != numeric.shape:
            raise GradcheckError(f"gradcheck: input {i}: gradient shape {analytic.shape} "
                                 f"!= input shape {numeric.shape}")
        bad = ~np.isclose(analytic, numeric, rtol=rtol, atol=atol)
        if bad.any():
            k = np.unravel_index(np.argmax(np.abs(analytic - numeric) * bad), bad.shape)
            raise GradcheckError(
                f"gradcheck: input {i} (shape {x.data.shape}) disagrees at {bad.sum()} of {bad.size} elements; "
                f"worst at index {tuple(int(j) for j in k)}: analytic {analytic[k]:.6g}, numerical {numeric[k]:.6g}"
            )
    return True


def gradgradcheck(fn: Callable[..., Any], *inputs: Any, seed: int = 1, **tolerances: Any) -> bool:
    """Check second derivatives: gradcheck the function inputs -> <v, d fn / d inputs>.

    The first backward is run with `create_graph=True`; that gradient is then itself checked
    numerically, which exercises every backward's own backward.
    """
    checked = [i for i, t in enumerate(inputs) if getattr(t, "requires_grad", False)]
    tensor_type = type(inputs[checked[0]])
    out_shape = np.asarray(fn(*inputs).data).shape
    v = np.random.default_rng(seed).standard_normal(out_shape)

    def first_grads(*xs: Any) -> Any:
        for j in checked:
            xs[j].grad = None
        out = fn(*xs)
        out.backward(tensor_type(v.astype(np.asarray(out.data).dtype)), create_graph=True)
        total = None
        for j in checked:
            g = xs[j].grad
            if g is None:
                continue
            term = (g * g).sum()  # a scalar that depends on every gradient element
            total = term if total is None else total + term
        for j in checked:
            xs[j].grad = None
        return total

    fresh = [tensor_type(np.array(t.data), requires_grad=True) if k in checked else t for k, t in enumerate(inputs)]
    return gradcheck(first_grads, *fresh, seed=seed, **tolerances)
