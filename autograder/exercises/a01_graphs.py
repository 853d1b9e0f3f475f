"""Hidden checks of a01_graphs.

Part 1, the scalar engine of `solutions/scalar.py` (micrograd-like): every function is graded by
the trusted judge: the student's answer runs in the sandbox's engine
(`student_module("solutions.scalar")`), where `Value`, `as_value` and every other exercise are the
reference ones, so a wrong `mul` does not cost points in `backward`; the reference runs here, and
only plain numbers cross. Ops are called on the sandbox's Values whose `grad` already holds some
gradient (as if another consumer had sent its share), which tells an overwrite (`=`) from an
accumulation (`+=`). Graphs for `topological_order` and `backward` are built in the sandbox with
its engine's ops (the reference ones there) and walked through proxies: a node is known by its
handle, not by `is`. The same graphs built here with the reference engine give the expected
gradients.

Part 2, the tensor engine's graph walk of `solutions/graph.py` (`toposort`, `run_backward`,
`no_grad`), checked the same way on Tensors: the sandbox's ops are the reference ones, so only
the walk is the student's.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    Proxy,
    StudentError,
    chain_in_sandbox,
    close,
    graded,
    identity,
    kind,
    reference_engine,
    run,
    same_object,
    sandbox_operator,
    sandbox_type,
    student_engine,
    student_engine_session,
    student_module,
    time_limit,
    type_name,
)

SOURCE = "solutions.scalar"


def _S():
    """The sandbox's scalar engine (the kit's `coursekit.engine.scalar`, the answer plugged in)."""
    return student_module(SOURCE)


def _R():
    """The reference scalar engine, here."""
    import solutions.scalar
    return solutions.scalar








def _callable(x) -> bool:
    return kind(x) in ("function", "type") if isinstance(x, Proxy) else callable(x)


def _children_of(node) -> list:
    """A node's `_children` as a list ([] if it has none, or none that can be listed)."""
    try:
        children = getattr(node, "_children", ())
        return list(children) if isinstance(children, (Proxy, tuple, list)) else []
    except (TypeError, AttributeError):  # a student's `_children` that is not a collection
        return []


def _data(x):
    """A Value's number (fetched from the sandbox), or a plain number as it is."""
    return x.data if isinstance(x, Proxy) else x


# --------------------------------------------------------------------------------------------
# Ops
# --------------------------------------------------------------------------------------------
def _check_value(out, name: str, label: str):
    S = _S()
    if not isinstance(out, S.Value):
        raise GradingFailure(f"{label}: {name} returned {type_name(out)}; return the new output Value")
    return out


def _op_case(f, name: str, label: str, args: list, forward, local_grads, rng, hint=None, raised_hint=None):
    """Call f(*args) on fresh Values and check data, children, and the accumulated gradients.

    `args` holds floats (made Values) and ("num", x) for plain numbers; `local_grads(*values)`
    returns d out / d arg for each Value argument, in order."""
    S = _S()
    values: list = []
    call_args: list = []
    for a in args:
        if isinstance(a, tuple) and a[0] == "num":
            call_args.append(a[1])
        elif isinstance(a, tuple) and a[0] == "same":
            call_args.append(values[a[1]])
        else:
            v = S.Value(a)
            v.grad = float(rng.uniform(0.5, 1.5) * rng.choice([-1, 1]))  # another consumer's share
            values.append(v)
            call_args.append(v)
    datas = [v.data for v in values]
    priors = [v.grad for v in values]
    out = _check_value(run(f"{label}: {name}", f, *call_args), name, label)
    if any(v.data != d for v, d in zip(values, datas, strict=False)):
        raise GradingFailure(f"{label}: {name} changed the data of an input; build a new Value instead")
    arg_data = [_data(a) for a in call_args]
    want_data = forward(*arg_data)
    out_data = out.data
    if not isinstance(out_data, (int, float)) or not math.isclose(out_data, want_data, rel_tol=1e-9, abs_tol=1e-12):
        raise GradingFailure(f"{label}: the output's data is wrong (the forward value of {name})")
    children = _children_of(out)
    for v in values:
        if not any(same_object(c, v) for c in children):
            raise GradingFailure(f"{label}: the output does not record its input Values as children; create it as "
                                 f"Value(data, (a, b), op) so that backward can reach the inputs")
    # Judged by what the closure sends, not by how it was made: the default one, which sends
    # nothing, is a right answer where the derivative is 0 (power with p = 0).
    closure = out._backward
    if not _callable(closure):
        raise GradingFailure(f"{label}: out._backward is {type_name(closure)}; it must be a function, the closure "
                             "that sends out.grad to the inputs")
    no_closure = same_object(closure, S._no_backward)
    g = float(rng.uniform(0.5, 2.0) * rng.choice([-1, 1]))
    out.grad = g
    run(f"{label}: the _backward closure of {name}", closure, hint=raised_hint)
    if out.grad != g:
        raise GradingFailure(f"{label}: _backward changed out.grad; it must only add to the inputs' grads")

    # The reference: the same local derivatives, summed over repeated arguments.
    unique: list = []
    for v in values:
        if not any(u is v for u in unique):
            unique.append(v)
    locals_ = local_grads(*arg_data)
    for v in unique:
        prior = priors[values.index(v)]
        share = sum(lg for lg, a in zip(locals_, call_args, strict=False) if a is v)
        got = v.grad
        want = prior + share * g
        if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
            continue
        if no_closure:
            raise GradingFailure(f"{label}: the output has no _backward closure, so no gradient reaches the inputs; "
                                 "define one and assign out._backward = _backward before returning out")
        if not math.isfinite(got):
            message = hint(got - prior, share, g, *arg_data) if hint else None
            raise GradingFailure(f"{label}: " + (message or "a gradient became nan or inf"))
        if math.isclose(got, share * g, rel_tol=1e-9) or any(
                math.isclose(got, lg * g, rel_tol=1e-9) for lg in locals_):
            raise GradingFailure(f"{label}: the gradient the input already had was lost: did you overwrite "
                                 "(a.grad = ...) instead of accumulate (a.grad += ...)? A value used in several "
                                 "places receives gradient from each of them")
        if math.isclose(got, prior + share, rel_tol=1e-9) and abs(g - 1) > 1e-6:
            raise GradingFailure(f"{label}: the chain rule: multiply the local derivative by out.grad")
        message = hint(got - prior, share, g, *arg_data) if hint else None
        raise GradingFailure(f"{label}: " + (message or f"the gradient {name} sends to an input is wrong"))


