"""solutions.nn: Module mechanics, layers, initialization, losses, and the numerical gradient.

Gradients are checked numerically in float64; values against closed forms written out here.
PyTorch's own numbers for BatchNorm and the losses are in `tests/engine/test_nn_golden.py`.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from solutions import Tensor, nn, ops
from solutions.nn import functional as F
from solutions.nn import init, numerical_gradient
from solutions.testing import assert_close, gradcheck

f64 = np.float64


def randn(*shape, seed=0, dtype=f64, requires_grad=True):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), requires_grad=requires_grad)


class Net(nn.Module):
    """A model with nesting, a buffer-holding layer and a shared parameter (for the mechanics tests)."""

    def __init__(self, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.fc1 = nn.Linear(4, 3, rng=rng)
        self.norm = nn.BatchNorm1d(3)
        self.body = nn.Sequential(nn.ReLU(), nn.Dropout(0.5, rng=1), nn.Linear(3, 2, rng=rng))
        self.scale = nn.Parameter(np.ones(1, dtype=np.float32))

    def forward(self, x):
        return self.body(self.norm(self.fc1(x))) * self.scale


# --------------------------------------------------------------------------------------------
# Module mechanics
# --------------------------------------------------------------------------------------------
def test_parameter_is_a_tensor_that_requires_grad():
    p = nn.Parameter(np.zeros(3, dtype=np.float32))
    assert isinstance(p, Tensor) and p.requires_grad and p.is_leaf
    assert repr(p).startswith("Parameter containing:\nTensor(")
    y = (p * 2.0).sum()
    assert type(y) is Tensor  # results of ops are plain tensors, not parameters
    with pytest.raises(TypeError, match="floating-point"):
        nn.Parameter(np.zeros(3, dtype=np.int64))


def test_parameters_are_registered_in_assignment_order_with_dotted_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "body.2.weight", "body.2.bias"]
    assert [p.shape for p in net.parameters()] == [(1,), (3, 4), (3,), (3,), (3,), (2, 3), (2,)]
    assert [type(m).__name__ for m in net.children()] == ["Linear", "BatchNorm1d", "Sequential"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "norm", "body", "body.0", "body.1", "body.2"]
    assert len(list(net.modules())) == 7
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["scale"]


def test_own_parameters_come_before_children_and_shared_ones_are_listed_once():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2, rng=0)
            self.b = nn.Linear(2, 2, rng=1)
            self.b.weight = self.a.weight  # weight tying

    names = [n for n, _ in Tied().named_parameters()]
    assert names == ["a.weight", "a.bias", "b.bias"]


def test_reassigning_and_deleting_attributes_updates_the_registries():
    layer = nn.Linear(2, 3, rng=0)
    layer.weight = nn.Parameter(np.zeros((3, 2), dtype=np.float32))
    assert next(layer.parameters()) is layer.weight
    with pytest.raises(TypeError, match=r"Linear.weight is a parameter.*\.weight\.data"):
        layer.weight = Tensor(np.zeros((3, 2), dtype=np.float32))
    layer.bias = None  # None keeps the name reserved, as bias=False does
    assert [n for n, _ in layer.named_parameters()] == ["weight"]
    del layer.weight
    assert list(layer.parameters()) == []


def test_a_name_lives_in_one_registry_and_buffers_take_arrays():
    m = nn.Module()
    m.child = nn.Module()
    m.child = nn.Parameter(np.ones(2))  # a child's name given a Parameter becomes a parameter
    assert list(m._parameters) == ["child"] and list(m._modules) == []
    m.sub = nn.Module()
    m.sub = 5  # anything else in a child's place: no longer a child
    assert list(m._modules) == [] and m.sub == 5
    m.register_buffer("count", np.zeros(2))
    m.count = np.ones(2)  # a buffer given a new array stays a buffer
    assert_close(m._buffers["count"], np.ones(2))
    with pytest.raises(TypeError, match="count is a buffer: assign an ndarray"):
        m.count = "text"
    m.note = Tensor(np.ones(2), requires_grad=True)  # a plain Tensor is an ordinary attribute
    assert "note" not in m._parameters and "note" in vars(m)


def test_named_modules_lists_a_shared_module_once_and_takes_a_prefix():
    net = Net()
    net.again = net.body  # one module reachable under two names
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "norm", "body", "body.0", "body.1", "body.2"]
    assert [n for n, _ in net.body.named_modules("net.body")][:2] == ["net.body", "net.body.0"]
    assert [n for n, _ in net.named_parameters(prefix="net")][:2] == ["net.scale", "net.fc1.weight"]


def test_forgetting_super_init_is_named():
    class Broken(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(RuntimeError, match=r"Broken: call super\(\).__init__\(\)"):
        Broken()


def test_train_and_eval_reach_every_descendant():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.body.train()
    assert net.body[1].training and not net.training and not net.norm.training
    net.train()
    assert all(m.training for m in net.modules())


def test_zero_grad_clears_every_gradient():
    net = Net()
    net(Tensor(np.random.default_rng(0).random((5, 4), dtype=np.float32))).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_repr_reads_like_pytorch():
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, bias=False, rng=0), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25, rng=0), nn.Linear(128, 10, rng=0),
    )
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
        "  (1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
        "  (2): ReLU()\n"
        "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0)\n"
        "  (4): Flatten(start_dim=1, end_dim=-1)\n"
        "  (5): Dropout(p=0.25)\n"
        "  (6): Linear(in_features=128, out_features=10, bias=True)\n"
        ")"
    )
    assert repr(Net()).splitlines()[3] == "  (body): Sequential("


def test_sequential_indexing_and_errors():
    seq = nn.Sequential(nn.Linear(2, 3, rng=0), nn.Tanh())
    assert len(seq) == 2 and isinstance(seq[-1], nn.Tanh) and [type(m) for m in seq] == [nn.Linear, nn.Tanh]
    seq.append(nn.Sigmoid())
    assert list(dict(seq.named_children())) == ["0", "1", "2"]
    with pytest.raises(TypeError, match="argument 1 is a ufunc, not a Module"):
        nn.Sequential(nn.ReLU(), np.tanh)


def test_module_without_forward_says_so():
    with pytest.raises(NotImplementedError, match="Module does not define forward"):
        nn.Module()(1)


# --------------------------------------------------------------------------------------------
# state_dict, save and load
# --------------------------------------------------------------------------------------------
def test_state_dict_has_parameters_and_buffers_as_array_copies():
    net = Net()
    sd = net.state_dict()
    assert list(sd) == [
        "scale", "fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "norm.running_mean", "norm.running_var",
        "norm.num_batches_tracked", "body.2.weight", "body.2.bias",
    ]
    assert all(type(v) is np.ndarray for v in sd.values())
    net.fc1.weight.data += 1.0
    net.norm.running_mean += 1.0
    assert not np.shares_memory(sd["fc1.weight"], net.fc1.weight.data)
    assert_close(sd["norm.running_mean"], np.zeros(3))


def test_state_dict_round_trip_through_npz(tmp_path):
    a, b = Net(seed=0), Net(seed=1)
    x = Tensor(np.random.default_rng(2).random((6, 4), dtype=np.float32))
    a(x)  # one training step's worth of running statistics
    a.eval(), b.eval()
    assert not np.allclose(a(x).data, b(x).data)
    weight_before = b.fc1.weight  # loading writes into the existing arrays (optimizers keep them)
    path = a.save(tmp_path / "net")
    assert path.name == "net.npz" and path.exists()
    assert b.load(path) is b
    assert b.fc1.weight is weight_before
    assert_close(b(x), a(x), rtol=0, atol=0)
    assert int(b.norm.num_batches_tracked) == 1


def test_load_state_dict_strict_errors_name_the_keys_and_shapes():
    net = Net()
    sd = net.state_dict()
    del sd["fc1.bias"]
    sd["extra.weight"] = np.zeros(2)
    with pytest.raises(RuntimeError, match=r"missing key\(s\): 'fc1.bias'; unexpected key\(s\): 'extra.weight'"):
        net.load_state_dict(sd)
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["fc1.bias"] and result.unexpected_keys == ["extra.weight"]

    sd = net.state_dict()
    sd["body.2.weight"] = np.zeros((3, 2))
    with pytest.raises(RuntimeError,
                       match=r"shape mismatch for 'body.2.weight': checkpoint has \(3, 2\), this model has \(2, 3\)"):
        net.load_state_dict(sd, strict=False)


def test_state_dict_keeps_a_tied_weight_under_both_names_as_pytorch_does():
    a, b = nn.Linear(2, 2, rng=0), nn.Linear(2, 2, rng=1)
    tied = nn.Sequential(a, b)
    b.weight = a.weight
    assert list(tied.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert [n for n, _ in tied.named_parameters()] == ["0.weight", "0.bias", "1.bias"]


def test_a_failed_load_changes_nothing_and_a_broadcastable_shape_is_still_a_mismatch():
    net = Net()
    before = {k: v.copy() for k, v in net.state_dict().items()}
    sd = Net(seed=1).state_dict()
    sd["fc1.bias"] = np.ones(1, dtype=np.float32)  # NumPy would broadcast it into the (3,) bias
    with pytest.raises(RuntimeError,
                       match=r"shape mismatch for 'fc1.bias': checkpoint has \(1,\), this model has \(3,\)"):
        net.load_state_dict(sd)
    assert all(np.array_equal(net.state_dict()[k], v) for k, v in before.items())
    sd = Net(seed=1).state_dict()
    del sd["scale"]
    with pytest.raises(RuntimeError, match="missing key"):
        net.load_state_dict(sd)
    assert all(np.array_equal(net.state_dict()[k], v) for k, v in before.items())


def test_loading_copies_the_values_into_the_existing_arrays():
    net, sd = Net(), Net(seed=1).state_dict()
    weight, running = net.fc1.weight.data, net.norm.running_mean
    net.load_state_dict(sd)
    assert net.fc1.weight.data is weight and net.norm.running_mean is running
    assert_close(weight, sd["fc1.weight"], rtol=0, atol=0)
    sd["fc1.weight"][...] = 7.0  # the model does not share memory with the state dict
    assert not np.any(weight == 7.0)


def test_load_names_the_file(tmp_path):
    small = nn.Linear(2, 2, rng=0)
    path = small.save(tmp_path / "small.npz")
    with pytest.raises(RuntimeError, match=r"shape mismatch for 'weight'.*small\.npz"):
        nn.Linear(3, 2, rng=0).load(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        small.load(tmp_path / "missing.npz")


def test_to_changes_the_dtype_of_parameters_and_float_buffers():
    net = Net().to(np.float64)
    assert {p.dtype for p in net.parameters()} == {np.dtype(np.float64)}
    assert net.norm.running_var.dtype == np.float64 and net.norm.num_batches_tracked.dtype == np.int64
    assert net(randn(5, 4, requires_grad=False)).dtype == np.float64


# --------------------------------------------------------------------------------------------
# Initialization
# --------------------------------------------------------------------------------------------
def test_init_is_reproducible_from_a_seed_and_independent_of_dtype():
    a = nn.Linear(30, 20, rng=np.random.default_rng(7))
    b = nn.Linear(30, 20, rng=7)
    c = nn.Linear(30, 20, rng=7, dtype=np.float64)
    assert a.weight.dtype == np.float32 and c.weight.dtype == np.float64
    assert_close(a.weight, b.weight, rtol=0, atol=0)
    assert_close(a.weight.data.astype(f64), c.weight, rtol=1e-6)
    init.manual_seed(3)
    d = nn.Linear(30, 20)
    init.manual_seed(3)
    assert_close(nn.Linear(30, 20).weight, d.weight, rtol=0, atol=0)


def test_default_init_follows_pytorch_bounds():
    layer = nn.Linear(400, 300, rng=0)
    bound = 1 / math.sqrt(400)  # kaiming_uniform(a=sqrt 5): gain sqrt(1/3) * sqrt(3 / fan_in)
    for t in (layer.weight, layer.bias):
        assert np.abs(t.data).max() <= bound and np.abs(t.data).max() > 0.99 * bound
    conv = nn.Conv2d(6, 16, (3, 5), groups=2, rng=0)
    assert conv.weight.shape == (16, 3, 3, 5) and conv.bias.shape == (16,)
    bound = 1 / math.sqrt(3 * 3 * 5)
    assert np.abs(conv.weight.data).max() <= bound and np.abs(conv.bias.data).max() <= bound


@pytest.mark.parametrize(
    "fill, expected_std",
    [
        (lambda t, r: init.kaiming_uniform_(t, rng=r), math.sqrt(2 / (1 + 0.01**2)) / math.sqrt(200)),
        (lambda t, r: init.kaiming_normal_(t, nonlinearity="relu", rng=r), math.sqrt(2 / 200)),
        (lambda t, r: init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu", rng=r), math.sqrt(2 / 300)),
        (lambda t, r: init.xavier_uniform_(t, rng=r), math.sqrt(2 / 500)),
        (lambda t, r: init.xavier_normal_(t, gain=2.0, rng=r), 2 * math.sqrt(2 / 500)),
    ],
)
def test_init_functions_have_the_documented_spread(fill, expected_std):
    t = Tensor(np.empty((300, 200), dtype=np.float32))
    assert fill(t, np.random.default_rng(0)) is t
    assert abs(t.data.std() / expected_std - 1) < 0.02
    assert abs(t.data.mean()) < 0.05 * expected_std * 10


def test_init_helpers_and_errors():
    t = Tensor(np.ones((2, 3)))
    assert np.all(init.zeros_(t).data == 0) and np.all(init.ones_(t).data == 1)
    assert init.fan_in_and_fan_out((8, 4, 3, 3)) == (36, 72)
    with pytest.raises(ValueError, match=r"at least 2 dimensions, got shape \(5,\)"):
        init.xavier_uniform_(Tensor(np.zeros(5)))
    with pytest.raises(TypeError, match="rng must be a numpy Generator"):
        nn.Linear(2, 2, rng="seed")
    with pytest.raises(TypeError, match="dtype must be a floating-point type"):
        nn.Linear(2, 2, dtype=np.int32)


# --------------------------------------------------------------------------------------------
# The numerical gradient (chapter 5's check of cross-entropy's gradient)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 2)])
def test_numerical_gradient_is_central_for_any_shape_and_restores_x(shape):
    x = np.array(np.random.default_rng(0).standard_normal(shape) * 3)
    saved = x.copy()
    grad = numerical_gradient(lambda a: float((a**3).sum()), x, eps=1e-2)
    assert grad.shape == x.shape and grad.dtype == np.float64
    assert np.array_equal(x, saved)  # exactly: the original is put back, not recomputed
    assert_close(grad, 3 * saved**2 + 1e-4, rtol=1e-9, atol=1e-9)  # a cubic's central difference, exactly


def test_numerical_gradient_changes_x_in_place_for_a_function_that_reads_it_from_outside():
    w = np.random.default_rng(1).standard_normal(4)
    assert_close(numerical_gradient(lambda _: float(w @ w), w), 2 * w, rtol=1e-7)


def test_cross_entropy_gradient_matches_its_numerical_gradient_and_the_formula():
    z = np.random.default_rng(2).standard_normal((5, 4))
    t = np.array([0, 3, 1, 1, 2])
    logits = Tensor(z.copy(), requires_grad=True)
    F.cross_entropy(logits, t).backward()
    numeric = numerical_gradient(lambda a: F.cross_entropy(Tensor(a), t).item(), z)
    softmax = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    assert_close(logits.grad, numeric, rtol=1e-6, atol=1e-9)
    assert_close(logits.grad, (softmax - np.eye(4)[t]) / 5, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------------
# Layers: values and gradients
# --------------------------------------------------------------------------------------------
def test_linear_matches_the_formula_and_gradchecks():
    layer = nn.Linear(4, 3, dtype=f64, rng=0)
    x = randn(5, 4, seed=1)
    assert_close(layer(x), x.data @ layer.weight.data.T + layer.bias.data)
    assert layer(randn(2, 6, 4, requires_grad=False)).shape == (2, 6, 3)

    def fn(x, w, b):
        layer.weight, layer.bias = w, b
        return layer(x)

    assert gradcheck(fn, x, layer.weight, layer.bias)
    with pytest.raises(ValueError, match=r"linear: input has 5 features \(shape \(2, 5\)\) but the weight expects 4"):
        layer(randn(2, 5))


def test_linear_without_bias():
    layer = nn.Linear(3, 2, bias=False, rng=0)
    assert layer.bias is None and [n for n, _ in layer.named_parameters()] == ["weight"]
    assert "bias=False" in repr(layer)


def test_conv2d_module_is_the_conv2d_op_with_its_weights():
    conv = nn.Conv2d(2, 4, 3, stride=2, padding=1, dtype=f64, rng=0)
    x = randn(2, 2, 5, 5, seed=1)
    assert_close(conv(x), ops.conv2d(x, conv.weight, conv.bias, stride=2, padding=1))
    assert conv(x).shape == (2, 4, 3, 3)

    def fn(x, w, b):
        conv.weight, conv.bias = w, b
        return conv(x)

    assert gradcheck(fn, x, conv.weight, conv.bias)
    with pytest.raises(ValueError, match=r"divisible by groups \(2\)"):
        nn.Conv2d(3, 4, 3, groups=2)


def test_pooling_and_flatten_modules():
    x = randn(2, 3, 4, 4)
    assert_close(nn.MaxPool2d(2)(x), ops.max_pool2d(x, 2))
    assert_close(nn.AvgPool2d(2, stride=1)(x), ops.avg_pool2d(x, 2, stride=1))
    assert nn.Flatten()(x).shape == (2, 48)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 4)
    assert_close(nn.Identity()(x), x)


def test_activations():
    x = randn(3, 4)
    assert_close(nn.ReLU()(x), np.maximum(x.data, 0))
    assert_close(nn.Sigmoid()(x), 1 / (1 + np.exp(-x.data)))
    assert_close(nn.Tanh()(x), np.tanh(x.data))


def test_dropout_scales_survivors_and_is_the_identity_in_eval():
    drop = nn.Dropout(0.25, rng=0)
    x = Tensor(np.ones((200, 100), dtype=np.float32))
    y = drop(x).data
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.01
    assert abs(y.mean() - 1.0) < 0.02  # inverted dropout keeps the expectation
    assert y.dtype == np.float32
    assert not np.array_equal(drop(x).data, y)  # a fresh mask per call
    assert_close(nn.Dropout(0.25, rng=0)(x), y)  # the same seed gives the same masks
    drop.eval()
    assert drop(x) is x
    assert nn.Dropout(0.0, rng=0)(x) is x
    assert np.all(nn.Dropout(1.0, rng=0)(x).data == 0)
    with pytest.raises(ValueError, match=r"p must be a probability in \[0, 1\], got 1.5"):
        nn.Dropout(1.5)


def test_dropout_gradchecks_with_a_fixed_mask():
    x = randn(4, 5)
    # A fresh layer with the same seed per call: every evaluation draws the same mask.
    assert gradcheck(lambda t: nn.Dropout(0.4, rng=3)(t), x)
    x.grad = None
    y = nn.Dropout(0.4, rng=3)(x)
    y.backward(np.ones((4, 5)))
    assert_close(x.grad, y.data / x.data)  # the gradient is the mask times 1/(1-p)


def _batch_norm_reference(x, gamma, beta, axes, eps=1e-5):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    shape = [1] * x.ndim
    shape[1] = -1
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)


@pytest.mark.parametrize("layer, shape, axes", [
    (nn.BatchNorm1d, (6, 3), (0,)),
    (nn.BatchNorm1d, (4, 3, 5), (0, 2)),
    (nn.BatchNorm2d, (3, 2, 4, 3), (0, 2, 3)),
])
def test_batch_norm_train_mode_values_running_stats_and_gradients(layer, shape, axes):
    bn = layer(shape[1], momentum=0.2, dtype=f64)
    rng = np.random.default_rng(0)
    bn.weight.data[:] = rng.uniform(0.5, 1.5, shape[1])
    bn.bias.data[:] = rng.standard_normal(shape[1])
    x = randn(*shape, seed=1)
    x.data *= 3.0
    x.data += 2.0
    y = bn(x)
    assert_close(y, _batch_norm_reference(x.data, bn.weight.data, bn.bias.data, axes))
    n = x.size // shape[1]
    # PyTorch's convention: the running variance takes the *unbiased* batch variance.
    assert_close(bn.running_mean, 0.2 * x.data.mean(axis=axes))
    assert_close(bn.running_var, 0.8 + 0.2 * x.data.var(axis=axes) * n / (n - 1))
    assert int(bn.num_batches_tracked) == 1

    def fn(x, w, b):
        bn.weight, bn.bias = w, b
        return bn(x)

    assert gradcheck(fn, x, bn.weight, bn.bias)


def test_batch_norm_eval_mode_uses_the_running_statistics():
    bn = nn.BatchNorm2d(2, dtype=f64)
    bn.running_mean[:] = [1.0, -2.0]
    bn.running_var[:] = [4.0, 0.25]
    bn.weight.data[:] = [2.0, 1.0]
    bn.bias.data[:] = [0.5, 0.0]
    bn.eval()
    x = randn(3, 2, 2, 2)
    expected = (x.data - np.array([1.0, -2.0]).reshape(1, 2, 1, 1)) / \
        np.sqrt(np.array([4.0, 0.25]) + 1e-5).reshape(1, 2, 1, 1)
    expected = expected * np.array([2.0, 1.0]).reshape(1, 2, 1, 1) + np.array([0.5, 0.0]).reshape(1, 2, 1, 1)
    assert_close(bn(x), expected)
    assert int(bn.num_batches_tracked) == 0  # eval leaves the statistics alone
    assert gradcheck(lambda t: bn(t), x)
    assert bn(randn(1, 2, 2, 2)).shape == (1, 2, 2, 2)  # a single sample is fine in eval


def test_batch_norm_momentum_none_is_a_cumulative_average_and_untracked_uses_batch_stats():
    bn = nn.BatchNorm1d(2, momentum=None, dtype=f64)
    xs = [randn(5, 2, seed=s) for s in range(3)]
    for x in xs:
        bn(x)
    assert_close(bn.running_mean, np.mean([x.data.mean(axis=0) for x in xs], axis=0))
    free = nn.BatchNorm1d(2, affine=False, track_running_stats=False, dtype=f64).eval()
    assert list(free.state_dict()) == []
    assert_close(free(xs[0]), _batch_norm_reference(xs[0].data, np.ones(2), np.zeros(2), (0,)))


def test_batch_norm_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected input of shape \(N, C, H, W\) "
                                         r"with C = num_features = 3, got shape \(2, 4, 5, 5\)"):
        nn.BatchNorm2d(3)(randn(2, 4, 5, 5))
    with pytest.raises(ValueError, match=r"BatchNorm1d: expected input of shape \(N, C\) or \(N, C, L\)"):
        nn.BatchNorm1d(3)(randn(2, 3, 4, 4))
    with pytest.raises(ValueError, match=r"more than one value per channel.*\(1, 3\)"):
        nn.BatchNorm1d(3)(randn(1, 3))


def test_a_whole_model_gradchecks_in_float64():
    model = nn.Sequential(
        nn.Conv2d(1, 2, 3, padding=1, rng=0), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(8, 3, rng=1), nn.Tanh(),
    ).to(f64)
    x = randn(3, 1, 4, 4, seed=5)
    params = list(model.parameters())

    def fn(x, *ps):
        for (owner, name), p in zip(owners, ps, strict=True):
            setattr(owner, name, p)
        return F.cross_entropy(model(x), np.array([0, 2, 1]))

    owners = [(m, n) for m in model.modules() for n, p in m._parameters.items() if p is not None]
    assert gradcheck(fn, x, *params)


# --------------------------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------------------------
def test_cross_entropy_matches_the_formula_for_each_reduction():
    logits = randn(5, 4)
    target = np.array([0, 3, 1, 1, 2])
    z = logits.data
    per_sample = np.log(np.exp(z).sum(axis=1)) - z[np.arange(5), target]
    assert_close(F.cross_entropy(logits, target, reduction="none"), per_sample)
    assert_close(F.cross_entropy(logits, target, reduction="sum"), per_sample.sum())
    loss = F.cross_entropy(logits, Tensor(target))
    assert_close(loss, per_sample.mean())
    loss.backward()
    softmax = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    assert_close(logits.grad, (softmax - np.eye(4)[target]) / 5)
    assert_close(nn.CrossEntropyLoss(reduction="sum")(logits, target), per_sample.sum())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_gradcheck(reduction):
    logits, target = randn(4, 3), np.array([2, 0, 1, 2])
    assert gradcheck(lambda z: F.cross_entropy(z, target, reduction), logits)
    assert gradcheck(lambda z: F.nll_loss(z.log_softmax(axis=1), target, reduction), logits)
    a, b = randn(3, 2, seed=1), randn(3, 2, seed=2)
    assert gradcheck(lambda a, b: F.mse_loss(a, b, reduction), a, b)


def test_label_smoothing_mixes_in_the_uniform_target():
    logits, target = randn(4, 3), np.array([2, 0, 1, 2])
    log_p = logits.data - np.log(np.exp(logits.data).sum(axis=1, keepdims=True))
    smooth = 0.9 * np.eye(3)[target] + 0.1 / 3
    assert_close(F.cross_entropy(logits, target, label_smoothing=0.1), -(smooth * log_p).sum(axis=1).mean())
    assert gradcheck(lambda z: F.cross_entropy(z, target, "sum", label_smoothing=0.2), logits)
    assert repr(nn.CrossEntropyLoss(label_smoothing=0.1)) == "CrossEntropyLoss(label_smoothing=0.1)"
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\], got -0.1"):
        F.cross_entropy(logits, target, label_smoothing=-0.1)


def test_cross_entropy_is_stable_at_huge_logits():
    logits = Tensor(np.array([[1000.0, 0.0, -1000.0], [0.0, 1000.0, 1000.0], [-1000.0, -1000.0, -1000.0]]),
                    requires_grad=True)
    target = np.array([2, 1, 0])
    loss = F.cross_entropy(logits, target, reduction="none")
    assert_close(loss, [2000.0, math.log(2.0), math.log(3.0)])
    loss.sum().backward()
    expected = np.array([[1.0, 0.0, -1.0], [0.0, -0.5, 0.5], [1 / 3 - 1, 1 / 3, 1 / 3]])
    assert np.all(np.isfinite(logits.grad.data))
    assert_close(logits.grad, expected)
    # float32 logits of 1000 are just as safe, and the loss stays float32
    l32 = F.cross_entropy(Tensor(np.array([[1000.0, -1000.0]], dtype=np.float32), requires_grad=True), np.array([0]))
    assert l32.dtype == np.float32 and l32.item() == 0.0


def test_nll_loss_picks_the_target_log_probability():
    log_probs = Tensor(np.log(np.array([[0.2, 0.8], [0.6, 0.4]])), requires_grad=True)
    loss = F.nll_loss(log_probs, np.array([1, 0]))
    assert_close(loss, -(np.log(0.8) + np.log(0.6)) / 2)
    loss.backward()
    assert_close(log_probs.grad, [[0.0, -0.5], [-0.5, 0.0]])
    assert_close(nn.NLLLoss()(log_probs, np.array([1, 0])), loss)


def test_mse_loss_values():
    a = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    assert_close(F.mse_loss(a, np.array([[0.0, 2.0], [3.0, 6.0]])), (1 + 4) / 4)
    assert_close(F.mse_loss(a, np.zeros((2, 2)), reduction="sum"), 30.0)
    assert_close(nn.MSELoss()(a, np.ones((2, 2), dtype=np.int64)), (0 + 1 + 4 + 9) / 4)


def test_loss_errors_name_shapes_dtypes_and_indices():
    logits = randn(4, 3)
    with pytest.raises(ValueError, match=r"cross_entropy: target has shape \(3,\) but the scores have shape \(4, 3\)"):
        F.cross_entropy(logits, np.array([0, 1, 2]))
    with pytest.raises(TypeError, match=r"cross_entropy: target must hold integer class indices, got dtype float64"):
        F.cross_entropy(logits, np.array([0.0, 1.0, 2.0, 1.0]))
    with pytest.raises(IndexError, match=r"cross_entropy: target\[2\] = 3 is not a class index in \[0, 3\)"):
        F.cross_entropy(logits, np.array([0, 1, 3, 1]))
    with pytest.raises(IndexError, match=r"target\[0\] = -1"):
        F.nll_loss(logits, np.array([-1, 1, 2, 1]))
    with pytest.raises(ValueError, match=r"cross_entropy: expected scores of shape \(N, K\).*got shape \(4, 3, 2\)"):
        F.cross_entropy(randn(4, 3, 2), np.array([0, 1, 2, 1]))
    with pytest.raises(ValueError, match=r"reduction must be one of \('mean', 'sum', 'none'\), got 'avg'"):
        F.cross_entropy(logits, np.array([0, 1, 2, 1]), reduction="avg")
    with pytest.raises(ValueError, match=r"mse_loss: input has shape \(4, 1\) but target has shape \(4,\)"):
        F.mse_loss(randn(4, 1), np.zeros(4))
