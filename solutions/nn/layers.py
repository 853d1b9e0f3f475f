"""The layers: Linear, Conv2d, ConvTranspose2d, pooling, Flatten, activations, Dropout, BatchNorm,
LayerNorm, and losses.

Book: chapters 5 and 6 (`book/05_layers.md`, `book/06_training.md`).
Tests: `tests/engine/test_layers.py`, `tests/engine/test_nn_golden.py`.

Every layer takes `dtype` (float32 by default: half the memory traffic of float64 and twice the
GEMM speed; pass np.float64 for gradcheck) and `rng` (a `np.random.Generator` or an int seed; None
uses `solutions.nn.init`'s module-wide generator), so a model built twice from one seed is the
same model. Default initializations are PyTorch's, so accuracies are comparable with it.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import ops
from ..graph import Tensor
from ..ops.im2col import as_pair
from . import functional as F
from . import init
from .module import Module, Parameter

__all__ = [
    "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv2d", "ConvTranspose2d", "CrossEntropyLoss", "Dropout", "ELU",
    "Flatten", "GELU", "Hardtanh", "Identity", "LayerNorm", "LeakyReLU", "Linear", "MSELoss", "MaxPool2d", "NLLLoss",
    "ReLU", "ReLU6", "SiLU", "Sigmoid", "Softplus", "Tanh",
]


def _pair(value: Any, name: str, layer: str) -> tuple[int, int]:
    """An int or a pair of ints as a pair, as PyTorch's layers accept both: the ops' own parser,
    with the error a layer's constructor has always raised here (a ValueError)."""
    try:
        return as_pair(value, name, layer)
    except TypeError as error:
        raise ValueError(str(error)) from None


def _float_dtype(dtype: Any, layer: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"{layer}: dtype must be a floating-point type, got {dtype}")
    return dtype


# --------------------------------------------------------------------------------------------
# Layers with weights
# --------------------------------------------------------------------------------------------
class Linear(Module):
    r"""$y = x W^T + b$; x (..., in_features) -> y (..., out_features); W (out, in), b (out,).

    Init (PyTorch's): W ~ kaiming_uniform(a=sqrt 5), i.e. $U(\pm 1/\sqrt{\text{in}})$; b ~ the same bound.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, dtype: Any = np.float32,
                 rng: Any = None):
        super().__init__()
        if in_features <= 0 or out_features <= 0:
            raise ValueError(
                f"Linear: in_features and out_features must be positive, got {in_features}, {out_features}")
        dtype, rng = _float_dtype(dtype, "Linear"), init.as_rng(rng)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dtype))
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), rng=rng)
        if bias:
            self.bias = Parameter(np.empty(out_features, dtype=dtype))
            init.uniform_(self.bias, -1 / math.sqrt(in_features), 1 / math.sqrt(in_features), rng=rng)
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _ConvLayer(Module):
    """What Conv2d and ConvTranspose2d share: channels, groups, their pair-valued sizes, and a weight
    and bias with PyTorch's init."""

    in_channels: int
    out_channels: int
    groups: int
    kernel_size: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    weight: Parameter
    bias: Parameter | None

    def _setup(self, name: str, in_channels: int, out_channels: int, groups: int, sizes: dict[str, Any],
               weight_axes: tuple[int, int], bias: bool, dtype: Any, rng: Any) -> None:
        """Check the channels against the groups, parse `sizes` (kernel_size, stride, ...) as pairs, and
        make the weight (weight_axes[0], weight_axes[1] / G, KH, KW) and the bias; the bias bound
        uses the fan-in of the weight's axis 1, as PyTorch does for both layouts."""
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                f"divisible by groups ({groups})"
            )
        dtype, rng = _float_dtype(dtype, name), init.as_rng(rng)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        for size, value in sizes.items():
            setattr(self, size, _pair(value, size, name))
        KH, KW = self.kernel_size
        self.weight = Parameter(np.empty((weight_axes[0], weight_axes[1] // groups, KH, KW), dtype=dtype))
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), rng=rng)
        if bias:
            fan_in = weight_axes[1] // groups * KH * KW
            self.bias = Parameter(np.empty(out_channels, dtype=dtype))
            init.uniform_(self.bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), rng=rng)
        else:
            self.register_parameter("bias", None)


