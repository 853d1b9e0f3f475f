"""PyTorch's numbers for chapter 7's ops and layers: embedding, masked softmax, scaled dot-product
attention, the head split and merge, nn.MultiheadAttention and a pre-norm transformer block.

Two tables. `CASES` (ops) uses `golden_ops.Case`: values, first derivatives (a VJP with a random
upstream gradient) and second derivatives (a Hessian-vector product), checked by
`tests/engine/test_attention.py` as `test_golden.py` checks the core ops. `make_layers` computes the
layers' cases: PyTorch's module with its random weights, saved with the input, the output, the
attention weights and every gradient, so the test loads the same weights into ours.

Where PyTorch's fused `scaled_dot_product_attention` has no second derivative (its CPU backward is
not differentiable again), the op's torch side is the math form
`_safe_softmax(Q K^T s + M) V`, and `make` first checks that this form gives the fused op's output
and gradients (to 1e-12): the HVPs below are PyTorch's own semantics, fully masked rows included.

    .venv-golden/bin/python tests/golden/make_golden.py attention
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from golden_ops import FIXED, Case, U, _torch_case, inputs

import solutions as S

Arrays = dict[str, np.ndarray]
CASES: dict[str, Case] = {}
TOKENS = np.array([[1, 3, 3, 0], [4, 1, 1, 1]])  # repeated ids: their rows' gradients must add up


def _ids(rng: np.random.Generator) -> np.ndarray:
    return TOKENS.copy()


def _bool(mask: Any):
    return lambda rng: np.array(mask, dtype=bool)


# A (2, 1, 3, 4) bool mask (True = attend) broadcast over heads; query 1 of sample 1 sees no key.
PARTIAL = [[[[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 1, 1]]], [[[1, 1, 1, 1], [0, 0, 0, 0], [0, 1, 1, 0]]]]


def _t_mask(t, mask, dtype):
    """A mask as the additive float tensor torch's math form adds (bool: True = attend)."""
    m = mask if isinstance(mask, t.Tensor) else t.from_numpy(np.asarray(mask))
    if m.dtype == t.bool:
        return t.zeros(m.shape, dtype=dtype).masked_fill(~m, -math.inf)
    return m


def _t_attention(t, q, k, v, mask=None, causal=False, scale=None):
    """PyTorch's SDPA semantics, written out so that it differentiates twice."""
    s = (1.0 / math.sqrt(q.shape[-1])) if scale is None else scale
    scores = q @ k.transpose(-1, -2) * s
    if causal:
        L, S_ = scores.shape[-2:]
        mask = np.tril(np.ones((L, S_), dtype=bool))
    if mask is not None:
        scores = scores + _t_mask(t, mask, q.dtype)
    return t._safe_softmax(scores, -1) @ v


def _t_fused(t, q, k, v, mask=None, causal=False, scale=None):
    m = None if mask is None else t.from_numpy(np.asarray(mask)) if isinstance(mask, np.ndarray) else mask
    return t.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, scale=scale)


def _add(name: str, case: Case) -> None:
    assert name not in CASES, name
    CASES[name] = case


# -- embedding -------------------------------------------------------------------------------
_add("embedding", Case(inputs(ids=_ids, w=U((5, 3))), lambda t, ids, w: t.nn.functional.embedding(t.from_numpy(ids), w),
                       lambda ids, w: S.ops.embedding(ids, w), diff=("w",)))
# Squared, so the second derivative runs through the scatter-add's own backward (a lookup again).
_add("embedding_squared", Case(inputs(ids=_ids, w=U((5, 3))),
                               lambda t, ids, w: t.nn.functional.embedding(t.from_numpy(ids), w) ** 2,
                               lambda ids, w: S.ops.embedding(ids, w) ** 2, diff=("w",)))
_add("embedding_padding_idx", Case(
    inputs(ids=_ids, w=U((5, 3))),
    lambda t, ids, w: t.nn.functional.embedding(t.from_numpy(ids), w, padding_idx=1) ** 2,
    lambda ids, w: S.ops.embedding(ids, w, padding_idx=1) ** 2, diff=("w",)))

