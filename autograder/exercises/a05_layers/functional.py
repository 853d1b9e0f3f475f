"""Hidden checks of a05_layers: linear, dropout, batch_norm, cross_entropy."""
from __future__ import annotations

import math

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    dtype_name,
    graded,
    in_sandbox,
    judged,
    raises,
    run,
    student_engine,
    student_rng,
    time_limit,
    type_name,
)

from .common import (
    TIME_LIMIT,
    _slow,
    _tensor_result,
)


# --------------------------------------------------------------------------------------------
# linear, dropout, batch_norm, cross_entropy (composites: gradients come from the engine's ops)
# --------------------------------------------------------------------------------------------
def _grads_of(E, fn, arrays, needs, upstream, name="the function"):
    """The output and the gradients (arrays) of every input that needs one, through engine E: the
    student's (`student_engine()`, in the sandbox; `fn` the answer) or the reference (`solutions`)."""
    Tensor = E.Tensor
    ts = [None if a is None else Tensor(a.copy(), requires_grad=n) for a, n in zip(arrays, needs, strict=False)]
    out = fn(*ts)
    if not isinstance(out, Tensor):
        raise GradingFailure(f"{name} returned {type_name(out)}; return a Tensor built with Tensor operations")
    wanted = [t for t, n in zip(ts, needs, strict=False) if t is not None and n]
    gs = E.grad(out, wanted, Tensor(upstream.astype(out.dtype)), allow_unused=True) if wanted else []
    return out, [None if g is None else np.array(g.data) for g in gs]


@graded("a05-linear", "solutions.nn.functional:linear", points=1, diagnose=("linear", "Module.parameters"))
def check_linear(linear, rng):
    import solutions as R
    S = student_engine()
    f = linear
    reference = judged().reference()
    cases = [
        ("a batch (5, 3) through a (4, 3) weight with bias", (5, 3), (4, 3), True, np.float64),
        ("a batch (4, 4) through a square (4, 4) weight with bias", (4, 4), (4, 4), True, np.float64),
        ("one sample (3,) through a (2, 3) weight", (3,), (2, 3), True, np.float64),
        ("a (2, 3, 4) sequence batch through a (5, 4) weight without bias", (2, 3, 4), (5, 4), False, np.float64),
        ("a batch (6, 3) through a (3, 3) weight, float32", (6, 3), (3, 3), True, np.float32),
    ]
    for label, xs, ws, with_bias, dtype in cases:
        x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
        b = rng.standard_normal(ws[0]).astype(dtype) if with_bias else None
        needs = (True, True, with_bias)

        def hint(error):
            if "matmul" in str(error) or "mismatch" in str(error):
                return "W has shape (out_features, in_features): y = x W^T + b (transpose the weight)"
            return None

        got, got_grads = run(f"{label}: linear", lambda: _grads_of(S, lambda *t: f(*t), [x, w, b], needs,
                                                                   rng_upstream(x, w), f"{label}: linear"), hint=hint)
        want, want_grads = _grads_of(R, lambda *t: reference(*t), [x, w, b], needs, rng_upstream(x, w))
        _tensor_result(label, "linear", got)
        if got.shape != want.shape:
            raise GradingFailure(f"{label}: the output must be (..., out_features): y = x W^T + b")
        got_data = got.data
        if not close(got_data, want.data, dtype):
            if ws[0] == ws[1] and close(got_data, x @ w + (0 if b is None else b), dtype):
                raise GradingFailure(f"{label}: W has shape (out_features, in_features): y = x W^T + b "
                                     "(transpose the weight)")
            if b is not None and close(got_data, want.data - b, dtype):
                raise GradingFailure(f"{label}: the bias is missing")
            raise GradingFailure(f"{label}: wrong values; y = x W^T + b")
        if got.dtype != dtype:
            raise GradingFailure(f"{label}: keep the dtype of x and W")
        for name, g, h in zip(("x", "W", "b"), got_grads, want_grads, strict=False):
            if g is None or not close(g, h, dtype):
                raise GradingFailure(f"{label}: the gradient with respect to {name} is wrong: build y with Tensor "
                                     "operations (x @ weight.T + bias), not on .data")
    error = run("mismatched features: linear", raises, f, _t(np.zeros((2, 3))), _t(np.zeros((4, 5))), None)
    if not isinstance(error, ValueError):
        raise GradingFailure("an input with 3 features and a weight expecting 5 must raise a ValueError naming "
                             "both shapes (check x.shape[-1] against weight.shape[1])")
    if "(2, 3)" not in str(error) or "(4, 5)" not in str(error):
        raise GradingFailure("the ValueError for mismatched features must name both shapes, x's and the "
                             "weight's (as tuples, e.g. (2, 3) and (4, 5)), so that the caller sees which is wrong")


