"""The computation graph: Tensor, Function, backward (chapter 1, `book/01_graphs.md`).

What a reader of the chapter can check here: the worked example by hand, gradients that
accumulate, a backward pass that visits every node exactly once (no exponential blow-up on
shared subgraphs, no recursion limit on long chains), PyTorch's autograd rules (retain_graph,
retain_grad, no_grad, leaves, detach), dtype rules, and gradients of gradients. The walk itself
(`toposort`, `run_backward`, `no_grad`: a01's exercises) relies on the graph module's given
helpers only (`input_grads`, `add_grads`, `Tensor.clone`), never on an op's backward.
"""
from __future__ import annotations

import collections
import gc
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import solutions
from solutions import Function, Tensor, enable_grad, grad, is_grad_enabled, no_grad, override, topological_order
from solutions.graph import GradSum, add_grads, input_grads, set_grad_enabled, toposort
from solutions.ops import Add
from solutions.testing import assert_close, gradcheck


def scalar(v: float, requires_grad: bool = True) -> Tensor:
    return Tensor(np.float64(v), requires_grad=requires_grad)


# --------------------------------------------------------------------------------------------
# The worked example, by hand
# --------------------------------------------------------------------------------------------
class TestWorkedExample:
    """y = (a + b) * (b + c) at a=2, b=3, c=4: f = a+b = 5, g = b+c = 7, y = f g = 35."""

    def test_values_and_gradients(self):
        a, b, c = scalar(2.0), scalar(3.0), scalar(4.0)
        f, g = a + b, b + c
        y = f * g
        assert (f.item(), g.item(), y.item()) == (5.0, 7.0, 35.0)
        y.backward()
        # dy/da = g, dy/dc = f, and b feeds both factors, so dy/db = g + f.
        assert (a.grad.item(), b.grad.item(), c.grad.item()) == (7.0, 12.0, 5.0)
        # Intermediate (non-leaf) tensors keep no gradient unless asked to.
        assert f.grad is None and g.grad is None

    def test_graph_structure(self):
        a, b, c = scalar(2.0), scalar(3.0), scalar(4.0)
        f, g = a + b, b + c
        y = f * g
        assert y.grad_fn.name == "Mul" and y.grad_fn.inputs == (f, g)
        assert f.grad_fn.name == "Add" and f.grad_fn.inputs == (a, b)
        assert a.is_leaf and a.grad_fn is None and not y.is_leaf
        order = topological_order([y])
        assert order[-1] is y
        assert {id(t) for t in order} == {id(t) for t in (a, b, c, f, g, y)}

    def test_retain_grad_shows_the_intermediate_gradients(self):
        a, b, c = scalar(2.0), scalar(3.0), scalar(4.0)
        f, g = a + b, b + c
        f.retain_grad()
        g.retain_grad()
        y = f * g
        y.backward()
        assert f.retains_grad and (f.grad.item(), g.grad.item()) == (7.0, 5.0)


# --------------------------------------------------------------------------------------------
# Accumulation
# --------------------------------------------------------------------------------------------
class TestAccumulation:
    def test_shared_node_sums_its_paths(self):
        x = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
        (x * x + x + x * 3.0).sum().backward()
        assert_close(x.grad, 2 * x.data + 1 + 3)

    def test_same_tensor_twice_in_one_op(self):
        x = scalar(3.0)
        (x * x).backward()
        assert x.grad.item() == 6.0
        y = scalar(3.0)
        (y + y + y).backward()
        assert y.grad.item() == 3.0

    def test_across_backward_calls_until_zero_grad(self):
        x = scalar(2.0)
        (x * x).backward()
        (x * 5.0).backward()
        assert x.grad.item() == 4.0 + 5.0
        x.zero_grad()
        assert x.grad is None
        (x * x * x).backward()
        assert x.grad.item() == 12.0

    def test_leaf_gradient_is_owned_and_writable(self):
        # Add passes its gradient on unchanged and sum's backward broadcasts (a read-only view):
        # the stored .grad must still be a separate, writable array (optimizers update in place).
        a = Tensor(np.ones((2, 3)), requires_grad=True)
        b = Tensor(np.ones((2, 3)), requires_grad=True)
        (a + b).sum().backward()
        assert a.grad is not b.grad and not np.shares_memory(a.grad.data, b.grad.data)
        assert a.grad.data.flags.writeable
        a.grad.data *= 0.5
        assert_close(b.grad, np.ones((2, 3)))
        seed = Tensor(np.ones(3))
        c = Tensor(np.ones(3), requires_grad=True)
        (c * 1.0).backward(seed)
        c.grad.data[:] = 7.0
        assert_close(seed, np.ones(3))

    def test_multiple_roots_and_duplicate_roots(self):
        x = scalar(2.0)
        y, z = x * 3.0, x * x
        solutions.run_backward([y, z, y])
        assert x.grad.item() == 3.0 + 4.0 + 3.0


