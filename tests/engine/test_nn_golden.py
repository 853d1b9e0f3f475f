"""BatchNorm, the losses and the optimizers against PyTorch's own numbers.

The fixture `tests/golden/nn.npz` was written by `tests/golden/golden_nn.py` with torch 2.13
(`make golden`); it holds every input, hyperparameter and expected output, so torch is not needed
here. Everything is float64, so the tolerances are tight: a different formula (the biased
variance in the running statistics, Adam's bias correction in the wrong place) would show.
"""
from __future__ import annotations

import numpy as np
import pytest

from solutions import Tensor, nn, optim
from solutions.nn import functional as F
from solutions.testing import assert_close

from support import GOLDEN

FIXTURE = GOLDEN / "nn.npz"


def _load() -> dict[str, dict[str, np.ndarray]]:
    cases: dict[str, dict[str, np.ndarray]] = {}
    with np.load(FIXTURE) as f:
        for key in f.files:
            case, name = key.split("/", 1)
            cases.setdefault(case, {})[name] = f[key]
    return cases


GOLDEN = _load()
TIGHT = dict(rtol=1e-10, atol=1e-12)


def _cases(prefix: str) -> list[str]:
    names = sorted(c for c in GOLDEN if c.startswith(prefix))
    assert names, f"no case starting with {prefix!r} in {FIXTURE}"
    return names


@pytest.mark.parametrize("case", _cases("batchnorm"))
def test_batch_norm_matches_pytorch(case):
    g = GOLDEN[case]
    layer = nn.BatchNorm2d if g["x"].ndim == 4 else nn.BatchNorm1d
    bn = layer(g["weight"].size, eps=float(g["eps"]), momentum=float(g["momentum"]), dtype=np.float64)
    bn.weight.data[:] = g["weight"]
    bn.bias.data[:] = g["bias"]
    bn.running_mean[:] = g["running_mean"]
    bn.running_var[:] = g["running_var"]
    x = Tensor(g["x"], requires_grad=True)
    y = bn(x)
    y.backward(g["upstream"])
    assert_close(y, g["y_train"], **TIGHT, msg="train output")
    assert_close(x.grad, g["grad_x"], rtol=1e-9, atol=1e-11, msg="input gradient")
    assert_close(bn.weight.grad, g["grad_weight"], **TIGHT, msg="weight gradient")
    assert_close(bn.bias.grad, g["grad_bias"], **TIGHT, msg="bias gradient")
    assert_close(bn.running_mean, g["running_mean_after"], **TIGHT, msg="running mean")
    assert_close(bn.running_var, g["running_var_after"], **TIGHT, msg="running var (unbiased)")
    bn.eval()
    assert_close(bn(Tensor(g["x_eval"])), g["y_eval"], **TIGHT, msg="eval output")


@pytest.mark.parametrize("case", _cases("cross_entropy"))
def test_cross_entropy_matches_pytorch(case):
    g = GOLDEN[case]
    reduction = next(k for k in g if k.startswith("reduction_")).removeprefix("reduction_")
    logits = Tensor(g["logits"], requires_grad=True)
    smoothing = float(g["label_smoothing"]) if "label_smoothing" in g else 0.0
    loss = F.cross_entropy(logits, g["target"], reduction=reduction, label_smoothing=smoothing)
    (loss.sum() if reduction == "none" else loss).backward()
    assert_close(loss, g["loss"], **TIGHT)
    assert_close(logits.grad, g["grad_logits"], **TIGHT)


def test_nll_loss_matches_pytorch():
    g = GOLDEN["nll_loss"]
    log_probs = Tensor(g["log_probs"], requires_grad=True)
    loss = F.nll_loss(log_probs, g["target"])
    loss.backward()
    assert_close(loss, g["loss"], **TIGHT)
    assert_close(log_probs.grad, g["grad_log_probs"], **TIGHT)


def test_mse_loss_matches_pytorch():
    g = GOLDEN["mse_loss"]
    a, b = Tensor(g["input"], requires_grad=True), Tensor(g["target"], requires_grad=True)
    loss = F.mse_loss(a, b)
    loss.backward()
    assert_close(loss, g["loss"], **TIGHT)
    assert_close(a.grad, g["grad_input"], **TIGHT)
    assert_close(b.grad, g["grad_target"], **TIGHT)


def _optimizer(case: str, params, g: dict[str, np.ndarray]):
    hp = {k.removeprefix("hp_"): v for k, v in g.items() if k.startswith("hp_")}
    if "betas" in hp:
        hp["betas"] = tuple(float(b) for b in hp["betas"])
    hp = {k: (bool(v) if k == "nesterov" else v if k == "betas" else float(v)) for k, v in hp.items()}
    cls = optim.AdamW if case.startswith("adamw") else optim.Adam if case.startswith("adam") else optim.SGD
    return cls(params, **hp)


@pytest.mark.parametrize("case", _cases("sgd") + _cases("adam"))
def test_optimizer_steps_match_pytorch(case):
    g = GOLDEN[case]
    p = nn.Parameter(g["param"].copy())
    opt = _optimizer(case, [p], g)
    step = 0
    while f"grad{step}" in g:
        p.grad = Tensor(g[f"grad{step}"])
        opt.step()
        assert_close(p.data, g[f"after{step}"], rtol=1e-12, atol=1e-14, msg=f"{case}, after step {step + 1}")
        step += 1
    assert step == 3
