"""Hidden checks of a02_broadcasting: gradients of the tensor ops, broadcasting included.

Every op is graded by the trusted judge: the student's class runs in the sandbox's engine, where
every other exercise (`unbroadcast`, ...) is the reference; the same case runs through the
reference engine here, and only arrays cross. Cases cover the broadcasting patterns (new leading axes,
stretched size-1 axes, 0-d tensors), float32 and float64, an input that needs no gradient, and gradients of gradients
(create_graph=True). Messages name the kind of mistake and the case's pattern, never its values.
"""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    Case,
    Context,
    GradingFailure,
    check_op,
    close,
    graded,
    judged,
    recorded_calls,
    reference_engine,
    run,
    student_engine,
    sum_to,
)


def op(name: str):
    """A case's call: the engine's lowercase function `name` (`E.ops.mul`), for either engine E."""
    return lambda E, *xs: getattr(E.ops, name)(*xs)


def _shape_text(shape) -> str:
    return "a 0-d tensor" if shape == () else f"{len(shape)}-D"


# --------------------------------------------------------------------------------------------
# unbroadcast
# --------------------------------------------------------------------------------------------
UNBROADCAST_CASES = [
    ((4, 3), (3,), "a new leading axis"),
    ((4, 3), (4, 1), "a stretched size-1 last axis"),
    ((4, 3), (1, 3), "a stretched size-1 first axis"),
    ((2, 3, 4), (3, 1), "a new leading axis and a stretched size-1 axis"),
    ((5, 2, 1, 4), (2, 1, 1), "a new leading axis, a size-1 axis that stayed 1 and a stretched one"),
    ((2, 3), (), "every axis (the input was a 0-d tensor)"),
    ((3, 4), (3, 4), "nothing (no broadcasting happened)"),
]


def _unbroadcast_shape_hint(gshape, shape, got) -> str:
    gshape, shape, got = tuple(gshape), tuple(shape), tuple(got)
    lead = len(gshape) - len(shape)
    leading_only = gshape[lead:]
    stretched = any(n == 1 and m != 1 for n, m in zip(shape, leading_only, strict=False))
    squeezed = tuple(n for n in shape if n != 1)
    if got == leading_only and stretched:
        return ("the stretched size-1 axes were not summed: broadcasting also copied the input along every "
                "axis where `shape` has size 1, and each copy received gradient" +
                (" (the new leading axes are summed correctly)" if lead else ""))
    if got == gshape:
        return "nothing was summed: the result must have the input's shape `shape`"
    if got == squeezed or (len(got) < len(shape) and int(np.prod(got)) == int(np.prod(shape))):
        return "the size-1 axes of `shape` were dropped: keep them (keepdims=True, or reshape to `shape`)"
    if gshape and got == gshape[1:]:
        return ("you summed only axis 0: sum over every axis that "
                "broadcasting added in front or stretched from size 1")
    return "the result does not have the shape `shape`"


@graded("a02-unbroadcast", "solutions.ops.shape:unbroadcast", points=3,
        diagnose=("x + y (broadcast)", "x * y (broadcast)"))
