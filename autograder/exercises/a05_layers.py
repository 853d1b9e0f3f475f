"""Hidden checks of a05_layers: initialization, layers, the loss, optimizers and mini-batches.

The exercises are functions and methods of `solutions/nn/` (fan_in_and_fan_out, kaiming_uniform_,
linear, dropout, batch_norm, cross_entropy), `solutions/optim.py` (SGD._update, Adam._update) and
`solutions/data.py` (DataLoader.__iter__). Each is graded by the trusted judge: the student's answer
runs in the sandbox's engine, where every other exercise is the reference, on inputs built there
with that engine (Tensors, generators, datasets, running-statistics arrays); the same case runs
through the reference engine here, and only plain data (arrays, numbers) crosses, so gradients are
checked fully. Random parts (initialization, dropout masks, shuffling) draw from generators made in
the sandbox and are checked by their contract, not by the reference's exact draws: bounds and
variances, mask values and rates, permutations, reproducibility from the given generator.
Optimizers are run for several steps with gradients set by hand and compared with PyTorch's update
rules. Messages name the kind of mistake.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judge.checks import (close, in_sandbox, prepare, run, same_object, sandbox_type, spec_of,
                                     student_engine, time_limit, type_name)
from autograder.judge.registry import GradingFailure
from autograder.judge.judge import current, student_module
from autograder.spec import graded

TIME_LIMIT = 30.0


def _slow(name: str) -> str:
    return f"{name}: the checks took more than {TIME_LIMIT:g} s on small inputs; is there an endless loop?"


def _dtype_name(dtype) -> str:
    return np.dtype(dtype).name


# --------------------------------------------------------------------------------------------
# The sandbox side: objects made there, with the student's engine
# --------------------------------------------------------------------------------------------


def _student_rng(seed: int):
    """`np.random.default_rng(seed)`, made in the sandbox (a Generator does not cross)."""
    return current().module("numpy").random.default_rng(seed)


def _sandbox_array(a: np.ndarray):
    """A sandbox copy of `a`, kept there (a proxy): what the student's code changes in place shows
    up in `np.asarray(proxy)`."""
    return in_sandbox(a)


def _sandbox_subclass(base, name: str, namespace: dict):
    """`type(name, (*bases,), namespace)` in the sandbox, for classes of the sandbox (proxies)."""
    bases = base if isinstance(base, tuple) else (base,)
    return sandbox_type(bases[0])(name, bases, namespace)


def _tensor_result(label: str, name: str, out, shape=None):
    if not isinstance(out, student_engine().Tensor):
        raise GradingFailure(f"{label}: {name} returned {type_name(out)}; return a Tensor built with Tensor "
                             "operations")
    if shape is not None and out.shape != tuple(shape):
        raise GradingFailure(f"{label}: {name} returned a Tensor of the wrong shape")
    return out


def _raises(f, *args, **kwargs):
    """The exception f raises (None if it returns); a student's exception also is its builtin
    class (`isinstance(error, ValueError)`)."""
    try:
        f(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 (the student's code: any exception is an answer here)
        return error
    return None


# --------------------------------------------------------------------------------------------
# Initialization
# --------------------------------------------------------------------------------------------
@graded("a05-fan-in-fan-out", "solutions.nn.init:fan_in_and_fan_out", points=1, title="fan_in_and_fan_out")
def check_fan(fan_in_and_fan_out, rng):
    f = prepare(fan_in_and_fan_out, "a05-fan-in-fan-out", "function")
    cases = [((5, 3), "a Linear weight (out, in)"), ((8, 3, 3, 3), "a Conv2d weight (K, C, KH, KW)"),
             ((6, 2, 1, 5), "a non-square (K, C, 1, KW) kernel"), ((4, 7, 3), "a Conv1d weight (K, C, KL)"),
             ((16, 4, 1, 1), "a 1x1 convolution"), ((2, 3, 2, 2, 2), "a 3-D convolution weight")]
    for shape, label in cases:
        got = run(f"{label}: fan_in_and_fan_out", f, shape)
        receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        want = (shape[1] * receptive, shape[0] * receptive)
        if not isinstance(got, tuple) or len(got) != 2:
            raise GradingFailure(f"{label}: return a pair (fan_in, fan_out)")
        if not all(isinstance(v, (int, np.integer)) for v in got):
            raise GradingFailure(f"{label}: fan_in and fan_out are ints")
        if tuple(got) == want:
            continue
        if tuple(got) == want[::-1]:
            raise GradingFailure(f"{label}: fan_in and fan_out are swapped: fan_in counts the inputs each output "
                                 "sees (shape[1] x receptive field), fan_out the outputs each input feeds")
        if tuple(got) == (shape[1], shape[0]):
            raise GradingFailure(f"{label}: for a convolution weight each output sees C x KH x KW inputs: multiply "
                                 "by the receptive field (the product of the kernel dimensions)")
        raise GradingFailure(f"{label}: wrong fans; fan_in = shape[1] x receptive field, fan_out = shape[0] x "
                             "receptive field")
    if not isinstance(run("a 1-D shape: fan_in_and_fan_out", _raises, f, (5,)), ValueError):
        raise GradingFailure("a 1-D shape has no fan in and fan out: raise a ValueError")


@graded("a05-kaiming-uniform", "solutions.nn.init:kaiming_uniform_", points=1, title="kaiming_uniform_")
def check_kaiming_uniform(kaiming_uniform_, rng):
    from solutions.nn import init
    Tensor = student_engine().Tensor
    f = prepare(kaiming_uniform_, "a05-kaiming-uniform", "function")
    cases = [
        ("the defaults (a=0, fan_in, leaky_relu) on a (300, 400) weight", (300, 400), {}, np.float64),
        ("a=sqrt(5), Linear's default, on a (200, 500) weight", (200, 500), {"a": math.sqrt(5)}, np.float32),
        ("mode='fan_out' on a (64, 32, 3, 3) conv weight", (64, 32, 3, 3), {"mode": "fan_out"}, np.float64),
        ("nonlinearity='relu' on a (40, 16, 5, 5) conv weight", (40, 16, 5, 5), {"nonlinearity": "relu"}, np.float64),
    ]
    with time_limit(TIME_LIMIT, _slow("kaiming_uniform_")):
        for label, shape, kwargs, dtype in cases:
            label = f"{label}, {_dtype_name(dtype)}"
            t = Tensor(np.zeros(shape, dtype=dtype))
            seed = int(rng.integers(1 << 30))
            out = run(f"{label}: kaiming_uniform_", lambda: f(t, rng=_student_rng(seed), **kwargs))
            if not same_object(out, t):
                raise GradingFailure(f"{label}: fill the tensor in place and return it (return tensor), as "
                                     "torch.nn.init does")
            w = np.asarray(t.data)
            if w.shape != shape or w.dtype != dtype:
                raise GradingFailure(f"{label}: keep the tensor's shape and dtype (fill tensor.data[...])")
            a, mode, nl = kwargs.get("a", 0.0), kwargs.get("mode", "fan_in"), kwargs.get("nonlinearity", "leaky_relu")
            fan_in, fan_out = init.fan_in_and_fan_out(shape)
            gain = init.calculate_gain(nl, a)
            bound = math.sqrt(3.0) * gain / math.sqrt(fan_in if mode == "fan_in" else fan_out)
            observed = float(np.max(np.abs(w)))
            if observed == 0:
                raise GradingFailure(f"{label}: the tensor is still all zeros: draw U(-b, b) into it")
            if observed <= bound * (1 + 1e-5) and observed >= 0.98 * bound \
                    and abs(float(np.var(w.astype(np.float64))) / (bound * bound / 3) - 1) < 0.05 \
                    and abs(float(np.mean(w))) < 0.02 * bound:
                t2 = Tensor(np.zeros(shape, dtype=dtype))
                run(f"{label}: kaiming_uniform_", lambda: f(t2, rng=_student_rng(seed), **kwargs))
                if not np.array_equal(np.asarray(t2.data), w):
                    raise GradingFailure(f"{label}: draw from the generator `rng` you are given, so that a seeded "
                                         "model is the same model every time")
                continue
            ratio = observed / bound
            other_fan = fan_out if mode == "fan_in" else fan_in
            std = gain / math.sqrt(fan_in if mode == "fan_in" else fan_out)
            if abs(ratio - 1 / math.sqrt(3)) < 0.03:
                raise GradingFailure(f"{label}: U(-b, b) has variance b^2/3, so for the variance gain^2/fan the "
                                     "bound is b = gain * sqrt(3/fan): the factor sqrt(3) is missing")
            if abs(observed / (math.sqrt(3.0) * gain / math.sqrt(other_fan)) - 1) < 0.03 and fan_in != fan_out:
                raise GradingFailure(f"{label}: `mode` chooses the fan: fan_in (the default) or fan_out")
            if abs(observed / (math.sqrt(3.0) / math.sqrt(fan_in if mode == "fan_in" else fan_out)) - 1) < 0.03:
                raise GradingFailure(f"{label}: the gain is missing: calculate_gain(nonlinearity, a)")
            if abs(float(np.std(w)) / std - 1) < 0.05 and observed > 1.2 * bound:
                raise GradingFailure(f"{label}: kaiming_uniform_ draws from a uniform distribution, not a normal one")
            raise GradingFailure(f"{label}: the values must be uniform on (-b, b), b = gain * sqrt(3/fan)")


# --------------------------------------------------------------------------------------------
# linear, dropout, batch_norm, cross_entropy (composites: gradients come from the engine's ops)
# --------------------------------------------------------------------------------------------
def _grads_of(E, fn, arrays, needs, upstream, name="the function"):
    """The output and the gradients (arrays) of every input that needs one, through engine E: the
    student's (`student_engine()`, in the sandbox; `fn` the answer) or the reference (`solutions`)."""
    Tensor = E.Tensor
    ts = [None if a is None else Tensor(a.copy(), requires_grad=n) for a, n in zip(arrays, needs)]
    out = fn(*ts)
    if not isinstance(out, Tensor):
        raise GradingFailure(f"{name} returned {type_name(out)}; return a Tensor built with Tensor operations")
    wanted = [t for t, n in zip(ts, needs) if t is not None and n]
    gs = E.grad(out, wanted, Tensor(upstream.astype(out.dtype)), allow_unused=True) if wanted else []
    return out, [None if g is None else np.array(g.data) for g in gs]