# -- masked softmax ----------------------------------------------------------------------------
_ROWS = [[1, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]  # one row fully masked, one with a single survivor
_add("masked_softmax_bool", Case(
    inputs(x=U((2, 3, 4), -3, 3), mask=_bool(_ROWS)),
    lambda t, x, mask: t._safe_softmax(x + _t_mask(t, mask, x.dtype), -1),
    lambda x, mask: S.ops.masked_softmax(x, mask)))
_add("masked_softmax_float", Case(
    inputs(x=U((2, 3, 4), -3, 3), mask=FIXED([[0.0, -1.5, -np.inf, 2.0]] * 3)),
    lambda t, x, mask: t._safe_softmax(x + mask, -1),
    lambda x, mask: S.ops.masked_softmax(x, mask)))

# -- scaled dot-product attention ----------------------------------------------------------------
_QKV = dict(q=U((2, 2, 3, 4)), k=U((2, 2, 4, 4)), v=U((2, 2, 4, 5)))
_SQUARE = dict(q=U((2, 2, 4, 3)), k=U((2, 2, 4, 3)), v=U((2, 2, 4, 3)))
SDPA = {
    # name: (inputs, mask input or None, keyword arguments)
    "sdpa_plain": (_QKV, None, {}),
    "sdpa_causal": (_SQUARE, None, {"causal": True}),
    "sdpa_causal_rectangular": (_QKV, None, {"causal": True}),  # L=3 < S=4: the last key hidden from all
    "sdpa_bool_mask_over_heads": (_QKV, _bool(PARTIAL), {}),
    "sdpa_float_mask": (_QKV, U((3, 4), -1, 1), {}),
    "sdpa_scale": (_QKV, None, {"scale": 0.3}),
    "sdpa_shared_kv": (dict(q=U((2, 2, 3, 4)), k=U((1, 2, 4, 4)), v=U((2, 1, 4, 5))), None, {}),
}


def _engine_sdpa(kwargs):
    def run(q, k, v, mask=None):
        return S.ops.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=kwargs.get("causal", False),
                                                  scale=kwargs.get("scale"))
    return run


for _name, (_qkv, _mask, _kw) in SDPA.items():
    _makers = dict(_qkv, **({"mask": _mask} if _mask is not None else {}))
    _add(_name, Case(inputs(**_makers), lambda t, q, k, v, mask=None, kw=_kw: _t_attention(t, q, k, v, mask, **kw),
                     _engine_sdpa(_kw), diff=("q", "k", "v"), extra={"fused": _kw}))

# -- heads -------------------------------------------------------------------------------------
_add("split_heads", Case(inputs(x=U((2, 3, 6))),
                         lambda t, x: x.view(2, 3, 2, 3).transpose(1, 2) ** 2,
                         lambda x: S.ops.split_heads(x, 2) ** 2))
_add("merge_heads", Case(inputs(x=U((2, 2, 3, 4))),
                         lambda t, x: x.transpose(1, 2).reshape(2, 3, 8) ** 2,
                         lambda x: S.ops.merge_heads(x) ** 2))


def _check_math_form(torch, rng: np.random.Generator) -> None:
    """The math form used for the SDPA cases gives the fused op's output and first derivatives."""
    for name, (qkv, mask_maker, kw) in SDPA.items():
        arrays = {k: make(rng) for k, make in qkv.items()}
        mask = None if mask_maker is None else mask_maker(rng)
        results = []
        for fn in (_t_attention, _t_fused):
            ts = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
            out = fn(torch, ts["q"], ts["k"], ts["v"], mask, **kw)
            out.backward(torch.ones_like(out))
            results.append([out.detach().numpy()] + [ts[k].grad.numpy() for k in ("q", "k", "v")])
        for a, b in zip(*results, strict=True):
            if not np.allclose(a, b, rtol=1e-10, atol=1e-12):
                raise AssertionError(f"golden_attention: the math form differs from PyTorch's fused SDPA on {name}")


# --------------------------------------------------------------------------------------------
# Layers: nn.MultiheadAttention and a pre-norm block
# --------------------------------------------------------------------------------------------
MHA = {
    # name: (batch_first, N, L, S, E, H, forward keyword arguments)
    "mha_self_batch_first": (True, 2, 4, 4, 6, 2, {"self": True}),
    "mha_cross_seq_first": (False, 2, 3, 5, 6, 3, {}),
    "mha_masks_per_head": (True, 2, 4, 4, 6, 2, {"self": True, "attn_mask": "causal", "key_padding_mask": True,
                                                  "average_attn_weights": False}),
    "mha_no_weights": (True, 2, 4, 4, 6, 2, {"self": True, "attn_mask": "causal", "need_weights": False}),
}