def _binary_cases(rng):
    x, y = (float(v) for v in rng.uniform(0.5, 2.0, size=2) * rng.choice([-1, 1], size=2))
    return [
        ("two Values", [x, y]),
        ("a Value and a number", [x, ("num", float(rng.uniform(-2, 2)))]),
        ("a number and a Value (as in 2 + v)", [("num", float(rng.uniform(-2, 2))), y]),
        ("the same Value twice (as in v + v)", [x, ("same", 0)]),
    ]


@graded("a01-add", f"{SOURCE}:add", points=2)
def check_add(add, rng):
    for label, args in _binary_cases(rng):
        _op_case(add, "add", label, args, lambda a, b: a + b, lambda a, b: (1.0, 1.0), rng)


@graded("a01-mul", f"{SOURCE}:mul", points=2)
def check_mul(mul, rng):
    def hint(got, share, g, a, b):
        if math.isclose(got, a * g, rel_tol=1e-9):
            return "the inputs are swapped: d(ab)/da = b, so a's gradient is b.data * out.grad"
        return None

    for label, args in _binary_cases(rng):
        _op_case(mul, "mul", label, args, lambda a, b: a * b, lambda a, b: (b, a), rng, hint)


@graded("a01-power", f"{SOURCE}:power", points=2)
def check_power(power, rng):
    def hint(got, share, g, a, p):
        if p == 0:
            return ("with exponent 0, c = 1 is a constant: _backward must send no gradient, even at a = 0 "
                    "(p * a^(p-1) there is 0 * inf = nan); guard the case p = 0")
        if a == 0 and p < 1 and not math.isinf(got):
            return ("at a = 0 an exponent p < 1 has an infinite slope: send p * inf (math.copysign(math.inf, "
                    "exponent) * out.grad), as NumPy does")
        if math.isclose(got, p * a**p * g, rel_tol=1e-9):
            return "the exponent is off by one: d(a^p)/da = p a^(p-1)"
        if math.isclose(got, a ** (p - 1) * g, rel_tol=1e-9):
            return "the factor p is missing: d(a^p)/da = p a^(p-1)"
        return None

    def raised_hint(p):
        def hint_for(error):
            if error.remote_type != "ZeroDivisionError":
                return None
            if p == 0:
                return ("in Python 0.0 ** -1 raises: guard the case p = 0 (c = 1 is a constant, so no gradient, "
                        "even at a = 0)")
            return ("in Python 0.0 ** (p - 1) raises for p < 1: at a = 0 power has an infinite slope, guard that "
                    "case and send p * inf (math.copysign(math.inf, exponent) * out.grad)")
        return hint_for

    def slope(a, q):
        if q == 0:
            return 0.0
        if a == 0 and q < 1:
            return math.copysign(math.inf, q)
        return q * a ** (q - 1)

    cases = [("a square", 2, None), ("a cube", 3, None), ("a negative power (1/a)", -1, None),
             ("a square root", 0.5, None), ("a negative fractional power", -1.5, None), ("0", 0, None),
             ("0 at a = 0", 0, 0.0), ("a square root at a = 0", 0.5, 0.0), ("a square at a = 0", 2, 0.0)]
    for label, p, at in cases:
        x = float(rng.uniform(0.5, 2.0)) if at is None else at
        _op_case(power, "power", f"exponent {label}", [x, ("num", p)], lambda a, q: a**q,
                 lambda a, q: (slope(a, q), 0.0), rng, hint, raised_hint(p))


def _unary(name: str, f, rng, forward, derivative, points_of_interest, hint=None):
    for label, x in points_of_interest(rng):
        _op_case(f, name, label, [x], forward, lambda a: (derivative(a),), rng, hint)


@graded("a01-exp", f"{SOURCE}:exp", points=2)
def check_exp(exp, rng):
    def hint(got, share, g, a):
        if math.isclose(got, a * g, rel_tol=1e-9):
            return "exp'(a) = exp(a), the output: use out.data, not the input a.data"
        return None
    _unary("exp", exp, rng, math.exp, math.exp,
           lambda r: [("a positive input", float(r.uniform(0.5, 2))), ("a negative input", float(r.uniform(-3, -0.5)))],
           hint)


@graded("a01-tanh", f"{SOURCE}:tanh", points=2)
def check_tanh(tanh, rng):
    def hint(got, share, g, a):
        if math.isclose(got, (1 - a * a) * g, rel_tol=1e-9):
            return "tanh'(a) = 1 - tanh(a)^2: square the output t, not the input a"
        if math.isclose(got, (1 - math.tanh(a)) * g, rel_tol=1e-9):
            return "tanh'(a) = 1 - tanh(a)^2: the output is squared"
        return None
    _unary("tanh", tanh, rng, math.tanh, lambda a: 1 - math.tanh(a) ** 2,
           lambda r: [("a positive input", float(r.uniform(0.3, 1.5))),
                      ("a negative input", float(r.uniform(-2, -0.3))),
                      ("a large input (tanh saturates)", 20.0)], hint)