@graded("a05-linear", "solutions.nn.functional:linear", points=1, title="linear")
def check_linear(linear, rng):
    import solutions as R
    S = student_engine()
    f = prepare(linear, "a05-linear", "function")
    reference = spec_of("a05-linear").reference()
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
        for name, g, h in zip(("x", "W", "b"), got_grads, want_grads):
            if g is None or not close(g, h, dtype):
                raise GradingFailure(f"{label}: the gradient with respect to {name} is wrong: build y with Tensor "
                                     "operations (x @ weight.T + bias), not on .data")
    error = run("mismatched features: linear", _raises, f, _t(np.zeros((2, 3))), _t(np.zeros((4, 5))), None)
    if not isinstance(error, ValueError):
        raise GradingFailure("an input with 3 features and a weight expecting 5 must raise a ValueError naming "
                             "both shapes (check x.shape[-1] against weight.shape[1])")


def rng_upstream(x, w):
    shape = x.shape[:-1] + (w.shape[0],)
    return np.random.default_rng(5).standard_normal(shape)


def _t(a, requires_grad=False):
    """A Tensor of the student's engine (in the sandbox)."""
    return student_engine().Tensor(a, requires_grad=requires_grad)


@graded("a05-dropout", "solutions.nn.functional:dropout", points=2, title="dropout")
def check_dropout(dropout, rng):
    S = student_engine()
    Tensor, grad = S.Tensor, S.grad
    f = prepare(dropout, "a05-dropout", "function")
    with time_limit(TIME_LIMIT, _slow("dropout")):
        # evaluation and p = 0: the identity
        x = rng.standard_normal((4, 5))
        for label, p, training in [("evaluation mode (training=False), p = 0.5", 0.5, False),
                                   ("training with p = 0", 0.0, True)]:
            out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, _t(x.copy(), True), p, training,
                                                      _student_rng(1)), x.shape)
            if not np.array_equal(out.data, x):
                raise GradingFailure(f"{label}: dropout must return x unchanged (no mask, no scaling)")
        for p, dtype in [(0.3, np.float64), (0.5, np.float32), (0.8, np.float64)]:
            label = f"training with p = {p}, {_dtype_name(dtype)}"
            ones = np.ones((200, 250), dtype=dtype)
            xt = Tensor(ones.copy(), requires_grad=True)
            out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, xt, p, True,
                                                      _student_rng(int(rng.integers(1 << 30)))), ones.shape)
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
        first = run("dropout twice with the same seed", f, _t(x.copy()), 0.5, True, _student_rng(7))
        second = run("dropout twice with the same seed", f, _t(x.copy()), 0.5, True, _student_rng(7))
        third = run("dropout with another seed", f, _t(x.copy()), 0.5, True, _student_rng(8))
        first, second, third = (np.asarray(_tensor_result("dropout with a seeded generator", "dropout", out).data)
                                for out in (first, second, third))
        if not np.array_equal(first, second) or np.array_equal(first, third):
            raise GradingFailure("draw the mask from the generator `rng` you are given (rng.random(x.shape)), so "
                                 "that a seeded layer drops the same units on every run")
        if not np.allclose(first[first != 0], 2 * x[first != 0]):
            raise GradingFailure("for an arbitrary x, every kept element is x / (1-p) (here p = 0.5)")
        label = "training with p = 1"
        xt = Tensor(rng.standard_normal((3, 4)), requires_grad=True)
        out = _tensor_result(label, "dropout", run(f"{label}: dropout", f, xt, 1.0, True, _student_rng(1)),
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


@graded("a05-batch-norm", "solutions.nn.functional:batch_norm", points=3, title="batch_norm")
def check_batch_norm(batch_norm, rng):
    import solutions as R
    S = student_engine()
    f = prepare(batch_norm, "a05-batch-norm", "function")
    reference = spec_of("a05-batch-norm").reference()
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
            label = f"{label}, {_dtype_name(dtype)}" if dtype != np.float32 else label
            C = shape[1]
            x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
            w = rng.uniform(0.5, 1.5, C).astype(dtype) if affine else None
            b = rng.standard_normal(C).astype(dtype) if affine else None
            rm0 = rng.standard_normal(C).astype(dtype) if stats else None
            rv0 = rng.uniform(0.5, 2.0, C).astype(dtype) if stats else None
            # the student's running statistics live in the sandbox, where they are updated in place
            rm, rv = (None if rm0 is None else _sandbox_array(rm0.copy())), \
                (None if rv0 is None else _sandbox_array(rv0.copy()))
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
            for name, g, h in zip(("x", "weight", "bias"), got_grads, want_grads):
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
        error = run("training on one sample: batch_norm", _raises, f, x, np.zeros(3), np.ones(3), None, None, True)
        if not isinstance(error, ValueError):
            raise GradingFailure("training on a single value per channel (input (1, C)) cannot estimate a variance: "
                                 "raise a ValueError")


@graded("a05-cross-entropy", "solutions.nn.functional:cross_entropy", points=2, title="cross_entropy")
def check_cross_entropy(cross_entropy, rng):
    import solutions as R
    S = student_engine()
    f = prepare(cross_entropy, "a05-cross-entropy", "function")
    reference = spec_of("a05-cross-entropy").reference()
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
    if not isinstance(run("a target out of range: cross_entropy", _raises, f, logits, np.array([0, 4, 1])), IndexError):
        raise GradingFailure("a target class outside [0, K) must raise an IndexError (check the targets with the "
                             "given _class_targets)")


# --------------------------------------------------------------------------------------------
# Optimizers: several steps with gradients set by hand, compared with PyTorch's rules
# --------------------------------------------------------------------------------------------
SHAPES = [(3, 4), (5,)]
STEPS = 4


def _run_optimizer(E, cls, kwargs, grads, p0, label, name):
    """Each parameter's values after each step, with `cls` and Tensors of engine E: the student's
    (in the sandbox, where `p.data` is changed in place; reading it here copies it) or the reference."""
    Tensor = E.Tensor
    params = [Tensor(a.copy(), requires_grad=True) for a in p0]
    opt = run(f"{label}: {name}(...)", lambda: cls(params, **kwargs))
    history = []
    for step, gs in enumerate(grads):
        for p, g in zip(params, gs):
            p.grad = None if g is None else Tensor(g.copy())
        run(f"{label}: {name}.step()", opt.step)
        history.append([np.array(p.data, dtype=np.float64) for p in params])
    return history


def _same(a, b, dtype=np.float64) -> bool:
    return all(close(x, y, dtype) for hx, hy in zip(a, b) for x, y in zip(hx, hy))


def _grads(rng, dtype, skip=False):
    out = []
    for step in range(STEPS):
        gs = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
        if skip and step == 1:
            gs[1] = None  # a parameter unused in one step: its state does not advance
        out.append(gs)
    return out


@np.errstate(all="ignore")
def _sgd_sim(p0, grads, lr, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0, variant=""):
    params = [a.astype(np.float64).copy() for a in p0]
    bufs: list = [None] * len(params)
    history = []
    for gs in grads:
        for i, g in enumerate(gs):
            if g is None:
                continue
            g = g.astype(np.float64)
            sign = -1 if variant == "wd-sign" else 1
            if weight_decay:
                g = g + sign * weight_decay * params[i]
            if momentum:
                if bufs[i] is None or variant == "no-state":
                    bufs[i] = (1 - dampening) * g if variant == "dampen-first" else g.copy()
                else:
                    bufs[i] = momentum * bufs[i] + (1 - dampening) * g
                if nesterov and variant == "nesterov-ignored":
                    d = bufs[i]
                elif nesterov and variant == "nesterov-swapped":
                    d = bufs[i] + momentum * g
                elif nesterov:
                    d = g + momentum * bufs[i]
                else:
                    d = bufs[i]
            else:
                d = g
            params[i] = params[i] - lr * d
        history.append([p.copy() for p in params])
    return history


@graded("a05-sgd", "solutions.optim:SGD", regions=("_update",), points=3, title="SGD._update")
def check_sgd(SGD, rng):
    import solutions as R
    S = student_engine()
    cls = prepare(SGD, "a05-sgd", "class")
    reference = spec_of("a05-sgd").reference()
    configs = [
        ("plain SGD, lr 0.1", dict(lr=0.1)),
        ("momentum 0.9", dict(lr=0.1, momentum=0.9)),
        ("momentum 0.9 with dampening 0.5", dict(lr=0.1, momentum=0.9, dampening=0.5)),
        ("momentum 0.9 with nesterov=True", dict(lr=0.1, momentum=0.9, nesterov=True)),
        ("weight_decay 0.05", dict(lr=0.1, weight_decay=0.05)),
        ("momentum 0.8, nesterov=True and weight_decay 0.05", dict(lr=0.05, momentum=0.8, nesterov=True,
                                                                   weight_decay=0.05)),
    ]
    with time_limit(TIME_LIMIT, _slow("SGD")):
        for k, (label, kwargs) in enumerate(configs):
            dtype = np.float32 if k == 1 else np.float64
            label = f"{label}, {STEPS} steps, {_dtype_name(dtype)}" + (", a parameter without grad in one step"
                                                                       if k in (1, 3) else "")
            p0 = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
            grads = _grads(rng, dtype, skip=k in (1, 3))
            got = _run_optimizer(S, cls, kwargs, grads, p0, label, "SGD")
            want = _run_optimizer(R, reference, kwargs, grads, p0, label, "SGD")
            if _same(got, want, dtype):
                continue
            variants = [("wd-sign", "weight decay adds lambda * theta to the gradient (g + lambda theta); yours "
                                    "subtracts it, which makes the weights grow"),
                        ("nesterov-ignored", "with nesterov=True the direction is g + mu * b, not the buffer b"),
                        ("nesterov-swapped", "Nesterov: the direction is g + mu * b (the gradient plus mu times the "
                                             "updated buffer), not b + mu * g"),
                        ("dampen-first", "the first step sets the buffer to the gradient itself, without dampening "
                                         "(PyTorch's rule); dampening applies from the second step on"),
                        ("no-state", "the momentum buffer must persist between steps, in "
                                     "state['momentum_buffer'] (the per-parameter state dict)")]
            for variant, message in variants:
                if _same(got, _sgd_sim(p0, grads, variant=variant, **kwargs), dtype):
                    raise GradingFailure(f"{label}: {message}")
            first = [np.asarray(a) for a in got[0]]
            if not all(close(a, b, dtype) for a, b in zip(first, want[0])):
                raise GradingFailure(f"{label}: the first step is already wrong: theta <- theta - lr * d, with d the "
                                     "gradient (plus weight decay), or the momentum buffer b_1 = g_1")
            raise GradingFailure(f"{label}: the steps after the first are wrong: b_t = mu b_(t-1) + (1 - dampening) "
                                 "g_t, updated in place in the state")


@np.errstate(all="ignore")
def _adam_sim(p0, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False, variant=""):
    params = [a.astype(np.float64).copy() for a in p0]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    t = [0] * len(params)
    history = []
    b1, b2 = betas
    for gs in grads:
        for i, g in enumerate(gs):
            if g is None:
                continue
            g = g.astype(np.float64)
            t[i] += 1
            if weight_decay:
                if decoupled != (variant == "decay-kind"):
                    params[i] = params[i] * (1 - lr * weight_decay)
                else:
                    g = g + weight_decay * params[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * (g if variant == "v-not-squared" else g * g)
            bc1, bc2 = 1 - b1 ** t[i], 1 - b2 ** t[i]
            if variant == "no-bias-correction":
                step = m[i] / (np.sqrt(v[i]) + eps)
            elif variant == "m-corrected-only":
                step = m[i] / bc1 / (np.sqrt(v[i]) + eps)
            elif variant == "eps-inside-sqrt":
                step = m[i] / bc1 / np.sqrt(v[i] / bc2 + eps)
            else:
                step = (m[i] / bc1) / (np.sqrt(v[i] / bc2) + eps)
            params[i] = params[i] - lr * step
        history.append([p.copy() for p in params])
    return history


@graded("a05-adam", "solutions.optim:Adam", regions=("_update",), points=3, title="Adam._update")
def check_adam(Adam, rng):
    import solutions as R
    S = student_engine()
    cls = prepare(Adam, "a05-adam", "class")
    reference = spec_of("a05-adam").reference()
    configs = [
        ("Adam, lr 0.01", dict(lr=0.01), False),
        ("Adam with betas (0.8, 0.95) and a large eps 1e-3", dict(lr=0.01, betas=(0.8, 0.95), eps=1e-3), False),
        ("Adam with L2 weight_decay 0.1", dict(lr=0.01, weight_decay=0.1), False),
        ("AdamW (a subclass of your Adam with _decoupled = True), weight_decay 0.1",
         dict(lr=0.01, weight_decay=0.1), True),
    ]
    with time_limit(TIME_LIMIT, _slow("Adam")):
        for k, (label, kwargs, decoupled) in enumerate(configs):
            dtype = np.float32 if k == 2 else np.float64
            label = f"{label}, {STEPS} steps, {_dtype_name(dtype)}" + (", a parameter without grad in one step"
                                                                       if k == 1 else "")
            p0 = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
            grads = _grads(rng, dtype, skip=k == 1)
            student = _sandbox_subclass(cls, "AdamW", {"_decoupled": True}) if decoupled else cls
            ref = type("AdamW", (reference,), {"_decoupled": True}) if decoupled else reference
            got = _run_optimizer(S, student, kwargs, grads, p0, label, "Adam")
            want = _run_optimizer(R, ref, kwargs, grads, p0, label, "Adam")
            if _same(got, want, dtype):
                continue
            variants = [
                ("no-bias-correction", "the bias correction is missing: m and v start at 0, so divide them by "
                                       "(1 - beta1^t) and (1 - beta2^t)"),
                ("m-corrected-only", "correct both moments: v_hat = v / (1 - beta2^t) as well as m_hat"),
                ("eps-inside-sqrt", "eps is added after the square root: m_hat / (sqrt(v_hat) + eps)"),
                ("v-not-squared", "the second moment averages the *squared* gradient, g * g"),
                ("decay-kind", "L2 weight decay (Adam) adds lambda theta to the gradient; decoupled decay (AdamW, "
                               "self._decoupled) shrinks theta by (1 - lr lambda) directly: yours uses the wrong one"),
            ]
            for variant, message in variants:
                if _same(got, _adam_sim(p0, grads, decoupled=decoupled, variant=variant, **kwargs), dtype):
                    raise GradingFailure(f"{label}: {message}")
            raise GradingFailure(f"{label}: wrong steps; m_t = b1 m + (1 - b1) g, v_t = b2 v + (1 - b2) g^2, "
                                 "theta -= lr * m_hat / (sqrt(v_hat) + eps) with the bias-corrected moments, and a "
                                 "step count t per parameter")


# --------------------------------------------------------------------------------------------
# DataLoader
# --------------------------------------------------------------------------------------------
def _list_dataset(n: int):
    """A plain Dataset (not a TensorDataset), made in the sandbox: sample i is (features of i, label i).

    Its class derives from the kit's `Dataset` and from `list` (which gives `len` and indexing),
    so it needs no code of the judge's in the sandbox."""
    data = student_module("solutions.data")
    list_type = sandbox_type([])
    cls = _sandbox_subclass((list_type, data.Dataset), "_ListDataset", {})
    return cls([(np.full(3, float(i)), i) for i in range(n)])


def _ids(batches, label):
    """The sample ids of each batch (the label column holds each sample's index)."""
    Tensor = student_engine().Tensor
    out = []
    for b in batches:
        if not isinstance(b, tuple) or not all(isinstance(t, Tensor) for t in b):
            raise GradingFailure(f"{label}: a batch is a tuple of Tensors (features, labels), got "
                                 f"{type_name(b)}")
        x, y = b
        ids = np.asarray(y.data).astype(int).tolist()
        if x.shape[0] != len(ids) or not np.allclose(np.asarray(x.data)[:, 0], ids):
            raise GradingFailure(f"{label}: the features and labels of a batch must come from the same samples")
        out.append(ids)
    return out


@graded("a05-dataloader", "solutions.data:DataLoader", regions=("__iter__",), points=2, title="DataLoader.__iter__")
def check_dataloader(DataLoader, rng):
    TensorDataset = student_module("solutions.data").TensorDataset
    cls = prepare(DataLoader, "a05-dataloader", "class")
    with time_limit(TIME_LIMIT, _slow("DataLoader")):
        for n, batch, drop_last, plain in [(10, 4, False, False), (10, 4, True, False), (10, 5, True, False),
                                           (7, 3, False, True), (3, 8, False, False), (9, 2, True, True)]:
            kind = "a plain Dataset" if plain else "a TensorDataset"
            label = f"{n} samples of {kind}, batch_size {batch}, drop_last={drop_last}, no shuffle"
            dataset = _list_dataset(n) if plain else TensorDataset(np.repeat(np.arange(n, dtype=float)[:, None], 3, 1),
                                                                 np.arange(n))
            loader = run(f"{label}: DataLoader(...)", lambda: cls(dataset, batch_size=batch, drop_last=drop_last))
            batches = _ids(run(f"{label}: iterating", lambda: list(loader)), label)
            full = [list(range(i, min(i + batch, n))) for i in range(0, n, batch)]
            want = [b for b in full if len(b) == batch] if drop_last else full
            if batches == want:
                again = _ids(run(f"{label}: a second epoch", lambda: list(loader)), label)
                if again != want:
                    raise GradingFailure(f"{label}: a second pass over the loader (the next epoch) must give every "
                                         "batch again: build the batches inside __iter__")
                continue
            if batches == full[:-1] and not drop_last:
                raise GradingFailure(f"{label}: without drop_last the last, smaller batch is kept")
            if batches == full and drop_last:
                raise GradingFailure(f"{label}: drop_last drops the last batch when it is smaller than batch_size")
            if drop_last and batches == want[:-1]:
                raise GradingFailure(f"{label}: drop_last drops only a *smaller* last batch, never a full one")
            if sorted(sum(batches, [])) == list(range(n)):
                raise GradingFailure(f"{label}: without shuffle the batches follow the dataset's order, "
                                     "samples 0, 1, 2, ...")
            raise GradingFailure(f"{label}: wrong batches; consecutive slices of batch_size samples")

        n, batch = 23, 5
        dataset = TensorDataset(np.repeat(np.arange(n, dtype=float)[:, None], 3, 1), np.arange(n))
        label = f"{n} samples, batch_size {batch}, shuffle=True, seed 3, three epochs"
        loader = run(f"{label}: DataLoader(...)", lambda: cls(dataset, batch_size=batch, shuffle=True, seed=3))
        epochs = [_ids(run(f"{label}: iterating", lambda: list(loader)), label) for _ in range(3)]
        for batches in epochs:
            flat = sum(batches, [])
            if [len(b) for b in batches] != [5, 5, 5, 5, 3]:
                raise GradingFailure(f"{label}: with shuffle the batches still have batch_size samples (the last "
                                     "one fewer)")
            if sorted(flat) != list(range(n)):
                raise GradingFailure(f"{label}: an epoch must visit every sample exactly once: shuffle with a "
                                     "permutation (rng.permutation(n)), not random draws with replacement")
        orders = [sum(b, []) for b in epochs]
        if orders[0] == list(range(n)):
            raise GradingFailure(f"{label}: shuffle=True must shuffle the order of the samples")
        if orders[0] == orders[1] == orders[2]:
            raise GradingFailure(f"{label}: every epoch has the same order: draw each epoch's permutation from "
                                 "self.rng (seeded once, in __init__), do not re-seed in __iter__")
        twin = run(f"{label}: DataLoader(...)", lambda: cls(dataset, batch_size=batch, shuffle=True, seed=3))
        twin_orders = [sum(_ids(run(f"{label}: iterating", lambda: list(twin)), label), []) for _ in range(3)]
        if twin_orders != orders:
            raise GradingFailure(f"{label}: two loaders with the same seed must give the same epochs: draw the "
                                 "permutations from self.rng, not from NumPy's global generator")
