"""The worked examples of the four seed articles the course grew from, as tests.

Readers who come from those articles look for these examples; here they run on our engine, and
where an article's own code goes wrong (a global max shift in softmax, broadcasting undone on
axis 0 only, an exponential recursive backward) the test shows the engine gets it right.
See `/work/shared/seeds/README.md` for what each article covers.
"""
from __future__ import annotations

import numpy as np
import pytest

import solutions as S
from solutions import Tensor, grad
from solutions.testing import assert_close


# --------------------------------------------------------------------------------------------
# Seed 000: the computation-graph example y = (a + b) * (b + c)
# --------------------------------------------------------------------------------------------
def test_graph_example_by_hand():
    a, b, c = (Tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    f = a + b  # 5
    g = b + c  # 7
    y = f * g  # 35
    y.backward()
    # dy/da = g; dy/dc = f; b reaches y through f and through g, and the two paths add up.
    assert y.item() == 35.0
    assert (a.grad.item(), b.grad.item(), c.grad.item()) == (7.0, 12.0, 5.0)


def test_graph_example_on_vectors():
    rng = np.random.default_rng(0)
    av, bv, cv = rng.standard_normal((3, 4))
    a, b, c = Tensor(av, requires_grad=True), Tensor(bv, requires_grad=True), Tensor(cv, requires_grad=True)
    ((a + b) * (b + c)).sum().backward()
    assert_close(a.grad, bv + cv)
    assert_close(b.grad, (bv + cv) + (av + bv))
    assert_close(c.grad, av + bv)


def test_graph_example_backward_runs_each_node_once():
    """The article's backward recursed into every predecessor; on y = (a + b) * (b + c) that
    only visits b twice, but stacking the pattern doubles the work per level. Here: one visit."""
    calls = []

    class CountingMul(S.ops.Mul):
        def backward(self, grad):
            calls.append(self)
            return super().backward(grad)

    a, b, c = (Tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    with S.override(Mul=CountingMul):
        y = (a + b) * (b + c)
        for _ in range(30):
            y = (y + b) * (y + c) * 1e-3  # each level uses y twice
        y.backward()
    assert len(calls) == len(set(map(id, calls))) == 1 + 2 * 30


# --------------------------------------------------------------------------------------------
# Seed 000: softmax and its full Jacobian
# --------------------------------------------------------------------------------------------
def softmax_jacobian(s: np.ndarray) -> np.ndarray:
    """The n-by-n Jacobian of softmax at output s: J = diag(s) - s s^T."""
    return np.diag(s) - np.outer(s, s)


@pytest.mark.parametrize("n", [2, 3, 7])
def test_softmax_full_jacobian_equals_the_vjp(n):
    rng = np.random.default_rng(n)
    x = Tensor(rng.standard_normal((4, n)) * 3.0, requires_grad=True)
    s = x.softmax(axis=-1)
    for _ in range(3):  # several random upstream vectors
        u = rng.standard_normal((4, n))
        (vjp,) = grad(s, x, Tensor(u), retain_graph=True)
        for row in range(4):
            J = softmax_jacobian(s.data[row])
            assert_close(vjp.data[row], u[row] @ J, msg=f"row {row}")


def test_softmax_jacobian_properties():
    s = Tensor(np.array([0.5, -1.0, 2.0])).softmax().data
    J = softmax_jacobian(s)
    assert_close(J, J.T)  # symmetric
    assert_close(J.sum(axis=1), np.zeros(3), atol=1e-15)  # outputs always sum to 1
    # Column by column: the Jacobian is the VJP of each basis vector.
    x = Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    y = x.softmax()
    rows = [grad(y, x, Tensor(np.eye(3)[i]), retain_graph=True)[0].data for i in range(3)]
    assert_close(np.stack(rows), J)


def test_softmax_shifts_each_row_by_its_own_max():
    """The article shifted by the maximum of the whole batch: a row far below it underflows to
    0 / 0. Shifting each row by its own maximum gives the right answer."""
    logits = np.array([[0.0, 0.0], [1000.0, 1000.0]])
    with np.errstate(all="ignore"):
        e = np.exp(logits - np.max(logits))  # the article's global shift
        article = e / e.sum(axis=1, keepdims=True)
    assert np.isnan(article[0]).all()
    assert_close(Tensor(logits).softmax(axis=1), np.full((2, 2), 0.5))


# --------------------------------------------------------------------------------------------
# Seed 000's broadcasting fix summed axis 0 only
# --------------------------------------------------------------------------------------------
def test_broadcast_gradients_sum_over_every_stretched_axis():
    x = Tensor(np.ones((2, 3, 4)), requires_grad=True)
    scale = Tensor(np.ones((3, 1)), requires_grad=True)  # stretched along axis 0 (missing) and axis 2
    (x * scale).sum().backward()
    assert scale.grad.shape == (3, 1)
    assert_close(scale.grad, np.full((3, 1), 8.0))


# --------------------------------------------------------------------------------------------
# Seed 001: PyTorch's transpose versus NumPy's, and the extended graph
# --------------------------------------------------------------------------------------------
def test_transpose_conventions():
    x = Tensor(np.arange(24.0).reshape(2, 3, 4))
    assert x.transpose().shape == (4, 3, 2)  # NumPy: no axes reverses all of them
    assert x.transpose((0, 2, 1)).shape == (2, 4, 3)  # NumPy: a full permutation
    assert x.swapaxes(-1, -2).shape == (2, 4, 3)  # PyTorch's transpose(dim0, dim1)
    assert x.permute(2, 0, 1).shape == (4, 2, 3)


def test_extended_graph_gives_second_derivatives():
    x = Tensor(np.array([0.3, -1.2]), requires_grad=True)
    y = (x.exp() * x).sum()  # y' = e^x (1 + x), y'' = e^x (2 + x)
    (g,) = grad(y, x, create_graph=True)
    assert g.grad_fn is not None  # the gradient is itself a node of the graph
    (h,) = grad(g.sum(), x)
    assert_close(g, np.exp(x.data) * (1 + x.data))
    assert_close(h, np.exp(x.data) * (2 + x.data))


# --------------------------------------------------------------------------------------------
# Seed 003: a fully-connected layer trained by plain gradient descent
# --------------------------------------------------------------------------------------------
def test_fully_connected_regression_learns():
    rng = np.random.default_rng(3)
    N, D, K = 64, 8, 3
    x = Tensor(rng.standard_normal((N, D)))
    w_true, b_true = rng.standard_normal((D, K)), rng.standard_normal(K)
    y = Tensor(x.data @ w_true + b_true + 0.01 * rng.standard_normal((N, K)))
    w = Tensor(np.zeros((D, K)), requires_grad=True)
    b = Tensor(np.zeros(K), requires_grad=True)
    lr, history = 0.5, []
    for step in range(100):
        loss = ((x @ w + b - y) ** 2).mean()
        w.zero_grad()
        b.zero_grad()
        loss.backward()
        if step == 0:  # the gradient of the mean squared error, by hand
            residual = -y.data
            assert_close(w.grad, 2 * x.data.T @ residual / (N * K))
            assert_close(b.grad, 2 * residual.sum(axis=0) / (N * K))
        w.data -= lr * w.grad.data
        b.data -= lr * b.grad.data
        history.append(loss.item())
    assert all(later <= earlier for earlier, later in zip(history, history[1:], strict=False)), "the loss went up"
    assert history[-1] < 1e-3 * history[0]
    assert_close(w, w_true, atol=0.02)
    assert_close(b, b_true, atol=0.02)


def test_fully_connected_outputs_driven_to_zero():
    """The article's own set-up: y = x @ w + b with random x, w, b; gradient descent on
    sum(y ** 2) pushes every output towards 0 (here smaller, and in float32)."""
    rng = np.random.default_rng(1)
    x = Tensor(rng.random((50, 30), dtype=np.float32))
    w = Tensor(rng.random((30, 10), dtype=np.float32), requires_grad=True)
    b = Tensor(rng.random(10, dtype=np.float32), requires_grad=True)
    lr, history = 1e-3, []
    for _ in range(100):
        loss = ((x @ w + b) ** 2).sum()
        history.append(loss.item())
        loss.backward()
        w.data -= lr * w.grad.data
        b.data -= lr * b.grad.data
        w.zero_grad()
        b.zero_grad()
    assert w.grad is None and w.data.dtype == np.float32
    decreasing = sum(later < earlier for earlier, later in zip(history, history[1:], strict=False))
    assert decreasing >= 95  # monotone, give or take float32 rounding at the end
    assert history[-1] < 0.01 * history[0]
