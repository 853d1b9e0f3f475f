r"""Attention's ops: the embedding lookup, the masked softmax, scaled dot-product attention, and the
head split and merge.

Book: chapter 7 (`book/07_attention.md`) derives these ops' backward passes; chapter 2
(`book/02_broadcasting.md`) the softmax VJP they build on.
Tests: `tests/engine/test_attention.py` (PyTorch's numbers in `tests/golden/golden_attention.py`).
Layers built on these: `solutions/nn/attention.py`. Assignment: `assignments/source/a07_attention/`
(causal_mask, masked_softmax_array, MaskedSoftmax.backward, scaled_dot_product_attention,
attention_backward, split_heads, merge_heads and embedding_backward_array are its exercises).

Shapes: N batch, T (or L) query positions, S key positions, E embedding (model) width, H heads,
D = E / H the width of one head, V the vocabulary (rows of an embedding table).

- `embedding(indices, weight)`: row `indices[...]` of a (V, E) table. Its backward is a
  *scatter-add*: a token that occurs twice receives the sum of both positions' gradients, so
  the rows are accumulated (`np.add.at`), never assigned.
- `masked_softmax(x, mask)`: softmax of `x + mask` along the last axis, with an additive mask
  (0 where a position takes part, -inf where it does not) that broadcasts over heads and
  batch. A row whose every entry is masked gets weights 0 (and gradient 0), as PyTorch's
  `scaled_dot_product_attention` does since 2.5; a plain softmax would give 0/0 = nan there.
  The mask is a constant: it only chooses which scores count, so it gets no gradient.
- `scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)`:
  PyTorch's signature and meaning. $P = \operatorname{softmax}(Q K^T / \sqrt{D} + M)$,
  $O = P V$. A bool mask says True = attend; a float mask is added to the scores.
- `split_heads` / `merge_heads`: (N, T, E) <-> (N, H, T, D), head h owning features
  h*D .. (h+1)*D - 1 (PyTorch's layout); pure reshapes and transposes, so their gradients are
  the inverse reshapes and transposes.

The teaching forms are here; the reference engine runs two faster kernels from `_fast.py`
chosen by `kernels.py`, beneath the ops: the embedding's scatter-add without `np.add.at`'s loop,
and attention's first derivatives on arrays, from the P its forward pass kept.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..graph import Function, Tensor, as_tensor, is_grad_enabled
from . import kernels
from .linalg import matmul
from .shape import reshape, transpose, unbroadcast


# --------------------------------------------------------------------------------------------
# Embedding: a lookup whose backward is a scatter-add
# --------------------------------------------------------------------------------------------
def embedding_backward_array(grad: np.ndarray, indices: np.ndarray, num_embeddings: int) -> np.ndarray:
    """dW (V, E) from the gradient of the looked-up rows (..., E): every row of `grad` added to
    row `indices[...]` of dW. `np.add.at` accumulates repeated indices; `dW[indices] += grad`
    would keep only one of them (NumPy's buffered fancy-index assignment)."""
    E = grad.shape[-1]
    dw = np.zeros((num_embeddings, E), dtype=grad.dtype)
    np.add.at(dw, indices.reshape(-1), grad.reshape(-1, E))
    return dw


class Embedding(Function):
    r"""out[...] = weight[indices[...]]: (V, E) -> (*indices.shape, E).

    Backward: $dW_v = \sum_{p:\ \text{indices}_p = v} g_p$, the scatter-add of
    `EmbeddingBackward`; the row `padding_idx` (if any) gets no gradient, as in PyTorch.
    """

    def __init__(self, indices: np.ndarray, padding_idx: int | None):
        self.indices, self.padding_idx = indices, padding_idx

    def forward(self, weight):
        return weight[self.indices]

    def backward(self, grad):
        (weight,) = self.inputs
        return EmbeddingBackward.apply(grad, indices=self.indices, num_embeddings=weight.shape[0],
                                       padding_idx=self.padding_idx)


class EmbeddingBackward(Function):
    """The scatter-add (..., E) -> (V, E). Its own backward is the lookup again (a gather is the
    adjoint of a scatter), which is what makes second derivatives through an embedding work."""

    def __init__(self, indices: np.ndarray, num_embeddings: int, padding_idx: int | None):
        self.indices, self.num_embeddings, self.padding_idx = indices, num_embeddings, padding_idx

    def forward(self, grad):
        dw = kernels.embedding_backward_array(grad, self.indices, self.num_embeddings)
        if self.padding_idx is not None:
            dw[self.padding_idx] = 0
        return dw

    def backward(self, grad):
        if self.padding_idx is not None:  # the zeroed row sent nothing: it receives nothing
            keep = np.ones((self.num_embeddings, 1), dtype=grad.dtype)
            keep[self.padding_idx] = 0
            grad = grad * keep
        return Embedding.apply(grad, indices=self.indices, padding_idx=None)


def _token_ids(indices: Any, num_embeddings: int, op: str) -> np.ndarray:
    """indices as an integer array with every entry in [0, V); the errors name the op and shapes."""
    idx = np.asarray(indices.data if isinstance(indices, Tensor) else indices)
    if not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"{op}: token ids must be integers, got dtype {idx.dtype} (shape {idx.shape}); "
                        "pass an int array such as np.array([[3, 1, 4]])")
    bad = (idx < 0) | (idx >= num_embeddings)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise IndexError(f"{op}: token id {int(idx[where])} at position {where} is out of range for an "
                         f"embedding table of {num_embeddings} rows (ids shape {idx.shape}); ids must be in "
                         f"[0, {num_embeddings})")
    return idx


