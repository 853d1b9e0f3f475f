"""PyTorch's numbers for the layers, losses and optimizers of `solutions.nn` and `solutions.optim`.

`make(rng)` returns {case: {array: ndarray}}: every input, every hyperparameter (as a 0-d array)
and every expected output, all float64, so `tests/engine/test_nn_golden.py` reads everything it needs
from the fixture file and never imports torch. Run through `make golden` (make_golden.py), or
alone to write tests/golden/nn.npz:

    .venv-golden/bin/python tests/golden/golden_nn.py
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

SEED = 20261121  # the seed used when this file is run on its own


def _batch_norm_cases(torch, rng) -> dict[str, dict[str, np.ndarray]]:
    cases = {}
    for name, shape, layer in [
        ("batchnorm1d", (8, 4), torch.nn.BatchNorm1d),
        ("batchnorm1d_3d", (4, 3, 5), torch.nn.BatchNorm1d),
        ("batchnorm2d", (4, 3, 5, 5), torch.nn.BatchNorm2d),
    ]:
        C = shape[1]
        a = {
            "x": rng.standard_normal(shape) * 2.0 + 1.0,
            "x_eval": rng.standard_normal(shape),
            "upstream": rng.standard_normal(shape),
            "weight": rng.uniform(0.5, 1.5, C),
            "bias": rng.standard_normal(C),
            "running_mean": rng.standard_normal(C) * 0.1,
            "running_var": rng.uniform(0.5, 2.0, C),
            "momentum": np.array(0.1),
            "eps": np.array(1e-5),
        }
        bn = layer(C, eps=1e-5, momentum=0.1).double()
        with torch.no_grad():
            bn.weight.copy_(torch.from_numpy(a["weight"]))
            bn.bias.copy_(torch.from_numpy(a["bias"]))
            bn.running_mean.copy_(torch.from_numpy(a["running_mean"]))
            bn.running_var.copy_(torch.from_numpy(a["running_var"]))
        x = torch.from_numpy(a["x"]).requires_grad_()
        bn.train()
        y = bn(x)
        y.backward(torch.from_numpy(a["upstream"]))
        a["y_train"] = y.detach().numpy().copy()
        a["grad_x"] = x.grad.numpy().copy()
        a["grad_weight"] = bn.weight.grad.numpy().copy()
        a["grad_bias"] = bn.bias.grad.numpy().copy()
        a["running_mean_after"] = bn.running_mean.numpy().copy()
        a["running_var_after"] = bn.running_var.numpy().copy()
        bn.eval()
        with torch.no_grad():
            a["y_eval"] = bn(torch.from_numpy(a["x_eval"])).numpy().copy()
        cases[name] = a
    return cases


def _loss_cases(torch, rng) -> dict[str, dict[str, np.ndarray]]:
    F = torch.nn.functional
    cases = {}

    def with_grad(fn, *inputs):
        ts = [torch.from_numpy(i).requires_grad_() for i in inputs]
        out = fn(*ts)
        out.backward(torch.ones_like(out) if out.ndim else None)
        return out.detach().numpy().copy(), [t.grad.numpy().copy() for t in ts]

    for name, logits, reduction in [
        ("cross_entropy", rng.standard_normal((6, 5)) * 3.0, "mean"),
        ("cross_entropy_sum", rng.standard_normal((4, 3)), "sum"),
        # Logits of +-1000: log(softmax) would be log(0) = -inf; logsumexp keeps it finite.
        ("cross_entropy_large",
         np.array([[1000.0, 0.0, -1000.0], [0.0, 1000.0, 1000.0], [-1000.0, 999.0, 1000.0]]), "none"),
    ]:
        target = rng.integers(0, logits.shape[1], logits.shape[0])
        loss, (grad,) = with_grad(
            lambda z, target=target, reduction=reduction: F.cross_entropy(z, torch.from_numpy(target),
                                                                           reduction=reduction), logits)
        cases[name] = {"logits": logits, "target": target, "loss": loss, "grad_logits": grad}
        cases[name]["reduction_" + reduction] = np.array(1.0)  # which reduction, readable as a key

    logits = rng.standard_normal((5, 4)) * 2.0
    target = rng.integers(0, 4, 5)
    loss, (grad,) = with_grad(lambda z: F.cross_entropy(z, torch.from_numpy(target), label_smoothing=0.1), logits)
    cases["cross_entropy_label_smoothing"] = {
        "logits": logits, "target": target, "loss": loss, "grad_logits": grad,
        "reduction_mean": np.array(1.0), "label_smoothing": np.array(0.1),
    }

    log_probs = np.log(rng.dirichlet(np.ones(4), size=5))
    target = rng.integers(0, 4, 5)
    loss, (grad,) = with_grad(lambda z: F.nll_loss(z, torch.from_numpy(target)), log_probs)
    cases["nll_loss"] = {"log_probs": log_probs, "target": target, "loss": loss, "grad_log_probs": grad}

    inp, tgt = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    loss, (g_in, g_tgt) = with_grad(F.mse_loss, inp, tgt)
    cases["mse_loss"] = {"input": inp, "target": tgt, "loss": loss, "grad_input": g_in, "grad_target": g_tgt}
    return cases


def _optimizer_cases(torch, rng) -> dict[str, dict[str, np.ndarray]]:
    settings = {
        "sgd_momentum": ("SGD", dict(lr=0.1, momentum=0.9)),
        "sgd_nesterov_weight_decay": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
        "sgd_dampening": ("SGD", dict(lr=0.05, momentum=0.5, dampening=0.3, weight_decay=0.1)),
        "adam": ("Adam", dict(lr=0.01)),
        "adam_weight_decay": ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
        "adamw": ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    }
    cases = {}
    steps = 3
    for name, (cls, hyper) in settings.items():
        param = rng.standard_normal((3, 4))
        grads = [rng.standard_normal((3, 4)) for _ in range(steps)]
        p = torch.nn.Parameter(torch.from_numpy(param.copy()))
        opt = getattr(torch.optim, cls)([p], **hyper)
        case = {"param": param}
        for k, v in hyper.items():
            case[f"hp_{k}"] = np.array(v, dtype=np.float64)
        for i, g in enumerate(grads):
            p.grad = torch.from_numpy(g.copy())
            opt.step()
            case[f"grad{i}"] = g
            case[f"after{i}"] = p.detach().numpy().copy()
        cases[name] = case
    return cases


def make(rng: np.random.Generator) -> dict[str, dict[str, np.ndarray]]:
    """{case name: {array name: ndarray}} for BatchNorm, the losses and the optimizers."""
    import torch  # only the fixture generator needs torch; the tests read the saved arrays

    cases: dict[str, dict[str, np.ndarray]] = {}
    cases.update(_batch_norm_cases(torch, rng))
    cases.update(_loss_cases(torch, rng))
    cases.update(_optimizer_cases(torch, rng))
    return {case: {k: np.asarray(v) for k, v in arrays.items()} for case, arrays in cases.items()}


def save(cases: dict[str, dict[str, np.ndarray]], path: Path) -> Path:
    np.savez_compressed(path, **{f"{case}/{name}": arr
                                 for case, arrays in cases.items() for name, arr in arrays.items()})
    return path


if __name__ == "__main__":
    out = save(make(np.random.default_rng(SEED)), Path(__file__).with_name("nn.npz"))
    print(f"wrote {out} ({out.stat().st_size} bytes)")
