"""Gradient clipping (solutions/nn/utils.py) against values worked out by hand, with PyTorch's
semantics: one global norm over every gradient, the norm before clipping returned, a factor
max_norm / (norm + 1e-6) applied only when it is below 1, parameters without a gradient ignored."""
from __future__ import annotations

import math

import numpy as np
import pytest

from solutions import Tensor
from solutions.nn import Parameter
from solutions.nn.utils import clip_grad_norm_, clip_grad_value_


def params_with_grads(*grads):
    params = []
    for g in grads:
        p = Parameter(np.zeros(np.shape(g)))
        p.grad = Tensor(np.array(g, dtype=np.float64))
        params.append(p)
    return params


def test_the_norm_is_global_and_every_gradient_shrinks_by_the_same_factor():
    # (3, 4) and (12,): the global 2-norm is sqrt(9 + 16 + 144) = 13, not 5 or 12
    a, b = params_with_grads([3.0, 4.0], [12.0])
    norm = clip_grad_norm_([a, b], max_norm=6.5)
    assert norm.item() == pytest.approx(13.0)
    factor = 6.5 / (13.0 + 1e-6)
    np.testing.assert_allclose(a.grad.data, [3.0 * factor, 4.0 * factor], rtol=1e-12)
    np.testing.assert_allclose(b.grad.data, [12.0 * factor], rtol=1e-12)
    assert math.hypot(*a.grad.data, *b.grad.data) == pytest.approx(6.5, rel=1e-6)


def test_below_the_threshold_nothing_changes():
    (a,) = params_with_grads([0.3, -0.4])
    assert clip_grad_norm_(a, max_norm=1.0).item() == pytest.approx(0.5)  # a lone tensor is accepted
    np.testing.assert_array_equal(a.grad.data, [0.3, -0.4])


def test_other_norms_and_missing_gradients():
    a, b = params_with_grads([1.0, -2.0], [2.0])
    c = Parameter(np.ones(3))  # grad None: ignored, and left None
    assert clip_grad_norm_([a, b, c], max_norm=10.0, norm_type=1).item() == pytest.approx(5.0)
    assert clip_grad_norm_([a, b, c], max_norm=1.0, norm_type=float("inf")).item() == pytest.approx(2.0)
    np.testing.assert_allclose(a.grad.data, [0.5, -1.0], rtol=1e-6)
    assert c.grad is None
    assert clip_grad_norm_([c], max_norm=1.0).item() == 0.0


def test_a_nonfinite_norm_raises_only_when_asked():
    (a,) = params_with_grads([np.inf, 1.0])
    with pytest.raises(RuntimeError, match="clip_grad_norm_: the total norm"):
        clip_grad_norm_(a, 1.0, error_if_nonfinite=True)
    with pytest.raises(TypeError, match="clip_grad_norm_: parameters must be Tensors"):
        clip_grad_norm_([np.ones(2)], 1.0)
    with pytest.raises(ValueError, match="norm_type"):
        clip_grad_norm_(a, 1.0, norm_type=0)


def test_a_broadcast_gradient_is_clipped_too():
    # backward of a broadcast can leave a read-only view in .grad: clipping must not write into it
    (a,) = params_with_grads([0.0, 0.0])
    a.grad = Tensor(np.broadcast_to(np.array(4.0), (2,)))
    clip_grad_norm_(a, max_norm=math.sqrt(2))
    np.testing.assert_allclose(a.grad.data, [1.0, 1.0], rtol=1e-6)


def test_clip_by_value_clamps_each_entry():
    a, b = params_with_grads([0.5, -3.0], [2.0])
    clip_grad_value_([a, b], 1.0)
    np.testing.assert_array_equal(a.grad.data, [0.5, -1.0])
    np.testing.assert_array_equal(b.grad.data, [1.0])
    with pytest.raises(ValueError, match="clip_value"):
        clip_grad_value_(a, -1.0)
