"""Hidden checks of a05_layers: the optimizers: SGD._update and Adam._update."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    close,
    dtype_name,
    graded,
    in_sandbox,
    judged,
    run,
    student_engine,
    time_limit,
)

from .common import (
    TIME_LIMIT,
    _sandbox_subclass,
    _slow,
)

# --------------------------------------------------------------------------------------------
# Optimizers: several steps with gradients set by hand, compared with PyTorch's rules
# --------------------------------------------------------------------------------------------
SHAPES = [(3, 4), (5,)]
STEPS = 4


def _run_optimizer(E, cls, kwargs, grads, p0, label, name, student=False, change_first=False):
    """Each parameter's values after each step, and the optimizer, with `cls` and Tensors of engine E:
    the student's (`student=True`: in the sandbox, where `p.data` is changed in place; reading it
    here copies it) or the reference.

    The student's gradients are arrays kept in the sandbox, so that `p.grad.data` *is* the array
    given: after every step each one must still hold what the caller put there (step() must not
    write into a gradient). With `change_first`, the caller then overwrites the first step's
    gradients with zeros (as code that reuses its gradient arrays would), which must not change
    what the optimizer keeps."""
    Tensor = E.Tensor
    params = [Tensor(a.copy(), requires_grad=True) for a in p0]
    opt = run(f"{label}: {name}(...)", lambda: cls(params, **kwargs))
    history, given = [], []
    for step, gs in enumerate(grads):
        for p, g in zip(params, gs, strict=False):
            if g is None:
                p.grad = None
                continue
            array = in_sandbox(g.copy()) if student else g.copy()
            p.grad = Tensor(array)
            given.append([array, g.copy()])
        run(f"{label}: {name}.step()", opt.step)
        history.append([np.array(p.data, dtype=np.float64) for p in params])
        if student and any(not np.array_equal(np.asarray(array), values) for array, values in given):
            raise GradingFailure(f"{label}: {name}.step() changed a gradient array: g is p.grad's own array, so "
                                 "compute new arrays (g = g + ..., never g += ... or g *= ...), and start any state "
                                 "from a copy of the gradient (g.copy()), never from g itself")
        if change_first and step == 0:
            for entry in given:
                entry[0][...] = 0.0
                entry[1][...] = 0.0
    return history, opt


def _saved_state(opt, label: str, name: str) -> dict:
    """The optimizer's per-parameter state by parameter position, as Optimizer.state_dict saves it."""
    state = run(f"{label}: {name}.state_dict() (given)", lambda: opt.state_dict())["state"]
    return {int(k): v for k, v in state.items()}


def _same(a, b, dtype=np.float64) -> bool:
    return all(close(x, y, dtype) for hx, hy in zip(a, b, strict=False) for x, y in zip(hx, hy, strict=False))


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
    kept: list = [None] * len(params)
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
                    kept[i] = bufs[i]
                elif variant == "buffer-not-kept":  # b_t computed from b_1, which the state keeps forever
                    bufs[i] = momentum * kept[i] + (1 - dampening) * g
                else:
                    bufs[i] = momentum * bufs[i] + (-1 if variant == "momentum-sign" else 1) * (1 - dampening) * g
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
            params[i] = params[i] + lr * d if variant == "ascent" else params[i] - lr * d
        history.append([p.copy() for p in params])
    return history


@graded("a05-sgd", "solutions.optim:SGD", regions=("_update",), points=3, title="SGD._update",
        diagnose=("Module.parameters",))