# --------------------------------------------------------------------------------------------
# Each node once: the diamond ladder and the long chain
# --------------------------------------------------------------------------------------------
BACKWARD_CALLS: collections.Counter = collections.Counter()


class Half(Function):
    """x / 2, counting how often its backward runs (per node)."""

    def forward(self, x):
        return 0.5 * x

    def backward(self, grad):
        BACKWARD_CALLS[id(self)] += 1
        return grad * 0.5


class CountingAdd(Add):
    def backward(self, grad):
        BACKWARD_CALLS[id(self)] += 1
        return super().backward(grad)


def test_diamond_ladder_visits_each_node_once():
    """x_{k+1} = f(x_k) + g(x_k), 60 times. A backward that recursed into every input without
    remembering what it had visited would run 2^60 backward calls; ours runs one per node."""
    BACKWARD_CALLS.clear()
    x0 = scalar(1.5)
    with override(Add=CountingAdd):
        x = x0
        for _ in range(60):
            x = Half.apply(x) + Half.apply(x)
        x.backward()
    assert len(BACKWARD_CALLS) == 60 * 3  # two Halves and one Add per level
    assert set(BACKWARD_CALLS.values()) == {1}
    assert x.item() == 1.5 and x0.grad.item() == 1.0  # each level: d/dx (x/2 + x/2) = 1
    assert len(topological_order([x])) == 60 * 3 + 1


@pytest.mark.slow
def test_long_chain_has_no_recursion_limit():
    n = 100_000
    assert n > 10 * sys.getrecursionlimit()
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    one = Tensor(1.0)
    y = x
    for i in range(n):
        y = y * one if i % 2 else y + one
    assert_close(y, x.data + n // 2)
    order = topological_order([y])
    assert len(order) == n + 1 and order[0] is x and order[-1] is y
    y.sum().backward()
    assert_close(x.grad, np.ones(2))
    del y, order
    gc.collect()  # freeing a 100 000-deep graph must not overflow the C stack either


# --------------------------------------------------------------------------------------------
# topological_order on random graphs
# --------------------------------------------------------------------------------------------
@st.composite
def random_programs(draw, ops=("mean", "mul", "tanh", "neg", "detach")):
    """A random DAG as a program: leaf values, which leaves require grad, and a list of ops, each
    reading one or two earlier nodes. Every value stays in [-1, 1] (mean, product, tanh, neg)."""
    n_leaves = draw(st.integers(1, 4))
    values = [draw(st.floats(-1, 1)) for _ in range(n_leaves)]
    requires = [i == 0 or draw(st.booleans()) for i in range(n_leaves)]  # leaf 0 always does
    program = []
    for k in range(draw(st.integers(1, 20))):
        n = n_leaves + k
        program.append((draw(st.sampled_from(ops)), draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))))
    last = draw(st.integers(0, n_leaves + len(program) - 1))
    return values, requires, program, last


def run_program(program, last, *leaves):
    nodes = list(leaves)
    for op, i, j in program:
        a, b = nodes[i], nodes[j]
        nodes.append({"mean": lambda a=a, b=b: (a + b) * 0.5, "mul": lambda a=a, b=b: a * b, "tanh": a.tanh,
                      "neg": lambda a=a: -a, "detach": a.detach}[op]())
    return nodes[-1] + nodes[last] + nodes[0]  # the root always depends on leaf 0


def leaves_of(values, requires):
    return [Tensor(np.array([v]), requires_grad=r) for v, r in zip(values, requires, strict=True)]