def rng_upstream(x, w):
    shape = x.shape[:-1] + (w.shape[0],)
    return np.random.default_rng(5).standard_normal(shape)


def _t(a, requires_grad=False):
    """A Tensor of the student's engine (in the sandbox)."""
    return student_engine().Tensor(a, requires_grad=requires_grad)


@graded("a05-dropout", "solutions.nn.functional:dropout", points=2, diagnose=("Module.parameters",))
def check_dropout(dropout, rng):
    S = student_engine()
    Tensor, grad = S.Tensor, S.grad
    f = dropout
    with time_limit(TIME_LIMIT, _slow("dropout")):
        # evaluation and p = 0: the identity
        x = rng.standard_normal((4, 5))
        for label, p, training in [("evaluation mode (training=False), p = 0.5", 0.5, False),
                                   ("training with p = 0", 0.0, True)]:
            out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, _t(x.copy(), True), p, training,
                                                      student_rng(1)), x.shape)
            if not np.array_equal(out.data, x):
                raise GradingFailure(f"{label}: dropout must return x unchanged (no mask, no scaling)")
        for p, dtype in [(0.3, np.float64), (0.5, np.float32), (0.8, np.float64)]:
            label = f"training with p = {p}, {dtype_name(dtype)}"
            ones = np.ones((200, 250), dtype=dtype)
            xt = Tensor(ones.copy(), requires_grad=True)
            out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, xt, p, True,
                                                      student_rng(int(rng.integers(1 << 30)))), ones.shape)
            if out.dtype != dtype:
                raise GradingFailure(f"{label}: keep x's dtype (draw the mask in x's dtype or cast it)")
            v = np.asarray(out.data, dtype=np.float64)
            if not np.all(np.isfinite(v)):
                raise GradingFailure(f"{label}: the output contains nan or inf")
            kept = v != 0
            rate = 1.0 - kept.mean()
            sigma = math.sqrt(p * (1 - p) / v.size)
            scale = 1.0 / (1.0 - p)
            if abs(rate - (1 - p)) < 5 * sigma and abs(p - 0.5) > 0.05:
                raise GradingFailure(f"{label}: zero each element with probability p (keep it with probability "
                                     "1 - p); yours drops 1 - p of them")
            if abs(rate - p) > 5 * sigma:
                raise GradingFailure(f"{label}: about a fraction p of the elements must be zeroed, "
                                     "independently for each element")
            survivors = v[kept]
            if np.allclose(survivors, 1.0):
                raise GradingFailure(f"{label}: inverted dropout scales the kept units by 1/(1-p), so that the "
                                     "expected output equals x and evaluation needs no rescaling; yours does not scale")
            if np.allclose(survivors, 1.0 - p, rtol=1e-5):
                raise GradingFailure(f"{label}: scale the kept units by 1/(1-p), not by (1-p)")
            if not np.allclose(survivors, scale, rtol=1e-5):
                raise GradingFailure(f"{label}: every kept unit is x / (1-p)")
            if not out.requires_grad:
                raise GradingFailure(f"{label}: the output is not part of the graph: multiply the Tensor x by a "
                                     "constant mask array (x * mask), not x.data")
            g = rng.standard_normal(ones.shape).astype(dtype)
            (dx,) = run(f"{label}: the gradient through dropout", lambda: grad(out, [xt], Tensor(g)))
            if not close(dx.data, g * v, dtype):
                raise GradingFailure(f"{label}: the gradient must go through the same mask and scale as the output")
        # the same generator state gives the same mask; the mask depends on it
        x = rng.standard_normal((30, 40))
        first = run("dropout twice with the same seed", f, _t(x.copy()), 0.5, True, student_rng(7))
        second = run("dropout twice with the same seed", f, _t(x.copy()), 0.5, True, student_rng(7))
        third = run("dropout with another seed", f, _t(x.copy()), 0.5, True, student_rng(8))
        first, second, third = (np.asarray(_tensor_result("dropout with a seeded generator", "dropout", out).data)
                                for out in (first, second, third))
        if not np.array_equal(first, second) or np.array_equal(first, third):
            raise GradingFailure("draw the mask from the generator `rng` you are given (rng.random(x.shape)), so "
                                 "that a seeded layer drops the same units on every run")
        if not np.allclose(first[first != 0], 2 * x[first != 0]):
            raise GradingFailure("for an arbitrary x, every kept element is x / (1-p) (here p = 0.5)")
        for p in (-0.1, 1.5):
            if not isinstance(run(f"dropout with p = {p}", raises, f, _t(np.ones(3)), p, True, student_rng(1)),
                              ValueError):
                raise GradingFailure(f"p = {p} is not a probability: raise a ValueError for p outside [0, 1]")
        label = "training with rng=None"
        out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, _t(np.ones((40, 50))), 0.5, True, None),
                             (40, 50))
        v = np.asarray(out.data)
        if not (np.all((v == 0) | (v == 2.0)) and 0.35 < (v == 0).mean() < 0.65):
            raise GradingFailure(f"{label}: without a generator draw the mask from a fresh np.random.default_rng()")
        label = "training with p = 1"
        xt = Tensor(rng.standard_normal((3, 4)), requires_grad=True)
        out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, xt, 1.0, True, student_rng(1),
                                                   hint=lambda e: "p = 1 drops every element: return x * 0 (zeros "
                                                                  "that stay in the graph), never divide by "
                                                                  "1 - p = 0"),
                             (3, 4))
        if not np.all(out.data == 0):
            raise GradingFailure(f"{label}: every element is dropped: the output is all zeros (without dividing by "
                                 "1 - p = 0, which gives nan)")
        if not out.requires_grad:
            raise GradingFailure(f"{label}: keep the output in the graph (x * 0), so that x gets a zero gradient "
                                 "rather than none")