def check_sgd(SGD, rng):
    import solutions as R
    S = student_engine()
    cls = SGD
    reference = judged().reference()
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
            label = f"{label}, {STEPS} steps, {dtype_name(dtype)}" + (", a parameter without grad in one step"
                                                                       if k in (1, 3) else "")
            p0 = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
            grads = _grads(rng, dtype, skip=k in (1, 3))
            got, opt = _run_optimizer(S, cls, kwargs, grads, p0, label, "SGD", student=True)
            want, ref_opt = _run_optimizer(R, reference, kwargs, grads, p0, label, "SGD")
            if _same(got, want, dtype):
                if kwargs.get("momentum"):
                    state, ref_state = _saved_state(opt, label, "SGD"), _saved_state(ref_opt, label, "SGD")
                    for i, ref in ref_state.items():
                        buf = state.get(i, {}).get("momentum_buffer") if isinstance(state.get(i), dict) else None
                        if buf is None or not close(np.asarray(buf), ref["momentum_buffer"], dtype):
                            raise GradingFailure(f"{label}: keep the momentum buffer b in "
                                                 "state['momentum_buffer'] (Optimizer.state_dict saves it in a "
                                                 "checkpoint)")
                continue
            variants = [("wd-sign", "weight decay adds lambda * theta to the gradient (g + lambda theta); yours "
                                    "subtracts it, which makes the weights grow"),
                        ("nesterov-ignored", "with nesterov=True the direction is g + mu * b, not the buffer b"),
                        ("nesterov-swapped", "Nesterov: the direction is g + mu * b (the gradient plus mu times the "
                                             "updated buffer), not b + mu * g"),
                        ("dampen-first", "the first step sets the buffer to the gradient itself, without dampening "
                                         "(PyTorch's rule); dampening applies from the second step on"),
                        ("no-state", "the momentum buffer must persist between steps, in "
                                     "state['momentum_buffer'] (the per-parameter state dict)"),
                        ("buffer-not-kept", "the momentum buffer must carry over from step to step: update "
                                            "state['momentum_buffer'] in place (buf *= mu; buf += ...) or store the "
                                            "new array back in the state; yours binds it to a local name only, so "
                                            "the state keeps the first step's buffer"),
                        ("momentum-sign", "the buffer adds the new gradient, b = mu * b + (1 - dampening) * g; "
                                          "yours subtracts it (a sign error)"),
                        ("ascent", "each step moves theta against the gradient, theta <- theta - lr * d; yours "
                                   "adds lr * d (gradient ascent)")]
            for variant, message in variants:
                if _same(got, _sgd_sim(p0, grads, variant=variant, **kwargs), dtype):
                    raise GradingFailure(f"{label}: {message}")
            first = [np.asarray(a) for a in got[0]]
            if not all(close(a, b, dtype) for a, b in zip(first, want[0], strict=False)):
                raise GradingFailure(f"{label}: the first step is already wrong: theta <- theta - lr * d, with d the "
                                     "gradient (plus weight decay), or the momentum buffer b_1 = g_1")
            raise GradingFailure(f"{label}: the steps after the first are wrong: b_t = mu b_(t-1) + (1 - dampening) "
                                 "g_t, kept in the state between steps")
        # the caller reuses its gradient arrays after a step: the buffer must not be one of them
        label = f"momentum 0.9, {STEPS} steps, the gradient arrays overwritten by the caller after the first step"
        kwargs = dict(lr=0.1, momentum=0.9)
        p0 = [rng.standard_normal(s) for s in SHAPES]
        grads = _grads(rng, np.float64)
        got, _ = _run_optimizer(S, cls, kwargs, grads, p0, label, "SGD", student=True, change_first=True)
        want, _ = _run_optimizer(R, reference, kwargs, grads, p0, label, "SGD", change_first=True)
        if not _same(got, want):
            raise GradingFailure(f"{label}: the momentum buffer must start as a copy of the gradient "
                                 "(np.array(g, copy=True)): yours shares memory with p.grad, so a gradient changed "
                                 "after step() changed the buffer")


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
            step_count = max(t) if variant == "shared-step" else t[i]
            if weight_decay:
                if decoupled != (variant == "decay-kind"):
                    params[i] = params[i] * (1 - lr * weight_decay)
                else:
                    g = g + weight_decay * params[i]
            if variant == "moments-not-kept":  # the state's m and v stay at zero
                m[i], v[i] = np.zeros_like(g), np.zeros_like(g)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * (g if variant == "v-not-squared" else g * g)
            bc1, bc2 = 1 - b1 ** step_count, 1 - b2 ** step_count
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


