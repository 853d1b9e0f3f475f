r"""The transformer's layers: `Embedding`, `MultiheadAttention`, positional encodings, and a pre-norm
`TransformerBlock`.

Book: chapter 7 (`book/07_attention.md`) derives these layers' pieces; chapter 5
(`book/05_layers.md`) for Module, Linear and LayerNorm, which they compose.
Tests: `tests/engine/test_attention.py`. Ops underneath: `solutions/ops/attention.py`. A model built
from them: `solutions/sequence.py`.

`Embedding` and `MultiheadAttention` follow PyTorch's signatures, parameter names, shapes and
initializations, so a `state_dict` from `torch.nn.MultiheadAttention` loads into ours and gives
the same numbers (`tests/golden/golden_attention.py` checks it). Shapes: N batch, L (or T) query
positions, S key positions, E = embed_dim, H heads, D = E / H.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import ops
from ..graph import Tensor
from . import functional as F
from . import init
from .layers import GELU, Dropout, LayerNorm, Linear, _float_dtype
from .module import Module, Parameter, Sequential

__all__ = ["Embedding", "LearnedPositionalEncoding", "MultiheadAttention", "SinusoidalPositionalEncoding",
           "TransformerBlock"]


class Embedding(Module):
    """A table of `num_embeddings` vectors of width `embedding_dim`: integer ids (...) -> (..., E).

    Init (PyTorch's): N(0, 1), with the row `padding_idx` zeroed; that row gets no gradient."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, *,
                 dtype: Any = np.float32, rng: Any = None):
        super().__init__()
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise ValueError(f"Embedding: num_embeddings and embedding_dim must be positive, got "
                             f"{num_embeddings}, {embedding_dim}")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is outside the table of {num_embeddings} rows")
            padding_idx %= num_embeddings
        dtype, rng = _float_dtype(dtype, "Embedding"), init.as_rng(rng)
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = Parameter(np.empty((num_embeddings, embedding_dim), dtype=dtype))
        init.normal_(self.weight, 0.0, 1.0, rng=rng)
        if padding_idx is not None:
            self.weight.data[padding_idx] = 0

    def forward(self, indices: Any) -> Tensor:
        return ops.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


