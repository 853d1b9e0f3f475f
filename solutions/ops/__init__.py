"""Every differentiable op of the engine: one class per op, one lowercase function per class.

`Tensor`'s operators and methods call the lowercase functions here, and each function looks its
class up at call time, so replacing a class in its module (see `solutions.override`) changes what
every tensor expression uses. The grader relies on that to test one student-written op at a time.
The convolution, pooling, dilate and erode ops run their array kernels through `kernels.py`,
which picks the teaching or the fast ones (bound at the end of this file).

Beyond the chapters' ops, the ones a PyTorch user reaches for: `sin`, `cos`, `sign`, `floor`,
`ceil`, `round`, `trunc`, `tan`, `sinh`, `cosh`, `arcsin`/`asin`, `arccos`/`acos`, `arctan`/`atan`,
`log1p`, `expm1`, `erf`, `square`, `reciprocal`, `rsqrt` (math.py), `leaky_relu`, `elu`, `softplus`,
`hardtanh`, `relu6`, `silu`, `gelu` (activation.py), `roll`, `tril`, `triu`, `take`,
`take_along_axis`, `gather`, `repeat`, `tile`, `split`, `chunk` (shape.py), `std`, `prod`, `cumsum`
(reduce.py), `einsum` (einsumfunc.py), `conv_transpose2d` (conv_transpose.py) and
`max_pool2d(..., dilation=d)` (pool.py); and chapter 7's `embedding`, `masked_softmax`,
`scaled_dot_product_attention`, `split_heads`, `merge_heads` (attention.py). An axis out
of range raises NumPy's `AxisError`, both a ValueError and an IndexError, naming the op.

No module here is named after a function it exports (`matmul` lives in `linalg.py`, `softmax` in
`activation.py`, `einsum` in `einsumfunc.py`), so `import solutions.ops.linalg as m` is always the
module. The array kernels (`im2col`, `col2im`, `windows`, ...) are not ops: they stay in their
modules (`solutions.ops.im2col`) and are reached through `kernels.py`.
"""
from types import ModuleType as _ModuleType

from .elementwise import (
    Abs, Add, Cast, Clip, Div, Exp, Log, Maximum, Minimum, Mul, Neg, Pow, PowScalar, ReLU,
    Sigmoid, Sqrt, Sub, Tanh, Where,
    abs, add, astype, clip, div, exp, log, maximum, minimum, mul, neg, pow, relu, sigmoid, sqrt,
    sub, tanh, where,
)
from .linalg import MatMul, matmul
from .reduce import Max, Min, Sum, argmax, argmin, max, mean, min, sum, var
from .reduce import CumSum, Prod, Std, cumsum, prod, std
from .shape import (
    BroadcastTo, Concatenate, Flip, GetItem, Pad, Reshape, ScatterAdd, Transpose,
    broadcast_to, concatenate, expand_dims, flatten, flip, getitem, pad, permute, reshape,
    scatter_add, squeeze, stack, swapaxes, transpose, unbroadcast, unsqueeze,
)
from .activation import LogSoftmax, LogSumExp, Softmax, log_softmax, logsumexp, softmax
from .conv import (
    Conv2d, Conv2dInputGrad, Conv2dWeightGrad, conv1d, conv2d, conv2d_input_grad, conv2d_weight_grad,
)
from .conv_backward import (
    Dilate, Erode, conv2d_backward_derived, dilate, erode, pad2d, rotate180, undilate, unpad2d,
)
from .pool import (
    AvgPool2d, AvgPool2dScatter, MaxPool2d, MaxPool2dGather, MaxPool2dScatter, avg_pool2d, global_avg_pool2d,
    max_pool2d,
)
# Beyond the chapters (re-exported: the op namespace).
from .pool import MaxPool2dDilated, MaxPool2dDilatedGather, MaxPool2dDilatedScatter
from .math import Ceil, Cos, Floor, Round, Sign, Sin, ceil, cos, floor, round, sign, sin
from .math import (
    Arccos, Arcsin, Arctan, Cosh, Erf, Expm1, Log1p, Sinh, Tan, Trunc, acos, arccos, arcsin, arctan, asin, atan,
    cosh, erf, expm1, log1p, reciprocal, rsqrt, sinh, square, tan, trunc,
)
from .activation import (
    ELU, Hardtanh, LeakyReLU, Softplus, elu, gelu, hardtanh, leaky_relu, relu6, silu, softplus,
)
from .shape import (
    Roll, Triangle, chunk, gather, repeat, roll, split, take, take_along_axis, tile, tril, triu,
)
from .einsumfunc import Einsum, einsum
from .conv_transpose import conv_transpose2d
from .attention import (  # chapter 7
    Embedding, EmbeddingBackward, MaskedSoftmax, ScaledDotProductAttention, attention_weights, causal_mask,
    embedding, masked_softmax, merge_heads, scaled_dot_product_attention, split_heads,
)
from . import kernels

# What `from solutions.ops import *` gives: the op functions and classes, not the submodules.
__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_") and not isinstance(value, _ModuleType))

kernels.use_fast(kernels.default_fast())
