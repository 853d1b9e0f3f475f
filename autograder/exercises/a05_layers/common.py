"""What the checks of a05_layers share: the time limit, and objects made in the sandbox."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    GradingFailure,
    current,
    in_sandbox,
    sandbox_type,
    student_engine,
    type_name,
)

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