@graded("a01-relu", f"{SOURCE}:relu", points=2)
def check_relu(relu, rng):
    def hint(got, share, g, a):
        if a <= 0 and math.isclose(got, g, rel_tol=1e-9):
            return "relu passes gradient only where its input is > 0 (the gradient is 0 for a <= 0, also at 0)"
        return None
    _unary("relu", relu, rng, lambda a: max(a, 0.0), lambda a: 1.0 if a > 0 else 0.0,
           lambda r: [("a positive input", float(r.uniform(0.5, 2))), ("a negative input", float(r.uniform(-2, -0.5))),
                      ("an input of exactly 0", 0.0)], hint)


# --------------------------------------------------------------------------------------------
# Graphs for the graph walk, built with engine E's ops: the sandbox's (its reference ops, for
# the student's walk) or the reference here (for the expected gradients)
# --------------------------------------------------------------------------------------------
def _expression(E, rng):
    """A small tree-shaped expression: no node is used twice."""
    a, b, c, d = (E.Value(float(v)) for v in rng.uniform(-1, 1, size=4))
    return (a * b + c).tanh() * d, [a, b, c, d]


def _shared(E, rng):
    """Interior nodes used several times: t feeds three nodes, b feeds t and the output."""
    a, b, c = (E.Value(float(v)) for v in rng.uniform(0.5, 1.5, size=3))
    t = a * b + c
    return (t * t + t.tanh()) * b, [a, b, c]


def _neuron(E, rng):
    xs = [E.Value(float(v)) for v in rng.uniform(-1, 1, size=3)]
    ws = [E.Value(float(v)) for v in rng.uniform(-1, 1, size=3)]
    bias = E.Value(float(rng.uniform(-0.5, 0.5)))
    total = bias
    for w, x in zip(ws, xs, strict=False):
        total = total + w * x
    return total.tanh(), xs + ws + [bias]


def _ladder(E, depth: int):
    """A diamond ladder: every level uses the previous one twice, so 2^depth paths lead down."""
    x = E.Value(0.3)
    v = x
    for _ in range(depth):
        v = v * 0.5 + v * 0.25
    return v, [x]


def _chain(S, length: int):
    """x + 0.0 + 0.0 + ...: `length` additions, built by the sandbox in one request. Adding 0 makes
    every addition the same call (the kit answers a repeated call of a sealed op from its cache)."""
    x = S.Value(0.1)
    return chain_in_sandbox(sandbox_operator("add"), x, 0.0, length, every=False), [x]


def _known_chain(S, length: int) -> tuple:
    """A chain of additions of one shared constant, with its graph as `_graph` gives it, known as
    it is built (by the sandbox, in one request): walking 10 000 nodes through the sandbox would
    cost two requests per node."""
    x, zero = S.Value(0.1), S.Value(0.0)
    chain = chain_in_sandbox(sandbox_operator("add"), x, zero, length)
    nodes = [*chain, zero]
    children: dict[tuple[str, int], list] = {identity(x): [], identity(zero): []}
    for below, v in zip(chain, chain[1:], strict=False):
        children[identity(v)] = [identity(below), identity(zero)]
    return chain[-1], (nodes, children)


def _graph(root) -> tuple[list, dict]:
    """Every node `root` depends on (depth-first, children in order) and each node's children,
    by key. Through proxies each node's `_children` is fetched once."""
    seen, stack, nodes, children = set(), [root], [], {}
    while stack:
        n = stack.pop()
        k = identity(n)
        if k in seen:
            continue
        seen.add(k)
        nodes.append(n)
        kids = _children_of(n)
        children[k] = [identity(c) for c in kids]
        stack.extend(kids)
    return nodes, children


def _all_nodes(root) -> list:
    return _graph(root)[0]


LADDER_DEPTH = 26
CHAIN_LENGTH = 10_000
TIME_LIMIT = 3.0


def _slow(what: str) -> str:
    return (f"{what} took more than {TIME_LIMIT:g} s on a diamond ladder (each level uses the one below twice, "
            f"{LADDER_DEPTH} levels): that is exponential in the depth. Visit each node once: keep a visited set")


@graded("a01-topological-order", f"{SOURCE}:topological_order", points=3)
def check_topological_order(topological_order, rng):
    S = _S()
    f = topological_order
    leaf = S.Value(1.0)
    graphs = [("a single Value", (leaf, [leaf])), ("a tree-shaped expression", _expression(S, rng)),
              ("an expression that uses a value several times", _shared(S, rng)),
              ("a neuron tanh(w . x + b)", _neuron(S, rng))]
    for label, (root, _) in graphs:
        before = _graph(root)
        order = run(f"{label}: topological_order", f, root)
        _check_unchanged(before, root, label, "topological_order")
        _check_order(order, before, label)
    root, _ = _ladder(S, LADDER_DEPTH)
    before = _graph(root)
    with time_limit(TIME_LIMIT, _slow("topological_order")):
        order = run("a diamond ladder: topological_order", f, root)
    _check_order(order, before, "a diamond ladder")
    root, before = _known_chain(S, CHAIN_LENGTH)
    order = run(f"a chain of {CHAIN_LENGTH} additions: topological_order", f, root)
    _check_order(order, before, f"a chain of {CHAIN_LENGTH} additions")


def _check_unchanged(before: tuple[list, dict], root, label: str, what: str) -> None:
    """The graph below `root` is the one `before` recorded: the walk read it, and changed nothing.
    (Checked on the small graphs; on the big ones the order is judged against the graph as it was
    before the call, so cutting it gains nothing there.)"""
    if _graph(root)[1] != before[1]:
        raise GradingFailure(f"{label}: after {what} the graph is not the same (a node's _children changed): "
                             f"{what} must not change the graph, only read it")


