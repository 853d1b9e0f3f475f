"""Hidden checks of a05_layers: initialization: fan-in and fan-out, Kaiming and Xavier."""
from __future__ import annotations

import math

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    dtype_name,
    graded,
    raises,
    run,
    same_object,
    student_engine,
    student_rng,
    time_limit,
)

from .common import (
    TIME_LIMIT,
    _slow,
)


# --------------------------------------------------------------------------------------------
# Initialization
# --------------------------------------------------------------------------------------------
@graded("a05-fan-in-fan-out", "solutions.nn.init:fan_in_and_fan_out", points=1, diagnose=("Module.parameters",))
def check_fan(fan_in_and_fan_out, rng):
    f = fan_in_and_fan_out
    cases = [((5, 3), "a Linear weight (out, in)"), ((8, 3, 3, 3), "a Conv2d weight (K, C, KH, KW)"),
             ((6, 2, 1, 5), "a non-square (K, C, 1, KW) kernel"), ((4, 7, 3), "a Conv1d weight (K, C, KL)"),
             ((16, 4, 1, 1), "a 1x1 convolution"), ((2, 3, 2, 2, 2), "a 3-D convolution weight")]
    for shape, label in cases:
        got = run(f"{label}: fan_in_and_fan_out", f, shape)
        receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        want = (shape[1] * receptive, shape[0] * receptive)
        if not isinstance(got, tuple) or len(got) != 2:
            raise GradingFailure(f"{label}: return a tuple (fan_in, fan_out), as the contract says (a list or "
                                 "an array does not compare equal to a tuple)")
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
    if not isinstance(run("a 1-D shape: fan_in_and_fan_out", raises, f, (5,)), ValueError):
        raise GradingFailure("a 1-D shape has no fan in and fan out: raise a ValueError")


@graded("a05-kaiming-uniform", "solutions.nn.init:kaiming_uniform_", points=1, diagnose=("Module.parameters",))
def check_kaiming_uniform(kaiming_uniform_, rng):
    from solutions.nn import init
    Tensor = student_engine().Tensor
    cases = [
        ("the defaults (a=0, fan_in, leaky_relu) on a (300, 400) weight", (300, 400), {}, np.float64),
        ("a=sqrt(5), Linear's default, on a (200, 500) weight", (200, 500), {"a": math.sqrt(5)}, np.float32),
        ("mode='fan_out' on a (64, 32, 3, 3) conv weight", (64, 32, 3, 3), {"mode": "fan_out"}, np.float64),
        ("nonlinearity='relu' on a (40, 16, 5, 5) conv weight", (40, 16, 5, 5), {"nonlinearity": "relu"}, np.float64),
    ]
    with time_limit(TIME_LIMIT, _slow("kaiming_uniform_")):
        for label, shape, kwargs, dtype in cases:
            label = f"{label}, {dtype_name(dtype)}"
            t = Tensor(np.zeros(shape, dtype=dtype))
            seed = int(rng.integers(1 << 30))
            out = run(f"{label}: kaiming_uniform_", lambda: kaiming_uniform_(t, rng=student_rng(seed), **kwargs))
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
                run(f"{label}: kaiming_uniform_", lambda: kaiming_uniform_(t2, rng=student_rng(seed), **kwargs))
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


def _filled(label: str, name: str, f, shape, dtype, seed: int, **kwargs) -> np.ndarray:
    """Run an init function on a zero tensor of the student's engine; check the in-place contract
    (returns the very tensor, keeps shape and dtype, draws from the given generator)."""
    Tensor = student_engine().Tensor
    t = Tensor(np.zeros(shape, dtype=dtype))
    out = run(f"{label}: {name}", lambda: f(t, rng=student_rng(seed), **kwargs))
    if not same_object(out, t):
        raise GradingFailure(f"{label}: fill the tensor in place and return it (return tensor), as torch.nn.init does")
    w = np.asarray(t.data)
    if w.shape != shape or w.dtype != dtype:
        raise GradingFailure(f"{label}: keep the tensor's shape and dtype (fill tensor.data in place)")
    if not np.any(w):
        raise GradingFailure(f"{label}: the tensor is still all zeros: draw the values into it")
    t2 = Tensor(np.zeros(shape, dtype=dtype))
    run(f"{label}: {name}", lambda: f(t2, rng=student_rng(seed), **kwargs))
    if not np.array_equal(np.asarray(t2.data), w):
        raise GradingFailure(f"{label}: draw from the generator `rng` you are given, so that a seeded model is the "
                             "same model every time")
    return w.astype(np.float64)


XAVIER_CASES = [
    # label, shape, gain, dtype
    ("the default gain 1 on a (300, 400) Linear weight", (300, 400), None, np.float64),
    ("gain 5/3 (tanh) on a (64, 32, 3, 3) conv weight", (64, 32, 3, 3), 5.0 / 3, np.float64),
    ("gain sqrt(2) (relu) on a (200, 500) weight, float32", (200, 500), math.sqrt(2.0), np.float32),
    ("gain 0.5 on a (40, 16, 5, 5) conv weight", (40, 16, 5, 5), 0.5, np.float64),
]


