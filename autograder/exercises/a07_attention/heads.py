"""Hidden checks of a07_attention: the split into heads and the merge back."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import GradingFailure, graded, raises, run, student_engine, time_limit, type_name

from .common import TIME_LIMIT, _grads, _slow


def _reshuffle_check(label, name, f, S, x, want_fn, hints, rng):
    """Forward values and the gradient (the inverse movement) of a reshape/transpose function."""
    import solutions as R
    xs = S.Tensor(x.copy(), requires_grad=True)
    out = run(f"{label}: {name}", f, xs)
    if not isinstance(out, S.Tensor):
        raise GradingFailure(f"{label}: {name} returned {type_name(out)}; return a Tensor (the engine's reshape and "
                             "transpose)")
    xr = R.Tensor(x.copy(), requires_grad=True)
    want = want_fn(R, xr)
    got = np.array(out.data)
    if got.shape != want.shape:
        raise GradingFailure(f"{label}: {name} returned the wrong shape")
    if not np.array_equal(got, want.data):
        for candidate, message in hints:
            c = candidate(x)
            if c.shape == got.shape and np.array_equal(got, c):
                raise GradingFailure(f"{label}: {message}")
        raise GradingFailure(f"{label}: wrong values: head h owns features h*D .. (h+1)*D - 1 of every token")
    upstream = rng.standard_normal(want.shape)
    mine = run(f"{label}: the gradient through {name}", _grads, S, out, [xs], upstream)[0]
    if mine is None or not np.allclose(mine, _grads(R, want, [xr], upstream)[0]):
        raise GradingFailure(f"{label}: no correct gradient reaches x through {name}: use the engine's reshape and "
                             "transpose on the Tensor (their gradients undo them), not .data")


@graded("a07-split-heads", "solutions.ops.attention:split_heads", points=1)
def check_split_heads(split_heads, rng):
    S = student_engine()
    f = split_heads
    cases = [("(N, T, E) = (2, 5, 12), 3 heads", (2, 5, 12), 3), ("(N, T, E) = (1, 4, 8), 2 heads", (1, 4, 8), 2),
             ("one head", (2, 3, 4), 1), ("a head per feature", (2, 3, 4), 4)]
    with time_limit(TIME_LIMIT, _slow("split_heads")):
        for label, shape, H in cases:
            N, T, E = shape
            D = E // H
            hints = [
                (lambda a, N=N, T=T, D=D, H=H: a.reshape(N, T, D, H).transpose(0, 3, 1, 2),
                 "head h must own the contiguous features h*D .. (h+1)*D - 1 (PyTorch's layout), not every H-th "
                 "feature: reshape to (N, T, H, D)"),
                (lambda a, N=N, T=T, D=D, H=H: a.reshape(N, H, T, D),
                 "a reshape alone to (N, H, T, D) mixes tokens into heads: reshape to (N, T, H, D), then swap the "
                 "T and H axes (transpose)"),
            ]
            _reshuffle_check(label, "split_heads", lambda x, H=H: f(x, H), S,  # noqa: B023
                             rng.standard_normal(shape), lambda E_, x, H=H: E_.ops.split_heads(x, H), hints, rng)
        out = run("an ndarray input: split_heads", f, np.arange(24.0).reshape(1, 4, 6), 2)
        if not isinstance(out, S.Tensor) or out.shape != (1, 2, 4, 3):
            raise GradingFailure("split_heads of an ndarray: turn it into a Tensor first (as_tensor) and return "
                                 "a Tensor of shape (N, H, T, D)")
        for label, args in [("E = 10 with 4 heads", (np.ones((2, 3, 10)), 4)), ("0 heads", (np.ones((2, 3, 6)), 0)),
                            ("a 2-D input", (np.ones((3, 6)), 2))]:
            error = raises(f, S.Tensor(args[0]), args[1])
            if not isinstance(error, ValueError):
                raise GradingFailure(f"{label}: split_heads must raise a ValueError naming the problem")
            if label.startswith("E =") and "head" not in str(error).lower():
                raise GradingFailure(f"{label}: raise your own ValueError naming E and num_heads (the head count "
                                     "must divide E), before reshape fails with a message about elements")


@graded("a07-merge-heads", "solutions.ops.attention:merge_heads", points=1)
def check_merge_heads(merge_heads, rng):
    S = student_engine()
    cases = [("(N, H, T, D) = (2, 3, 5, 4)", (2, 3, 5, 4)), ("(N, H, T, D) = (1, 2, 4, 2)", (1, 2, 4, 2)),
             ("one head", (2, 1, 3, 4)), ("D = 1", (2, 4, 3, 1))]
    with time_limit(TIME_LIMIT, _slow("merge_heads")):
        for label, shape in cases:
            N, H, T, D = shape
            hints = [
                (lambda a, N=N, T=T, H=H, D=D: a.transpose(0, 2, 3, 1).reshape(N, T, H * D),
                 "the heads are merged in the wrong order: each head's D features must stay together, head 0's "
                 "first (transpose to (N, T, H, D), then reshape), not interleaved"),
                (lambda a, N=N, T=T, H=H, D=D: a.reshape(N, T, H * D),
                 "a reshape alone mixes tokens and heads: move the head axis next to D first (transpose to "
                 "(N, T, H, D)), then reshape"),
            ]
            _reshuffle_check(label, "merge_heads", merge_heads, S, rng.standard_normal(shape),
                             lambda E_, x: E_.ops.merge_heads(x), hints, rng)
        if not isinstance(raises(merge_heads, S.Tensor(np.ones((2, 3, 4)))), ValueError):
            raise GradingFailure("a 3-D input: merge_heads must raise a ValueError naming the shape")
