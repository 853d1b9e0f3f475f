"""Gradient clipping, with PyTorch's names and semantics (`torch.nn.utils.clip_grad_norm_`,
`clip_grad_value_`): the gradients a `backward()` left in `p.grad` are changed in place, between
`backward()` and the optimizer's `step()`.

Book: chapter 5 (`book/05_layers.md`; its second half, `book/05b_optimizers.md`, *Gradient clipping*).
Tests: `tests/engine/test_clip_grad.py`.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..graph import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters: Tensor | Iterable[Tensor], op: str) -> list[Tensor]:
    """The gradients of the parameters that have one."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for k, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"{op}: parameters must be Tensors, got {type(p).__name__} at position {k}")
    return [p.grad for p in params if p.grad is not None]


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> Tensor:
    r"""Scale every gradient by the same factor so that their global norm is at most `max_norm`.

    The global norm is the norm of all gradients taken as one vector,
    $\|g\| = \big(\sum_p \|g_p\|^{q}\big)^{1/q}$ for `norm_type` $q$ (`float("inf")`: the largest
    $|g|$). Every gradient is multiplied by $\min(1, \text{max\_norm} / (\|g\| + 10^{-6}))$, so the
    direction of the whole update is kept and only its length is capped. Parameters whose grad is
    None are ignored. Returns the norm *before* clipping, as a 0-d Tensor (0 when no parameter has
    a gradient). With `error_if_nonfinite`, a NaN or infinite norm raises instead of spreading
    NaN into every gradient.
    """
    grads = _grads(parameters, "clip_grad_norm_")
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return Tensor(np.array(0.0))
    if norm_type == np.inf:
        total = max(float(np.max(np.abs(g.data))) if g.data.size else 0.0 for g in grads)
    elif norm_type > 0:
        per_param = [np.sum(np.abs(g.data.astype(np.float64)) ** norm_type) for g in grads]
        total = float(np.sum(per_param) ** (1.0 / norm_type))
    else:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive or inf, got {norm_type}")
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                           f"{total}; pass error_if_nonfinite=False to clip anyway")
    scale = min(1.0, max_norm / (total + 1e-6))
    for g in grads:  # a new array: a gradient may be a read-only broadcast view, or shared
        g.data = g.data * np.asarray(scale, dtype=g.data.dtype)
    return Tensor(np.array(total))


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    """Clamp every gradient entry into [-clip_value, clip_value], in place. Unlike clipping by the
    norm, this changes the update's direction."""
    clip = float(clip_value)
    if clip < 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    for g in _grads(parameters, "clip_grad_value_"):
        g.data = np.clip(g.data, -clip, clip)