def _check_order(order, before: tuple[list, dict], label: str) -> None:
    """`order` lists every node of the graph `before` held (taken before the call), each after its children."""
    S = _S()
    if not isinstance(order, (list, tuple)):
        raise GradingFailure(f"{label}: topological_order returned {type_name(order)}; return a list of Values")
    nodes, children = before
    keys = {identity(n) for n in nodes}
    # A node of the graph is a Value; anything else is asked of the sandbox (one request each).
    if not all(isinstance(v, Proxy) and (identity(v) in keys or isinstance(v, S.Value)) for v in order):
        raise GradingFailure(f"{label}: the list must contain the Values themselves")
    ids = [identity(v) for v in order]
    if len(set(ids)) != len(ids):
        raise GradingFailure(f"{label}: a node appears more than once; keep a visited set so each node is added once")
    if set(ids) != keys:
        missing = len(keys - set(ids))
        raise GradingFailure(f"{label}: {missing} node(s) the root depends on are missing"
                             if missing else f"{label}: the list contains Values the root does not depend on")
    position = {i: k for k, i in enumerate(ids)}
    for n, kids in children.items():
        for c in kids:
            if position[c] > position[n]:
                raise GradingFailure(f"{label}: a node comes before one of its children; add a node only after "
                                     "all of its children (post-order), so the root comes last")


@graded("a01-backward", f"{SOURCE}:backward", points=3)
def check_backward(backward, rng):
    f = backward
    S, R = _S(), _R()
    seed = int(rng.integers(1 << 30))
    builders = [("a tree-shaped expression", _expression), ("an expression that uses a value several times", _shared),
                ("a neuron tanh(w . x + b)", _neuron)]
    for label, build in builders:
        root, leaves = build(S, np.random.default_rng(seed))
        before = _graph(root)
        run(f"{label}: backward", f, root)
        _check_unchanged(before, root, label, "backward")
        got = [n.grad for n in before[0]]
        ref_root, _ = build(R, np.random.default_rng(seed))
        R.backward(ref_root)
        want = [n.grad for n in _all_nodes(ref_root)]
        _compare_backward(got, want, root, ref_root, label, shared=build is not _expression)
    root, leaves = _ladder(S, LADDER_DEPTH)
    with time_limit(TIME_LIMIT, _slow("backward")):
        run("a diamond ladder: backward", f, root)
    ref_root, ref_leaves = _ladder(R, LADDER_DEPTH)
    R.backward(ref_root)
    _compare_backward([leaves[0].grad], [ref_leaves[0].grad], root, ref_root, "a diamond ladder", shared=True)
    root, leaves = _chain(S, CHAIN_LENGTH)
    run(f"a chain of {CHAIN_LENGTH} additions: backward", f, root)
    if leaves[0].grad != 1.0:
        raise GradingFailure(f"a chain of {CHAIN_LENGTH} additions: the input's gradient is wrong: call every "
                             "node's _backward once, in reverse topological order, after seeding the root with 1")


def _number(g) -> bool:
    """A real number of any kind: the contract says "seed the root with 1", so 1 and 1.0 both do."""
    return isinstance(g, (int, float, np.integer, np.floating)) and not isinstance(g, bool)


def _compare_backward(got, want, root, ref_root, label: str, shared: bool) -> None:
    if all(_number(g) and math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12) for g, w in zip(got, want, strict=False)):
        return
    if not all(_number(g) for g in got):
        raise GradingFailure(f"{label}: every grad must stay a number; one became "
                             f"{type_name(next(g for g in got if not _number(g)))}")
    if root.grad != 1.0:
        raise GradingFailure(f"{label}: the root's gradient must be 1 after backward (d root / d root = 1): "
                             "seed it before walking the graph")
    if all(g == 0 for g in got[1:]):
        raise GradingFailure(f"{label}: no gradient reached the inputs: call every node's _backward, from the "
                             "root towards the leaves (reverse topological order)")
    if shared and any(abs(g) > abs(w) * (1 + 1e-9) + 1e-12 for g, w in zip(got, want, strict=False)):
        raise GradingFailure(f"{label}: some gradients are too large: a shared node sent its gradient back more "
                             "than once. Call each node's _backward exactly once, in reverse topological order")
    raise GradingFailure(f"{label}: wrong gradients; call each node's _backward once, in reverse topological "
                         "order, so a node sends gradient back only after all of its users have sent theirs")


# ============================================================================================
# Part 2: the tensor engine's graph walk (`solutions/graph.py`): toposort, run_backward, no_grad
# ============================================================================================
# Graphs are built in the sandbox with its engine (the reference ops there, and the student's
# answer plugged into `graph`), and the same graphs here with the reference engine give the
# expected gradients. Only arrays, numbers and strings cross; nodes are known by identity().
GRAPH = "solutions.graph"
TENSOR_CHAIN = 5_000  # Python's recursion limit is 1 000: a recursive walk fails long before
TENSOR_LADDER = 24


def _T():
    """The sandbox's engine (`coursekit.engine`, the student's answer plugged into its graph module)."""
    return student_engine()


def _call(obj, name: str, *args):
    """`obj.name(*args)` in the sandbox, the result as it is (a proxy's `with` drops __exit__'s result)."""
    return student_engine_session().request("method", obj, name, *args)


def _raised(f, *args, **kwargs):
    """The exception student code raised (a StudentError), or None if it returned."""
    try:
        f(*args, **kwargs)
    except StudentError as error:
        return error
    return None


def _array(t):
    """A tensor's data as a float64 array (None for None). A sandbox value that is not a Tensor
    (the student stored something else in .grad) is a failure that says so."""
    if t is None:
        return None
    if isinstance(t, Proxy) and not isinstance(t, _T().Tensor) or isinstance(t, (int, float, np.ndarray)):
        raise GradingFailure(f".grad holds {type_name(t)}; store a Tensor there, built with the engine's operations "
                             "(g.clone(), add_grads)")
    return np.array(t.data, dtype=np.float64)


def _same(got, want) -> bool:
    return got is not None and want is not None and close(got, want)