def _mha_case(torch, rng, batch_first, N, L, S_, E, H, kw) -> Arrays:
    mha = torch.nn.MultiheadAttention(E, H, batch_first=batch_first).double()
    with torch.no_grad():  # PyTorch starts the biases at 0: make them count
        mha.in_proj_bias.copy_(torch.from_numpy(rng.standard_normal(3 * E) * 0.5))
        mha.out_proj.bias.copy_(torch.from_numpy(rng.standard_normal(E) * 0.5))
    shape = (lambda T: (N, T, E)) if batch_first else (lambda T: (T, N, E))
    a: Arrays = {"query": rng.standard_normal(shape(L))}
    if kw.get("self"):
        a["key"] = a["value"] = a["query"]
    else:
        a["key"], a["value"] = rng.standard_normal(shape(S_)), rng.standard_normal(shape(S_))
    args: dict[str, Any] = {"need_weights": kw.get("need_weights", True),
                            "average_attn_weights": kw.get("average_attn_weights", True)}
    if kw.get("attn_mask") == "causal":
        a["attn_mask"] = ~np.tril(np.ones((L, S_), dtype=bool))  # this layer's convention: True = hidden
        args["attn_mask"] = torch.from_numpy(a["attn_mask"])
    if kw.get("key_padding_mask"):
        a["key_padding_mask"] = np.zeros((N, S_), dtype=bool)
        a["key_padding_mask"][1, -1] = True  # the last key of sample 1 is padding
        args["key_padding_mask"] = torch.from_numpy(a["key_padding_mask"])
    q = torch.from_numpy(a["query"]).requires_grad_()
    if kw.get("self"):
        k = v = q
    else:
        k, v = (torch.from_numpy(a[n]).requires_grad_() for n in ("key", "value"))
    out, weights = mha(q, k, v, **args)
    a["upstream"] = rng.standard_normal(tuple(out.shape))
    out.backward(torch.from_numpy(a["upstream"]))
    a["out"] = out.detach().numpy().copy()
    if weights is not None:
        a["weights"] = weights.detach().numpy().copy()
    a["grad_query"] = q.grad.numpy().copy()
    if not kw.get("self"):
        a["grad_key"], a["grad_value"] = k.grad.numpy().copy(), v.grad.numpy().copy()
    for name, p in mha.named_parameters():
        a[f"param.{name}"] = p.detach().numpy().copy()
        a[f"grad.{name}"] = p.grad.numpy().copy()
    a["batch_first"] = np.array(batch_first)
    a["num_heads"] = np.array(H)
    return a


def _block_case(torch, rng, N=2, T=5, E=8, H=2) -> Arrays:
    """torch.nn.TransformerEncoderLayer with norm_first=True and GELU is exactly our pre-norm
    TransformerBlock: x + attn(ln1(x)), then x + linear2(gelu(linear1(ln2(x))))."""
    layer = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=4 * E, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=True).double()
    with torch.no_grad():
        for p in layer.parameters():  # away from the unit LayerNorm and zero biases of a fresh layer
            p.add_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * 0.1))
    layer.train()  # no fused inference path: the plain composition
    a: Arrays = {"x": rng.standard_normal((N, T, E))}
    x = torch.from_numpy(a["x"]).requires_grad_()
    mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    out = layer(x, src_mask=mask, is_causal=True)
    a["upstream"] = rng.standard_normal(tuple(out.shape))
    out.backward(torch.from_numpy(a["upstream"]))
    a["out"], a["grad_x"] = out.detach().numpy().copy(), x.grad.numpy().copy()
    for name, p in layer.named_parameters():
        a[f"param.{name}"] = p.detach().numpy().copy()
        a[f"grad.{name}"] = p.grad.numpy().copy()
    a["num_heads"] = np.array(H)
    return a


def make(rng: np.random.Generator) -> dict[str, Arrays]:
    """{case: {array: ndarray}}: the ops' table, then the layers, all computed by PyTorch in float64."""
    import torch

    torch.set_num_threads(1)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _check_math_form(torch, np.random.default_rng(0))
        cases = {name: _torch_case(torch, rng, case) for name, case in CASES.items()}
        for name, spec in MHA.items():
            torch.manual_seed(int(rng.integers(2**31)))
            cases[name] = _mha_case(torch, rng, *spec)
        torch.manual_seed(int(rng.integers(2**31)))
        cases["block_prenorm_causal"] = _block_case(torch, rng)
    finally:
        torch.set_default_dtype(previous)
    return cases