def reachable(root: Tensor) -> set[int]:
    seen, todo = set(), [root]
    while todo:
        t = todo.pop()
        if id(t) in seen or not t.requires_grad:
            continue
        seen.add(id(t))
        if t.grad_fn is not None:
            todo.extend(t.grad_fn.inputs)
    return seen


@given(random_programs())
def test_topological_order_properties(case):
    values, requires, program, last = case
    root = run_program(program, last, *leaves_of(values, requires))
    order = topological_order([root])
    ids = [id(t) for t in order]
    assert len(ids) == len(set(ids)), "a node appears twice"
    assert set(ids) == reachable(root), "exactly the grad-requiring tensors that reach the root"
    assert order[-1] is root
    position = {k: i for i, k in enumerate(ids)}
    for t in order:
        assert t.requires_grad
        if t.grad_fn is not None:
            for parent in t.grad_fn.inputs:
                if parent.requires_grad:
                    assert position[id(parent)] < position[id(t)], "an input comes after its consumer"


@given(random_programs(ops=("mean", "mul", "tanh", "neg")))
def test_random_graph_gradients_match_finite_differences(case):
    """Shared nodes, fan-out and fan-in at random: backward agrees with central differences."""
    values, requires, program, last = case
    gradcheck(lambda *leaves: run_program(program, last, *leaves), *leaves_of(values, requires))


# --------------------------------------------------------------------------------------------
# backward's contract
# --------------------------------------------------------------------------------------------
class TestBackwardErrors:
    def test_non_scalar_needs_an_explicit_grad(self):
        x = Tensor(np.ones(3), requires_grad=True)
        y = x * 2.0
        with pytest.raises(RuntimeError, match=r"one element.*\(3,\)"):
            y.backward()
        y.backward(np.array([1.0, 2.0, 3.0]))
        assert_close(x.grad, [2.0, 4.0, 6.0])

    def test_wrong_shape_grad(self):
        x = Tensor(np.ones(3), requires_grad=True)
        with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
            (x * 2.0).backward(np.ones(2))

    def test_backward_on_a_constant(self):
        with pytest.raises(RuntimeError, match="does not require grad"):
            Tensor(np.ones(2)).sum().backward()

    def test_second_backward_through_a_freed_graph(self):
        x = scalar(2.0)
        y = x * x
        y.backward()
        with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
            y.backward()

    def test_retain_graph_allows_a_second_backward(self):
        x = scalar(2.0)
        y = x * x
        y.backward(retain_graph=True)
        y.backward()
        assert x.grad.item() == 8.0
        with pytest.raises(RuntimeError, match="second time"):
            y.backward()

    def test_freed_graph_shared_with_a_new_branch(self):
        x = scalar(2.0)
        h = x * 3.0
        (h * 2.0).backward()
        with pytest.raises(RuntimeError, match="Mul was already used"):
            (h * 4.0).backward()

    def test_retain_grad_on_a_constant(self):
        with pytest.raises(RuntimeError, match="does not require grad"):
            Tensor(np.ones(2)).retain_grad()

    def test_retain_grad_on_a_leaf_is_harmless(self):
        x = scalar(2.0)
        x.retain_grad()
        (x * 3.0).backward()
        assert x.grad.item() == 3.0