# --------------------------------------------------------------------------------------------
# toposort
# --------------------------------------------------------------------------------------------
def _tensor_graph(roots) -> tuple[dict, dict, set]:
    """The grad-requiring tensors the roots depend on (key -> proxy), each one's grad-requiring
    inputs (key -> [keys]) and the keys of the constants met on the way."""
    nodes, inputs, constants = {}, {}, set()
    stack = list(roots)
    while stack:
        t = stack.pop()
        k = identity(t)
        if k in nodes or k in constants:
            continue
        if not t.requires_grad:
            constants.add(k)
            continue
        nodes[k] = t
        fn = t.grad_fn
        parents = list(fn.inputs) if fn is not None else []
        inputs[k] = [identity(p) for p in parents]
        stack.extend(parents)
    for k in list(inputs):
        inputs[k] = [p for p in inputs[k] if p in nodes]
    return nodes, inputs, constants


def _topo_graphs(E, rng):
    """(label, roots) of the graphs toposort is tried on, built with engine E."""
    def leaf(*shape, grad=True):
        return E.Tensor(rng.uniform(0.5, 1.5, size=shape), requires_grad=grad)

    single = leaf(2)
    a, b, c = leaf(2), leaf(2), leaf(2, grad=False)
    f, g = a * b, b + c
    tree = (f * g).tanh()
    h = a * b
    shared = (h * h + h.tanh() * b).sum()
    u = E.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    v = E.Tensor(np.array([1.0, 2.0]), requires_grad=True)  # equal values, a different tensor
    twins = u * v + v
    y, z = a * b + b, (a * b).exp()
    detached = (a * b).detach() * a
    return [("a single leaf", [single]),
            ("an expression with a constant (a tensor that does not require grad)", [tree]),
            ("an expression that uses a tensor several times", [shared]),
            ("two different tensors with equal values", [twins]),
            ("two roots that share part of their graph", [y, z]),
            ("a graph cut by detach()", [detached])]


def _topo_hint(error) -> str | None:
    if "ambiguous" in str(error):
        return ("`t in a_list` compares tensors with ==, which is elementwise; keep a set of id(t) instead")
    return None


@graded("a01-toposort", f"{GRAPH}:toposort", points=3)
def check_toposort(toposort, rng):
    S = _T()
    f = toposort
    for label, roots in _topo_graphs(S, rng):
        before = _tensor_graph(roots)
        order = run(f"{label}: toposort", f, roots, hint=_topo_hint)
        after = _tensor_graph(roots)
        if (set(after[0]), after[1], after[2]) != (set(before[0]), before[1], before[2]):
            raise GradingFailure(f"{label}: after toposort the graph is not the same (a tensor's grad_fn or its "
                                 "inputs changed): toposort must not change the graph, only read it")
        _check_tensor_order(order, before, label)
    # The big graphs: known as they are built (no walk through the sandbox), and judged against
    # that graph, so an answer that cuts it gains nothing.
    x = S.Tensor(np.array([0.5]), requires_grad=True)
    nodes, inputs, top = {identity(x): x}, {identity(x): []}, x
    for _ in range(TENSOR_LADDER):
        left, right = top * 0.5, top * 0.5
        below, top = top, left + right
        for t, parents in ((left, [below]), (right, [below]), (top, [left, right])):
            nodes[identity(t)] = t
            inputs[identity(t)] = [identity(p) for p in parents]
    with time_limit(TIME_LIMIT, _slow_tensors("toposort")):
        order = run("a diamond ladder: toposort", f, [top], hint=_topo_hint)
    _check_length(order, len(nodes), "a diamond ladder")
    _check_tensor_order(order, (nodes, inputs, set()), "a diamond ladder")
    chain = _tensor_chain(S, TENSOR_CHAIN)
    nodes = {identity(t): t for t in chain}
    inputs = {identity(x): [identity(below)] for below, x in zip(chain, chain[1:], strict=False)}
    inputs[identity(chain[0])], top = [], chain[-1]
    order = run(f"a chain of {TENSOR_CHAIN} ops: toposort", f, [top], hint=_topo_hint)
    _check_length(order, len(nodes), f"a chain of {TENSOR_CHAIN} ops")
    _check_tensor_order(order, (nodes, inputs, set()), f"a chain of {TENSOR_CHAIN} ops")


def _tensor_chain(S, length: int, x=None, *, every: bool = True):
    """x + 0 + 0 + ...: `length` ops, built by the sandbox in one request. The op is the engine's
    own GradSum (a + b, gradient to both), not an exercise: a walk of 5 000 nodes then costs no
    request to the judge either (an exercise's op is sealed: one request per call)."""
    if x is None:
        x = S.Tensor(np.array([0.5]), requires_grad=True)
    return chain_in_sandbox(S.graph.GradSum.apply, x, np.zeros(1), length, every=every)


def _slow_tensors(what: str) -> str:
    return (f"{what} took more than {TIME_LIMIT:g} s on a diamond ladder (each level uses the one below twice, "
            f"{TENSOR_LADDER} levels): that is exponential in the depth. Visit each tensor once: keep a set of "
            "the ids of the tensors already visited")


def _check_length(order, n: int, label: str) -> None:
    if not isinstance(order, (list, tuple)):
        raise GradingFailure(f"{label}: toposort returned {type_name(order)}; return a list of Tensors")
    if len(order) != n:
        raise GradingFailure(f"{label}: the list must hold each of the {n} tensors once, got {len(order)} entries"
                             + ("; keep a set of visited tensors" if len(order) > n else ""))


