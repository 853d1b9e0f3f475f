"""solutions.optim against PyTorch's documented update rules, computed by hand for a few steps.

Each test feeds the same fixed gradients to the optimizer and to a plain-NumPy transcription of
the algorithm box in PyTorch's documentation. `tests/engine/test_nn_golden.py` compares with torch itself.
"""
from __future__ import annotations

import numpy as np
import pytest

from solutions import Tensor, nn, optim
from solutions.testing import assert_close

THETA0 = np.array([[0.5, -1.0, 2.0], [0.0, 0.25, -3.0]])
GRADS = [
    np.array([[0.1, -0.2, 0.3], [1.0, -1.0, 0.5]]),
    np.array([[-0.4, 0.1, 0.0], [0.2, 0.3, -0.6]]),
    np.array([[0.05, 0.5, -0.25], [-1.5, 0.0, 0.7]]),
]


def run_steps(make_optimizer, grads=GRADS, theta0=THETA0, dtype=np.float64):
    """Parameter values after each step, feeding `grads` one per step."""
    p = nn.Parameter(np.array(theta0, dtype=dtype))
    opt = make_optimizer([p])
    data_id = id(p.data)
    values = []
    for g in grads:
        opt.zero_grad()
        p.grad = Tensor(np.array(g, dtype=dtype))
        opt.step()
        values.append(p.data.copy())
    assert id(p.data) == data_id  # updated in place: the model still holds the same array
    return values


def sgd_reference(lr, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0):
    theta, buf, out = THETA0.copy(), None, []
    for g in GRADS:
        g = g + weight_decay * theta
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        theta = theta - lr * g
        out.append(theta)
    return out


def adam_reference(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False):
    theta, m, v, out = THETA0.copy(), 0.0, 0.0, []
    b1, b2 = betas
    for t, g in enumerate(GRADS, start=1):
        if decoupled:
            theta = theta * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * theta
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        theta = theta - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append(theta)
    return out


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.1),
    dict(lr=0.1, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.5),
    dict(lr=0.05, momentum=0.9, nesterov=True),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
])
def test_sgd_follows_pytorchs_rule(kwargs):
    for got, want in zip(run_steps(lambda ps: optim.SGD(ps, **kwargs)), sgd_reference(**kwargs), strict=True):
        assert_close(got, want, rtol=1e-13, atol=1e-15)


def test_sgd_momentum_by_hand():
    # Two steps with scalar numbers, momentum 0.9: b1 = g1, b2 = 0.9 b1 + g2.
    p = nn.Parameter(np.array([1.0]))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    for g in (2.0, -1.0):
        p.grad = Tensor(np.array([g]))
        opt.step()
    # theta1 = 1 - 0.1*2 = 0.8; b2 = 0.9*2 - 1 = 0.8; theta2 = 0.8 - 0.1*0.8 = 0.72
    assert_close(p.data, [0.72])


@pytest.mark.parametrize("kwargs", [
    dict(lr=1e-2),
    dict(lr=1e-1, betas=(0.8, 0.99), eps=1e-6),
    dict(lr=1e-2, weight_decay=0.1),
])
def test_adam_follows_pytorchs_rule(kwargs):
    for got, want in zip(run_steps(lambda ps: optim.Adam(ps, **kwargs)), adam_reference(**kwargs), strict=True):
        assert_close(got, want, rtol=1e-12, atol=1e-14)


def test_adam_first_step_moves_each_weight_by_about_lr():
    # Bias correction makes step 1 exactly lr * g/(|g| + eps'): a move of lr against the sign of g.
    (theta1,) = run_steps(lambda ps: optim.Adam(ps, lr=0.01), grads=GRADS[:1])
    assert_close(theta1 - THETA0, -0.01 * np.sign(GRADS[0]), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("kwargs", [dict(lr=1e-2), dict(lr=1e-1, weight_decay=0.5, betas=(0.5, 0.9))])
def test_adamw_decays_the_weights_directly(kwargs):
    expected = adam_reference(decoupled=True, **{"weight_decay": 1e-2, **kwargs})
    for got, want in zip(run_steps(lambda ps: optim.AdamW(ps, **kwargs)), expected, strict=True):
        assert_close(got, want, rtol=1e-12, atol=1e-14)
    assert optim.AdamW([nn.Parameter(np.zeros(1))]).defaults["weight_decay"] == 1e-2


def test_parameters_without_gradient_are_skipped_and_keep_their_state():
    a, b = nn.Parameter(np.ones(2)), nn.Parameter(np.ones(2))
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = Tensor(np.array([1.0, -1.0]))
    opt.step()
    assert_close(b.data, [1.0, 1.0]) and b not in opt.state
    assert opt.state[a]["step"] == 1
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    opt.step()  # nothing to do
    assert opt.state[a]["step"] == 1


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1),
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    lambda ps: optim.Adam(ps, lr=0.1, weight_decay=0.1),
    lambda ps: optim.AdamW(ps, lr=0.1),
])
def test_step_never_writes_into_a_gradient_nor_keeps_it(make):
    """g is p.grad's own array: step() must leave it alone, and no state may share its memory
    (the caller may reuse the array: gradient accumulation, a loop that refills it)."""
    p = nn.Parameter(THETA0.copy())
    opt = make([p])
    arrays = [np.array(g) for g in GRADS]
    for g in arrays:
        p.grad = Tensor(g)
        assert p.grad.data is g
        opt.step()
    assert all(np.array_equal(a, g) for a, g in zip(arrays, GRADS, strict=True))
    state = opt.state[p]
    assert not any(isinstance(v, np.ndarray) and any(np.shares_memory(v, a) for a in arrays) for v in state.values())


def test_float32_parameters_stay_float32():
    for make in (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3), lambda ps: optim.Adam(ps),
                 lambda ps: optim.AdamW(ps)):
        values = run_steps(make, dtype=np.float32)
        assert all(v.dtype == np.float32 for v in values)


def test_param_groups_override_the_defaults():
    a, b = nn.Parameter(np.zeros(1)), nn.Parameter(np.zeros(1))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    a.grad, b.grad = Tensor(np.ones(1)), Tensor(np.ones(1))
    opt.step()
    assert_close(a.data, [-0.1]) and assert_close(b.data, [-1.0])
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]


def test_optimizer_trains_a_model_through_module_parameters():
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((64, 3)))
    y = x.data @ np.array([[1.5], [-2.0], [0.5]]) + 0.3
    model = nn.Linear(3, 1, dtype=np.float64, rng=0)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    for _ in range(150):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-6
    assert_close(model.weight, [[1.5, -2.0, 0.5]], rtol=1e-3)


def test_state_dict_round_trip_continues_identically():
    def make(p):
        return optim.Adam([p], lr=0.1)

    p1 = nn.Parameter(THETA0.copy())
    opt1 = make(p1)
    p1.grad = Tensor(GRADS[0])
    opt1.step()
    saved, theta = opt1.state_dict(), p1.data.copy()
    p1.grad = Tensor(GRADS[1])
    opt1.step()

    p2 = nn.Parameter(theta)
    opt2 = make(p2)
    opt2.load_state_dict(saved)
    p2.grad = Tensor(GRADS[1])
    opt2.step()
    assert_close(p2.data, p1.data, rtol=0, atol=0)


def test_errors_say_what_is_wrong():
    p = nn.Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="Nesterov momentum needs momentum > 0 and dampening = 0"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"betas must be in \[0, 1\)"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="does not require grad"):
        optim.SGD([Tensor(np.zeros(2))], lr=0.1)
    with pytest.raises(ValueError, match="appears twice"):
        optim.SGD([p, p], lr=0.1)
