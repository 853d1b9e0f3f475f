"""What the checks of a07_attention share: the time limit, masks and softmaxes for the hints'
candidates, gradients through either engine, and whether the arrays kept in the sandbox stayed as they were."""
from __future__ import annotations

import functools
import importlib

import numpy as np

from autograder.judge.checks import GradingFailure, close, student_module, too_slow

TIME_LIMIT = 30.0


_slow = functools.partial(too_slow, seconds=TIME_LIMIT)


def _reference_attention():
    return importlib.import_module("solutions.ops.attention")


def _student_attention():
    return student_module("solutions.ops.attention")


def _additive(mask: np.ndarray, dtype) -> np.ndarray:
    out = np.zeros(mask.shape, dtype=dtype)
    out[~mask] = -np.inf
    return out


def _causal(L: int, S: int, dtype=np.float64) -> np.ndarray:
    return _additive(np.tril(np.ones((L, S), dtype=bool)), dtype)


@np.errstate(all="ignore")
def _softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax along `axis` with fully masked rows as zeros (for the hints' candidates)."""
    m = np.max(z, axis=axis, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(m), m, 0))
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)


def _same(got: np.ndarray, candidate: np.ndarray, dtype) -> bool:
    """Equal values, infinities and nan in the same places (for candidates with -inf entries)."""
    got, candidate = np.asarray(got, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if got.shape != candidate.shape:
        return False
    finite = np.isfinite(candidate)
    if not np.array_equal(np.isfinite(got), finite) or not np.array_equal(got[~finite], candidate[~finite],
                                                                          equal_nan=True):
        return False
    return close(got[finite], candidate[finite], dtype)


def _grads(E, out, inputs, upstream):
    """Gradients (arrays, None where no gradient reached) of <out, upstream> in engine E."""
    if not out.requires_grad:  # built outside the graph (on .data, or from copies): nothing reaches the inputs
        return [None] * len(inputs)
    gs = E.grad(out, list(inputs), E.Tensor(upstream.astype(out.dtype)), allow_unused=True)
    return [None if g is None else np.array(g.data, dtype=np.float64) for g in gs]


def _kept(name: str, arrays: dict[str, tuple[object, np.ndarray]], label: str) -> None:
    """Each sandbox array (a proxy from `in_sandbox`) must hold what it held before the call: an
    array kernel reads its inputs and builds its result, it never writes into the caller's arrays."""
    for arg, (there, before) in arrays.items():
        if there is None:
            continue
        after = np.asarray(there)
        if after.shape != before.shape or not np.array_equal(after, before, equal_nan=True):
            raise GradingFailure(f"{label}: {name} changed its argument `{arg}` in place (an in-place `+=`, `-=` "
                                 "or out= into it): the caller's array must stay as it was; compute into a new "
                                 "array (z = x + mask)")