def check_unbroadcast(unbroadcast, rng):
    S = student_engine()
    Tensor, grad = S.Tensor, S.grad
    f = unbroadcast
    for dtype in (np.float64, np.float32):
        for gshape, shape, what in UNBROADCAST_CASES:
            label = f"summing back over {what}, {np.dtype(dtype).name}"
            g = rng.standard_normal(gshape).astype(dtype)
            out = run(f"{label}: unbroadcast", f, Tensor(g.copy()), shape)
            if not isinstance(out, Tensor):
                raise GradingFailure(f"{label}: unbroadcast returned {type(out).__name__}; return a Tensor built "
                                     "with Tensor operations (grad.sum(...), .reshape(...))")
            if out.shape != tuple(shape):
                raise GradingFailure(f"{label}: {_unbroadcast_shape_hint(gshape, shape, out.shape)}")
            if out.data.dtype != dtype:
                raise GradingFailure(f"{label}: the result is {out.data.dtype} for a {np.dtype(dtype).name} gradient; "
                                     "keep the gradient's dtype")
            want = sum_to(g.astype(np.float64), shape)
            if not close(out.data, want, dtype):
                lead = len(gshape) - len(shape)
                axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                                  if n == 1 and gshape[lead + i] != 1)
                count = int(np.prod([gshape[a] for a in axes])) if axes else 1
                if count > 1 and close(out.data, want / count, dtype):
                    raise GradingFailure(f"{label}: you averaged; every copy's gradient counts in full, so sum")
                raise GradingFailure(f"{label}: wrong values; sum (not average, not pick) over the broadcast axes")

    # Differentiable: the result must stay in the graph, so that create_graph works through it.
    g = Tensor(rng.standard_normal((4, 3)), requires_grad=True)
    out = run("unbroadcast under create_graph", f, g, (1, 3))
    if not getattr(out, "requires_grad", False):
        raise GradingFailure("the result is not part of the graph: build it from Tensor operations on grad "
                             "(grad.sum(axis=..., keepdims=True), .reshape(shape)), not from grad.data")
    v = rng.standard_normal((1, 3))
    (dg,) = run("unbroadcast under create_graph", lambda: grad(out, [g], Tensor(v)))
    if dg is None or not close(dg.data, np.broadcast_to(v, (4, 3))):
        raise GradingFailure("the gradient through your unbroadcast is wrong (it must be the adjoint of broadcasting)")

    # As x * y's backward calls it: the calls are made here, by the course's Mul (in the sandbox,
    # Mul's course version would not call your unbroadcast), and your unbroadcast gets the same ones.
    R = reference_engine()
    for xs, ys in [((4, 3), (3,)), ((2, 3, 4), (3, 1)), ((), (2, 2))]:
        xd, yd = rng.standard_normal(xs), rng.standard_normal(ys)
        upstream = rng.standard_normal(np.broadcast_shapes(xs, ys))
        x, y = R.Tensor(xd, requires_grad=True), R.Tensor(yd, requires_grad=True)
        calls = recorded_calls(judged().reference(), lambda: R.ops.mul(x, y).backward(upstream))
        for (g_in, shape), _, want in calls:
            got = run("x * y with broadcasting: its backward calls unbroadcast", f, Tensor(g_in.data.copy()), shape)
            if not isinstance(got, Tensor) or got.shape != want.shape or not close(got.data, want.data):
                raise GradingFailure("as x * y's backward calls it (the gradient of x and of y summed back to their "
                                     "shapes, one call after the other), your unbroadcast gives a wrong result, "
                                     "although the cases above passed: does it keep state between calls?")


# --------------------------------------------------------------------------------------------
# Elementwise binary ops
# --------------------------------------------------------------------------------------------
BINARY_PATTERNS = [
    ("x and y of the same shape", (3, 4), (3, 4)),
    ("y broadcast along a new leading axis", (4, 3), (3,)),
    ("y broadcast along its size-1 axis", (4, 3), (4, 1)),
    ("x broadcast along a new leading axis and its size-1 axis", (3, 1), (2, 3, 4)),
    ("x a 0-d tensor broadcast to y's shape", (), (2, 3)),
]


def binary_cases(rng, call, positive_y: bool = False) -> list[Case]:
    def draw(shape, dtype, positive=False):
        a = rng.uniform(0.5, 2.0, size=shape) * (1 if positive else rng.choice([-1, 1], size=shape))
        return np.asarray(a, dtype=dtype)

    cases = []
    for k, (label, xs, ys) in enumerate(BINARY_PATTERNS):
        cases.append(Case(f"{label}, float64", [draw(xs, np.float64), draw(ys, np.float64, positive_y)], call,
                          second_order=(k in (1, 3))))
    for label, xs, ys in BINARY_PATTERNS[1:3]:
        cases.append(Case(f"{label}, float32", [draw(xs, np.float32), draw(ys, np.float32, positive_y)], call))
    label, xs, ys = BINARY_PATTERNS[2]
    cases.append(Case(f"{label}, only y requires grad", [draw(xs, np.float64), draw(ys, np.float64, positive_y)],
                      call, needs_grad=(False, True)))
    cases.append(Case(f"{label}, only x requires grad", [draw(xs, np.float64), draw(ys, np.float64, positive_y)],
                      call, needs_grad=(True, False)))
    return cases