@graded("a05-adam", "solutions.optim:Adam", regions=("_update",), points=3, title="Adam._update",
        diagnose=("Adam", "Module.parameters"))
def check_adam(Adam, rng):
    import solutions as R
    S = student_engine()
    cls = Adam
    reference = judged().reference()
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
            label = f"{label}, {STEPS} steps, {dtype_name(dtype)}" + (", a parameter without grad in one step"
                                                                       if k == 1 else "")
            p0 = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
            grads = _grads(rng, dtype, skip=k == 1)
            student = _sandbox_subclass(cls, "AdamW", {"_decoupled": True}) if decoupled else cls
            ref = type("AdamW", (reference,), {"_decoupled": True}) if decoupled else reference
            got, opt = _run_optimizer(S, student, kwargs, grads, p0, label, "Adam", student=True)
            want, ref_opt = _run_optimizer(R, ref, kwargs, grads, p0, label, "Adam")
            if _same(got, want, dtype):
                state, ref_state = _saved_state(opt, label, "Adam"), _saved_state(ref_opt, label, "Adam")
                for i, reference_state in ref_state.items():
                    mine = state.get(i)
                    if not isinstance(mine, dict) or any(k not in mine for k in ("step", "exp_avg", "exp_avg_sq")):
                        raise GradingFailure(f"{label}: keep the state in state['step'], state['exp_avg'] and "
                                             "state['exp_avg_sq'] (Optimizer.state_dict saves them in a checkpoint)")
                    if int(np.asarray(mine["step"])) != reference_state["step"]:
                        raise GradingFailure(f"{label}: state['step'] counts the steps of *this* parameter (one "
                                             "without a gradient in a step does not advance)")
                    if not (close(np.asarray(mine["exp_avg"]), reference_state["exp_avg"], dtype) and
                            close(np.asarray(mine["exp_avg_sq"]), reference_state["exp_avg_sq"], dtype)):
                        raise GradingFailure(f"{label}: state['exp_avg'] and state['exp_avg_sq'] hold the moments m "
                                             "and v (not bias-corrected)")
                continue
            variants = [
                ("no-bias-correction", "the bias correction is missing: m and v start at 0, so divide them by "
                                       "(1 - beta1^t) and (1 - beta2^t)"),
                ("m-corrected-only", "correct both moments: v_hat = v / (1 - beta2^t) as well as m_hat"),
                ("eps-inside-sqrt", "eps is added after the square root: m_hat / (sqrt(v_hat) + eps)"),
                ("v-not-squared", "the second moment averages the *squared* gradient, g * g"),
                ("shared-step", "t counts the steps of *this* parameter (state['step']): a parameter without a "
                                "gradient in some step is one step behind the others, and yours used a count "
                                "shared by every parameter"),
                ("moments-not-kept", "m and v must carry over from step to step: update state['exp_avg'] and "
                                     "state['exp_avg_sq'] in place (m *= beta1; m += ...) or store the new arrays "
                                     "back in the state; yours binds them to local names only, so the state stays "
                                     "at zero"),
                ("decay-kind", "L2 weight decay (Adam) adds lambda theta to the gradient; decoupled decay (AdamW, "
                               "self._decoupled) shrinks theta by (1 - lr lambda) directly: yours uses the wrong one"),
            ]
            for variant, message in variants:
                if _same(got, _adam_sim(p0, grads, decoupled=decoupled, variant=variant, **kwargs), dtype):
                    raise GradingFailure(f"{label}: {message}")
            raise GradingFailure(f"{label}: wrong steps; m_t = b1 m + (1 - b1) g, v_t = b2 v + (1 - b2) g^2, "
                                 "theta -= lr * m_hat / (sqrt(v_hat) + eps) with the bias-corrected moments, and a "
                                 "step count t per parameter")
