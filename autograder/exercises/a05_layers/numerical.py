"""Hidden checks of a05_layers: the numerical gradient (central differences)."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    current,
    graded,
    in_sandbox,
    run,
    time_limit,
    type_name,
)

from .common import (
    TIME_LIMIT,
    _slow,
)


# --------------------------------------------------------------------------------------------
# The numerical gradient (central differences), as chapter 5 checks cross-entropy's gradient
# --------------------------------------------------------------------------------------------
def _central(f, x: np.ndarray, eps: float) -> np.ndarray:
    """The central differences of f at x, here (x is not changed)."""
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        grad[i] = (f(plus) - f(minus)) / (2 * eps)
    return grad


def _one_sided(f, x: np.ndarray, eps: float) -> np.ndarray:
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        plus = x.copy()
        plus[i] += eps
        grad[i] = (f(plus) - f(x)) / eps
    return grad


@graded("a05-numerical-gradient", "solutions.nn.numerical:numerical_gradient", points=2,
        diagnose=("Module.parameters",))
def check_numerical_gradient(numerical_gradient, rng):
    np_s = current().module("numpy")
    f = numerical_gradient

    def call(label, fn, x, *eps):
        """numerical_gradient(fn, x, *eps) on a sandbox copy of x; (the result, x as it is afterwards)."""
        xs = in_sandbox(x.copy())
        grad = run(f"{label}: numerical_gradient", f, fn, xs, *eps,
                   hint=lambda e: "x may have any shape, even 0-d: loop over np.ndindex(x.shape)"
                   if x.ndim != 1 and getattr(e, "remote_type", "") in ("IndexError", "TypeError") else None)
        after = np.asarray(xs)
        if not isinstance(grad, np.ndarray) or grad.shape != x.shape:
            raise GradingFailure(f"{label}: return an ndarray of x's shape, one partial derivative per entry"
                                 + ("" if isinstance(grad, np.ndarray) else f" (got {type_name(grad)})"))
        if not np.array_equal(after, x):
            if np.allclose(after, x, rtol=1e-12, atol=0):
                raise GradingFailure(f"{label}: x must come back exactly: keep each entry's original value and put "
                                     "it back (x[i] = original); adding and subtracting eps again is off in the "
                                     "last bits")
            raise GradingFailure(f"{label}: x must be restored: after its two evaluations, put each entry back to "
                                 "its original value (the caller's array is changed in place)")
        return grad.astype(np.float64)

    norm = np.linalg.norm
    with time_limit(TIME_LIMIT, _slow("numerical_gradient")):
        for label, shape, eps in [("f = the norm of x, x of shape (6,), eps 1e-3", (6,), 1e-3),
                                  ("f = the norm of x, x of shape (3, 4), eps 1e-3", (3, 4), 1e-3),
                                  ("f = the norm of x, x of shape (2, 3, 2), eps 1e-2", (2, 3, 2), 1e-2),
                                  ("f = the norm of x, a 0-d x, eps 1e-3", (), 1e-3)]:
            x = np.array(rng.standard_normal(shape) + 0.5)  # an ndarray, even 0-d
            got = call(label, np_s.linalg.norm, x, eps)
            want = _central(norm, x, eps)
            if np.allclose(got, want, rtol=1e-6, atol=1e-9):
                continue
            if np.allclose(got, 2 * want, rtol=1e-6, atol=1e-9):
                raise GradingFailure(f"{label}: the two points x - eps and x + eps are 2 eps apart: divide the "
                                     "difference by 2 eps")
            if np.allclose(got, _one_sided(norm, x, eps), rtol=1e-6, atol=1e-9):
                raise GradingFailure(f"{label}: use central differences, (f(x + eps) - f(x - eps)) / (2 eps), "
                                     "accurate to O(eps^2); yours is one-sided, (f(x + eps) - f(x)) / eps, only "
                                     "O(eps)")
            if np.allclose(got, _central(norm, x, 1e-6), rtol=1e-4, atol=1e-7):
                raise GradingFailure(f"{label}: use the eps you are given")
            if len(shape) != 1:
                raise GradingFailure(f"{label}: wrong values for an x of {len(shape)} dimension(s): every entry "
                                     "of x has its own partial derivative, whatever x's shape (np.ndindex(x.shape))")
            raise GradingFailure(f"{label}: wrong values; grad[i] = (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)")
        # Entries that do not survive adding and subtracting eps ((x - eps) + eps is off in the last
        # bit): "put every entry back exactly" is checked bitwise where arithmetic would not do it.
        label = "f = the norm of x, x of shape (9,), eps 1e-2, entries that x - eps + eps does not give back"
        eps = 1e-2
        pool = rng.standard_normal(400)
        back = pool[(pool - eps) + eps != pool][:3]  # x[i] = x - eps, later x[i] += eps
        there_and_back = pool[((pool + eps) - 2 * eps) + eps != pool][:3]  # += eps, -= 2 eps, += eps
        x = np.concatenate([[-1.0, 0.5, 2.0], back, there_and_back])
        got = call(label, np_s.linalg.norm, x, eps)
        if not np.allclose(got, _central(norm, x, eps), rtol=1e-6, atol=1e-9):
            raise GradingFailure(f"{label}: wrong values; grad[i] = (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)")
        # the default eps: f = the variance (quadratic: central differences are exact up to rounding)
        label = "f = the variance of x, x of shape (8,), the default eps"
        x = rng.standard_normal(8)
        got = call(label, np_s.var, x)
        if not np.allclose(got, 2 * (x - x.mean()) / x.size, rtol=1e-4, atol=1e-6):
            raise GradingFailure(f"{label}: wrong values with the default eps = 1e-6")
        # f may read x from outside: x.dot(arg) is x . x only when the argument *is* x, changed in place
        label = "f = x.dot, which reads x itself as well as its argument"
        x = rng.standard_normal(5)
        xs = in_sandbox(x.copy())
        got = run(f"{label}: numerical_gradient", f, xs.dot, xs, 1e-4)
        if not isinstance(got, np.ndarray) or got.shape != x.shape:
            raise GradingFailure(f"{label}: return an ndarray of x's shape")
        if not np.array_equal(np.asarray(xs), x):
            raise GradingFailure(f"{label}: x must be restored exactly after each entry")
        if np.allclose(got, x, rtol=1e-5, atol=1e-8):
            raise GradingFailure(f"{label}: change x itself, in place (x[i] = original + eps), and call f(x): f may "
                                 "read x from outside (lambda _: loss(W)), so perturbing a copy misses it")
        if not np.allclose(got, 2 * x, rtol=1e-5, atol=1e-8):
            raise GradingFailure(f"{label}: wrong values; grad[i] = (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)")