@graded("a02-add", "solutions.ops.elementwise:Add", regions=("backward",), points=2, diagnose=("x + y (broadcast)",))
def check_add(Add, rng):
    def hint(ctx):
        if ctx.matches(sum_to(np.ones_like(ctx.out), ctx.inputs[ctx.index].shape)):
            return f"the gradient of {ctx.name} ignores the upstream gradient: d(x + y)/d{ctx.name} = 1, times grad"
        return None

    check_op(Add, "Add", binary_cases(rng, op("add")), rng, hint)


@graded("a02-mul", "solutions.ops.elementwise:Mul", regions=("backward",), points=2, diagnose=("x * y (broadcast)",))
def check_mul(Mul, rng):
    def hint(ctx):
        x, y = ctx.inputs
        own, other = (x, y) if ctx.index == 0 else (y, x)
        shape = own.shape
        if ctx.matches(sum_to(ctx.g * own, shape)):
            return (f"the gradient of {ctx.name} uses {ctx.name} itself: d(xy)/dx = y and d(xy)/dy = x, "
                    "so multiply grad by the *other* input")
        if ctx.matches(sum_to(np.broadcast_to(other, ctx.out.shape), shape)):
            return f"the gradient of {ctx.name} ignores the upstream gradient: multiply by grad (the chain rule)"
        return None

    check_op(Mul, "Mul", binary_cases(rng, op("mul")), rng, hint)


@graded("a02-div", "solutions.ops.elementwise:Div", regions=("backward",), points=2, diagnose=("x / y",))
def check_div(Div, rng):
    cls = Div

    def hint(ctx):
        x, y = ctx.inputs
        g = ctx.g
        if ctx.index == 1:
            if ctx.matches(sum_to(g * x / (y * y), y.shape)):
                return "the sign of y's gradient: d(x/y)/dy = -x / y^2 (a minus sign)"
            if ctx.matches(sum_to(-g * x / y, y.shape)) or ctx.matches(sum_to(g * x / y, y.shape)):
                return "d(x/y)/dy = -x / y^2: y is squared in the denominator"
            if ctx.matches(sum_to(-g / (y * y), y.shape)):
                return "d(x/y)/dy = -x / y^2: the factor x is missing"
        else:
            if ctx.matches(sum_to(g * y, x.shape)):
                return "d(x/y)/dx = 1/y: divide grad by y"
        return None

    check_op(cls, "Div", binary_cases(rng, op("div"), positive_y=True), rng, hint)


# --------------------------------------------------------------------------------------------
# Elementwise unary ops
# --------------------------------------------------------------------------------------------
def unary_cases(rng, call, low=-2.0, high=2.0, extra=()) -> list[Case]:
    cases = []
    for shape, dtype, second in [((3, 4), np.float64, True), ((), np.float64, False), ((2, 3, 5), np.float32, False)]:
        x = rng.uniform(low, high, size=shape).astype(dtype)
        cases.append(Case(f"a {_shape_text(shape)} input, {np.dtype(dtype).name}", [x], call, names=("x",),
                          second_order=second))
    for label, x in extra:
        cases.append(Case(label, [x], call, names=("x",)))
    return cases


