"""Optimizers with PyTorch's exact update rules: SGD (momentum, Nesterov, weight decay), Adam, AdamW.

Book: chapter 5 (`book/05_layers.md`). Tests: `tests/engine/test_optim.py`, `tests/engine/test_nn_golden.py`.

An optimizer holds the parameters and, per parameter, the state its rule needs (a momentum
buffer, Adam's two moment estimates and step count). `step()` reads each `p.grad` and changes
`p.data` *in place*: the model keeps pointing at the same arrays, and no graph is recorded (the
update is not part of the function being differentiated). Parameters whose grad is None (unused
in this forward pass, or frozen) are skipped and their state does not advance.

Parameters can be given as one iterable or as PyTorch-style groups,
`[{"params": [...], "lr": 0.1}, {"params": [...]}]`, where a group's entries override the defaults.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from .graph import Tensor

__all__ = ["Adam", "AdamW", "Optimizer", "SGD"]


class Optimizer:
    """Base class: keeps `param_groups` (a list of dicts, each with "params" and hyperparameters)
    and `state` (per parameter, keyed by the parameter object)."""

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]):
        self.defaults = dict(defaults)
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[dict[str, Any]] = []
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list "
                             "(did model.parameters() run out? it is an iterator)")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        seen: set[int] = set()
        for group in groups:
            group = {**self.defaults, **group, "params": list(group["params"])}
            for p in group["params"]:
                if not isinstance(p, Tensor):
                    raise TypeError(f"{type(self).__name__}: parameters must be Tensors, got {type(p).__name__}")
                if not p.requires_grad:
                    raise ValueError(f"{type(self).__name__}: a parameter of shape {p.shape} does not require grad")
                if id(p) in seen:
                    raise ValueError(f"{type(self).__name__}: a parameter of shape {p.shape} appears twice")
                seen.add(id(p))
            self.param_groups.append(group)

    def zero_grad(self) -> None:
        """Set every parameter's grad to None, as `torch.optim` does by default."""
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def step(self) -> None:
        """One update of every parameter that has a gradient. The rules work on the raw arrays
        (`p.data`, `p.grad.data`), so no graph is recorded and no `no_grad` is needed."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.data
                if g.shape != p.data.shape:
                    raise RuntimeError(f"{type(self).__name__}: grad of shape {g.shape} "
                                       f"for a parameter of shape {p.shape}")
                self._update(p, g.astype(p.data.dtype, copy=False), group, self.state.setdefault(p, {}))

    def _update(self, p: Tensor, g: np.ndarray, group: dict[str, Any], state: dict[str, Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not define _update")

    # -- checkpointing -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Hyperparameters per group, and each parameter's state keyed by its position (0, 1, ...)."""
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        state = {
            index[id(p)]: {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in s.items()}
            for p, s in self.state.items()
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
            len(a["params"]) != len(b["params"]) for a, b in zip(groups, self.param_groups, strict=True)
        ):
            raise ValueError(f"{type(self).__name__}.load_state_dict: the saved groups do not match "
                             "this optimizer's parameters")
        params = [p for g in self.param_groups for p in g["params"]]
        for saved, group in zip(groups, self.param_groups, strict=True):
            group.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {
            params[int(i)]: {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in s.items()}
            for i, s in state_dict["state"].items()
        }

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines + [")"])


class SGD(Optimizer):
    r"""Stochastic gradient descent, PyTorch's rule. With weight decay $\lambda$, momentum $\mu$,
    dampening $\tau$ and step t:

    $g_t = \nabla_\theta + \lambda \theta_{t-1}$;
    $b_1 = g_1$, $b_t = \mu b_{t-1} + (1 - \tau) g_t$ (when $\mu \ne 0$);
    direction $d_t = g_t + \mu b_t$ if nesterov else $b_t$ (or $g_t$ without momentum);
    $\theta_t = \theta_{t-1} - \text{lr}\, d_t$.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float,
        momentum: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
    ):
        if lr < 0:
            raise ValueError(f"SGD: invalid learning rate {lr}")
        if momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: momentum ({momentum}) and weight_decay ({weight_decay}) must be >= 0")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and dampening = 0 "
                             f"(got {momentum}, {dampening})")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, nesterov=nesterov,
                                      weight_decay=weight_decay))

    def _update(self, p, g, group, state):
        wd, mu = group["weight_decay"], group["momentum"]
        if wd != 0:
            g = g + wd * p.data
        if mu != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = np.array(g, copy=True)  # first step: b_1 = g_1, no dampening
            else:
                buf *= mu
                buf += (1 - group["dampening"]) * g
            g = g + mu * buf if group["nesterov"] else buf
        p.data -= group["lr"] * g


class Adam(Optimizer):
    r"""Adam (Kingma & Ba, 2015), PyTorch's rule. With $g_t = \nabla_\theta + \lambda \theta_{t-1}$
    (L2 weight decay, folded into the gradient):

    $m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t$, $v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2$,
    $\theta_t = \theta_{t-1} - \frac{\text{lr}}{1 - \beta_1^t} \cdot
    \frac{m_t}{\sqrt{v_t} / \sqrt{1 - \beta_2^t} + \epsilon}$

    (the bias-corrected $\hat m_t / (\sqrt{\hat v_t} + \epsilon)$, computed in PyTorch's order so
    the results agree to the last bits).
    """

    _decoupled = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        name = type(self).__name__
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"{name}: lr ({lr}), eps ({eps}) and weight_decay ({weight_decay}) must be >= 0")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"{name}: betas must be in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def _update(self, p, g, group, state):
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(p.data)
            state["exp_avg_sq"] = np.zeros_like(p.data)
        state["step"] += 1
        t = state["step"]
        if wd != 0:
            if self._decoupled:
                p.data *= 1 - lr * wd  # AdamW: shrink the weights directly, outside the adaptive scaling
            else:
                g = g + wd * p.data
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= beta1
        m += (1 - beta1) * g
        v *= beta2
        v += (1 - beta2) * (g * g)
        bias_correction1 = 1 - beta1**t
        bias_correction2 = 1 - beta2**t
        denom = np.sqrt(v) / math.sqrt(bias_correction2) + eps
        p.data -= (lr / bias_correction1) * (m / denom)


class AdamW(Adam):
    r"""Adam with decoupled weight decay (Loshchilov & Hutter, 2019), PyTorch's rule:

    $\theta \leftarrow \theta (1 - \text{lr}\,\lambda)$, then the Adam step with the plain gradient
    $g_t = \nabla_\theta$. Unlike L2 decay in Adam, the decay is not divided by $\sqrt{\hat v_t}$,
    so every weight shrinks at the same rate.
    """

    _decoupled = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ):
        super().__init__(params, lr, betas, eps, weight_decay)