def _check_tensor_order(order, graph: tuple[dict, dict, set], label: str) -> None:
    """`order` lists every tensor of `graph` (the roots' graph, taken before the call), each after its inputs."""
    S = _T()
    if not isinstance(order, (list, tuple)):
        raise GradingFailure(f"{label}: toposort returned {type_name(order)}; return a list of Tensors")
    nodes, inputs, constants = graph
    if not all(isinstance(t, Proxy) and (identity(t) in nodes or identity(t) in constants or isinstance(t, S.Tensor))
               for t in order):
        raise GradingFailure(f"{label}: the list must contain the Tensors themselves")
    keys = [identity(t) for t in order]
    if len(set(keys)) != len(keys):
        raise GradingFailure(f"{label}: a tensor appears more than once; keep a set of the tensors already "
                             "visited (by id(t)) so that each is added once")
    if set(keys) & constants:
        raise GradingFailure(f"{label}: the list contains a tensor that does not require grad (a constant); "
                             "leave such tensors out, no gradient flows to them")
    if set(keys) - set(nodes):
        raise GradingFailure(f"{label}: the list contains tensors the roots do not depend on")
    missing = set(nodes) - set(keys)
    if missing:
        hint = (": tensors with equal values are still different tensors, so key the visited set by id(t) "
                "(Tensor's == compares values)") if label.startswith("two different tensors") else ""
        raise GradingFailure(f"{label}: {len(missing)} tensor(s) the roots depend on are missing{hint}")
    position = {k: i for i, k in enumerate(keys)}
    for k, parents in inputs.items():
        if any(position[p] > position[k] for p in parents):
            raise GradingFailure(f"{label}: a tensor comes before one of its inputs; add a tensor only after all "
                                 "of its inputs (post-order), so that each root comes after everything it "
                                 "depends on")


# --------------------------------------------------------------------------------------------
# run_backward
# --------------------------------------------------------------------------------------------
def _bw_hint(error) -> str | None:
    if "second time" in str(error):
        return ("a Function was asked for its backward after it was freed: it was freed before its backward ran, "
                "or the walk reached it twice (once per path to it). Process each tensor once, in reverse "
                "toposort order, and free its Function only after input_grads(fn, g) has run it")
    return None


def _backward(label: str, root, *args, **kwargs) -> None:
    run(f"{label}: backward", lambda: root.backward(*args, **kwargs), hint=_bw_hint)


def _leaf_data(rng, n: int, shape=(3,)) -> list[np.ndarray]:
    return [rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1, 1], size=shape) for _ in range(n)]


def _tree(E, data):
    """sum(tanh(a * b + c)): every tensor is used once."""
    a, b, c = (E.Tensor(d.copy(), requires_grad=True) for d in data)
    return (a * b + c).tanh().sum(), [a, b, c]


def _shared_use(E, data):
    """h = a * b feeds three ops and b feeds two: their gradients must add up."""
    a, b, _ = (E.Tensor(d.copy(), requires_grad=True) for d in data)
    h = a * b
    return (h * h + h.tanh() * b).sum(), [a, b]


def _compare_leaves(label: str, build, data, failure: str) -> None:
    S, R = _T(), reference_engine()
    root, leaves = build(S, data)
    _backward(label, root)
    got = [_array(t.grad) for t in leaves]
    ref_root, ref_leaves = build(R, data)
    ref_root.backward()
    want = [_array(t.grad) for t in ref_leaves]
    if all(_same(g, w) for g, w in zip(got, want, strict=False)):
        return
    if all(g is None for g in got):
        raise GradingFailure(f"{label}: no gradient reached the leaves: walk the tensors in reverse topological "
                             "order (reversed(toposort(roots))), so that each tensor is processed after every op "
                             "that uses it, and store a leaf's gradient in its .grad")
    if any(g is not None and g.shape != w.shape for g, w in zip(got, want, strict=False)):
        raise GradingFailure(f"{label}: a leaf's .grad does not have the leaf's shape")
    raise GradingFailure(f"{label}: {failure}")


@graded("a01-run-backward", f"{GRAPH}:run_backward", points=5)
def check_run_backward(run_backward, rng):
    S, R = _T(), reference_engine()
    data = _leaf_data(rng, 3)
    _compare_leaves("a tree-shaped expression", _tree, data,
                    "wrong gradients: seed each root, then for each tensor in reversed(toposort(roots)) send the "
                    "gradient it received through input_grads(fn, g) to its inputs")
    _compare_leaves("an expression that uses a tensor several times", _shared_use, data,
                    "the gradients of a tensor used by several ops must add up: accumulate what arrives for "
                    "a tensor (add_grads(total, g)) instead of overwriting it")
    _check_seed(S, rng)
    _check_accumulation_and_retain_grad(S, data)
    _check_several_roots(run_backward, S, R, data)
    _check_owned_grads(S, data)
    _check_gradient_shapes(S)
    _check_freeing(S, data)
    _check_create_graph(S, rng)
    _check_deep(S)


def _check_seed(S, rng) -> None:
    label = "backward() of a one-element float32 leaf of shape (1, 1)"
    x = S.Tensor(np.array([[1.5]], dtype=np.float32), requires_grad=True)
    _backward(label, x)
    g = x.grad
    got = _array(g)
    if got is None or got.shape != (1, 1) or np.asarray(g.data).dtype != np.float32 or got[0, 0] != 1.0:
        raise GradingFailure(f"{label}: without grads, seed each root with ones of the root's own shape and dtype "
                             "(np.ones_like(root.data)): the leaf's .grad must be that seed")
    label = "backward(grad) of a non-scalar output"
    data = rng.uniform(0.5, 1.5, size=3)
    upstream = rng.standard_normal(3)
    a = S.Tensor(data.copy(), requires_grad=True)
    _backward(label, a * 3.0, upstream)
    if not _same(_array(a.grad), 3.0 * upstream):
        raise GradingFailure(f"{label}: grads[i] is the gradient of roots[i]: start the walk from it")