def _xavier_std(shape, gain, fans=None) -> float:
    from solutions.nn import init
    fan_in, fan_out = fans or init.fan_in_and_fan_out(shape)
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def _xavier_mistakes(shape, gain, std: float) -> list[tuple[float, str]]:
    """(the standard deviation a classic mistake gives, its message), for a sample whose std is off."""
    out = []
    if gain != 1.0:
        out.append((std / gain, "the gain is missing: multiply by gain"))
    if len(shape) > 2:
        out.append((_xavier_std(shape, gain, (shape[1], shape[0])), "a conv weight's fans include its receptive "
                    "field (the kernel size): take them from fan_in_and_fan_out(tensor.shape), not from shape[0] "
                    "and shape[1]"))
    out.append((gain * math.sqrt(1.0 / math.prod(shape[1:])), "Xavier averages both fans: the variance is "
                "2 gain^2 / (fan_in + fan_out), not gain^2 / fan_in"))
    return out


@graded("a05-xavier-uniform", "solutions.nn.init:xavier_uniform_", points=1, diagnose=("Module.parameters",))
def check_xavier_uniform(xavier_uniform_, rng):
    f = xavier_uniform_
    with time_limit(TIME_LIMIT, _slow("xavier_uniform_")):
        for label, shape, gain, dtype in XAVIER_CASES:
            kwargs = {} if gain is None else {"gain": gain}
            gain = 1.0 if gain is None else gain
            w = _filled(label, "xavier_uniform_", f, shape, dtype, int(rng.integers(1 << 30)), **kwargs)
            std = _xavier_std(shape, gain)
            bound = math.sqrt(3.0) * std
            observed, sample_std = float(np.max(np.abs(w))), float(np.std(w))
            if bound * 0.98 <= observed <= bound * (1 + 1e-5) and abs(sample_std / std - 1) < 0.03 \
                    and abs(float(np.mean(w))) < 0.02 * bound:
                continue
            if abs(observed / std - 1) < 0.03:
                raise GradingFailure(f"{label}: U(-b, b) has variance b^2/3, so the bound is b = gain * sqrt(6 / "
                                     "(fan_in + fan_out)); yours is the standard deviation gain * sqrt(2 / ...)")
            if abs(sample_std / std - 1) < 0.03 and observed > 1.2 * bound:
                raise GradingFailure(f"{label}: xavier_uniform_ draws from a uniform distribution U(-b, b), not a "
                                     "normal one")
            for wrong, message in _xavier_mistakes(shape, gain, std):
                if abs(sample_std / wrong - 1) < 0.03:
                    raise GradingFailure(f"{label}: {message}")
            raise GradingFailure(f"{label}: the values must be uniform on (-b, b), b = gain * sqrt(6 / (fan_in + "
                                 "fan_out))")


@graded("a05-xavier-normal", "solutions.nn.init:xavier_normal_", points=1, diagnose=("Module.parameters",))
def check_xavier_normal(xavier_normal_, rng):
    f = xavier_normal_
    with time_limit(TIME_LIMIT, _slow("xavier_normal_")):
        for label, shape, gain, dtype in XAVIER_CASES:
            kwargs = {} if gain is None else {"gain": gain}
            gain = 1.0 if gain is None else gain
            w = _filled(label, "xavier_normal_", f, shape, dtype, int(rng.integers(1 << 30)), **kwargs)
            std = _xavier_std(shape, gain)
            sample_std, peak = float(np.std(w)), float(np.max(np.abs(w)))
            normal_tails = peak > 3.3 * sample_std  # a uniform sample never exceeds sqrt(3) of its std
            if abs(sample_std / std - 1) < 0.03 and abs(float(np.mean(w))) < 0.02 * std and normal_tails:
                continue
            if abs(sample_std / std - 1) < 0.03 and not normal_tails:
                raise GradingFailure(f"{label}: xavier_normal_ draws from a normal distribution N(0, std^2) "
                                     "(normal_), not a uniform one")
            if abs(sample_std / (math.sqrt(3.0) * std) - 1) < 0.03:
                raise GradingFailure(f"{label}: the standard deviation is gain * sqrt(2 / (fan_in + fan_out)); "
                                     "yours is the uniform version's bound gain * sqrt(6 / ...)")
            if abs(sample_std / std**2 - 1) < 0.03:
                raise GradingFailure(f"{label}: normal_ takes the standard deviation, the square root of the "
                                     "variance 2 gain^2 / (fan_in + fan_out); yours passes the variance")
            for wrong, message in _xavier_mistakes(shape, gain, std):
                if abs(sample_std / wrong - 1) < 0.03:
                    raise GradingFailure(f"{label}: {message}")
            raise GradingFailure(f"{label}: the values must be N(0, std^2) with std = gain * sqrt(2 / (fan_in + "
                                 "fan_out))")