@graded("a02-pow-scalar", "solutions.ops.elementwise:PowScalar", regions=("backward",), points=2, diagnose=("x ** p",))
def check_pow_scalar(PowScalar, rng):
    cls = PowScalar
    for p, label in [(2, "a square"), (3, "a cube"), (0.5, "a square root"), (-1.5, "a negative fractional power"),
                     (1, "the power 1")]:
        def hint(ctx, p=p):
            (x,) = ctx.inputs
            if ctx.matches(ctx.g * p * x**p):
                return "the exponent is off by one: d(x^p)/dx = p x^(p-1)"
            if ctx.matches(ctx.g * x ** (p - 1)):
                return "the factor p is missing: d(x^p)/dx = p x^(p-1)"
            if ctx.matches(p * x ** (p - 1) * np.ones_like(x)):
                return "multiply by the upstream gradient grad (the chain rule)"
            return None

        cases = unary_cases(rng, lambda E, x, p=p: E.ops.pow(x, p), 0.5, 2.0)
        for c in cases:
            c.label = f"exponent {label}, {c.label}"
        check_op(cls, "PowScalar", cases, rng, hint)

    # The guard the contract asks for: p = 0, tried where x = 0 (there p x^(p-1) is 0 * inf = nan).
    def zero_hint(ctx):
        return ("guard the case p = 0: the derivative of x^0 = 1 is 0 everywhere, also at x = 0, where "
                "p * x ** (p - 1) is 0 * inf = nan")

    x = rng.uniform(0.5, 2.0, size=(3, 4)) * rng.choice([-1, 1], size=(3, 4))
    x[rng.permutation(3)[:2], rng.permutation(4)[:2]] = 0.0
    cases = [Case("exponent 0, an input with zeros, float64", [x], lambda E, x: E.ops.pow(x, 0), names=("x",)),
             Case("exponent 0.0, an input with zeros, float32", [x.astype(np.float32)],
                  lambda E, x: E.ops.pow(x, 0.0), names=("x",))]
    try:
        check_op(cls, "PowScalar", cases, rng, zero_hint)
    except GradingFailure as failure:
        if "nan or inf" not in str(failure):
            raise
        raise GradingFailure(f"{failure}: {zero_hint(None)}") from None


@graded("a02-exp", "solutions.ops.elementwise:Exp", regions=("backward",), points=2, diagnose=("exp, log",))
def check_exp(Exp, rng):
    def hint(ctx):
        (x,) = ctx.inputs
        if ctx.matches(ctx.g * x):
            return "exp'(x) = exp(x), which is the output: use self.output, not the input"
        return None

    check_op(Exp, "Exp", unary_cases(rng, op("exp")), rng, hint)


@graded("a02-log", "solutions.ops.elementwise:Log", regions=("backward",), points=2, diagnose=("exp, log",))
def check_log(Log, rng):
    def hint(ctx):
        (x,) = ctx.inputs
        if ctx.matches(ctx.g * x):
            return "log'(x) = 1/x: divide grad by x"
        if ctx.matches(ctx.g * np.log(x)) or ctx.matches(ctx.g / np.log(x)):
            return "log'(x) = 1/x (the input, not its log)"
        return None

    check_op(Log, "Log", unary_cases(rng, op("log"), 0.2, 3.0), rng, hint)


@graded("a02-tanh", "solutions.ops.elementwise:Tanh", regions=("backward",), points=2, diagnose=("tanh, sigmoid",))
def check_tanh(Tanh, rng):
    def hint(ctx):
        (x,) = ctx.inputs
        if ctx.matches(ctx.g * (1 - x * x)):
            return "tanh'(x) = 1 - tanh(x)^2: square the output (self.output), not the input"
        if ctx.matches(ctx.g * (1 - np.tanh(x))):
            return "tanh'(x) = 1 - tanh(x)^2: the output is squared"
        return None

    check_op(Tanh, "Tanh", unary_cases(rng, op("tanh")), rng, hint)


@graded("a02-sigmoid", "solutions.ops.elementwise:Sigmoid", regions=("backward",), points=2,
        diagnose=("tanh, sigmoid",))
