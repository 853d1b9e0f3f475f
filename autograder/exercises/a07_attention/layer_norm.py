"""Hidden checks of a07_attention: layer normalisation, built from Tensor operations."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    Case,
    GradingFailure,
    close,
    graded,
    judged,
    raises,
    run,
    second_order,
    student_engine,
    time_limit,
    type_name,
)

from .common import TIME_LIMIT, _grads, _slow


def _layer_norm_hint(got, x, shape, w, b, eps, dtype) -> str:
    k = len(shape)
    axes = tuple(range(x.ndim - k, x.ndim))
    flat = x.reshape(-1, int(np.prod(shape)))
    over_batch = ((flat - flat.mean(axis=0)) / np.sqrt(flat.var(axis=0) + eps)).reshape(x.shape)
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + eps)
    ww = 1.0 if w is None else w
    bb = 0.0 if b is None else b
    candidates = [
        (over_batch * ww + bb, "layer norm is normalized over the batch (each feature across the samples): that is "
                               "batch norm; layer norm normalizes each sample over its own last axes"),
        ((x_hat + bb) * ww, "the bias is added before the weight scales: gamma * x_hat + beta"),
        ((x - mu) / np.sqrt(x.var(axis=axes, ddof=1, keepdims=True) + eps) * ww + bb,
         "use the biased variance (divide by D, not D - 1), as PyTorch does"),
        ((x - mu) / (np.sqrt(var) + eps) * ww + bb, "eps goes inside the square root: sqrt(var + eps)"),
    ]
    for candidate, message in candidates:
        if close(got, candidate, dtype):
            return message
    return "wrong values; (x - mean) / sqrt(var + eps) over the last axes, then weight * x_hat + bias"


@graded("a07-layer-norm", "solutions.nn.functional:layer_norm", points=3)
def check_layer_norm(layer_norm, rng):
    import solutions as R
    S = student_engine()
    f = layer_norm
    reference = judged().reference()
    cases = [("tokens (N, T, E) = (2, 3, 6) over E, with weight and bias", (2, 3, 6), 6, True, True, 1e-5),
             ("(M, E) = (5, 4) with weight only, eps = 0.1", (5, 4), (4,), True, False, 0.1),
             ("over the last two axes (2, 3, 4) -> normalized_shape (3, 4), with bias only", (2, 3, 4), (3, 4), False,
              True, 1e-5),
             ("without weight and bias, (4, 7)", (4, 7), 7, False, False, 1e-5),
             ("float32 tokens (2, 4, 8)", (2, 4, 8), 8, True, True, 1e-5)]
    with time_limit(TIME_LIMIT, _slow("layer_norm")):
        for k, (label, shape, norm, affine_w, affine_b, eps) in enumerate(cases):
            dtype = np.float32 if label.startswith("float32") else np.float64
            nshape = (norm,) if isinstance(norm, int) else norm
            x = (rng.standard_normal(shape) * 2 + rng.standard_normal(shape[-1:]) * 3).astype(dtype)
            w = rng.uniform(0.5, 1.5, nshape).astype(dtype) if affine_w else None
            b = rng.standard_normal(nshape).astype(dtype) if affine_b else None
            arrays = [x, w, b]
            sts = [None if a is None else S.Tensor(a.copy(), requires_grad=True) for a in arrays]
            rts = [None if a is None else R.Tensor(a.copy(), requires_grad=True) for a in arrays]
            out = run(f"{label}: layer_norm", f, sts[0], norm, sts[1], sts[2], eps)
            want = reference(rts[0], norm, rts[1], rts[2], eps)
            if not isinstance(out, S.Tensor):
                raise GradingFailure(f"{label}: layer_norm returned {type_name(out)}; return a Tensor built with "
                                     "Tensor operations")
            got = np.array(out.data)
            if got.shape != want.shape:
                raise GradingFailure(f"{label}: layer_norm must keep x's shape")
            if got.dtype != want.dtype:
                raise GradingFailure(f"{label}: layer_norm returned {got.dtype} for {want.dtype} input; keep the dtype")
            if not close(got, want.data, dtype):
                raise GradingFailure(f"{label}: " + _layer_norm_hint(
                    got, x.astype(np.float64), nshape, None if w is None else w.astype(np.float64),
                    None if b is None else b.astype(np.float64), eps, dtype))
            upstream = rng.standard_normal(shape)
            live = [t for t in sts if t is not None]
            mine = run(f"{label}: the gradients through your layer_norm", _grads, S, out, live, upstream)
            ref = _grads(R, want, [t for t in rts if t is not None], upstream)
            names = [n for n, a in zip(("x", "weight", "bias"), arrays, strict=True) if a is not None]
            for name, a, r in zip(names, mine, ref, strict=True):
                if a is None or not close(a, r, dtype):
                    raise GradingFailure(f"{label}: the gradient of {name} is wrong or missing: build layer_norm from "
                                         "Tensor operations on x, weight and bias (never .data), so the engine "
                                         "derives its backward")
            if k == 0:
                case = Case(label, [x, w, b], lambda E, a, ww, bb, n=norm, e=eps:
                            E.nn.functional.layer_norm(a, n, ww, bb, e), names=("x", "weight", "bias"))
                mine2 = run(f"{label} with create_graph=True: layer_norm", second_order, S, case, upstream,
                            (True, True, True))
                want2 = second_order(R, case, upstream, (True, True, True))
                if not all(close(a, b2, dtype) for a, b2 in zip(mine2, want2, strict=True)):
                    raise GradingFailure(f"{label}: gradients of gradients (create_graph=True) through layer_norm are "
                                         "wrong: use Tensor operations only")
        for label, x_shape, norm, wshape in [("normalized_shape (3,) for input (2, 4)", (2, 4), 3, None),
                                             ("normalized_shape (2, 4) for input (4, 2)", (4, 2), (2, 4), None),
                                             ("a weight of shape (3,) for normalized_shape (4,)", (2, 4), 4, (3,))]:
            weight = None if wshape is None else S.Tensor(np.ones(wshape))
            if not isinstance(raises(f, S.Tensor(np.ones(x_shape)), norm, weight), ValueError):
                raise GradingFailure(f"{label}: layer_norm must raise a ValueError naming the shapes")