def _check_accumulation_and_retain_grad(S, data) -> None:
    label = "two backward calls on graphs that share a leaf"
    a = S.Tensor(data[0].copy(), requires_grad=True)
    _backward(label, (a * a).sum())
    _backward(label, (a * 3.0).sum())
    if not _same(_array(a.grad), 2 * data[0] + 3.0):
        raise GradingFailure(f"{label}: a leaf's .grad accumulates across backward calls (only zero_grad() resets "
                             "it): add the new gradient to the .grad it already has")
    label = "an intermediate tensor, without retain_grad()"
    a, b = (S.Tensor(d.copy(), requires_grad=True) for d in data[:2])
    h = a * b
    _backward(label, h.tanh().sum())
    if h.grad is not None:
        raise GradingFailure(f"{label}: only leaves (and tensors on which retain_grad() was called) keep a .grad "
                             "after backward; an intermediate tensor's gradient is needed only during the walk")
    label = "an intermediate tensor with retain_grad()"
    a, b = (S.Tensor(d.copy(), requires_grad=True) for d in data[:2])
    h = a * b
    h.retain_grad()
    _backward(label, h.tanh().sum())
    want = 1 - np.tanh(data[0] * data[1]) ** 2
    if not _same(_array(h.grad), want):
        raise GradingFailure(f"{label}: a tensor with retains_grad set keeps its gradient in .grad, like a leaf")
    label = "an expression with a constant (a tensor that does not require grad)"
    a, c = S.Tensor(data[0].copy(), requires_grad=True), S.Tensor(data[1].copy())
    _backward(label, (a * c + c).sum())
    if c.grad is not None:
        raise GradingFailure(f"{label}: the constant received a .grad; only tensors that require grad get one")


def _check_several_roots(f, S, R, data) -> None:
    label = "run_backward([y, z, y]): several roots, one listed twice"
    results = []
    for E, call in ((S, lambda roots: run(f"{label}: run_backward", f, roots, hint=_bw_hint)),
                    (R, R.run_backward)):
        a = E.Tensor(data[0].copy(), requires_grad=True)
        y, z = (a * 3.0).sum(), (a * a).sum()
        call([y, z, y])
        results.append(_array(a.grad))
    if not _same(*results):
        raise GradingFailure(f"{label}: every root starts with its own gradient (ones without grads), and a root "
                             "listed twice counts twice: add the seeds up as any other gradients")


def _check_owned_grads(S, data) -> None:
    label = "a + b, both leaves"
    a, b = (S.Tensor(d.copy(), requires_grad=True) for d in data[:2])
    _backward(label, (a + b).sum())
    if a.grad is not None and same_object(a.grad, b.grad):
        raise GradingFailure(f"{label}: a.grad and b.grad are the same Tensor (Add sends one gradient to both "
                             "inputs), so changing one changes the other; the first time, store g.clone(), a "
                             "copy that owns its data")
    label = "backward(grad) of a leaf"
    c = S.Tensor(data[0].copy(), requires_grad=True)
    seed = S.Tensor(np.ones(3))
    _backward(label, c, seed)
    if same_object(c.grad, seed):
        raise GradingFailure(f"{label}: c.grad is the very Tensor passed as grad; store g.clone(), a copy that "
                             "owns its data")


def _check_freeing(S, data) -> None:
    label = "a second backward through the same graph"
    a, b = (S.Tensor(d.copy(), requires_grad=True) for d in data[:2])
    y = (a * b).sum()
    _backward(label, y)
    error = _raised(y.backward)
    if error is None:
        raise GradingFailure(f"{label}: without retain_graph the graph is used up: call fn.free() on each "
                             "Function after its backward ran, so that a second backward through it fails (as "
                             "in PyTorch; input_grads refuses a freed Function) instead of silently using it again")
    if "second time" not in str(error):
        raise GradingFailure(f"{label}: the second backward must fail because the graph was freed, but it raised "
                             f"{error.remote_type}: {str(error)[:200]}")
    label = "backward(retain_graph=True), then backward again"
    a, b = (S.Tensor(d.copy(), requires_grad=True) for d in data[:2])
    y = (a * b).sum()
    _backward(label, y, retain_graph=True)
    error = _raised(y.backward)
    if error is not None:
        if "second time" in str(error):
            raise GradingFailure(f"{label}: retain_graph=True must keep the graph: free the Functions only when "
                                 "retain_graph is False")
        run(f"{label}: backward", y.backward)
    if not _same(_array(a.grad), 2 * data[1]):
        raise GradingFailure(f"{label}: after two backward passes a.grad must hold both gradients")


def _check_create_graph(S, rng) -> None:
    label = "the second derivative of tanh (backward with create_graph=True, then backward of the gradient)"
    values = rng.uniform(-2, 2, size=5)
    x = S.Tensor(values.copy(), requires_grad=True)
    _backward(label, x.tanh().sum(), create_graph=True)
    d1 = x.grad
    if _array(d1) is None or not d1.requires_grad or d1.grad_fn is None:
        raise GradingFailure(f"{label}: with create_graph=True the gradients must themselves be graph tensors: run "
                             "the walk inside set_grad_enabled(create_graph) and build every gradient with the "
                             "engine's operations (clone, add_grads), never from .data")
    x.grad = None
    _backward(label, d1.sum())
    t = np.tanh(values)
    if not _same(_array(x.grad), -2 * t * (1 - t * t)):
        raise GradingFailure(f"{label}: wrong second derivative: with create_graph=True the walk must be recorded "
                             "(set_grad_enabled(create_graph)) and every gradient built with the engine's operations")
    label = ("a Hessian-vector product of f(x) = x.Ax / 2 + sum(x^4) / 4, where x is used several times "
             "(backward with create_graph=True, then backward of grad . v)")
    n = 4
    A, v, x0 = rng.standard_normal((n, n)), rng.standard_normal(n), rng.standard_normal(n)
    x = S.Tensor(x0.copy(), requires_grad=True)
    fx = 0.5 * (x @ (S.Tensor(A) @ x)) + 0.25 * (x ** 4).sum()
    _backward(label, fx, create_graph=True)
    gx = x.grad
    if _array(gx) is None or not gx.requires_grad:
        raise GradingFailure(f"{label}: x.grad is not a graph tensor. The gradients arriving at a tensor used "
                             "several times must be summed with the engine's operations (add_grads), not from "
                             ".data, so that the sum can itself be differentiated")
    x.grad = None
    _backward(label, (gx * S.Tensor(v)).sum())
    want = ((A + A.T) / 2 + np.diag(3 * x0 ** 2)) @ v
    if not _same(_array(x.grad), want):
        raise GradingFailure(f"{label}: wrong Hessian-vector product. The gradients arriving at a tensor used "
                             "several times must be summed with the engine's operations (add_grads), not from "
                             ".data, so that the sum can itself be differentiated")