def embedding(indices: Any, weight: Any, padding_idx: int | None = None) -> Tensor:
    """Rows of the table `weight` (V, E) picked by integer `indices` of any shape: (*indices.shape, E).

    PyTorch's `F.embedding(input, weight, padding_idx)` (argument order included)."""
    weight = as_tensor(weight)
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be a (V, E) table, got shape {weight.shape}")
    V = weight.shape[0]
    idx = _token_ids(indices, V, "embedding")
    if padding_idx is not None:
        if not -V <= padding_idx < V:
            raise ValueError(f"embedding: padding_idx {padding_idx} is outside the table of {V} rows")
        padding_idx %= V
    return Embedding.apply(weight, indices=idx, padding_idx=padding_idx)


# --------------------------------------------------------------------------------------------
# Masks and the masked softmax
# --------------------------------------------------------------------------------------------
def causal_mask(L: int, S: int | None = None) -> np.ndarray:
    """(L, S) bool, True where query i may attend key j: j <= i (PyTorch's `is_causal`, aligned
    at the top left, so with S > L the last S - L keys are hidden from every query)."""
    S = L if S is None else S
    return np.tril(np.ones((L, S), dtype=bool))


def mask_array(mask: Any, op: str) -> np.ndarray:
    """A mask's values as an array. A mask is a constant: a Tensor that requires grad is refused,
    because its gradient would be dropped and a learned bias passed as a mask would never train."""
    if isinstance(mask, Tensor):
        if mask.requires_grad:
            raise TypeError(f"{op}: the mask (shape {mask.shape}) is a Tensor that requires grad, but masks are "
                            "constants here: it would get no gradient and never train. To learn a bias, add it "
                            "to the scores yourself, masked_softmax(scores + bias), which the engine "
                            "differentiates; to use its values as a mask, pass mask.detach()")
        return np.asarray(mask.data)
    return np.asarray(mask)


def additive_mask(mask: Any, dtype: Any, op: str = "attention mask") -> np.ndarray:
    """A mask as the array that is *added* to the scores: a bool mask (True = attend) becomes
    0 / -inf; a float mask is used as it is (its -inf entries mask, other values bias).
    `op` names the caller in the errors (a mask that requires grad, a mask of another dtype)."""
    m = mask_array(mask, op)
    if m.dtype == np.bool_:
        out = np.zeros(m.shape, dtype=dtype)
        out[~m] = -np.inf
        return out
    if not np.issubdtype(m.dtype, np.floating):
        raise TypeError(f"{op}: expected a bool mask (True = attend) or a float mask to add, "
                        f"got dtype {m.dtype} (shape {m.shape})")
    return m.astype(dtype, copy=False)