def check_sigmoid(Sigmoid, rng):
    def hint(ctx):
        (x,) = ctx.inputs
        s = 1 / (1 + np.exp(-x))
        if ctx.matches(ctx.g * s):
            return "sigma'(x) = sigma(x) (1 - sigma(x)): the factor (1 - sigma(x)) is missing"
        if ctx.matches(ctx.g * x * (1 - x)):
            return "sigma'(x) = s (1 - s) with s the *output* sigma(x) (self.output), not the input"
        if ctx.matches(ctx.g * (1 - s)):
            return "sigma'(x) = sigma(x) (1 - sigma(x)): the factor sigma(x) is missing"
        return None

    extra = [("large inputs of both signs, float64", np.array([-30.0, -5.0, 5.0, 30.0]))]
    check_op(Sigmoid, "Sigmoid", unary_cases(rng, op("sigmoid"), -4, 4, extra), rng, hint)


# --------------------------------------------------------------------------------------------
# Reductions and shapes
# --------------------------------------------------------------------------------------------
@graded("a02-sum", "solutions.ops.reduce:Sum", regions=("backward",), points=2, diagnose=("sum",))
def check_sum(Sum, rng):
    cls = Sum
    specs = [((3, 4), None, False, "every axis"), ((3, 4), 0, False, "axis 0"),
             ((3, 4), 1, False, "the last axis"), ((3, 3), 1, False, "the last axis of a square matrix"),
             ((3, 4), 1, True, "the last axis with keepdims=True"), ((2, 3, 4), (0, 2), False, "two axes of three"),
             ((2, 3, 4), -2, True, "a middle axis with keepdims=True")]
    cases = []
    for k, (shape, axis, keepdims, what) in enumerate(specs):
        dtype = np.float32 if k == 5 else np.float64
        cases.append(Case(f"summing over {what}, {np.dtype(dtype).name}",
                          [rng.standard_normal(shape).astype(dtype)],
                          lambda E, x, axis=axis, keepdims=keepdims: E.ops.sum(x, axis, keepdims), names=("x",),
                          second_order=(k == 5)))

    def shape_hint(ctx, got):
        if got == ctx.out.shape and got != ctx.inputs[0].shape:
            return ("the gradient of sum has the output's shape: every summed element receives the upstream "
                    "gradient, so copy it back along the summed axes (broadcast_to(..., x.shape))")
        if len(got) == ctx.inputs[0].ndim and all(n in (1, m) for n, m in zip(got, ctx.inputs[0].shape, strict=False)):
            return "the reduced axes are back as size 1, now copy along them: broadcast_to(..., x.shape)"
        return None

    def exception_hint(error):
        if "broadcast" in str(error):
            return ("put the reduced axes back as size-1 axes first (reshape to kept_shape(x.shape, self.axes)), "
                    "then broadcast_to(x.shape)")
        return None

    def hint(ctx):
        return ("the upstream gradient was copied along the wrong axes: restore the reduced axes as size 1 "
                "(kept_shape(x.shape, self.axes)) before broadcasting")

    check_op(cls, "Sum", cases, rng, hint, shape_hint=shape_hint, exception_hint=exception_hint)


@graded("a02-broadcast-to", "solutions.ops.shape:BroadcastTo", regions=("backward",), points=2)
def check_broadcast_to(BroadcastTo, rng):
    cls = BroadcastTo
    specs = [((3,), (4, 3), "a new leading axis"), ((4, 1), (4, 3), "a size-1 axis"),
             ((1, 3, 1), (2, 1, 3, 5), "new leading axes and size-1 axes"), ((), (2, 2), "a 0-d tensor"),
             ((2, 3), (2, 3), "the same shape")]
    cases = [Case(f"broadcasting over {what}, float64", [rng.standard_normal(s)],
                  lambda E, x, to=to: E.ops.broadcast_to(x, to), names=("x",), second_order=(k == 2))
             for k, (s, to, what) in enumerate(specs)]
    cases.append(Case("broadcasting over a size-1 axis, float32", [rng.standard_normal((4, 1)).astype(np.float32)],
                      lambda E, x: E.ops.broadcast_to(x, (4, 3)), names=("x",)))

    def shape_hint(ctx, got):
        if got == ctx.out.shape:
            return ("the gradient has the broadcast shape: sum it back over the broadcast axes "
                    "(unbroadcast(grad, x.shape))")
        return None

    check_op(cls, "BroadcastTo", cases, rng, shape_hint=shape_hint,
             hint=lambda ctx: "sum (not average or pick) over the broadcast axes: unbroadcast(grad, x.shape)")