class TestEngineChecksGradients:
    """The engine checks what every backward returns, and names the op when it is wrong."""

    def test_wrong_shape(self):
        class Squash(Function):
            def forward(self, x):
                return x.sum(axis=0)

            def backward(self, grad):
                return grad  # forgot to broadcast back to the input's shape

        x = Tensor(np.ones((2, 3)), requires_grad=True)
        with pytest.raises(RuntimeError, match=r"Squash.*shape \(3,\).*shape \(2, 3\)"):
            Squash.apply(x).sum().backward()

    def test_wrong_count(self):
        class Pair(Function):
            def forward(self, x, y):
                return x + y

            def backward(self, grad):
                return (grad,)

        x, y = scalar(1.0), scalar(2.0)
        with pytest.raises(RuntimeError, match="Pair.backward returned 1 gradients for 2 inputs"):
            Pair.apply(x, y).backward()

    def test_not_a_tensor(self):
        class Raw(Function):
            def forward(self, x):
                return 2 * x

            def backward(self, grad):
                return 2 * grad.data

        with pytest.raises(TypeError, match="Raw.backward returned ndarray for input 0"):
            Raw.apply(Tensor(np.ones(2), requires_grad=True)).sum().backward()

    def test_wrong_dtype_is_cast(self):
        class Wide(Function):
            def forward(self, x):
                return 2 * x

            def backward(self, grad):
                return grad.astype(np.float64) * 2.0

        x = Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
        Wide.apply(x).sum().backward()
        assert x.grad.dtype == np.float32
        assert_close(x.grad, [2.0, 2.0])

    def test_none_means_no_gradient(self):
        class FirstOnly(Function):
            def forward(self, x, y):
                return x * 1.0

            def backward(self, grad):
                return grad, None

        x, y = scalar(1.0), scalar(2.0)
        FirstOnly.apply(x, y).backward()
        assert x.grad.item() == 1.0 and y.grad is None


# --------------------------------------------------------------------------------------------
# Grad mode
# --------------------------------------------------------------------------------------------
class TestGradMode:
    def test_no_grad_records_nothing(self):
        x = scalar(2.0)
        with no_grad():
            assert not is_grad_enabled()
            y = x * x + 1.0
        assert is_grad_enabled()
        assert y.grad_fn is None and not y.requires_grad and y.is_leaf
        assert y.item() == 5.0

    def test_no_grad_as_a_decorator(self):
        @no_grad()
        def step(t):
            """Docstring kept."""
            return t * 2.0

        y = step(scalar(1.0))
        assert not y.requires_grad and step.__name__ == "step" and step.__doc__ == "Docstring kept."
        assert is_grad_enabled()

    def test_enable_grad_inside_no_grad(self):
        x = scalar(2.0)
        with no_grad():
            with enable_grad():
                y = x * x
            z = x * x
        assert y.requires_grad and y.grad_fn is not None and not z.requires_grad
        y.backward()
        assert x.grad.item() == 4.0

    def test_enable_grad_as_a_decorator(self):
        @enable_grad()
        def square(t):
            return t * t

        with no_grad():
            y = square(scalar(3.0))
        assert y.requires_grad

    def test_mode_restored_after_an_exception(self):
        with pytest.raises(ZeroDivisionError):
            with no_grad():
                1 / 0  # noqa: B018 (evaluated only to raise ZeroDivisionError inside no_grad)
        assert is_grad_enabled()

    def test_set_grad_enabled(self):
        with solutions.set_grad_enabled(False):
            assert not (scalar(1.0) * 2.0).requires_grad
        assert is_grad_enabled()

    def test_set_grad_enabled_switches_at_once(self):
        # As torch.set_grad_enabled: a plain call switches the mode (no_grad's answer relies on it).
        set_grad_enabled(False)
        try:
            assert not is_grad_enabled()
        finally:
            set_grad_enabled(True)
        assert is_grad_enabled()

    def test_nested_no_grad_keeps_recording_off(self):
        with no_grad():
            with no_grad():
                pass
            assert not is_grad_enabled()
        assert is_grad_enabled()
        set_grad_enabled(False)
        with no_grad():
            pass
        assert not is_grad_enabled()
        set_grad_enabled(True)

    def test_a_decorated_recursive_function_restores_each_level(self):
        @no_grad()
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)

        assert depth(3) == 3 and is_grad_enabled()

    def test_no_exception_is_swallowed(self):
        with pytest.raises(KeyError):
            with no_grad():
                raise KeyError("inside")
        with pytest.raises(KeyError):
            with enable_grad():
                raise KeyError("inside")


