"""Hidden checks of a01_graphs: Part 1, the scalar engine: the ops of Value and the graph walk."""
from __future__ import annotations

import math

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    Proxy,
    chain_in_sandbox,
    graded,
    identity,
    run,
    same_object,
    sandbox_operator,
    time_limit,
    type_name,
)

from .common import _R, _S, SOURCE, TIME_LIMIT, _callable, _children_of, _data


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


@graded("a01-add", f"{SOURCE}:add", points=2, diagnose=("the backward walk",))
def check_add(add, rng):
    for label, args in _binary_cases(rng):
        _op_case(add, "add", label, args, lambda a, b: a + b, lambda a, b: (1.0, 1.0), rng)


@graded("a01-mul", f"{SOURCE}:mul", points=2, diagnose=("the backward walk",))
def check_mul(mul, rng):
    def hint(got, share, g, a, b):
        if math.isclose(got, a * g, rel_tol=1e-9):
            return "the inputs are swapped: d(ab)/da = b, so a's gradient is b.data * out.grad"
        return None

    for label, args in _binary_cases(rng):
        _op_case(mul, "mul", label, args, lambda a, b: a * b, lambda a, b: (b, a), rng, hint)


@graded("a01-power", f"{SOURCE}:power", points=2, diagnose=("the backward walk",))
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


@graded("a01-exp", f"{SOURCE}:exp", points=2, diagnose=("the backward walk",))
def check_exp(exp, rng):
    def hint(got, share, g, a):
        if math.isclose(got, a * g, rel_tol=1e-9):
            return "exp'(a) = exp(a), the output: use out.data, not the input a.data"
        return None
    _unary("exp", exp, rng, math.exp, math.exp,
           lambda r: [("a positive input", float(r.uniform(0.5, 2))), ("a negative input", float(r.uniform(-3, -0.5)))],
           hint)


@graded("a01-tanh", f"{SOURCE}:tanh", points=2, diagnose=("the backward walk",))
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


@graded("a01-relu", f"{SOURCE}:relu", points=2, diagnose=("the backward walk",))
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


def _exponential(what: str) -> str:
    return (f"{what} took more than {TIME_LIMIT:g} s on a diamond ladder (each level uses the one below twice, "
            f"{LADDER_DEPTH} levels): that is exponential in the depth. Visit each node once: keep a visited set")


@graded("a01-topological-order", f"{SOURCE}:topological_order", points=3, diagnose=("the backward walk",))
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
    with time_limit(TIME_LIMIT, _exponential("topological_order")):
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


@graded("a01-backward", f"{SOURCE}:backward", points=3, diagnose=("the backward walk",))
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
    with time_limit(TIME_LIMIT, _exponential("backward")):
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