def _check_gradient_shapes(S) -> None:
    label = "an op whose backward returns a gradient of the wrong shape"
    # A Sum whose backward (Neg's) hands back the output's shape, not the input's.
    Squash = sandbox_type(S.Function)("Squash", (S.ops.Sum,), {"backward": S.ops.Neg.backward})
    x = S.Tensor(np.ones((2, 3)), requires_grad=True)
    y = Squash.apply(x, axes=(0,), keepdims=False).sum()
    error = _raised(y.backward)
    if error is None or "Squash" not in str(error):
        raise GradingFailure(f"{label}: backward must stop with an error that names the op; send every "
                             "Function's gradients through input_grads(fn, g), which checks them")


def _check_deep(S) -> None:
    x = S.Tensor(np.array([0.5]), requires_grad=True)
    top = x
    for _ in range(TENSOR_LADDER):
        top = top * 0.5 + top * 0.5
    with time_limit(TIME_LIMIT, _slow_tensors("backward")):
        _backward("a diamond ladder", top)
    if not _same(_array(x.grad), np.ones(1)):
        raise GradingFailure("a diamond ladder: wrong gradient; process each tensor once, after all its consumers")
    x = S.Tensor(np.array([0.5]), requires_grad=True)
    top = _tensor_chain(S, TENSOR_CHAIN, x, every=False)
    _backward(f"a chain of {TENSOR_CHAIN} ops", top)
    if not _same(_array(x.grad), np.ones(1)):
        raise GradingFailure(f"a chain of {TENSOR_CHAIN} ops: the input's gradient is wrong: process each tensor "
                             "once, in reversed(toposort(roots)), passing on the gradient it received")


# --------------------------------------------------------------------------------------------
# no_grad
# --------------------------------------------------------------------------------------------
@graded("a01-no-grad", f"{GRAPH}:no_grad", regions=("__enter__", "__exit__"), points=2)
def check_no_grad(no_grad, rng):
    S = _T()
    x = S.Tensor(rng.uniform(0.5, 1.5, size=3), requires_grad=True)
    label = "a no_grad block"
    ctx = run(f"{label}: no_grad()", no_grad)
    run(f"{label}: entering it", _call, ctx, "__enter__")
    inside, y = S.is_grad_enabled(), x * 2.0
    result = run(f"{label}: leaving it", _call, ctx, "__exit__", None, None, None)
    after = S.is_grad_enabled()
    S.set_grad_enabled(True)
    if inside or y.requires_grad:
        raise GradingFailure(f"{label}: inside the block ops must record nothing: switch recording off in "
                             "__enter__ (set_grad_enabled(False))")
    if not after:
        raise GradingFailure(f"{label}: leaving the block must switch recording back on (restore the mode that "
                             "was on before it)")
    if result:
        raise GradingFailure(f"{label}: __exit__ returned a true value, which swallows any exception raised in "
                             "the block; return nothing")

    label = "two nested no_grad blocks"
    outer, inner = run(f"{label}: no_grad()", no_grad), run(f"{label}: no_grad()", no_grad)
    run(f"{label}: entering the outer block", _call, outer, "__enter__")
    run(f"{label}: entering the inner block", _call, inner, "__enter__")
    innermost, y = S.is_grad_enabled(), x * x
    run(f"{label}: leaving the inner block", _call, inner, "__exit__", None, None, None)
    between = S.is_grad_enabled()
    run(f"{label}: leaving the outer block", _call, outer, "__exit__", None, None, None)
    after = S.is_grad_enabled()
    S.set_grad_enabled(True)
    if innermost or y.requires_grad:
        raise GradingFailure(f"{label}: inside the inner block ops recorded again: __enter__ must switch recording "
                             "off whatever mode is on (set_grad_enabled(False)), not flip it")
    if between:
        raise GradingFailure(f"{label}: leaving the inner block switched recording on inside the outer block; "
                             "__exit__ must restore the mode that was on before (remember it in __enter__)")
    if not after:
        raise GradingFailure(f"{label}: leaving the outer block must switch recording back on; each block "
                             "remembers its own previous mode (on self, not on the class)")

    label = "a no_grad block entered while recording is already off"
    S.set_grad_enabled(False)
    ctx = run(f"{label}: no_grad()", no_grad)
    run(f"{label}: entering it", _call, ctx, "__enter__")
    inside = S.is_grad_enabled()
    run(f"{label}: leaving it", _call, ctx, "__exit__", None, None, None)
    after = S.is_grad_enabled()
    S.set_grad_enabled(True)
    if inside:
        raise GradingFailure(f"{label}: inside the block recording was on: __enter__ must switch recording off "
                             "whatever mode is on (set_grad_enabled(False)), not flip it")
    if after:
        raise GradingFailure(f"{label}: leaving it must restore the previous mode, which was off, not switch "
                             "recording on")

    label = "a no_grad block in which an exception is raised"
    # The given decorator runs the function inside `with no_grad():`; Tensor.item raises in it.
    decorated = run(f"{label}: no_grad() as a decorator", lambda: no_grad()(S.Tensor(np.ones(2)).item),
                    hint=lambda e: ("keep the given base class, class no_grad(GradMode): it makes @no_grad() work"
                                    if "not callable" in str(e) else None))
    error = _raised(decorated)
    after = S.is_grad_enabled()
    S.set_grad_enabled(True)
    if error is None:
        raise GradingFailure(f"{label}: the exception disappeared: __exit__ must not return a true value (that "
                             "swallows the exception)")
    if not after:
        raise GradingFailure(f"{label}: the previous mode must come back even when the block raises: __exit__ "
                             "runs then too, restore the mode whatever its arguments say")