class Conv2d(_ConvLayer):
    r"""2-D cross-correlation: x (N, C, H, W) -> (N, K, OH, OW) with weight (K, C/G, KH, KW), bias (K,).

    $OH = \lfloor (H + 2p - d(KH - 1) - 1)/s \rfloor + 1$ (same for OW). Init as Linear with
    fan_in = C/G * KH * KW.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        dtype: Any = np.float32,
        rng: Any = None,
    ):
        super().__init__()
        sizes = dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)
        self._setup("Conv2d", in_channels, out_channels, groups, sizes, (out_channels, in_channels), bias, dtype, rng)

    def forward(self, x: Tensor) -> Tensor:
        return ops.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class ConvTranspose2d(_ConvLayer):
    r"""Transposed 2-D convolution: x (N, C_in, H, W) -> (N, C_out, OH, OW), weight (C_in, C_out/G, KH, KW).

    $OH = (H - 1)s - 2p + d(KH - 1) + \text{output\_padding} + 1$. Init as PyTorch's: its
    fan_in is computed from the weight's axis 1, i.e. C_out/G * KH * KW.
    """

    output_padding: tuple[int, int]

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        output_padding: int | tuple[int, int] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple[int, int] = 1,
        *,
        dtype: Any = np.float32,
        rng: Any = None,
    ):
        super().__init__()
        # PyTorch's weight layout for a transposed convolution: (C_in, C_out/G, KH, KW)
        sizes = dict(kernel_size=kernel_size, stride=stride, padding=padding, output_padding=output_padding,
                     dilation=dilation)
        self._setup("ConvTranspose2d", in_channels, out_channels, groups, sizes, (in_channels, out_channels),
                    bias, dtype, rng)
        for a in (0, 1):
            if self.output_padding[a] >= max(self.stride[a], self.dilation[a]):
                raise ValueError(
                    f"ConvTranspose2d: output_padding {self.output_padding} must be smaller than either stride "
                    f"{self.stride} or dilation {self.dilation} along each axis"
                )

    def forward(self, x: Tensor) -> Tensor:
        return ops.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                    self.groups, self.dilation)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        for name, default in (("padding", (0, 0)), ("output_padding", (0, 0)), ("dilation", (1, 1))):
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class _BatchNorm(Module):
    """Shared by BatchNorm1d and BatchNorm2d; they differ only in the input shapes they accept."""

    _input_ndims: tuple[int, ...] = ()
    _shape_text = ""
    # buffers (register_buffer): None when track_running_stats is off
    running_mean: np.ndarray | None
    running_var: np.ndarray | None
    num_batches_tracked: Any  # a 0-d int64 array, or None

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        *,
        dtype: Any = np.float32,
    ):
        super().__init__()
        dtype = _float_dtype(dtype, type(self).__name__)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(np.ones(num_features, dtype=dtype))  # gamma
            self.bias = Parameter(np.zeros(num_features, dtype=dtype))  # beta
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", np.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", np.zeros((), dtype=np.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, x: Tensor) -> Tensor:
        name = type(self).__name__
        if x.ndim not in self._input_ndims or x.shape[1] != self.num_features:
            raise ValueError(
                f"{name}: expected input of shape {self._shape_text} with C = num_features = "
                f"{self.num_features}, got shape {x.shape}"
            )
        use_batch_stats = self.training or not self.track_running_stats
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
            if self.momentum is None:  # a cumulative average over every batch seen so far
                momentum = 1.0 / float(self.num_batches_tracked)
        fused = ops.kernels.batch_norm_train  # the reference engine's one-node BatchNorm, or None
        if (fused is not None and use_batch_stats and self.affine and x.data.size > x.shape[1]
                and x.dtype == self.weight.dtype and np.issubdtype(x.dtype, np.floating)):
            return fused(x, self.running_mean, self.running_var, self.weight, self.bias, momentum, self.eps)
        # Without tracked statistics the buffers are None, and the batch statistics serve in eval too.
        return F.batch_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            training=use_batch_stats,
            momentum=momentum,
            eps=self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    r"""Batch normalization over (N, C) or (N, C, L): statistics per feature C, over N (and L).

    Train: normalize with the batch statistics and update running_mean/running_var (momentum m:
    $r \leftarrow (1-m) r + m s$, the variance unbiased). Eval: normalize with the running ones.
    """

    _input_ndims = (2, 3)
    _shape_text = "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W): statistics per channel, over N, H and W."""

    _input_ndims = (4,)
    _shape_text = "(N, C, H, W)"