@np.errstate(all="ignore")
def _bn_reference(x, rm, rv, w, b, training, momentum, eps, unbiased_norm=False, inverted=False,
                  biased_running=False, axes=None):
    """batch_norm in NumPy with knobs for the classic mistakes (hints only): (y, running_mean, running_var)."""
    x = x.astype(np.float64)
    C = x.shape[1]
    shape = (1, C) + (1,) * (x.ndim - 2)
    per_channel = (0,) + tuple(range(2, x.ndim))
    axes = per_channel if axes is None else axes
    rm = None if rm is None else rm.astype(np.float64).copy()
    rv = None if rv is None else rv.astype(np.float64).copy()
    if training:
        n = int(np.prod([x.shape[a] for a in axes]))
        mean = x.mean(axis=axes, keepdims=True)
        var = x.var(axis=axes, keepdims=True)
        y = (x - mean) / np.sqrt((var * n / (n - 1) if unbiased_norm else var) + eps)
        if rm is not None and axes == per_channel:
            m = 1 - momentum if inverted else momentum
            rm = (1 - m) * rm + m * mean.reshape(C)
            rv = (1 - m) * rv + m * (var if biased_running else var * n / (n - 1)).reshape(C)
    else:
        y = (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y, rm, rv


@graded("a05-batch-norm", "solutions.nn.functional:batch_norm", points=3, diagnose=("batch_norm", "Module.parameters"))
def check_batch_norm(batch_norm, rng):
    import solutions as R
    S = student_engine()
    f = batch_norm
    reference = judged().reference()
    cases = [
        # label, x shape, training, affine, running stats, momentum, eps, dtype
        ("training on (N, C) = (8, 3), affine, running statistics", (8, 3), True, True, True, 0.1, 1e-5, np.float64),
        ("training on (N, C, L) = (4, 3, 5)", (4, 3, 5), True, True, True, 0.1, 1e-5, np.float64),
        ("training on (N, C, H, W) = (2, 3, 4, 5), momentum 0.3, eps 1e-3", (2, 3, 4, 5), True, True, True, 0.3,
         1e-3, np.float64),
        ("training without affine parameters or running statistics", (6, 4), True, False, False, 0.1, 1e-5,
         np.float64),
        ("evaluation mode on (N, C, H, W) = (3, 2, 3, 3) with running statistics", (3, 2, 3, 3), False, True, True,
         0.1, 1e-5, np.float64),
        ("training on (N, C) = (16, 5), float32", (16, 5), True, True, True, 0.1, 1e-5, np.float32),
    ]
    with time_limit(TIME_LIMIT, _slow("batch_norm")):
        for label, shape, training, affine, stats, momentum, eps, dtype in cases:
            label = f"{label}, {dtype_name(dtype)}" if dtype != np.float32 else label
            C = shape[1]
            x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
            w = rng.uniform(0.5, 1.5, C).astype(dtype) if affine else None
            b = rng.standard_normal(C).astype(dtype) if affine else None
            rm0 = rng.standard_normal(C).astype(dtype) if stats else None
            rv0 = rng.uniform(0.5, 2.0, C).astype(dtype) if stats else None
            # the student's running statistics live in the sandbox, where they are updated in place
            rm, rv = in_sandbox(rm0), in_sandbox(rv0)
            upstream = rng.standard_normal(shape)
            needs = (True, False, False, affine, affine)

            def call(xt, _rm, _rv, wt, bt, fn=f, rm=rm, rv=rv):
                return fn(xt, rm, rv, wt, bt, training, momentum, eps)

            got, got_grads = run(f"{label}: batch_norm", _grads_of, S, call, [x, None, None, w, b], needs, upstream,
                                 f"{label}: batch_norm")
            _tensor_result(label, "batch_norm", got, shape)
            rm_obj, rv_obj = (None if rm is None else np.asarray(rm)), (None if rv is None else np.asarray(rv))
            ref_rm, ref_rv = (None if rm0 is None else rm0.copy()), (None if rv0 is None else rv0.copy())

            def ref_call(xt, _rm, _rv, wt, bt):
                return reference(xt, ref_rm, ref_rv, wt, bt, training, momentum, eps)

            want, want_grads = _grads_of(R, ref_call, [x, None, None, w, b], needs, upstream)
            args = (x, rm0, rv0, w, b, training, momentum, eps)
            got_data = got.data
            if not close(got_data, want.data, dtype):
                if training and close(got_data, _bn_reference(*args, unbiased_norm=True)[0], dtype):
                    raise GradingFailure(f"{label}: normalize with the *biased* batch variance (divide by n, as "
                                         "x.var() does); the unbiased one (n - 1) is only for running_var")
                if not training and stats and close(got_data, _bn_reference(*args[:5], True, momentum, eps)[0], dtype):
                    raise GradingFailure(f"{label}: in evaluation mode normalize with the running statistics, not "
                                         "the batch's")
                if training and len(shape) > 2 and close(got_data, _bn_reference(*args, axes=(0,))[0], dtype):
                    raise GradingFailure(f"{label}: the statistics are per channel (axis 1), over N and every "
                                         "spatial axis: reduce over axes (0, 2, ...), not axis 0 only")
                shape1 = (1, C) + (1,) * (len(shape) - 2)
                mean = x.astype(np.float64).mean(axis=(0,) + tuple(range(2, len(shape))), keepdims=True)
                var = x.astype(np.float64).var(axis=(0,) + tuple(range(2, len(shape))), keepdims=True)
                outside = (x - mean) / (np.sqrt(var) + eps)
                if training and affine:
                    outside = outside * w.reshape(shape1) + b.reshape(shape1)
                if training and close(got_data, outside, dtype):
                    raise GradingFailure(f"{label}: eps goes inside the square root: (x - mean) / sqrt(var + eps)")
                raise GradingFailure(f"{label}: wrong output; y = weight * (x - mean) / sqrt(var + eps) + bias, per "
                                     "channel")
            if got.dtype != dtype:
                raise GradingFailure(f"{label}: keep x's dtype")
            for name, g, h in zip(("x", "weight", "bias"), got_grads, want_grads, strict=False):
                if g is None or not close(g, h, dtype):
                    raise GradingFailure(f"{label}: the gradient with respect to {name} is wrong: compute the "
                                         "statistics and the normalization with Tensor operations on x (the mean "
                                         "and variance depend on x too)")
            if stats and training:
                if rm_obj is not None and np.array_equal(rm_obj, rm0) and np.array_equal(rv_obj, rv0):
                    raise GradingFailure(f"{label}: update running_mean and running_var in place "
                                         "(running_mean *= ..., +=): the module keeps these very arrays")
                if not (close(rm_obj, ref_rm, dtype) and close(rv_obj, ref_rv, dtype)):
                    _, inv_m, inv_v = _bn_reference(*args, inverted=True)
                    if close(rm_obj, inv_m, dtype):
                        raise GradingFailure(f"{label}: running statistics: momentum m is the weight of the *new* "
                                             "batch statistic: r <- (1 - m) r + m s (yours is inverted)")
                    _, _, biased_v = _bn_reference(*args, biased_running=True)
                    if close(rm_obj, ref_rm, dtype) and close(rv_obj, biased_v, dtype):
                        raise GradingFailure(f"{label}: running_var is updated with the *unbiased* batch variance "
                                             "(times n / (n - 1)), PyTorch's convention")
                    raise GradingFailure(f"{label}: wrong running statistics: r <- (1 - m) r + m s, with the batch "
                                         "mean and the unbiased batch variance")
            if stats and not training and not (np.array_equal(rm_obj, rm0) and np.array_equal(rv_obj, rv0)):
                raise GradingFailure(f"{label}: evaluation mode must not change the running statistics")
        x = S.Tensor(rng.standard_normal((1, 3)))
        error = run("training on one sample: batch_norm", raises, f, x, np.zeros(3), np.ones(3), None, None, True)
        if not isinstance(error, ValueError):
            raise GradingFailure("training on a single value per channel (input (1, C)) cannot estimate a variance: "
                                 "raise a ValueError")


@graded("a05-cross-entropy", "solutions.nn.functional:cross_entropy", points=2,
        diagnose=("cross_entropy", "Module.parameters"))
def check_cross_entropy(cross_entropy, rng):
    import solutions as R
    S = student_engine()
    f = cross_entropy
    reference = judged().reference()
    cases = [
        ("logits (5, 4), reduction='mean'", (5, 4), 1.0, "mean", 0.0, np.float64),
        ("logits (6, 3), reduction='sum'", (6, 3), 1.0, "sum", 0.0, np.float64),
        ("logits (4, 5), reduction='none'", (4, 5), 1.0, "none", 0.0, np.float64),
        ("logits (5, 4) with label_smoothing=0.1", (5, 4), 1.0, "mean", 0.1, np.float64),
        ("large logits (about 1000)", (4, 6), 1000.0, "mean", 0.0, np.float64),
        ("large logits (about 100), float32", (4, 6), 100.0, "mean", 0.0, np.float32),
        ("one sample, logits (1, 3)", (1, 3), 1.0, "mean", 0.0, np.float64),
    ]
    for label, shape, scale, reduction, smoothing, dtype in cases:
        logits = (rng.standard_normal(shape) * scale).astype(dtype)
        target = rng.integers(0, shape[1], size=shape[0])
        out_shape = (shape[0],) if reduction == "none" else ()
        upstream = rng.standard_normal(out_shape)

        def call(z, fn):
            return fn(z, target.copy(), reduction, smoothing)

        got, got_grads = run(f"{label}: cross_entropy", _grads_of, S, lambda z: call(z, f), [logits], (True,),
                             upstream, f"{label}: cross_entropy")
        want, want_grads = _grads_of(R, lambda z: call(z, reference), [logits], (True,), upstream)
        _tensor_result(label, "cross_entropy", got)
        got_data = got.data
        if not np.all(np.isfinite(np.asarray(got_data, dtype=np.float64))) or \
                (got_grads[0] is not None and not np.all(np.isfinite(got_grads[0]))):
            raise GradingFailure(f"{label}: your cross-entropy overflows for large logits (nan or inf): use "
                                 "log_softmax, which subtracts each row's max, instead of exp and log of softmax")
        if got.shape != want.shape:
            raise GradingFailure(f"{label}: reduction='{reduction}' gives " +
                                 ("one loss per sample, shape (N,)" if reduction == "none" else "a 0-d Tensor"))
        if not close(got_data, want.data, dtype):
            d = np.asarray(got_data, dtype=np.float64)
            w = np.asarray(want.data, dtype=np.float64)
            if reduction == "mean" and close(d, w * shape[0], dtype):
                raise GradingFailure(f"{label}: reduction='mean' averages over the N samples (you summed)")
            if reduction == "sum" and close(d, w / shape[0], dtype):
                raise GradingFailure(f"{label}: reduction='sum' adds the N losses (you averaged)")
            if close(d, -w, dtype):
                raise GradingFailure(f"{label}: the sign: the loss is -log p of the target class, which is >= 0")
            if smoothing:
                log_p = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) \
                    - logits.max(1, keepdims=True)
                picked = -log_p[np.arange(shape[0]), target]
                summed = ((1 - smoothing) * picked - smoothing * log_p.sum(axis=1)).mean()
                if close(d, summed, dtype):
                    raise GradingFailure(f"{label}: the smoothing term is eps times the *mean* over the K classes "
                                         "of -log p (the uniform target puts eps/K on each class), not the sum")
                raise GradingFailure(f"{label}: with label smoothing eps the loss is (1 - eps)(-log p_target) + "
                                     "eps * mean over the classes of (-log p)")
            raise GradingFailure(f"{label}: wrong loss; l_i = logsumexp(z_i) - z_i[t_i]")
        if got.dtype != dtype:
            raise GradingFailure(f"{label}: keep the logits' dtype")
        if got_grads[0] is None or not close(got_grads[0], want_grads[0], dtype):
            raise GradingFailure(f"{label}: the gradient with respect to the logits is wrong: build the loss with "
                                 "Tensor operations (log_softmax, indexing, mean), not on .data")
    logits = _t(rng.standard_normal((3, 4)))
    for what, target, error_type in [("a target out of range", np.array([0, 4, 1]), IndexError),
                                     ("one target too few", np.array([0, 1]), ValueError),
                                     ("float targets", np.array([0.0, 1.0, 2.0]), TypeError)]:
        if not isinstance(run(f"{what}: cross_entropy", raises, f, logits, target), error_type):
            raise GradingFailure(f"{what}: check the targets with the given class_targets(\"cross_entropy\", "
                                 f"logits, target), which raises a {error_type.__name__} for them")