# --------------------------------------------------------------------------------------------
# Leaves and requires_grad
# --------------------------------------------------------------------------------------------
class TestLeaves:
    def test_requires_grad_propagates(self):
        a, c = scalar(1.0), scalar(2.0, requires_grad=False)
        assert (a * c).requires_grad and (c * a).requires_grad
        assert not (c * c).requires_grad and (c * c).grad_fn is None
        assert a.is_leaf
        assert not (a * c).is_leaf

    def test_constant_input_gets_no_gradient(self):
        a, c = scalar(1.0), scalar(2.0, requires_grad=False)
        (a * c).backward()
        assert c.grad is None and a.grad.item() == 2.0

    def test_detach(self):
        x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
        h = x * 3.0
        d = h.detach()
        assert d.grad_fn is None and not d.requires_grad and d.is_leaf
        assert np.shares_memory(d.data, h.data)
        (x * d).sum().backward()  # no gradient flows through the detached factor
        assert_close(x.grad, d.data)

    def test_integer_tensor_cannot_require_grad(self):
        with pytest.raises(TypeError, match="int64"):
            Tensor(np.array([1, 2, 3]), requires_grad=True)
        t = Tensor(np.array([1, 2]))
        with pytest.raises(TypeError, match="int64"):
            t.requires_grad = True
        assert Tensor(np.array([1, 2]), dtype=np.float32, requires_grad=True).requires_grad

    def test_requires_grad_on_a_non_leaf(self):
        y = scalar(1.0) * 2.0
        with pytest.raises(RuntimeError, match="leaf.*Mul.*detach"):
            y.requires_grad = False
        with pytest.raises(RuntimeError, match="leaf"):
            y.requires_grad_(True)

    def test_requires_grad_on_a_leaf(self):
        x = Tensor(np.ones(2))
        assert x.requires_grad_() is x and x.requires_grad
        x.requires_grad = False
        assert not x.requires_grad

    def test_integer_results_are_constants(self):
        x = Tensor(np.array([1.7, -2.2]), requires_grad=True)
        i = x.astype(np.int64)
        assert i.dtype == np.int64 and not i.requires_grad and i.grad_fn is None
        assert list(i.data) == [1, -2]


# --------------------------------------------------------------------------------------------
# dtypes: Python numbers never widen float32
# --------------------------------------------------------------------------------------------
F32 = np.float32


@pytest.mark.parametrize(
    "expr",
    [
        lambda t: 2 * t, lambda t: t * 2, lambda t: t - 1, lambda t: 1 - t, lambda t: 1 / t,
        lambda t: t / 3, lambda t: t + 0.5, lambda t: 0.5 + t, lambda t: t ** 2, lambda t: t ** 0.5,
        lambda t: 2 ** t, lambda t: 2.5 ** t, lambda t: np.ones(3, dtype=F32) + t,
        lambda t: t * np.ones(3, dtype=F32), lambda t: np.float32(2) * t, lambda t: t * True,
        lambda t: -t, lambda t: abs(t), lambda t: t.exp(), lambda t: t.mean(), lambda t: t.var(),
        lambda t: solutions.where(t.data > 1, t, 0.0), lambda t: t.maximum(1.5), lambda t: t.clip(1.2, 2.5),
        lambda t: t.softmax(), lambda t: t.logsumexp(), lambda t: t @ np.ones(3, dtype=F32),
    ],
)
def test_float32_stays_float32(expr):
    t = Tensor(np.array([1.0, 2.0, 3.0], dtype=F32), requires_grad=True)
    y = expr(t)
    assert y.dtype == F32
    y.sum().backward()
    assert t.grad.dtype == F32


def test_numpy_promotion_rules_for_arrays():
    """An array operand is not 'weak' like a Python number: NumPy's promotion applies."""
    t = Tensor(np.ones(3, dtype=F32), requires_grad=True)
    y = np.ones(3) + t  # float64 array + float32 tensor -> float64, as in NumPy
    assert y.dtype == np.float64
    y.sum().backward()
    assert t.grad.dtype == F32  # gradients come back in the input's dtype
    assert (Tensor(np.array([1, 2])) * 0.5).dtype == np.float64
    assert (Tensor(np.array([1, 2])) * 2).dtype == np.int64


def test_float64_default():
    assert Tensor([1.0, 2.0]).dtype == np.float64 and Tensor(3.0).dtype == np.float64