@graded("a02-transpose", "solutions.ops.shape:Transpose", regions=("backward",), points=2,
        diagnose=("transpose, reshape",))
def check_transpose(Transpose, rng):
    cls = Transpose
    specs = [((2, 3), None, "a matrix transpose"), ((2, 3, 4), (1, 2, 0), "a cyclic permutation of three axes"),
             ((2, 3, 4, 5), (0, 3, 1, 2), "a permutation of four axes"),
             ((3, 3, 3), (2, 0, 1), "a cyclic permutation of equal axes")]
    cases = [Case(f"{what}, float64", [rng.standard_normal(s)], lambda E, x, a=axes: E.ops.transpose(x, a),
                  names=("x",), second_order=(k == 1)) for k, (s, axes, what) in enumerate(specs)]

    def hint(ctx):
        return ("the gradient must undo the permutation: transpose grad by the inverse permutation "
                "(np.argsort(self.axes)), which differs from self.axes unless the permutation is its own inverse")

    def shape_hint(ctx, got):
        return hint(ctx)

    check_op(cls, "Transpose", cases, rng, hint, shape_hint=shape_hint)


@graded("a02-getitem", "solutions.ops.shape:GetItem", regions=("backward",), points=2, diagnose=("indexing",))
def check_getitem(GetItem, rng):
    specs = [((5, 3), (slice(1, 4),), "a slice"), ((5, 3), (2,), "an integer index"),
             ((6,), (np.array([0, 2, 2, 5, 2]),), "an index array that repeats an element"),
             ((4, 3), (np.array([1, 1, 3]), slice(None)), "repeated rows"),
             ((4, 3), (np.array([0, 0, 2]), np.array([1, 1, 2])), "pairs of index arrays that repeat an element"),
             ((3, 4), (np.array([[True, False, True, True]] * 3),), "a boolean mask")]
    cases = []
    for k, (s, index, what) in enumerate(specs):
        idx = index[0] if len(index) == 1 else index
        cases.append(Case(f"indexing with {what}, float64", [rng.standard_normal(s)],
                          lambda E, x, i=idx: E.ops.getitem(x, i), names=("x",), second_order=(k == 3),
                          params={"index": idx}))
    rows = (np.array([2, 0, 2]), slice(None))
    cases.append(Case("indexing with repeated rows, float32", [rng.standard_normal((4, 3)).astype(np.float32)],
                      lambda E, x: E.ops.getitem(x, rows), names=("x",), params={"index": rows}))

    def hint(ctx):
        (x,) = ctx.inputs
        assigned = np.zeros_like(x)
        assigned[ctx.case.params["index"]] = ctx.g
        if ctx.matches(assigned):
            return ("an element selected several times receives gradient from every copy: add the copies "
                    "(scatter_add, np.add.at), do not assign them")
        return "the gradient must go back to the selected elements (scatter-add grad into zeros of x's shape)"

    check_op(GetItem, "GetItem", cases, rng, hint)


