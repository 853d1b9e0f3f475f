"""The engine in one screen: the worked graph example, a higher-order gradient, and seed
003's fully-connected regression. `make` runs this as the engine's part of the main job.

    python -m solutions.examples.demo
"""
import numpy as np

from solutions import Tensor, grad


def worked_example() -> None:
    a, b, c = (Tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    y = (a + b) * (b + c)  # b feeds two nodes, so its gradient is the sum of two paths
    y.backward()
    print(f"y = (a + b) * (b + c) = {y.item():g} at a=2, b=3, c=4")
    da, db, dc = (t.grad for t in (a, b, c))
    assert da is not None and db is not None and dc is not None
    print(f"  dy/da = {da.item():g}, dy/db = {db.item():g}, dy/dc = {dc.item():g}")


def second_derivative() -> None:
    x = Tensor(0.5, requires_grad=True)
    (dy,) = grad(x.tanh(), x, create_graph=True)  # the gradient is itself a graph...
    assert dy is not None
    (d2y,) = grad(dy, x)  # ...so it can be differentiated again
    assert d2y is not None
    t = np.tanh(0.5)
    print(f"tanh''(0.5) = {d2y.item():.6f}  (closed form -2 tanh (1 - tanh^2) = {-2 * t * (1 - t * t):.6f})")


def regression(steps: int = 100, lr: float = 0.1) -> None:
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((64, 3)))
    y = Tensor(x.data @ np.array([[1.5], [-2.0], [0.5]]) + 0.3 + 0.05 * rng.standard_normal((64, 1)))
    w = Tensor(np.zeros((3, 1)), requires_grad=True)
    b = Tensor(np.zeros(1), requires_grad=True)
    for step in range(steps):
        loss = ((x @ w + b - y) ** 2).mean()
        w.zero_grad()
        b.zero_grad()
        loss.backward()
        assert w.grad is not None and b.grad is not None
        w.data -= lr * w.grad.data
        b.data -= lr * b.grad.data
        if step in (0, 9, steps - 1):
            print(f"  step {step + 1:3d}: loss {loss.item():.5f}")
    print(f"  learned w = {np.round(w.data.ravel(), 2)}, b = {np.round(b.data, 2)} (true [1.5 -2. 0.5], 0.3)")


if __name__ == "__main__":
    worked_example()
    second_derivative()
    print("fully-connected regression, squared loss:")
    regression()