def sinusoidal_table(max_len: int, embed_dim: int) -> np.ndarray:
    r"""(max_len, E): $PE_{t, 2i} = \sin(t / 10000^{2i/E})$, $PE_{t, 2i+1} = \cos(\cdot)$ (Vaswani et al.).

    Each pair of columns is a clock turning at its own rate, so a fixed offset k is the same
    rotation at every position t: attention can learn "k tokens back" once for all t."""
    t = np.arange(max_len)[:, None]
    rates = np.exp(-math.log(10000.0) * np.arange(0, embed_dim, 2) / embed_dim)  # (ceil(E/2),)
    table = np.zeros((max_len, embed_dim))
    table[:, 0::2] = np.sin(t * rates)
    table[:, 1::2] = np.cos(t * rates[: embed_dim // 2])
    return table


def _check_positions(x: Tensor, max_len: int, embed_dim: int, layer: str) -> None:
    if x.ndim < 2 or x.shape[-1] != embed_dim:
        raise ValueError(f"{layer}: expected input (..., T, E) with E = {embed_dim}, got shape {x.shape}")
    if x.shape[-2] > max_len:
        raise ValueError(f"{layer}: the sequence has {x.shape[-2]} positions (input shape {x.shape}) but the "
                         f"table has max_len = {max_len}; build the layer with a larger max_len")


class SinusoidalPositionalEncoding(Module):
    """x (..., T, E) -> x + PE[:T]: fixed sines and cosines (a buffer, not trained)."""

    pe: np.ndarray

    def __init__(self, embed_dim: int, max_len: int = 512, *, dtype: Any = np.float32):
        super().__init__()
        self.embed_dim, self.max_len = embed_dim, max_len
        dtype = _float_dtype(dtype, type(self).__name__)
        self.register_buffer("pe", sinusoidal_table(max_len, embed_dim).astype(dtype))

    def forward(self, x: Tensor) -> Tensor:
        _check_positions(x, self.max_len, self.embed_dim, type(self).__name__)
        return x + self.pe[: x.shape[-2]].astype(x.dtype, copy=False)

    def extra_repr(self) -> str:
        return f"{self.embed_dim}, max_len={self.max_len}"


class LearnedPositionalEncoding(Module):
    """x (..., T, E) -> x + W[:T] with W (max_len, E) a trained parameter, N(0, 0.02) at first (GPT-2's)."""

    def __init__(self, embed_dim: int, max_len: int = 512, *, dtype: Any = np.float32, rng: Any = None):
        super().__init__()
        self.embed_dim, self.max_len = embed_dim, max_len
        self.weight = Parameter(np.empty((max_len, embed_dim), dtype=_float_dtype(dtype, type(self).__name__)))
        init.normal_(self.weight, 0.0, 0.02, rng=init.as_rng(rng))

    def forward(self, x: Tensor) -> Tensor:
        _check_positions(x, self.max_len, self.embed_dim, type(self).__name__)
        return x + self.weight[: x.shape[-2]]

    def extra_repr(self) -> str:
        return f"{self.embed_dim}, max_len={self.max_len}"


def token_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """`F.linear` on (..., E_in) applied as one (M, E_in) @ (E_in, E_out) product, M = all tokens.

    The same numbers as `F.linear` on the 3-D input, but a 3-D @ 2-D matmul is a *batched*
    product: its weight gradient is N products of (E_in, T) @ (T, E_out), stacked and then summed
    over N; flattening the tokens makes it one product, with no (N, E_in, E_out) intermediate."""
    y = F.linear(x.reshape(-1, x.shape[-1]), weight, bias)
    return y.reshape(x.shape[:-1] + (weight.shape[0],))


def _mha_mask(attn_mask: Any, key_padding_mask: Any, is_causal: bool, N: int, H: int, L: int, S: int,
              dtype: np.dtype) -> np.ndarray | None:
    """MultiheadAttention's masks, in *its* convention (bool True = NOT allowed, float = added),
    merged into one additive (N, H, L, S)-broadcastable mask for the ops (which take no sides)."""
    op = "MultiheadAttention"
    masks = []
    if attn_mask is not None:
        m = ops.attention.mask_array(attn_mask, op)
        if m.shape == (L, S):
            pass
        elif m.shape == (N * H, L, S):
            m = m.reshape(N, H, L, S)
        else:
            raise ValueError(f"MultiheadAttention: attn_mask must have shape (L, S) = {(L, S)} or "
                             f"(N * num_heads, L, S) = {(N * H, L, S)}, got {m.shape}")
        masks.append(ops.attention.additive_mask(~m if m.dtype == np.bool_ else m, dtype, op))
    elif is_causal:
        masks.append(ops.attention.additive_mask(ops.causal_mask(L, S), dtype))
    if key_padding_mask is not None:
        k = ops.attention.mask_array(key_padding_mask, op)
        if k.shape != (N, S):
            raise ValueError(f"MultiheadAttention: key_padding_mask must have shape (N, S) = {(N, S)}, got {k.shape}")
        k = ops.attention.additive_mask(~k if k.dtype == np.bool_ else k, dtype, op)
        masks.append(k.reshape(N, 1, 1, S))
    if not masks:
        return None
    return masks[0] if len(masks) == 1 else masks[0] + masks[1]


class MultiheadAttention(Module):
    r"""PyTorch's `nn.MultiheadAttention`: $\operatorname{Concat}(\text{head}_1..\text{head}_H) W_O^T + b_O$,
    $\text{head}_h = \operatorname{Attention}(Q W_{Q,h}^T, K W_{K,h}^T, V W_{V,h}^T)$.

    Parameters as PyTorch's: `in_proj_weight` (3E, E) holds $W_Q, W_K, W_V$ stacked (Xavier-uniform),
    `in_proj_bias` (3E,) zeros, `out_proj` a Linear(E, E) whose bias starts at 0.
    `forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)` returns `(output, weights)`: output (N, L, E)
    with `batch_first=True`, else (L, N, E) (or (L, E) unbatched); weights (N, L, S) averaged
    over heads, (N, H, L, S) with `average_attn_weights=False`, None with `need_weights=False`.
    Masks in PyTorch's convention *for this layer*: a bool `attn_mask` or `key_padding_mask` is
    True where attention is NOT allowed (the opposite of `scaled_dot_product_attention`).
    Masks are constants: one that requires grad is refused (a TypeError). In training mode with
    `dropout`, the weights returned are the ones applied, after dropout (PyTorch's).
    `is_causal=True` alone builds the causal mask (PyTorch requires the mask as well). A query
    whose every key is masked gets zero weights and the output projection's bias, with or
    without `need_weights` (PyTorch 2.13 gives that without weights but nan with them).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, *, dtype: Any = np.float32, rng: Any = None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads}), both positive")
        if add_bias_kv or add_zero_attn or kdim not in (None, embed_dim) or vdim not in (None, embed_dim):
            raise ValueError("MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim other than embed_dim "
                             "are not supported here; project keys and values to embed_dim first")
        dtype, rng = _float_dtype(dtype, "MultiheadAttention"), init.as_rng(rng)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout, self.batch_first = dropout, batch_first
        self.in_proj_weight = Parameter(np.empty((3 * embed_dim, embed_dim), dtype=dtype))
        init.xavier_uniform_(self.in_proj_weight, rng=rng)
        if bias:
            self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype, rng=rng)
        if bias:
            init.zeros_(self.out_proj.bias)
        self.drop_rng = np.random.default_rng(rng.integers(2**63))

    def _project(self, x: Tensor, part: int) -> Tensor:
        """x (N, T, E) through rows part*E .. (part+1)*E - 1 of the stacked in-projection."""
        E = self.embed_dim
        w = self.in_proj_weight[part * E:(part + 1) * E]
        b = None if self.in_proj_bias is None else self.in_proj_bias[part * E:(part + 1) * E]
        return token_linear(x, w, b)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Any = None,
                need_weights: bool = True, attn_mask: Any = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        E, H = self.embed_dim, self.num_heads
        unbatched = query.ndim == 2
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.ndim != query.ndim or t.ndim not in (2, 3) or t.shape[-1] != E:
                raise ValueError(f"MultiheadAttention: {name} must be ({'N, L' if self.batch_first else 'L, N'}, E) "
                                 f"or unbatched (L, E) with E = embed_dim = {E}; got query {query.shape}, key "
                                 f"{key.shape}, value {value.shape}")
        if unbatched:
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = ops.attention.mask_array(key_padding_mask, "MultiheadAttention")[None]
        elif not self.batch_first:
            query, key, value = (t.swapaxes(0, 1) for t in (query, key, value))
        if key.shape != value.shape or key.shape[0] != query.shape[0]:
            raise ValueError(f"MultiheadAttention: key and value must have the same shape and the batch of query; "
                             f"got query {query.shape}, key {key.shape}, value {value.shape} (as (N, T, E))")
        N, L, S = query.shape[0], query.shape[1], key.shape[1]
        mask = _mha_mask(attn_mask, key_padding_mask, is_causal, N, H, L, S, query.dtype)
        if query is key and key is value:  # self-attention: one (N, L, E) @ (E, 3E) product, then split
            q, k, v = ops.split(token_linear(query, self.in_proj_weight, self.in_proj_bias), 3, axis=-1)
        else:
            q, k, v = self._project(query, 0), self._project(key, 1), self._project(value, 2)
        q, k, v = ops.split_heads(q, H), ops.split_heads(k, H), ops.split_heads(v, H)  # (N, H, L or S, D)
        p_drop = self.dropout if self.training else 0.0
        weights = None
        if need_weights:  # the weights are wanted: compute P explicitly, as PyTorch does then
            weights = ops.attention_weights(q, k, mask, 1.0 / math.sqrt(self.head_dim))
            if p_drop:  # PyTorch returns the weights it applied: after dropout
                weights = F.dropout(weights, p_drop, True, self.drop_rng)
            heads = weights @ v
        else:
            heads = ops.scaled_dot_product_attention(q, k, v, mask, p_drop, rng=self.drop_rng)
        out = token_linear(ops.merge_heads(heads), self.out_proj.weight, self.out_proj.bias)  # (N, L, E)
        if unbatched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.swapaxes(0, 1)
        if weights is not None:
            if average_attn_weights:
                weights = weights.mean(axis=1)
            if unbatched:
                weights = weights.squeeze(0)
        return out, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


class TransformerBlock(Module):
    r"""A pre-norm decoder block (GPT-2's arrangement), x (N, T, E) -> (N, T, E):

    $x \leftarrow x + \operatorname{Attention}(\operatorname{LN}_1(x))$, then
    $x \leftarrow x + \operatorname{MLP}(\operatorname{LN}_2(x))$ with MLP = Linear(E, rE), GELU,
    Linear(rE, E). Normalizing *inside* each branch leaves the residual path an identity, so the
    gradient reaches early layers undamped; causal by default (`is_causal=True` in forward).
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_ratio: int = 4, dropout: float = 0.0, *,
                 dtype: Any = np.float32, rng: Any = None):
        super().__init__()
        rng = init.as_rng(rng)
        self.ln1 = LayerNorm(embed_dim, dtype=dtype)
        self.attn = MultiheadAttention(embed_dim, num_heads, dropout=dropout, batch_first=True, dtype=dtype, rng=rng)
        self.ln2 = LayerNorm(embed_dim, dtype=dtype)
        self.mlp = Sequential(Linear(embed_dim, mlp_ratio * embed_dim, dtype=dtype, rng=rng), GELU(),
                              Linear(mlp_ratio * embed_dim, embed_dim, dtype=dtype, rng=rng))
        self.drop = Dropout(dropout, rng=rng)
        self.last_weights: np.ndarray | None = None

    def forward(self, x: Tensor, attn_mask: Any = None, is_causal: bool = True, key_padding_mask: Any = None,
                need_weights: bool = False) -> Tensor:
        """The block's output; with `need_weights=True`, also keeps each head's attention map in
        `self.last_weights` (N, H, T, T) for plotting."""
        h = self.ln1(x)
        a, w = self.attn(h, h, h, key_padding_mask=key_padding_mask, need_weights=need_weights,
                         attn_mask=attn_mask, average_attn_weights=False,
                         is_causal=is_causal and attn_mask is None)
        self.last_weights = None if w is None else w.data
        x = x + self.drop(a)
        h = self.ln2(x)
        h = self.mlp(h.reshape(-1, h.shape[-1])).reshape(h.shape)  # all tokens as one batch: see token_linear
        return x + self.drop(h)