# --------------------------------------------------------------------------------------------
# MatMul
# --------------------------------------------------------------------------------------------
@graded("a02-matmul", "solutions.ops.linalg:MatMul", regions=("backward",), points=3, diagnose=("matmul",))
def check_matmul(MatMul, rng):
    cls = MatMul
    specs = [((3, 4), (4, 5), "matrix @ matrix"), ((4, 4), (4, 4), "square matrices"),
             ((4,), (4, 5), "vector @ matrix"), ((3, 4), (4,), "matrix @ vector"), ((5,), (5,), "vector @ vector"),
             ((2, 3, 4), (4, 5), "a batch of matrices @ one matrix (the matrix is broadcast over the batch)"),
             ((3, 4), (2, 4, 5), "one matrix @ a batch of matrices"), ((2, 3, 4), (2, 4, 5), "batch @ batch"),
             ((2, 1, 3, 4), (5, 4, 2), "broadcast batch axes on both sides")]
    cases = []
    for k, (a, b, what) in enumerate(specs):
        cases.append(Case(f"{what}, float64", [rng.standard_normal(a), rng.standard_normal(b)], op("matmul"),
                          names=("a", "b"), second_order=(k in (0, 5))))
    cases.append(Case("matrix @ matrix, float32", [rng.standard_normal((3, 4)).astype(np.float32),
                                                   rng.standard_normal((4, 2)).astype(np.float32)],
                      op("matmul"), names=("a", "b")))

    def hint(ctx):
        a, b = ctx.inputs
        g = ctx.g
        if a.ndim == 2 and b.ndim == 2:
            if ctx.index == 0 and ctx.matches(g @ b):
                return "dL/dA = G B^T: transpose B (swapaxes(b, -1, -2)), do not use B as it is"
            if ctx.index == 1 and (ctx.matches(a @ g) or ctx.matches(g.T @ a)):
                return "dL/dB = A^T G: transpose A, and put it on the left of G"
        return ("wrong values: check the transposes and their side (dL/dA = G B^T, dL/dB = A^T G), and that a "
                "gradient is summed over the batch axes its operand was broadcast along")

    def shape_hint(ctx, got):
        a, b = ctx.inputs
        own = ctx.inputs[ctx.index]
        if len(got) > own.ndim:
            return (f"the gradient of {ctx.name} has batch axes that {ctx.name} does not have: {ctx.name} was "
                    "broadcast over the batch, so sum its gradient over those axes (unbroadcast)")
        return (f"the gradient of {ctx.name} does not have {ctx.name}'s shape: check which operand is "
                "transposed (dL/dA = G B^T, dL/dB = A^T G) and how 1-D operands are handled")

    def exception_hint(error):
        if "expand_dims" in str(error) and "shape ()" in str(error):
            return ("for vector @ vector the gradient G is 0-d and has no axis -2 yet: put the right operand's "
                    "axis back first (expand_dims(-1)), then the left one's (expand_dims(-2))")
        if "unbroadcast" in str(error) and "cannot be summed back" in str(error):
            return ("a gradient does not have its operand's shape: check which operand is transposed and on "
                    "which side of G it goes (dL/dA = G B^T, dL/dB = A^T G)")
        if "matmul" in str(error):
            return ("the shapes in your backward do not line up: dL/dA = G B^T and dL/dB = A^T G "
                    "(transpose the *other* operand, swapaxes(..., -1, -2))")
        if "reshape" in str(error):
            return ("a gradient has more elements than its operand: an operand that was broadcast over batch "
                    "axes needs its gradient summed over them (unbroadcast) before any reshape")
        return None

    check_op(cls, "MatMul", cases, rng, hint, shape_hint=shape_hint, exception_hint=exception_hint)


