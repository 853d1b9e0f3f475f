"""What the checks of a05_layers share: the time limit, and objects made in the sandbox."""
from __future__ import annotations

import functools

from autograder.judge.checks import (
    GradingFailure,
    sandbox_type,
    student_engine,
    too_slow,
    type_name,
)

TIME_LIMIT = 30.0


_slow = functools.partial(too_slow, seconds=TIME_LIMIT)


# --------------------------------------------------------------------------------------------
# The sandbox side: objects made there, with the student's engine
# --------------------------------------------------------------------------------------------


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