class LayerNorm(Module):
    """Layer normalization over the last axes (`normalized_shape`) of each sample, with a weight and
    a bias of that shape (ones and zeros at first). The same computation in train and eval mode."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, *, dtype: Any = np.float32):
        super().__init__()
        dtype = _float_dtype(dtype, "LayerNorm")
        shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(np.ones(shape, dtype=dtype))  # gamma
        else:
            self.register_parameter("weight", None)
        if elementwise_affine and bias:
            self.bias = Parameter(np.zeros(shape, dtype=dtype))  # beta
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


# --------------------------------------------------------------------------------------------
# Layers without weights
# --------------------------------------------------------------------------------------------
class MaxPool2d(Module):
    """Max over KH x KW windows: (N, C, H, W) -> (N, C, OH, OW); stride defaults to the kernel size."""

    def __init__(self, kernel_size: int | tuple[int, int], stride: int | tuple[int, int] | None = None,
                 padding: int | tuple[int, int] = 0, dilation: int | tuple[int, int] = 1):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, kernel_size if stride is None else stride, padding
        self.dilation = dilation

    def forward(self, x: Tensor) -> Tensor:
        return ops.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation)

    def extra_repr(self) -> str:
        dilation = f", dilation={self.dilation}" if self.dilation != 1 else ""
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}{dilation}"


class AvgPool2d(MaxPool2d):
    """Mean over KH x KW windows (padding counts as zeros in the mean, PyTorch's default)."""

    def __init__(self, kernel_size: int | tuple[int, int], stride: int | tuple[int, int] | None = None,
                 padding: int | tuple[int, int] = 0):
        super().__init__(kernel_size, stride, padding)  # no dilation: PyTorch's AvgPool2d has none

    def forward(self, x: Tensor) -> Tensor:
        return ops.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class Flatten(Module):
    """Merge axes start_dim..end_dim into one: (N, C, H, W) -> (N, C*H*W) by default."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x


class ReLU(Module):
    r"""$\max(x, 0)$, elementwise."""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class Sigmoid(Module):
    """$1/(1 + e^{-x})$, elementwise."""

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class LeakyReLU(Module):
    """x for x > 0, else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: Tensor) -> Tensor:
        return ops.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    r"""x for x > 0, else $\alpha (e^x - 1)$."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: Tensor) -> Tensor:
        return ops.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softplus(Module):
    r"""$\frac1\beta \log(1 + e^{\beta x})$, linear past the threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return ops.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """x clipped to [min_val, max_val]."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x: Tensor) -> Tensor:
        return ops.hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self):
        super().__init__(0.0, 6.0)


class SiLU(Module):
    r"""$x \sigma(x)$."""

    def forward(self, x: Tensor) -> Tensor:
        return ops.silu(x)


class GELU(Module):
    r"""$x \Phi(x)$; approximate="tanh" for the tanh formula."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return ops.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Dropout(Module):
    """Inverted dropout while training (zero with probability p, scale the rest by $1/(1-p)$);
    the identity in eval mode. The mask comes from the layer's own generator, so a seeded
    layer drops the same units on every run."""

    def __init__(self, p: float = 0.5, *, rng: Any = None):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p}")
        self.p = p
        if rng is None:
            # A child of the module-wide generator: init.manual_seed makes it reproducible too.
            rng = np.random.default_rng(init.default_rng().integers(2**63))
        self.rng = init.as_rng(rng)

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training, self.rng)

    def extra_repr(self) -> str:
        return f"p={self.p}"


# --------------------------------------------------------------------------------------------
# Losses as modules
# --------------------------------------------------------------------------------------------
class _Loss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class CrossEntropyLoss(_Loss):
    """`cross_entropy(logits (N, K), target (N,))`; see `solutions.nn.functional.cross_entropy`."""

    def __init__(self, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(reduction)
        self.label_smoothing = label_smoothing

    def forward(self, logits: Tensor, target: Any) -> Tensor:
        return F.cross_entropy(logits, target, self.reduction, self.label_smoothing)

    def extra_repr(self) -> str:
        extra = [super().extra_repr()] + ([f"label_smoothing={self.label_smoothing}"] if self.label_smoothing else [])
        return ", ".join(e for e in extra if e)


class NLLLoss(_Loss):
    """`nll_loss(log_probs (N, K), target (N,))`."""

    def forward(self, log_probs: Tensor, target: Any) -> Tensor:
        return F.nll_loss(log_probs, target, self.reduction)


class MSELoss(_Loss):
    """`mse_loss(input, target)`, same shapes."""

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.mse_loss(input, target, self.reduction)
