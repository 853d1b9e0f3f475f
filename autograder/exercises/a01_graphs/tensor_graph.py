"""Hidden checks of a01_graphs: Part 2, the tensor engine's graph walk: toposort, run_backward, no_grad."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    Proxy,
    StudentError,
    chain_in_sandbox,
    close,
    graded,
    identity,
    reference_engine,
    run,
    same_object,
    sandbox_type,
    student_engine,
    student_engine_session,
    time_limit,
    type_name,
)

from .common import TIME_LIMIT

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


@graded("a01-toposort", f"{GRAPH}:toposort", points=3, diagnose=("the backward walk",))
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


@graded("a01-run-backward", f"{GRAPH}:run_backward", points=5, drives=("a02",), diagnose=("the backward walk",))
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
@graded("a01-no-grad", f"{GRAPH}:no_grad", regions=("__enter__", "__exit__"), points=2, diagnose=("the backward walk",))
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
