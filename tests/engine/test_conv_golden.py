"""The engine's convolution and pooling against PyTorch's, from committed fixtures.

The fixtures (`tests/golden/conv.npz`) are made by `tests/golden/golden_conv.py` in the torch
venv (`make golden`); this test needs only NumPy. Each case checks the output, every first
derivative, and the second derivatives that `create_graph=True` gives. Every case runs on the
reference engine's fast kernels and on the teaching kernels (the students' engine).
"""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pytest

import solutions as S
from solutions import Tensor
from solutions.ops import kernels
from solutions.testing import assert_close

from support import GOLDEN

GOLDEN = GOLDEN / "conv.npz"


def _load() -> dict[str, dict[str, np.ndarray]]:
    if not GOLDEN.exists():
        pytest.skip(f"{GOLDEN} is missing: run `make golden`")
    cases: dict[str, dict[str, np.ndarray]] = {}
    with np.load(GOLDEN) as data:
        for key in data.files:
            case, name = key.split("/", 1)
            cases.setdefault(case, {})[name] = data[key]
    return cases


CASES = _load() if GOLDEN.exists() else {}


@pytest.fixture(scope="module", params=["fast", "teaching"], autouse=True)
def kernel_set(request):
    with nullcontext() if request.param == "fast" else kernels.teaching_kernels():
        yield request.param


def _names(prefix: str) -> list[str]:
    return sorted(name for name in CASES if name.startswith(prefix)) or \
        [pytest.param("missing", marks=pytest.mark.skip("no fixtures"))]


def _padding(a: np.ndarray):
    return str(a) if a.dtype.kind == "U" else tuple(int(v) for v in a)


def _pair_or_int(a: np.ndarray):
    return tuple(int(v) for v in a) if a.size > 1 else int(a[0])


@pytest.mark.parametrize("name", _names("conv"))
def test_conv_matches_pytorch(name):
    c = CASES[name]
    op = S.conv2d if name.startswith("conv2d") else S.conv1d
    x, w = Tensor(c["x"], requires_grad=True), Tensor(c["w"], requires_grad=True)
    b = Tensor(c["b"], requires_grad=True) if "b" in c else None
    params = dict(stride=_pair_or_int(c["stride"]), padding=_padding(c["padding"]),
                  dilation=_pair_or_int(c["dilation"]), groups=int(c["groups"]))
    if isinstance(params["padding"], tuple) and len(params["padding"]) == 1:
        params["padding"] = params["padding"][0]
    z = op(x, w, b, **params)
    assert_close(z, c["z"], msg=f"{name}: output")
    gout = Tensor(c["gout"], requires_grad=True)
    wanted = [x, w] + ([b] if b is not None else [])
    grads = S.grad(z, wanted, gout, create_graph=True)
    assert_close(grads[0], c["dx"], msg=f"{name}: dx")
    assert_close(grads[1], c["dw"], msg=f"{name}: dw")
    if b is not None:
        assert_close(grads[2], c["db"], msg=f"{name}: db")
    h = (grads[0] * c["u"]).sum() + (grads[1] * c["v"]).sum()
    hx, hw, hg = S.grad(h, [x, w, gout], allow_unused=True)
    # dx does not depend on x, nor dw on w: a missing gradient must then be zero.
    for got, key in ((hx, "hx"), (hw, "hw"), (hg, "hgout")):
        assert_close(np.zeros_like(c[key]) if got is None else got, c[key], msg=f"{name}: second derivative {key}")


@pytest.mark.parametrize("name", _names("max_pool2d") + _names("avg_pool2d"))
def test_pool_matches_pytorch(name):
    c = CASES[name]
    op = S.max_pool2d if name.startswith("max") else S.avg_pool2d
    x = Tensor(c["x"], requires_grad=True)
    out = op(x, _pair_or_int(c["kernel_size"]), _pair_or_int(c["stride"]), _pair_or_int(c["padding"]))
    assert_close(out, c["out"], msg=f"{name}: output")
    gout = Tensor(c["gout"], requires_grad=True)
    (dx,) = S.grad(out, [x], gout, create_graph=True)
    assert_close(dx, c["dx"], msg=f"{name}: dx (ties go to the first maximum)")
    (hg,) = S.grad((dx * c["u"]).sum(), [gout])
    assert_close(hg, c["hgout"], msg=f"{name}: second derivative")