# --------------------------------------------------------------------------------------------
# Tensor attributes
# --------------------------------------------------------------------------------------------
class TestAttributes:
    def test_array_attributes(self):
        t = Tensor(np.arange(6.0).reshape(2, 3))
        assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and t.dtype == np.float64
        assert len(t) == 2 and t.numpy() is t.data
        assert t.T.shape == (3, 2)
        assert_close(t.T, t.data.T)
        assert Tensor(2.5).item() == 2.5 and float(Tensor([2.5])) == 2.5
        with pytest.raises(ValueError, match="one-element"):
            t.item()
        with pytest.raises(TypeError, match="0-d"):
            len(Tensor(1.0))
        assert bool(Tensor(1.0)) and not bool(Tensor([0.0]))
        with pytest.raises(ValueError, match="ambiguous"):
            bool(t)

    def test_T_reverses_all_axes_and_is_differentiable(self):
        x = Tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
        assert x.T.shape == (4, 3, 2)
        w = np.random.default_rng(0).standard_normal((4, 3, 2))
        (x.T * w).sum().backward()
        assert_close(x.grad, w.T)

    def test_repr(self):
        x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
        assert "requires_grad=True" in repr(x)
        assert "grad_fn=<Mul>" in repr(x * 2.0)
        assert "dtype=float32" in repr(Tensor(np.ones(2, dtype=F32)))
        assert repr(Tensor([1.0])) == "Tensor([1.])"

    def test_comparisons_return_boolean_arrays(self):
        x = Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
        for result in (x > 2, x >= 2, x < 2, x <= 2, x == 2, x != 2, x > Tensor([0.0, 5.0, 1.0])):
            assert type(result) is np.ndarray and result.dtype == bool
        assert list(x > 1.5) == [False, True, True]

    def test_tensors_hash_by_identity(self):
        a, b = Tensor([1.0]), Tensor([1.0])
        assert len({a, b}) == 2

    def test_constructor(self):
        base = Tensor(np.ones(2))
        assert Tensor(base).data is base.data
        assert Tensor([1, 2], dtype=np.float32).dtype == np.float32
        assert Tensor(np.ones(2), name="w").name == "w"


