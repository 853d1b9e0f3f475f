"""PyTorch's numbers for every op of the engine core: values, first and second derivatives.

One table, `CASES`, says for each case how to make its inputs, which inputs are differentiated,
and how to compute it twice: with PyTorch (`torch_fn`, used only by `make`, in the torch venv)
and with our engine (`engine_fn`, used by `tests/engine/test_golden.py`). Importing this module does
not import torch, so the tests can read the table; `make(rng)` imports torch to compute the
expected arrays, and `tests/golden/make_golden.py` saves them as `tests/golden/ops.npz`.

Arrays per case (float64 unless an input is an index or a mask):
  the inputs by name; `out`; `gout`, a random upstream gradient; `grad_<x>` = d<gout, out>/dx for
  each differentiated input x; `dir_<x>`, a random direction per input; and the second
  derivatives `hess_<x>` = d/dx sum_y <grad_y, dir_y> (a Hessian-vector product, with the
  gradient itself differentiated: create_graph=True in both engines).

Semantics: where the engine follows NumPy (transpose axes, var with ddof=0, reductions over
tuples of axes) the torch side is called with the matching arguments; where it follows PyTorch's
autograd (max ties split evenly as in amax, abs'(0) = relu'(0) = 0, clamp's closed interval,
maximum ties half and half, pow's gradients at base 0) the kink cases below put inputs exactly
on those points.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import solutions as S
from solutions.nn import functional as nn_functional

Arrays = dict[str, np.ndarray]


@dataclass
class Case:
    inputs: Callable[[np.random.Generator], Arrays]
    torch_fn: Callable[..., Any]  # (torch, **inputs as tensors or arrays) -> torch tensor
    engine_fn: Callable[..., Any]  # (**inputs as Tensors or arrays) -> Tensor (or ndarray)
    diff: tuple[str, ...] = ("x",)  # inputs that get gradients
    second: bool = True  # also record second derivatives
    extra: dict = field(default_factory=dict)


CASES: dict[str, Case] = {}


# --------------------------------------------------------------------------------------------
# Input makers
# --------------------------------------------------------------------------------------------
def U(shape, low=-2.0, high=2.0):
    return lambda rng: rng.uniform(low, high, shape)


def POS(shape):
    return lambda rng: rng.uniform(0.5, 2.0, shape)


def NZ(shape):
    return lambda rng: rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.3, 2.0, shape)


def DISTINCT(shape):
    size = int(np.prod(shape, dtype=int))
    return lambda rng: ((rng.permutation(size) - size / 2) * 0.25).reshape(shape)


def QUARTERS(shape):  # with THREE_QUARTERS: never equal, so maximum/minimum have no ties
    return lambda rng: rng.integers(-3, 3, shape) + 0.25


def THREE_QUARTERS(shape):
    return lambda rng: rng.integers(-3, 3, shape) + 0.75


def FIXED(values):
    return lambda rng: np.array(values, dtype=np.float64)


def inputs(**makers) -> Callable[[np.random.Generator], Arrays]:
    return lambda rng: {name: make(rng) for name, make in makers.items()}


def add(name, case: Case) -> None:
    assert name not in CASES, name
    CASES[name] = case


# --------------------------------------------------------------------------------------------
# Binary elementwise ops over the broadcasting patterns
# --------------------------------------------------------------------------------------------
PATTERNS = {
    "same": ((2, 3), (2, 3)),
    "lead": ((2, 3), (3,)),
    "ones": ((1, 3), (2, 1)),
    "mixed": ((3, 1, 2), (4, 1)),
    "0d": ((2, 3), ()),
}

BINARY = {
    # name: (torch, engine, x maker, y maker)
    "add": (lambda t, x, y: x + y, lambda x, y: x + y, U, U),
    "sub": (lambda t, x, y: x - y, lambda x, y: x - y, U, U),
    "mul": (lambda t, x, y: x * y, lambda x, y: x * y, U, U),
    "div": (lambda t, x, y: x / y, lambda x, y: x / y, U, NZ),
    "pow": (lambda t, x, y: x**y, lambda x, y: x**y, POS, U),
    "maximum": (lambda t, x, y: t.maximum(x, y), S.maximum, QUARTERS, THREE_QUARTERS),
    "minimum": (lambda t, x, y: t.minimum(x, y), S.minimum, QUARTERS, THREE_QUARTERS),
}

for _op, (_tf, _ef, _mx, _my) in BINARY.items():
    for _pat, (_sx, _sy) in PATTERNS.items():
        add(f"{_op}_{_pat}", Case(inputs(x=_mx(_sx), y=_my(_sy)), _tf, _ef, diff=("x", "y")))

add("where", Case(
    inputs(x=U((2, 3)), y=U((3,)), cond=lambda rng: rng.random((2, 1)) < 0.5),
    lambda t, x, y, cond: t.where(t.as_tensor(cond), x, y),
    lambda x, y, cond: S.where(cond, x, y),
    diff=("x", "y"),
))
add("scalar_ops", Case(
    inputs(x=POS((2, 3))),
    lambda t, x: 2 * x - 1 / x + x / 3 + 2**x + 1.5 - x,
    lambda x: 2 * x - 1 / x + x / 3 + 2**x + 1.5 - x,
))

# --------------------------------------------------------------------------------------------
# Unary ops
# --------------------------------------------------------------------------------------------
UNARY = {
    "neg": (lambda t, x: -x, lambda x: -x, U),
    "exp": (lambda t, x: t.exp(x), S.exp, U),
    "log": (lambda t, x: t.log(x), S.log, POS),
    "sqrt": (lambda t, x: t.sqrt(x), S.sqrt, POS),
    "abs": (lambda t, x: t.abs(x), S.abs, NZ),
    "relu": (lambda t, x: t.relu(x), S.relu, NZ),
    "sigmoid": (lambda t, x: t.sigmoid(x), S.sigmoid, U),
    "tanh": (lambda t, x: t.tanh(x), S.tanh, U),
    "pow_2": (lambda t, x: x**2, lambda x: x**2, U),
    "pow_3": (lambda t, x: x**3, lambda x: x**3, U),
    "pow_0": (lambda t, x: x**0, lambda x: x**0, U),
    "pow_-1": (lambda t, x: x**-1, lambda x: x**-1, NZ),
    "pow_0.5": (lambda t, x: x**0.5, lambda x: x**0.5, POS),
    "pow_-1.5": (lambda t, x: x**-1.5, lambda x: x**-1.5, POS),
    "clip": (lambda t, x: t.clamp(x, -0.5, 0.7), lambda x: x.clip(-0.5, 0.7), U),
    "clip_min": (lambda t, x: t.clamp(x, min=-0.5), lambda x: x.clip(min=-0.5), U),
    "clip_max": (lambda t, x: t.clamp(x, max=0.7), lambda x: x.clip(max=0.7), U),
}
for _op, (_tf, _ef, _mx) in UNARY.items():
    add(_op, Case(inputs(x=_mx((3, 4))), _tf, _ef))

# PyTorch's values at the kinks, inputs placed exactly on them.
add("abs_at_zero", Case(inputs(x=FIXED([-1.5, 0.0, 2.0])), lambda t, x: t.abs(x), S.abs))
add("relu_at_zero", Case(inputs(x=FIXED([-1.0, 0.0, 1.0])), lambda t, x: t.relu(x), S.relu))
add("clip_at_bounds", Case(inputs(x=FIXED([-1.0, -0.5, 0.0, 0.7, 1.0])),
                           lambda t, x: t.clamp(x, -0.5, 0.7), lambda x: x.clip(-0.5, 0.7)))
add("maximum_ties", Case(inputs(x=FIXED([1.0, 2.0, 3.0, -1.0]), y=FIXED([1.0, 5.0, 3.0, -2.0])),
                         lambda t, x, y: t.maximum(x, y), S.maximum, diff=("x", "y")))
add("minimum_ties", Case(inputs(x=FIXED([1.0, 2.0, 3.0, -1.0]), y=FIXED([1.0, 5.0, 3.0, -2.0])),
                         lambda t, x, y: t.minimum(x, y), S.minimum, diff=("x", "y")))
add("maximum_tie_broadcast", Case(inputs(x=FIXED([[0.0, 1.0], [0.0, -1.0]]), y=FIXED(0.0)),
                                  lambda t, x, y: t.maximum(x, y), S.maximum, diff=("x", "y")))
# PyTorch's double backward at base 0 runs into 0 * inf; only first derivatives are compared.
add("pow_base_zero", Case(inputs(x=FIXED([0.0, 0.0, 2.0, 0.0]), y=FIXED([0.0, 2.0, 0.0, 1.0])),
                          lambda t, x, y: x**y, lambda x, y: x**y, diff=("x", "y"), second=False))

# --------------------------------------------------------------------------------------------
# matmul: every NumPy case
# --------------------------------------------------------------------------------------------
MATMUL = {
    "vec_vec": ((3,), (3,)),
    "vec_mat": ((3,), (3, 2)),
    "mat_vec": ((2, 3), (3,)),
    "mat_mat": ((2, 3), (3, 4)),
    "batched": ((4, 2, 3), (4, 3, 2)),
    "batch_left": ((4, 2, 3), (3, 2)),
    "batch_right": ((2, 3), (4, 3, 2)),
    "vec_batched": ((3,), (4, 3, 2)),
    "batched_vec": ((4, 2, 3), (3,)),
    "broadcast_batch": ((2, 1, 2, 3), (3, 3, 2)),
}
for _name, (_sa, _sb) in MATMUL.items():
    add(f"matmul_{_name}", Case(inputs(a=U(_sa), b=U(_sb)), lambda t, a, b: a @ b, lambda a, b: a @ b, diff=("a", "b")))


# --------------------------------------------------------------------------------------------
# Reductions: NumPy's axis conventions on our side, the matching dims on torch's
# --------------------------------------------------------------------------------------------
def _dims(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return (axis,) if isinstance(axis, int) else tuple(axis)


def _torch_prod(x, dims, keepdim):
    """torch.prod reduces one dim at a time: the tuple of axes, last first, so the others stay put."""
    for d in sorted(dims, reverse=True):
        x = x.prod(dim=d, keepdim=keepdim)
    return x


REDUCTION_AXES = {"all": (None, False), "ax1": (1, False), "axneg": (-1, True), "tuple": ((0, 2), False),
                  "tuple_keep": ((2, 0), True)}
for _axname, (_axis, _keep) in REDUCTION_AXES.items():
    _shape = (2, 3, 4)
    add(f"sum_{_axname}", Case(inputs(x=U(_shape)),
                               lambda t, x, a=_axis, k=_keep: x.sum(dim=_dims(a, 3), keepdim=k),
                               lambda x, a=_axis, k=_keep: x.sum(a, k)))
    add(f"mean_{_axname}", Case(inputs(x=U(_shape)),
                                lambda t, x, a=_axis, k=_keep: x.mean(dim=_dims(a, 3), keepdim=k),
                                lambda x, a=_axis, k=_keep: x.mean(a, k)))
    add(f"max_{_axname}", Case(inputs(x=DISTINCT(_shape)),
                               lambda t, x, a=_axis, k=_keep: t.amax(x, dim=_dims(a, 3), keepdim=k),
                               lambda x, a=_axis, k=_keep: x.max(a, k)))
    add(f"min_{_axname}", Case(inputs(x=DISTINCT(_shape)),
                               lambda t, x, a=_axis, k=_keep: t.amin(x, dim=_dims(a, 3), keepdim=k),
                               lambda x, a=_axis, k=_keep: x.min(a, k)))
    add(f"var_{_axname}", Case(inputs(x=U(_shape)),
                               lambda t, x, a=_axis, k=_keep: t.var(x, dim=_dims(a, 3), correction=0, keepdim=k),
                               lambda x, a=_axis, k=_keep: x.var(a, k)))
    add(f"logsumexp_{_axname}", Case(inputs(x=U(_shape)),
                                     lambda t, x, a=_axis, k=_keep: t.logsumexp(x, dim=_dims(a, 3), keepdim=k),
                                     lambda x, a=_axis, k=_keep: x.logsumexp(a, k)))

add("var_ddof1", Case(inputs(x=U((3, 4))), lambda t, x: t.var(x, dim=1, correction=1), lambda x: x.var(1, ddof=1)))
_TIES = [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]
add("max_ties_axis", Case(inputs(x=FIXED(_TIES)), lambda t, x: t.amax(x, dim=1), lambda x: x.max(axis=1)))
add("max_ties_all", Case(inputs(x=FIXED(_TIES)), lambda t, x: t.amax(x), lambda x: x.max()))
add("min_ties_axis", Case(inputs(x=FIXED(_TIES)), lambda t, x: t.amin(x, dim=0, keepdim=True),
                          lambda x: x.min(axis=0, keepdims=True)))
add("argmax", Case(inputs(x=DISTINCT((3, 4))), lambda t, x: t.argmax(x, dim=1), lambda x: S.argmax(x, axis=1), diff=()))
add("argmin_all", Case(inputs(x=DISTINCT((3, 4))), lambda t, x: t.argmin(x), lambda x: S.argmin(x), diff=()))

# --------------------------------------------------------------------------------------------
# Shape ops and indexing
# --------------------------------------------------------------------------------------------
X234 = inputs(x=U((2, 3, 4)))
SHAPE_OPS = {
    "reshape": (lambda t, x: x.reshape(4, 6), lambda x: x.reshape(4, 6)),
    "reshape_infer": (lambda t, x: x.reshape(-1, 2), lambda x: x.reshape(-1, 2)),
    "transpose_axes": (lambda t, x: x.permute(1, 2, 0), lambda x: x.transpose((1, 2, 0))),
    "transpose_T": (lambda t, x: x.permute(2, 1, 0), lambda x: x.T),
    "swapaxes": (lambda t, x: t.transpose(x, 0, 2), lambda x: x.swapaxes(0, 2)),
    "permute": (lambda t, x: x.permute(2, 0, 1), lambda x: x.permute(2, 0, 1)),
    "expand_dims": (lambda t, x: x.unsqueeze(1), lambda x: x.expand_dims(1)),
    "flatten": (lambda t, x: t.flatten(x, 1, 2), lambda x: x.flatten(1, 2)),
    "flip": (lambda t, x: t.flip(x, (0, 2)), lambda x: x.flip((0, 2))),
    "pad": (lambda t, x: t.nn.functional.pad(x, (2, 0, 1, 1), value=-1.5),
            lambda x: S.pad(x, ((0, 0), (1, 1), (2, 0)), value=-1.5)),
    "getitem_basic": (lambda t, x: x[1, ::2, 1:], lambda x: x[1, ::2, 1:]),
    "getitem_newaxis_ellipsis": (lambda t, x: x[None, ..., -1], lambda x: x[None, ..., -1]),
    "getitem_repeats": (lambda t, x: x[[0, 0, 1, 0]], lambda x: x[[0, 0, 1, 0]]),
    "getitem_mixed": (lambda t, x: x[:, [2, 0, 2], 1:3], lambda x: x[:, [2, 0, 2], 1:3]),
    "getitem_pairs": (lambda t, x: x[[1, 1, 0], [2, 2, 0]], lambda x: x[[1, 1, 0], [2, 2, 0]]),
}
for _name, (_tf, _ef) in SHAPE_OPS.items():
    # A product, so that the second derivative of the (linear) shape op is not trivially zero.
    add(_name, Case(X234, lambda t, x, f=_tf: f(t, x) * f(t, x), lambda x, f=_ef: f(x) * f(x)))

add("broadcast_to", Case(inputs(x=U((3, 1))), lambda t, x: t.broadcast_to(x, (2, 3, 4)) ** 2,
                         lambda x: x.broadcast_to((2, 3, 4)) ** 2))
add("squeeze", Case(inputs(x=U((2, 1, 3))), lambda t, x: x.squeeze(1) ** 2, lambda x: x.squeeze(1) ** 2))
add("getitem_mask", Case(inputs(x=U((3, 4)), mask=lambda rng: rng.random((3, 4)) < 0.5),
                         lambda t, x, mask: x[t.as_tensor(mask)] ** 2, lambda x, mask: x[mask] ** 2))
add("getitem_row_mask", Case(inputs(x=U((3, 4)), mask=lambda rng: np.array([True, False, True])),
                             lambda t, x, mask: x[t.as_tensor(mask)] ** 2, lambda x, mask: x[mask] ** 2))
add("concatenate", Case(inputs(a=U((2, 3)), b=U((2, 1)), c=U((2, 2))),
                        lambda t, a, b, c: t.cat([a, b, c], dim=1) ** 2,
                        lambda a, b, c: S.concatenate([a, b, c], axis=1) ** 2, diff=("a", "b", "c")))
add("stack", Case(inputs(a=U((2, 3)), b=U((2, 3))), lambda t, a, b: t.stack([a, b], dim=-1) ** 2,
                  lambda a, b: S.stack([a, b], axis=-1) ** 2, diff=("a", "b")))

# --------------------------------------------------------------------------------------------
# softmax family, including the numerically hard inputs
# --------------------------------------------------------------------------------------------
for _axis in (0, -1):
    add(f"softmax_ax{_axis}", Case(inputs(x=U((3, 4), -3, 3)), lambda t, x, a=_axis: t.softmax(x, dim=a),
                                   lambda x, a=_axis: x.softmax(a)))
    add(f"log_softmax_ax{_axis}", Case(inputs(x=U((3, 4), -3, 3)), lambda t, x, a=_axis: t.log_softmax(x, dim=a),
                                       lambda x, a=_axis: x.log_softmax(a)))
_LARGE = [[1000.0, 1000.0, 990.0], [-1000.0, 0.0, 1000.0]]
add("softmax_large", Case(inputs(x=FIXED(_LARGE)), lambda t, x: t.softmax(x, dim=1), lambda x: x.softmax(1)))
add("log_softmax_large",
    Case(inputs(x=FIXED(_LARGE)), lambda t, x: t.log_softmax(x, dim=1), lambda x: x.log_softmax(1)))
add("logsumexp_large", Case(inputs(x=FIXED(_LARGE)), lambda t, x: t.logsumexp(x, dim=1), lambda x: x.logsumexp(1)))
add("logsumexp_neg_inf", Case(inputs(x=FIXED([[-np.inf, 0.0, np.log(3.0)], [1.0, -np.inf, 2.0]])),
                              lambda t, x: t.logsumexp(x, dim=1), lambda x: x.logsumexp(1)))


# --------------------------------------------------------------------------------------------
# The ops a PyTorch user reaches for (added after the cases above, so that the random numbers
# of every earlier case, drawn in table order from one generator, stay what they were)
# --------------------------------------------------------------------------------------------
MORE_UNARY = {
    "sin": (lambda t, x: t.sin(x), S.sin, U((3, 4), -4, 4)),
    "cos": (lambda t, x: t.cos(x), S.cos, U((3, 4), -4, 4)),
    "sign": (lambda t, x: t.sign(x), S.sign, FIXED([-2.5, -0.0, 0.0, 0.3, 1.0])),
    "floor": (lambda t, x: t.floor(x), S.floor, U((3, 4), -3, 3)),
    "ceil": (lambda t, x: t.ceil(x), S.ceil, U((3, 4), -3, 3)),
    # halves round to even, as NumPy and PyTorch do
    "round": (lambda t, x: t.round(x), S.round, FIXED([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51])),
    "round_decimals": (lambda t, x: t.round(x, decimals=1), lambda x: S.round(x, 1), U((3, 4), -3, 3)),
}
for _op, (_tf, _ef, _mx) in MORE_UNARY.items():
    add(_op, Case(inputs(x=_mx), _tf, _ef))

STD_CASES = {
    # name: (shape or fixed values, axis, keepdims, correction)
    "all": ((2, 3, 4), None, False, 1),
    "ax1": ((2, 3, 4), 1, False, 1),
    "axneg_keep": ((2, 3, 4), -1, True, 1),
    "tuple": ((2, 3, 4), (0, 2), False, 1),
    "correction0": ((2, 3, 4), 1, False, 0),
    "correction2": ((3, 5), 1, False, 2),
}
for _name, (_shape, _axis, _keep, _corr) in STD_CASES.items():
    add(f"std_{_name}", Case(inputs(x=U(_shape)),
                             lambda t, x, a=_axis, k=_keep, c=_corr: t.std(x, dim=_dims(a, x.ndim), correction=c,
                                                                           keepdim=k),
                             lambda x, a=_axis, k=_keep, c=_corr: x.std(a, k, c)))
# A constant slice: std 0, and PyTorch's gradient there is 0 (not nan); one element with
# correction=0 is such a slice; one element with correction=1 is 0/0: nan, and a nan gradient.
add("std_constant_slice", Case(inputs(x=FIXED([[3.0, 3.0, 3.0], [1.0, 2.0, 4.0]])),
                               lambda t, x: t.std(x, dim=1), lambda x: x.std(1)))
add("std_one_element_correction0", Case(inputs(x=FIXED([[2.0], [-1.0]])),
                                        lambda t, x: t.std(x, dim=1, correction=0), lambda x: x.std(1, correction=0)))
add("std_one_element_nan", Case(inputs(x=FIXED([[2.0], [-1.0]])),
                                lambda t, x: t.std(x, dim=1), lambda x: x.std(1), second=False))

for _axname, (_axis, _keep) in REDUCTION_AXES.items():
    add(f"prod_{_axname}", Case(inputs(x=U((2, 3, 4), 0.5, 1.5)),
                                lambda t, x, a=_axis, k=_keep: _torch_prod(x, _dims(a, 3), k),
                                lambda x, a=_axis, k=_keep: x.prod(a, k)))
# Zeros: a row with one zero, a row with two, a row with none; and all of them at once.
_ZEROS = [[1.5, 0.0, 2.0, -1.0], [0.0, 3.0, 0.0, 2.0], [1.0, -2.0, 0.5, 4.0]]
add("prod_zeros_axis", Case(inputs(x=FIXED(_ZEROS)), lambda t, x: x.prod(dim=1), lambda x: x.prod(1)))
add("prod_zeros_all", Case(inputs(x=FIXED(_ZEROS)), lambda t, x: x.prod(), lambda x: x.prod()))
add("prod_one_zero_all", Case(inputs(x=FIXED([3.0, 1.0, 0.0, 2.0])), lambda t, x: x.prod(), lambda x: x.prod()))

for _axis in (0, -1):
    add(f"cumsum_ax{_axis}", Case(inputs(x=U((3, 4))), lambda t, x, a=_axis: t.cumsum(x, dim=a) ** 2,
                                  lambda x, a=_axis: x.cumsum(a) ** 2))

EINSUM = {
    # name: (subscripts, operand shapes)
    "matmul": ("ij,jk->ik", [(2, 3), (3, 4)]),
    "implicit": ("ij,jk", [(2, 3), (3, 4)]),
    "batched": ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    "outer": ("i,j->ij", [(3,), (4,)]),
    "dot": ("i,i->", [(5,), (5,)]),
    "three": ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    "ellipsis_broadcast": ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),
    "ellipsis_summed": ("...i,...i->...", [(2, 3, 4), (3, 4)]),
    "diagonal_times": ("ii,i->i", [(3, 3), (3,)]),
    "sum_inside": ("ijk,j->ik", [(2, 3, 4), (3,)]),
}
for _name, (_eq, _shapes) in EINSUM.items():
    _names = "abc"[: len(_shapes)]
    add(f"einsum_{_name}", Case(
        inputs(**{n: U(sh) for n, sh in zip(_names, _shapes, strict=True)}),
        lambda t, eq=_eq, **xs: t.einsum(eq, *xs.values()),
        lambda eq=_eq, **xs: S.einsum(eq, *xs.values()),
        diff=tuple(_names),
    ))
# One operand is linear in it: square the result so the second derivative says something.
for _name, _eq, _shape in [("diagonal", "ii->i", (3, 3)), ("trace", "ii->", (3, 3)), ("trace_implicit", "ii", (3, 3)),
                           ("transpose", "ij->ji", (2, 3)), ("row_sums", "ij->i", (2, 3)),
                           ("diagonal_3d", "iij->ji", (3, 3, 2))]:
    add(f"einsum_{_name}", Case(inputs(x=U(_shape)), lambda t, x, eq=_eq: t.einsum(eq, x) ** 2,
                                lambda x, eq=_eq: S.einsum(eq, x) ** 2))

CONV_TRANSPOSE = {
    # name: (x shape, weight shape (C_in, C_out/G, KH, KW), stride, padding, output_padding, groups, dilation)
    "plain": ((2, 3, 4, 5), (3, 2, 3, 3), 1, 0, 0, 1, 1),
    "stride2_pad1_outpad1": ((2, 3, 4, 4), (3, 2, 3, 3), 2, 1, 1, 1, 1),
    "groups": ((1, 4, 3, 4), (4, 3, 2, 3), 2, 0, 1, 2, 1),
    "dilation_outpad": ((1, 2, 4, 3), (2, 2, 3, 2), 1, 1, 1, 1, 2),
    "pairs": ((1, 2, 3, 4), (2, 3, 2, 3), (2, 3), (1, 0), (1, 2), 1, (1, 2)),
    "outpad_over_pad": ((1, 2, 3, 3), (2, 2, 2, 2), 3, 0, 2, 1, 1),
}
for _name, (_sx, _sw, _s, _p, _op, _g, _d) in CONV_TRANSPOSE.items():
    add(f"conv_transpose2d_{_name}", Case(
        inputs(x=U(_sx), w=U(_sw), b=U((_sw[1] * _g,))),
        lambda t, x, w, b, s=_s, p=_p, op=_op, g=_g, d=_d: t.nn.functional.conv_transpose2d(x, w, b, s, p, op, g, d),
        lambda x, w, b, s=_s, p=_p, op=_op, g=_g, d=_d: S.conv_transpose2d(x, w, b, s, p, op, g, d),
        diff=("x", "w", "b"),
    ))

MAX_POOL_DILATED = {
    # name: (x shape, kernel, stride, padding, dilation)
    "d2": ((2, 2, 7, 7), 3, 1, 0, 2),
    "d2_pad_stride": ((1, 2, 8, 9), 3, 2, 1, 2),
    "pairs": ((1, 1, 9, 8), (2, 3), (1, 2), (1, 0), (3, 2)),
}
for _name, (_sx, _k, _s, _p, _d) in MAX_POOL_DILATED.items():
    # Squared, so the second derivative is not zero; distinct values, so no window has a tie.
    add(f"max_pool2d_dilated_{_name}", Case(
        inputs(x=DISTINCT(_sx)),
        lambda t, x, k=_k, s=_s, p=_p, d=_d: t.nn.functional.max_pool2d(x, k, s, p, d) ** 2,
        lambda x, k=_k, s=_s, p=_p, d=_d: S.max_pool2d(x, k, s, p, d) ** 2,
    ))


# The second batch (appended, for the same reason): elementwise math, activations, selection.
MATH_MORE = {
    "tan": (lambda t, x: t.tan(x), S.tan, U((3, 4), -1.2, 1.2)),
    "sinh": (lambda t, x: t.sinh(x), S.sinh, U((3, 4), -3, 3)),
    "cosh": (lambda t, x: t.cosh(x), S.cosh, U((3, 4), -3, 3)),
    "arcsin": (lambda t, x: t.asin(x), S.arcsin, U((3, 4), -0.9, 0.9)),
    "arccos": (lambda t, x: t.acos(x), S.arccos, U((3, 4), -0.9, 0.9)),
    "arctan": (lambda t, x: t.atan(x), S.arctan, U((3, 4), -3, 3)),
    "log1p": (lambda t, x: t.log1p(x), S.log1p, U((3, 4), -0.9, 3)),
    "expm1": (lambda t, x: t.expm1(x), S.expm1, U((3, 4), -3, 3)),
    "erf": (lambda t, x: t.erf(x), S.erf, U((3, 4), -3, 3)),
    "trunc": (lambda t, x: t.trunc(x), S.trunc, FIXED([-2.5, -1.0, -0.3, 0.0, 0.7, 2.0, 3.9])),
    "square": (lambda t, x: t.square(x), S.square, U((3, 4))),
    "reciprocal": (lambda t, x: t.reciprocal(x), S.reciprocal, NZ((3, 4))),
    "rsqrt": (lambda t, x: t.rsqrt(x), S.rsqrt, POS((3, 4))),
    # the kinks: PyTorch's derivative at 0 (and at hardtanh's corners) is what the engine must give.
    # Not softplus exactly at its threshold: there PyTorch's first derivative is the curve's and its
    # second the line's (0), a point of measure zero where the engine keeps the curve's for both.
    "leaky_relu": (lambda t, x: t.nn.functional.leaky_relu(x, 0.2), lambda x: S.leaky_relu(x, 0.2),
                   FIXED([-2.0, -0.5, 0.0, 0.5, 3.0])),
    "elu": (lambda t, x: t.nn.functional.elu(x, 1.5), lambda x: S.elu(x, 1.5), FIXED([-3.0, -0.5, 0.0, 0.5, 40.0])),
    "softplus": (lambda t, x: t.nn.functional.softplus(x), S.softplus, U((3, 4), -5, 5)),
    "softplus_beta_threshold": (lambda t, x: t.nn.functional.softplus(x, beta=2.0, threshold=3.0),
                                lambda x: S.softplus(x, 2.0, 3.0), FIXED([-4.0, -0.5, 0.0, 1.0, 1.49, 1.51, 30.0])),
    "hardtanh": (lambda t, x: t.nn.functional.hardtanh(x, -0.5, 2.0), lambda x: S.hardtanh(x, -0.5, 2.0),
                 FIXED([-3.0, -0.5, -0.2, 0.0, 1.0, 2.0, 2.5])),
    "relu6": (lambda t, x: t.nn.functional.relu6(x), S.relu6, FIXED([-1.0, 0.0, 0.5, 5.9, 6.0, 7.0])),
    "silu": (lambda t, x: t.nn.functional.silu(x), S.silu, U((3, 4), -4, 4)),
    "gelu": (lambda t, x: t.nn.functional.gelu(x), S.gelu, U((3, 4), -4, 4)),
    "gelu_tanh": (lambda t, x: t.nn.functional.gelu(x, approximate="tanh"), lambda x: S.gelu(x, "tanh"),
                  U((3, 4), -4, 4)),
}
for _op, (_tf, _ef, _mx) in MATH_MORE.items():
    add(_op, Case(inputs(x=_mx), _tf, _ef))

# Selection ops are linear: squared, so that their second derivatives say something.
_IDX = np.array([[2, 0, 0], [1, 3, 1]])
SELECT = {
    "roll_flat": (U((3, 4)), lambda t, x: t.roll(x, 5), lambda x: S.roll(x, 5)),
    "roll_axes": (U((2, 3, 4)), lambda t, x: t.roll(x, (1, -2), (0, 2)), lambda x: S.roll(x, (1, -2), (0, 2))),
    "tril": (U((2, 3, 4)), lambda t, x: t.tril(x), S.tril),
    "triu_k1": (U((3, 4)), lambda t, x: t.triu(x, 1), lambda x: S.triu(x, 1)),
    "tril_k_neg": (U((4, 3)), lambda t, x: t.tril(x, -1), lambda x: S.tril(x, -1)),
    "take_repeated": (U((3, 4)), lambda t, x: t.index_select(x, 1, t.tensor([3, 0, 3, 3])),
                      lambda x: S.take(x, [3, 0, 3, 3], axis=1)),
    "gather_dim1": (U((2, 4)), lambda t, x: t.gather(x, 1, t.tensor(_IDX)), lambda x: S.gather(x, 1, _IDX)),
    "gather_smaller_index": (U((3, 5)), lambda t, x: t.gather(x, 0, t.tensor([[2, 0], [0, 0]])),
                             lambda x: S.gather(x, 0, np.array([[2, 0], [0, 0]]))),
    "take_along_axis": (U((2, 4)), lambda t, x: t.take_along_dim(x, t.tensor(_IDX), 1),
                        lambda x: S.take_along_axis(x, _IDX, 1)),
    "repeat_counts": (U((3, 2)), lambda t, x: t.repeat_interleave(x, t.tensor([2, 0, 3]), dim=0),
                      lambda x: S.repeat(x, [2, 0, 3], axis=0)),
    "repeat_flat": (U((2, 2)), lambda t, x: t.repeat_interleave(x, 3), lambda x: S.repeat(x, 3)),
    "tile": (U((2, 3)), lambda t, x: x.repeat(2, 1, 3), lambda x: S.tile(x, (2, 1, 3))),
    "split_sections": (U((4, 6)), lambda t, x: t.cat([p * (i + 1) for i, p in enumerate(t.tensor_split(x, 3, 1))], 1),
                       lambda x: S.concatenate([p * (i + 1) for i, p in enumerate(S.split(x, 3, 1))], 1)),
    "split_points": (U((5, 2)), lambda t, x: t.cat([p * (i + 1) for i, p in enumerate(t.tensor_split(x, [1, 3]))]),
                     lambda x: S.concatenate([p * (i + 1) for i, p in enumerate(S.split(x, [1, 3]))])),
    "chunk": (U((2, 7)), lambda t, x: t.cat([p * (i + 1) for i, p in enumerate(t.chunk(x, 3, 1))], 1),
              lambda x: S.concatenate([p * (i + 1) for i, p in enumerate(S.chunk(x, 3, 1))], 1)),
}
for _name, (_mx, _tf, _ef) in SELECT.items():
    add(_name, Case(inputs(x=_mx), lambda t, x, f=_tf: f(t, x) ** 2, lambda x, f=_ef: f(x) ** 2))

for _name, (_sx, _norm) in {"last": ((2, 3, 4), (4,)), "two_axes": ((2, 3, 4), (3, 4))}.items():
    add(f"layer_norm_{_name}", Case(
        inputs(x=U(_sx), w=U(_norm), b=U(_norm)),
        lambda t, x, w, b, n=_norm: t.nn.functional.layer_norm(x, n, w, b),
        lambda x, w, b, n=_norm: nn_functional.layer_norm(x, n, w, b),
        diff=("x", "w", "b"),
    ))


# --------------------------------------------------------------------------------------------
# Running a case
# --------------------------------------------------------------------------------------------
def directions(rng: np.random.Generator, case: Case, arrays: Arrays, out_shape) -> Arrays:
    """The random upstream gradient and one random direction per differentiated input."""
    extra = {"gout": rng.standard_normal(out_shape)}
    for name in case.diff:
        extra[f"dir_{name}"] = rng.standard_normal(arrays[name].shape)
    return extra


def _torch_case(torch, rng: np.random.Generator, case: Case) -> Arrays:
    arrays = case.inputs(rng)
    tensors = {
        k: torch.tensor(v, dtype=torch.float64, requires_grad=k in case.diff) if v.dtype.kind == "f" else v
        for k, v in arrays.items()
    }
    out = case.torch_fn(torch, **tensors)
    result = dict(arrays)
    result["out"] = out.detach().numpy().copy()
    if not case.diff:
        return result
    extra = directions(rng, case, arrays, tuple(out.shape))
    result.update(extra)
    xs = [tensors[k] for k in case.diff]
    grads = torch.autograd.grad(out, xs, torch.from_numpy(extra["gout"]), create_graph=case.second, allow_unused=True)
    for k, x, g in zip(case.diff, xs, grads, strict=True):
        result[f"grad_{k}"] = np.zeros(x.shape) if g is None else g.detach().numpy(force=True).copy()
    if case.second:
        s = sum((g * torch.from_numpy(extra[f"dir_{k}"])).sum()
                for k, g in zip(case.diff, grads, strict=True) if g is not None)
        if isinstance(s, int) or not s.requires_grad:  # the gradient does not depend on the inputs
            hess = [None] * len(xs)
        else:
            hess = torch.autograd.grad(s, xs, allow_unused=True)
        for k, x, h in zip(case.diff, xs, hess, strict=True):
            result[f"hess_{k}"] = np.zeros(x.shape) if h is None else h.detach().numpy(force=True).copy()
    return result


def make(rng: np.random.Generator) -> dict[str, Arrays]:
    """{case: {array name: ndarray}}, computed by PyTorch in float64."""
    import torch

    torch.set_num_threads(1)
    return {name: _torch_case(torch, rng, case) for name, case in CASES.items()}