# --------------------------------------------------------------------------------------------
# Softmax and LogSoftmax
# --------------------------------------------------------------------------------------------
def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_cases(rng, call) -> list[Case]:
    specs = [((4, 5), -1, 1.0, np.float64, "rows of logits"), ((3, 4, 5), 1, 1.0, np.float64, "a middle axis"),
             ((5, 3), 0, 1.0, np.float64, "axis 0"), ((4, 6), -1, 1000.0, np.float64, "large logits (about 1000)"),
             ((4, 6), -1, 100.0, np.float32, "large logits (about 100)"), ((6,), 0, 1.0, np.float64, "a vector")]
    return [Case(f"softmax over {what}, {np.dtype(dt).name}", [(rng.standard_normal(s) * scale).astype(dt)],
                 lambda E, x, axis=axis: call(E, x, axis), names=("x",), second_order=(k == 1), params={"axis": axis})
            for k, (s, axis, scale, dt, what) in enumerate(specs)]


# Each of the two softmax gradients is the other's with the upstream gradient rescaled (g / s, or
# g * s): withheld from each other, or an answer could call the other's backward.
@graded("a02-softmax", "solutions.ops.activation:Softmax", regions=("forward", "backward"), points=3,
        diagnose=("log_softmax",), withholds=("a02-log-softmax",))
def check_softmax(Softmax, rng):
    cls = Softmax

    def forward_hint(case, got, want):
        if not np.all(np.isfinite(got)):
            return ("the forward overflows to nan/inf for large logits: subtract the max along the axis before "
                    "exp (softmax(x) = softmax(x - c) for any constant c)")
        if got.shape != want.shape:
            return "the forward must keep the input's shape (use keepdims=True in the max and the sum)"
        if got.dtype != want.dtype:
            return f"the forward returned {got.dtype} for {want.dtype} logits; keep the input's dtype"
        return "the forward is wrong: exponentiate, then normalise along self.axis so each slice sums to 1"

    def hint(ctx):
        s = ctx.out
        g = ctx.g
        axis = _axis_of(ctx)
        if ctx.matches(s * g):
            return ("the outputs are coupled through the normalisation, so the VJP is s * (g - sum(g * s)) along "
                    "the axis, not s * g (that is only the diagonal of the Jacobian)")
        if ctx.matches(s * (1 - s) * g):
            return "s (1 - s) is only the diagonal of the Jacobian: the VJP is s * (g - sum(g * s, axis))"
        if ctx.matches(s * (g - (g * s).sum())):
            return "sum(g * s) must be taken along self.axis (keepdims=True), not over the whole tensor"
        if axis is not None and ctx.matches(s * (g + (g * s).sum(axis=axis, keepdims=True))):
            return "the sign: the VJP is s * (g - sum(g * s, axis))"
        return "wrong gradient: the VJP of softmax is s * (g - sum(g * s, axis, keepdims=True))"

    check_op(cls, "Softmax", softmax_cases(rng, op("softmax")), rng, hint, forward_hint=forward_hint,
             forward_given=False)


def _axis_of(ctx: Context):
    return ctx.case.params.get("axis")


@graded("a02-log-softmax", "solutions.ops.activation:LogSoftmax", regions=("backward",), points=2,
        diagnose=("log_softmax",), withholds=("a02-softmax",))
def check_log_softmax(LogSoftmax, rng):
    def hint(ctx):
        g = ctx.g
        axis = _axis_of(ctx)
        s = _softmax(ctx.inputs[0], axis)
        total = g.sum(axis=axis, keepdims=True)
        if ctx.matches(g + s * total):
            return "the sign: d log_softmax gives g - softmax(x) * sum(g, axis)"
        if ctx.matches(g - s * g):
            return "sum g along the axis: the VJP is g - softmax(x) * sum(g, axis, keepdims=True)"
        if ctx.matches(g - s * g.sum()):
            return "sum g along self.axis (keepdims=True), not over the whole tensor"
        if ctx.matches(g - ctx.out * total):
            return "softmax(x) is exp(self.output): exponentiate the output first"
        return "wrong gradient: the VJP of log_softmax is g - softmax(x) * sum(g, axis, keepdims=True)"

    cases = softmax_cases(rng, op("log_softmax"))
    for c in cases:
        c.label = c.label.replace("softmax over", "log_softmax over")
    check_op(LogSoftmax, "LogSoftmax", cases, rng, hint)