# --------------------------------------------------------------------------------------------
# Gradients of gradients
# --------------------------------------------------------------------------------------------
class TestHigherOrder:
    def test_create_graph_makes_the_gradient_differentiable(self):
        x = scalar(1.5)
        y = x ** 3
        y.backward(create_graph=True)
        g = x.grad  # 3 x^2, itself a graph
        assert g.requires_grad and g.grad_fn is not None
        assert_close(g, 3 * 1.5**2)
        (dg,) = grad(g, x)
        assert_close(dg, 6 * 1.5)

    def test_plain_backward_records_nothing(self):
        x = scalar(1.5)
        (x ** 3).backward()
        assert x.grad.grad_fn is None and not x.grad.requires_grad

    def test_second_derivative_of_tanh(self):
        for v in (-2.0, -0.3, 0.0, 0.5, 3.0):
            x = scalar(v)
            (d1,) = grad(x.tanh(), x, create_graph=True)
            (d2,) = grad(d1, x)
            t = np.tanh(v)
            assert_close(d1, 1 - t * t)
            assert_close(d2, -2 * t * (1 - t * t))

    def test_hessian_vector_product_of_a_quadratic_form(self):
        rng = np.random.default_rng(0)
        A = rng.standard_normal((4, 4))
        x = Tensor(rng.standard_normal(4), requires_grad=True)
        v = rng.standard_normal(4)
        f = x @ (Tensor(A) @ x)  # x^T A x
        (g,) = grad(f, x, create_graph=True)
        assert_close(g, (A + A.T) @ x.data)
        (hv,) = grad((g * v).sum(), x)
        assert_close(hv, (A + A.T) @ v)

    def test_hessian_vector_product_of_a_cubic_form(self):
        # f(x) = sum_i c_i x_i^3 + (a . x)^3:  H = diag(6 c x) + 6 (a . x) a a^T
        rng = np.random.default_rng(1)
        c, a, v = rng.standard_normal(5), rng.standard_normal(5), rng.standard_normal(5)
        x = Tensor(rng.standard_normal(5), requires_grad=True)
        f = (Tensor(c) * x ** 3).sum() + (x @ a) ** 3
        (g,) = grad(f, x, create_graph=True)
        hv = grad(g @ v, x)[0]
        s = a @ x.data
        H = np.diag(6 * c * x.data) + 6 * s * np.outer(a, a)
        assert_close(g, 3 * c * x.data**2 + 3 * s**2 * a)
        assert_close(hv, H @ v)

    def test_third_derivative_of_a_polynomial(self):
        # p(x) = x^4 - 2x^3 + 5x:  p''' = 24x - 12
        x = Tensor(np.array([-1.0, 0.5, 2.0]), requires_grad=True)
        p = x**4 - 2 * x**3 + 5 * x
        (d1,) = grad(p.sum(), x, create_graph=True)
        (d2,) = grad(d1.sum(), x, create_graph=True)
        (d3,) = grad(d2.sum(), x)
        assert_close(d1, 4 * x.data**3 - 6 * x.data**2 + 5)
        assert_close(d2, 12 * x.data**2 - 12 * x.data)
        assert_close(d3, 24 * x.data - 12)

    def test_grad_does_not_touch_dot_grad(self):
        x = scalar(2.0)
        (g,) = grad(x * x, x)
        assert g.item() == 4.0 and x.grad is None

    def test_grad_of_several_inputs_and_outputs(self):
        x, y = scalar(2.0), scalar(3.0)
        gx, gy = grad([x * y, x + y], [x, y])
        assert (gx.item(), gy.item()) == (3.0 + 1.0, 2.0 + 1.0)
        (g,) = grad(x * y * 1.0, x, grad_outputs=Tensor(2.0))
        assert g.item() == 6.0

    def test_grad_of_a_non_leaf(self):
        x = scalar(2.0)
        h = x * x
        (gh,) = grad(h * 3.0, h)
        assert gh.item() == 3.0

    def test_allow_unused(self):
        x, unused = scalar(2.0), scalar(5.0)
        y = x * x
        with pytest.raises(RuntimeError, match="input 1.*allow_unused=True"):
            grad(y, [x, unused], retain_graph=True)
        gx, gu = grad(y, [x, unused], allow_unused=True)
        assert gx.item() == 4.0 and gu is None

    def test_grad_of_an_input_that_does_not_require_grad(self):
        with pytest.raises(RuntimeError, match="input 0.*does not require grad"):
            grad(scalar(1.0) * 2.0, Tensor(1.0))

    def test_create_graph_keeps_the_graph(self):
        x = scalar(2.0)
        y = x ** 3
        (g,) = grad(y, x, create_graph=True)
        (g2,) = grad(y, x)  # retain_graph defaulted to True with create_graph
        assert g.item() == g2.item() == 12.0

    def test_accumulating_with_create_graph(self):
        x = scalar(2.0)
        (x * x).backward(create_graph=True)
        (x * x * x).backward(create_graph=True)
        g = x.grad  # 2x + 3x^2, as a graph
        assert_close(g, 4.0 + 12.0)
        (d,) = grad(g, x)
        assert_close(d, 2.0 + 6 * 2.0)


    def test_grad_leaves_every_other_gradient_alone(self):
        x, w = scalar(2.0), scalar(3.0)
        h = x * w
        h.retain_grad()
        (h * 1.0).backward(retain_graph=True)
        before = (x.grad.item(), w.grad.item(), h.grad.item())
        (gx, gh) = grad(h * h, [x, h])
        assert (gx.item(), gh.item()) == (2 * 6.0 * 3.0, 2 * 6.0)
        assert (x.grad.item(), w.grad.item(), h.grad.item()) == before and h.retains_grad
        y = x * w
        (gy,) = grad(y * y, y)  # a non-leaf input: lent a .grad for the call, then given its own back
        assert gy.item() == 12.0 and y.grad is None and not y.retains_grad