def masked_softmax_array(x: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """softmax(x + mask) over the last axis; a row with no finite entry gives zeros."""
    z = x if mask is None else x + mask
    m = np.max(z, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0  # an all -inf row: exp(-inf - 0) = 0 instead of nan
    e = np.exp(z - m)
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1)


class MaskedSoftmax(Function):
    r"""$s = \operatorname{softmax}(x + M)$ along the last axis, rows with no unmasked entry = 0.

    Backward, as for the plain softmax: $g^T J = s \odot (g - \langle g, s\rangle)$. A masked
    entry has $s = 0$, so it passes no gradient back, and a fully masked row passes none at all;
    M itself is a constant, so it gets none.
    """

    def __init__(self, mask: np.ndarray | None):
        self.mask = mask

    def forward(self, x):
        return masked_softmax_array(x, self.mask)

    def backward(self, grad):
        s = self.output
        return s * (grad - (grad * s).sum(axis=-1, keepdims=True))


def broadcast_mask(mask: np.ndarray, scores_shape: tuple[int, ...], op: str) -> np.ndarray:
    """The mask, checked to broadcast to the scores' shape without changing it."""
    try:
        if np.broadcast_shapes(mask.shape, scores_shape) == tuple(scores_shape):
            return mask
    except ValueError:
        pass
    raise ValueError(f"{op}: mask of shape {mask.shape} does not broadcast to the attention scores of shape "
                     f"{tuple(scores_shape)} (N, ..., L, S); a mask is (L, S), (N, 1, L, S) or (N, H, L, S)")


def masked_softmax(x: Any, mask: Any = None) -> Tensor:
    """Softmax over the last axis of `x` (..., S) with `mask` broadcast to x's shape: a bool mask
    (True = keep) or an additive float mask (-inf = drop). Fully masked rows are 0, not nan."""
    x = as_tensor(x)
    if x.ndim == 0:
        raise ValueError("masked_softmax: needs at least one dimension, got a 0-d tensor")
    m = None if mask is None else broadcast_mask(additive_mask(mask, x.dtype, "masked_softmax"), x.shape,
                                                  "masked_softmax")
    return MaskedSoftmax.apply(x, mask=m)


# --------------------------------------------------------------------------------------------
# Scaled dot-product attention
# --------------------------------------------------------------------------------------------
def attention_weights(query: Tensor, key: Tensor, mask: np.ndarray | None, scale: float) -> Tensor:
    r"""$P = \operatorname{softmax}(s\,Q K^T + M)$: (..., L, D), (..., S, D) -> (..., L, S), built
    from engine ops (matmul, transpose, the masked softmax), so its gradient follows from theirs."""
    scores = matmul(query, key.swapaxes(-1, -2)) * scale  # (..., L, S): one dot product per pair
    return MaskedSoftmax.apply(scores, mask=mask)


class ScaledDotProductAttention(Function):
    r"""$O = P V$ with $P = \operatorname{softmax}(s\,Q K^T + M)$, as one op.

    Q (..., L, D), K (..., S, D), V (..., S, Dv) -> O (..., L, Dv); M a constant additive mask.
    Backward, with $G = \partial\ell/\partial O$ (chapter 7 derives it):

    $dV = P^T G$, $dP = G V^T$, $dS = P \odot (dP - \operatorname{rowsum}(dP \odot P))$
    (the softmax VJP, row by row), $dQ = s\, dS\, K$, $dK = s\, dS^T Q$.

    `attention_backward` writes it with engine ops and P recomputed from the inputs, so the
    gradient is itself a graph and differentiates again. Batch axes broadcast (one K, V shared by
    every head, say): each gradient is summed back to its input's shape. Where the engine has an
    array kernel for the first derivatives (`kernels.attention_backward_array`: the reference
    engine's, None in the course kit), a backward that records no graph runs it on the P kept
    from the forward pass instead, as conv2d runs its kernels.
    """

    def __init__(self, mask: np.ndarray | None, scale: float):
        self.mask, self.scale = mask, scale

    def forward(self, q, k, v):
        p = masked_softmax_array((q @ np.swapaxes(k, -1, -2)) * self.scale, self.mask)
        self.p = p  # (..., L, S), for an array kernel's backward
        return p @ v

    def backward(self, grad):
        q, k, v = self.inputs
        kernel = kernels.attention_backward_array
        if kernel is not None and not is_grad_enabled():
            return kernel(grad, q, k, v, self.p, self.scale, self.needs_input_grad)
        p = attention_weights(q, k, self.mask, self.scale)
        return attention_backward(grad, q, k, v, p, self.scale, self.needs_input_grad)


def sum_to(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A gradient summed back over the batch axes its input was broadcast along (one K, V shared by
    every head); as it is when nothing was broadcast, the usual case, where no node is added."""
    return grad if grad.shape == tuple(shape) else unbroadcast(grad, shape)


def attention_backward(grad: Tensor, q: Tensor, k: Tensor, v: Tensor, p: Tensor, scale: float,
                       needs: tuple[bool, ...] = (True, True, True)) -> tuple[Tensor | None, ...]:
    """(dQ, dK, dV) from G = grad and the weights P, in engine ops; None where not needed."""
    dv = sum_to(matmul(p.swapaxes(-1, -2), grad), v.shape) if needs[2] else None
    if not (needs[0] or needs[1]):
        return None, None, dv
    dp = matmul(grad, v.swapaxes(-1, -2))                      # (..., L, S)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale  # through the softmax, then the scale
    dq = sum_to(matmul(ds, k), q.shape) if needs[0] else None
    dk = sum_to(matmul(ds.swapaxes(-1, -2), q), k.shape) if needs[1] else None
    return dq, dk, dv


def attention_inputs(query: Any, key: Any, value: Any) -> tuple[Tensor, Tensor, Tensor]:
    query, key, value = as_tensor(query), as_tensor(key), as_tensor(value)
    op = "scaled_dot_product_attention"
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise ValueError(f"{op}: query, key and value need shape (..., L, D), (..., S, D), (..., S, Dv); "
                         f"got {query.shape}, {key.shape}, {value.shape}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"{op}: query and key must have the same last axis D (one dot product per pair), "
                         f"got query {query.shape} and key {key.shape}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"{op}: key and value must have the same number of positions S (axis -2), "
                         f"got key {key.shape} and value {value.shape}")
    try:
        np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: the batch axes of query {query.shape}, key {key.shape} and value "
                         f"{value.shape} do not broadcast") from None
    return query, key, value


def dropout_attention(query: Tensor, key: Tensor, value: Tensor, mask: np.ndarray | None, scale: float,
                      dropout_p: float, rng: np.random.Generator | None) -> Tensor:
    """Attention whose weights P are dropped out (training): dropout(P) V, as PyTorch does."""
    from ..nn.functional import dropout  # nn is built on ops: imported when first needed

    p = dropout(attention_weights(query, key, mask, scale), dropout_p, True, rng)
    return matmul(p, value)


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    rng: np.random.Generator | None = None,
) -> Tensor:
    r"""PyTorch's `F.scaled_dot_product_attention`: $\operatorname{softmax}(Q K^T s + M)\, V$.

    query (..., L, D), key (..., S, D), value (..., S, Dv) -> (..., L, Dv); batch axes broadcast.
    `attn_mask` broadcasts to (..., L, S): bool (True = attend) or float (added to the scores).
    `is_causal=True` hides key j from query i when j > i (then attn_mask must be None).
    `scale` defaults to $1/\sqrt{D}$: the dot product of two D-vectors with unit-variance entries
    has variance D, and dividing by $\sqrt D$ keeps the softmax out of its saturated corners.
    `dropout_p` drops attention weights while training (with `rng`); it must be 0 for a
    deterministic result. A query whose every key is masked gets output 0.
    """
    op = "scaled_dot_product_attention"
    query, key, value = attention_inputs(query, key, value)
    L, S, D = query.shape[-2], key.shape[-2], query.shape[-1]
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: pass either attn_mask or is_causal=True, not both (the causal mask is built "
                         "for you; combine them yourself into one bool mask if you need both)")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout_p must be a probability in [0, 1], got {dropout_p}")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    scores_shape = np.broadcast_shapes(query.shape[:-2], key.shape[:-2]) + (L, S)
    mask = None
    if is_causal:
        mask = additive_mask(causal_mask(L, S), query.dtype)
    elif attn_mask is not None:
        mask = broadcast_mask(additive_mask(attn_mask, query.dtype, op), scores_shape, op)
    if dropout_p > 0.0:
        return dropout_attention(query, key, value, mask, scale, dropout_p, rng)
    return ScaledDotProductAttention.apply(query, key, value, mask=mask, scale=scale)


# --------------------------------------------------------------------------------------------
# Heads
# --------------------------------------------------------------------------------------------
def split_heads(x: Any, num_heads: int) -> Tensor:
    """(N, T, E) -> (N, H, T, D) with D = E / H: head h gets features h*D .. (h+1)*D - 1."""
    x = as_tensor(x)
    if x.ndim != 3:
        raise ValueError(f"split_heads: expected (N, T, E), got shape {x.shape}")
    N, T, E = x.shape
    if num_heads <= 0 or E % num_heads:
        raise ValueError(f"split_heads: embedding width E = {E} (input shape {x.shape}) is not divisible by "
                         f"num_heads = {num_heads}; choose a head count that divides E")
    return transpose(reshape(x, (N, T, num_heads, E // num_heads)), (0, 2, 1, 3))


def merge_heads(x: Any) -> Tensor:
    """(N, H, T, D) -> (N, T, H*D): the inverse of `split_heads` (heads side by side in order)."""
    x = as_tensor(x)
    if x.ndim != 4:
        raise ValueError(f"merge_heads: expected (N, H, T, D), got shape {x.shape}")
    N, H, T, D = x.shape
    return reshape(transpose(x, (0, 2, 1, 3)), (N, T, H * D))


# Their names before they were public (issue 39): notebooks released earlier import them, and are
# still graded.
_broadcast_mask, _sum_to, _attention_inputs = broadcast_mask, sum_to, attention_inputs
