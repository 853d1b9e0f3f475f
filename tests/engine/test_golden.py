"""Our engine against PyTorch's numbers (`tests/golden/ops.npz`, written by `make golden`).

For every case of `tests/golden/golden_ops.py`: the output, the first derivatives (a
vector-Jacobian product with a random upstream gradient) and the second derivatives (a
Hessian-vector product through the recorded backward) must match PyTorch's, in float64.
PyTorch itself is not imported: the expected arrays were saved by the fixture generator.
"""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import solutions as S
from solutions import Tensor
from solutions.testing import assert_close

from support import GOLDEN

GOLDEN = GOLDEN


def _load_cases():
    spec = importlib.util.spec_from_file_location("golden_ops", GOLDEN / "golden_ops.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up there)
    spec.loader.exec_module(module)  # defines the table only; torch is imported by make() alone
    return module.CASES


CASES = _load_cases()


def _load_fixtures() -> dict[str, dict[str, np.ndarray]]:
    with np.load(GOLDEN / "ops.npz") as npz:
        fixtures: dict[str, dict[str, np.ndarray]] = {}
        for key in npz.files:
            case, name = key.split("/", 1)
            fixtures.setdefault(case, {})[name] = npz[key]
    return fixtures


FIXTURES = _load_fixtures()


def test_fixtures_are_up_to_date():
    missing = sorted(set(CASES) - set(FIXTURES))
    stale = sorted(set(FIXTURES) - set(CASES))
    assert not missing and not stale, (
        f"tests/golden/ops.npz does not match golden_ops.py (missing {missing}, stale {stale}); run `make golden`"
    )


def _sum_of_products(grads, dirs):
    total = None
    for g, d in zip(grads, dirs, strict=True):
        if g is None:
            continue
        term = (g * d).sum()
        total = term if total is None else total + term
    return total


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name):
    case, expected = CASES[name], FIXTURES[name]
    args = {
        k: Tensor(v, requires_grad=k in case.diff) if v.dtype.kind == "f" else v
        for k, v in expected.items()
        if k in _input_names(expected)
    }
    with np.errstate(all="ignore"):  # the hard cases (1000, -inf) are on purpose
        out = case.engine_fn(**args)
        assert_close(getattr(out, "data", out), expected["out"], rtol=1e-9, atol=1e-12, msg=f"{name}: output")
        if not case.diff:
            return
        xs = [args[k] for k in case.diff]
        grads = S.grad(out, xs, Tensor(expected["gout"]), create_graph=case.second, allow_unused=True)
        for k, g in zip(case.diff, grads, strict=True):
            got = np.zeros(expected[k].shape) if g is None else g.data
            assert_close(got, expected[f"grad_{k}"], rtol=1e-9, atol=1e-12, msg=f"{name}: d/d{k}")
        if not case.second:
            return
        s = _sum_of_products(grads, [expected[f"dir_{k}"] for k in case.diff])
        hess = [None] * len(xs) if s is None or not s.requires_grad else S.grad(s, xs, allow_unused=True)
        for k, h in zip(case.diff, hess, strict=True):
            got = np.zeros(expected[k].shape) if h is None else h.data
            assert_close(got, expected[f"hess_{k}"], rtol=1e-9, atol=1e-12, msg=f"{name}: second derivative, d/d{k}")


def _input_names(arrays: dict[str, np.ndarray]) -> set[str]:
    derived = ("out", "gout")
    return {k for k in arrays if k not in derived and not k.startswith(("grad_", "dir_", "hess_"))}