# --------------------------------------------------------------------------------------------
# The walk's own pieces: toposort, input_grads, add_grads, clone, and no op's backward
# --------------------------------------------------------------------------------------------
class TestWalkPieces:
    def test_topological_order_is_toposort(self):
        x = scalar(1.0)
        y = x * 2.0 + x
        assert [id(t) for t in topological_order([y])] == [id(t) for t in toposort([y])]

    def test_toposort_keys_tensors_by_identity(self):
        u, v = Tensor([1.0], requires_grad=True), Tensor([1.0], requires_grad=True)  # equal values
        assert len(toposort([u * v])) == 3

    def test_input_grads_pairs_each_input_that_needs_a_gradient(self):
        x, c = Tensor(np.ones(3), requires_grad=True), Tensor(np.full(3, 2.0))
        y = x * c
        pairs = input_grads(y.grad_fn, Tensor(np.ones(3)))
        assert [id(t) for t, _ in pairs] == [id(x)] and pairs[0][1].shape == (3,)

    def test_input_grads_refuses_a_freed_node(self):
        x = scalar(2.0)
        y = x * x
        y.grad_fn.free()
        with pytest.raises(RuntimeError, match="Mul was already used.*retain_graph=True"):
            input_grads(y.grad_fn, Tensor(1.0))

    def test_add_grads_is_recorded_only_while_recording(self):
        a, b = Tensor([1.0], requires_grad=True), Tensor([2.0], requires_grad=True)
        with set_grad_enabled(False):
            plain = add_grads(a, b)
        assert plain.grad_fn is None and plain.item() == 3.0
        assert type(add_grads(a, b).grad_fn) is GradSum

    def test_clone_owns_its_data_and_passes_the_gradient(self):
        x = Tensor(np.broadcast_to(np.ones(1), (3,)), requires_grad=False)
        c = x.clone()
        assert c.data.flags.writeable and not np.shares_memory(c.data, x.data)
        y = Tensor(np.arange(3.0), requires_grad=True)
        (y.clone() * 2.0).sum().backward()
        assert_close(y.grad, [2.0, 2.0, 2.0])

    def test_second_order_never_runs_an_op_backward_for_accumulation(self):
        """The walk sums gradients with GradSum, not Add: gradients of gradients work even when
        Add's backward (an a02 exercise) does not exist yet."""
        class AddWithoutBackward(Add):
            def backward(self, grad):
                raise NotImplementedError("Add.backward is an exercise of a02")

        x = Tensor(np.array([0.5, -1.5]), requires_grad=True)
        with override(Add=AddWithoutBackward):
            y = (x * x * x).sum()  # x is used three times
            y.backward(create_graph=True)
            g = x.grad
            x.grad = None
            (g * Tensor(np.array([1.0, 2.0]))).sum().backward()
        assert_close(x.grad, 6 * x.data * np.array([1.0, 2.0]))

    def test_the_first_backward_with_create_graph_keeps_the_graph(self):
        x = scalar(0.5)
        y = x.tanh()
        y.backward(create_graph=True)
        g = x.grad
        x.grad = None
        g.backward()  # walks y's graph again: create_graph implied retain_graph
        t = np.tanh(0.5)
        assert_close(x.grad, -2 * t * (1 - t * t))


# --------------------------------------------------------------------------------------------
# override: swap an op for the duration of a block
# --------------------------------------------------------------------------------------------
class TestOverride:
    def test_swaps_and_restores(self):
        calls = []

        class LoudAdd(Add):
            def forward(self, x, y):
                calls.append("forward")
                return x + y

        a = scalar(1.0)
        with override(Add=LoudAdd):
            y = a + 2.0
            assert type(y.grad_fn) is LoudAdd
        assert calls == ["forward"]
        assert type((a + 2.0).grad_fn) is Add
        assert solutions.ops.elementwise.Add is Add

    def test_restores_on_an_exception(self):
        class BrokenAdd(Add):
            def forward(self, x, y):
                raise ArithmeticError("student bug")

        with pytest.raises(ArithmeticError, match="student bug"):
            with override(Add=BrokenAdd):
                scalar(1.0) + 1.0
        assert solutions.ops.elementwise.Add is Add
        assert (scalar(1.0) + 1.0).item() == 2.0

    def test_swapped_op_is_used_inside_other_backwards(self):
        seen = []

        class SpyAdd(Add):
            def backward(self, grad):
                seen.append(True)
                return super().backward(grad)

        x = scalar(2.0)
        with override(Add=SpyAdd):
            (x * x + x).backward()
        assert seen and x.grad.item() == 5.0

    def test_unknown_name(self):
        with pytest.raises(ValueError, match="NoSuchOp"):
            with override(NoSuchOp=Add):
                pass
