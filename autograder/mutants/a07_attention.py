"""Classic student bugs in a07_attention (masks, softmax, attention, heads, embedding, layer norm),
one solution region each, and correct answers in other styles.

`autograder check a07_attention` plants each mutant in the source notebook and expects it to lose
points on its own exercise only, with a message containing its `expect` phrase; each alternative
must keep full marks.
"""
from autograder.mutants import Mutant

_SOFTMAX_BODY = """    z = x if mask is None else x + mask
    m = np.max(z, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0  # an all -inf row: exp(-inf - 0) = 0 instead of nan
    e = np.exp(z - m)
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1)"""

# The softmax of the scores alone, which the mutants below then mask in wrong ways.
_UNMASKED_SOFTMAX = """    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    s = e / np.sum(e, axis=-1, keepdims=True)
"""

_LAYER_NORM_CORE = """    D = int(np.prod(shape))
    if D == 1:  # one element per sample: it is its own mean, so the normalized value is 0
        y = x - x
    else:
        y = batch_norm(x.reshape(1, x.size // D, D), None, None, training=True, eps=eps).reshape(x.shape)"""

_LAYER_NORM_AFFINE = """    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias"""

MUTANTS = [
    # causal_mask
    Mutant(id="causal-hides-diagonal", expect="off by one", exercise="a07-causal-mask",
           find="np.tril(np.ones((L, S), dtype=bool))", replace="np.tril(np.ones((L, S), dtype=bool), k=-1)",
           why="off by one: query i may not attend key i itself"),
    Mutant(id="causal-sees-next", expect="off by one", exercise="a07-causal-mask",
           find="np.tril(np.ones((L, S), dtype=bool))", replace="np.tril(np.ones((L, S), dtype=bool), k=1)",
           why="off by one: query i also sees key i + 1, the token it must predict"),
    Mutant(id="causal-bottom-right", expect="top left", exercise="a07-causal-mask",
           find="np.tril(np.ones((L, S), dtype=bool))", replace="np.tril(np.ones((L, S), dtype=bool), k=S - L)",
           why="aligned at the bottom right when S > L, not at the top left as PyTorch's is_causal"),
    Mutant(id="causal-upper", expect="future", exercise="a07-causal-mask",
           find="np.tril(np.ones((L, S), dtype=bool))", replace="np.triu(np.ones((L, S), dtype=bool))",
           why="the future instead of the past"),
    # masked_softmax_array
    Mutant(id="mask-after-softmax", expect="added after the softmax", exercise="a07-masked-softmax", find=_SOFTMAX_BODY,
           replace=_UNMASKED_SOFTMAX + """    return s if mask is None else s + mask""",
           why="the mask is added to the weights after the softmax"),
    Mutant(id="mask-multiplied-after-softmax", expect="multiplied by a 0/1 mask", exercise="a07-masked-softmax",
           find=_SOFTMAX_BODY,
           replace=_UNMASKED_SOFTMAX + """    return s if mask is None else s * (mask == 0)""",
           why="the chapter's own example: the weights multiplied by a 0/1 mask after the softmax"),
    Mutant(id="mask-zeroed-after-softmax", expect="multiplied by a 0/1 mask", exercise="a07-masked-softmax",
           find=_SOFTMAX_BODY,
           replace=_UNMASKED_SOFTMAX + """    return s if mask is None else np.where(mask == -np.inf, 0.0, s)""",
           why="the masked weights set to 0 after the softmax (np.where): the same as multiplying by a 0/1 mask"),
    Mutant(id="softmax-max-before-mask", expect="maximum is taken before the mask", exercise="a07-masked-softmax",
           find="m = np.max(z, axis=-1, keepdims=True)", replace="m = np.max(x, axis=-1, keepdims=True)",
           why="the row maximum of the unmasked scores: a masked score far above the rest leaves only underflow"),
    Mutant(id="softmax-max-before-exp-mask", expect="maximum is taken before the mask",
           exercise="a07-masked-softmax", find=_SOFTMAX_BODY,
           replace="""    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    if mask is not None:
        e = e * np.exp(mask)  # exp(-inf) = 0 removes a key, exp(bias) weighs it
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1)""",
           why="the mask applied as a factor exp(M) after subtracting the maximum of the unmasked scores"),
    Mutant(id="mask-added-in-place", expect="in place", exercise="a07-masked-softmax",
           find="z = x if mask is None else x + mask",
           replace="z = x\n    if mask is not None:\n        z += mask",
           why="the mask added into the caller's scores (z is x, not a copy)"),
    Mutant(id="mask-added-with-out", expect="in place", exercise="a07-masked-softmax",
           find="z = x if mask is None else x + mask",
           replace="z = x if mask is None else np.add(x, mask, out=x)",
           why="np.add(..., out=x) writes the masked scores over the caller's"),
    Mutant(id="softmax-wrong-axis", expect="wrong axis", exercise="a07-masked-softmax", find=_SOFTMAX_BODY,
           replace=_SOFTMAX_BODY.replace("axis=-1", "axis=-2"),
           why="normalizes over the queries (axis -2) instead of the keys"),
    Mutant(id="fully-masked-row-nan", expect="fully masked", exercise="a07-masked-softmax",
           find="    m[~np.isfinite(m)] = 0  # an all -inf row: exp(-inf - 0) = 0 instead of nan\n",
           replace="",
           why="a fully masked row gives nan instead of PyTorch's zeros"),
    Mutant(id="mask-filled-with-1e9", expect="-1e9) instead of -inf", exercise="a07-masked-softmax",
           find="z = x if mask is None else x + mask",
           replace="z = x if mask is None else x + np.maximum(mask, -1e9)",
           why="masked entries filled with -1e9 rather than -inf: a fully masked row comes out uniform"),
    Mutant(id="softmax-not-stable", expect="maximum", exercise="a07-masked-softmax",
           find="    e = np.exp(z - m)", replace="    e = np.exp(z)",
           why="no max subtraction: overflows for large scores"),
    Mutant(id="mask-ignored", expect="mask is ignored", exercise="a07-masked-softmax",
           find="z = x if mask is None else x + mask", replace="z = x",
           why="the mask is never applied"),
    Mutant(id="softmax-float64", expect="dtype", exercise="a07-masked-softmax",
           find="return e / np.where(total > 0, total, 1)",
           replace="return (e / np.where(total > 0, total, 1)).astype(float)",
           why="float32 scores give float64 weights"),
    # MaskedSoftmax.backward
    Mutant(id="softmax-vjp-diagonal", expect="diagonal", exercise="a07-softmax-backward",
           find="return s * (grad - (grad * s).sum(axis=-1, keepdims=True))", replace="return s * grad",
           why="only the Jacobian's diagonal: the coupling term is missing"),
    Mutant(id="softmax-vjp-wrong-axis", expect="wrong axis", exercise="a07-softmax-backward",
           find="(grad * s).sum(axis=-1, keepdims=True)", replace="(grad * s).sum(axis=-2, keepdims=True)",
           why="<g, s> summed over the queries instead of the keys"),
    Mutant(id="softmax-vjp-sign", expect="sign", exercise="a07-softmax-backward",
           find="return s * (grad - (grad * s)", replace="return s * (grad + (grad * s)",
           why="the sign of the coupling term"),
    Mutant(id="softmax-vjp-no-keepdims", expect="summed axis", exercise="a07-softmax-backward",
           find="(grad * s).sum(axis=-1, keepdims=True)", replace="(grad * s).sum(axis=-1)",
           why="<g, s> without keepdims: one value per row that no longer broadcasts against its row"),
    Mutant(id="softmax-vjp-on-data", expect="Tensor", exercise="a07-softmax-backward",
           find="return s * (grad - (grad * s).sum(axis=-1, keepdims=True))",
           replace="return Tensor(s.data * (grad.data - (grad.data * s.data).sum(axis=-1, keepdims=True)))",
           why="computed on .data: right values, but not differentiable again"),
    # scaled_dot_product_attention
    Mutant(id="scale-by-d", expect="1/D instead of 1/sqrt(D)", exercise="a07-attention",
           find="scale = 1.0 / math.sqrt(D) if scale is None else float(scale)",
           replace="scale = 1.0 / D if scale is None else float(scale)",
           why="the scores scaled by 1/D instead of 1/sqrt(D)"),
    Mutant(id="given-scale-ignored", expect="scale given by the caller", exercise="a07-attention",
           find="scale = 1.0 / math.sqrt(D) if scale is None else float(scale)",
           replace="scale = 1.0 / math.sqrt(D)",
           why="a caller's scale is ignored"),
    Mutant(id="causal-future", expect="not j >= i", exercise="a07-attention",
           find="mask = additive_mask(causal_mask(L, S), query.dtype)",
           replace="mask = additive_mask(np.triu(np.ones((L, S), dtype=bool)), query.dtype)",
           why="is_causal lets each query attend the future instead of the past"),
    Mutant(id="attn-mask-ignored", expect="attn_mask is ignored", exercise="a07-attention",
           find="        mask = broadcast_mask(additive_mask(attn_mask, query.dtype, op), scores_shape, op)\n",
           replace="        pass\n",
           why="a given attn_mask is never applied"),
    Mutant(id="causal-mask-not-passed", expect="must reach the op", exercise="a07-attention",
           find="return ScaledDotProductAttention.apply(query, key, value, mask=mask, scale=scale)",
           replace="return ScaledDotProductAttention.apply(query, key, value, mask=None if is_causal else mask, "
                   "scale=scale)",
           why="the causal mask built right, then never passed to the op"),
    Mutant(id="bool-mask-filled-with-1e9", expect="-1e9) instead of -inf", exercise="a07-attention",
           find="broadcast_mask(additive_mask(attn_mask, query.dtype, op), scores_shape, op)",
           replace="broadcast_mask(np.where(attn_mask, 0.0, -1e9).astype(query.dtype) if np.asarray(attn_mask).dtype "
                   "== bool else additive_mask(attn_mask, query.dtype, op), scores_shape, op)",
           why="a bool mask turned into 0 / -1e9 rather than 0 / -inf: a query with nothing to attend averages"),
    Mutant(id="bool-mask-added-as-is", expect="as 0 and 1", exercise="a07-attention",
           find="broadcast_mask(additive_mask(attn_mask, query.dtype, op), scores_shape, op)",
           replace="broadcast_mask(np.asarray(attn_mask, dtype=query.dtype), scores_shape, op)",
           why="a bool mask added to the scores as 0/1 instead of 0/-inf"),
    Mutant(id="scale-from-values", expect="values' width", exercise="a07-attention",
           find="L, S, D = query.shape[-2], key.shape[-2], query.shape[-1]",
           replace="L, S, D = query.shape[-2], key.shape[-2], value.shape[-1]",
           why="the scale 1/sqrt(Dv) from the values' width instead of the queries'"),
    Mutant(id="causal-mask-square", expect="causal_mask(L, S)", exercise="a07-attention",
           find="mask = additive_mask(causal_mask(L, S), query.dtype)",
           replace="mask = additive_mask(causal_mask(L), query.dtype)",
           why="an (L, L) causal mask: wrong as soon as there are more keys than queries"),
    Mutant(id="mask-not-broadcast-checked", expect="does not broadcast", exercise="a07-attention",
           find="mask = broadcast_mask(additive_mask(attn_mask, query.dtype, op), scores_shape, op)",
           replace="mask = additive_mask(attn_mask, query.dtype, op)",
           why="a mask that adds a batch axis to the scores is accepted (the output grows an axis)"),
    Mutant(id="scores-shape-from-query", expect="batch axes are those of query and key", exercise="a07-attention",
           find="scores_shape = np.broadcast_shapes(query.shape[:-2], key.shape[:-2]) + (L, S)",
           replace="scores_shape = query.shape[:-1] + (S,)",
           why="the scores' shape from the query alone: a query shared by the batch refuses a good mask"),
    Mutant(id="dropout-ignored", expect="dropout_p is ignored", exercise="a07-attention",
           find="    if dropout_p > 0.0:\n"
                "        return dropout_attention(query, key, value, mask, scale, dropout_p, rng)\n",
           replace="",
           why="dropout_p > 0 never drops anything"),
    Mutant(id="dropout-without-rng", expect="caller's rng", exercise="a07-attention",
           find="return dropout_attention(query, key, value, mask, scale, dropout_p, rng)",
           replace="return dropout_attention(query, key, value, mask, scale, dropout_p, None)",
           why="the dropped weights drawn from a fresh generator, not the caller's"),
    Mutant(id="both-masks-accepted", expect="not both", exercise="a07-attention",
           find="if is_causal and attn_mask is not None:",
           replace="if is_causal and attn_mask is not None and dropout_p < 0:",
           why="attn_mask together with is_causal=True is silently accepted"),
    Mutant(id="attention-on-data", expect="gradient reaching", exercise="a07-attention",
           find="return ScaledDotProductAttention.apply(query, key, value, mask=mask, scale=scale)",
           replace="return ScaledDotProductAttention.apply(Tensor(query.data), Tensor(key.data), Tensor(value.data), "
                   "mask=mask, scale=scale)",
           why="the op applied to copies: right values, no gradient reaches the inputs"),
    # attention_backward
    Mutant(id="dv-not-transposed", expect="P^T G", exercise="a07-attention-backward",
           find="dv = sum_to(matmul(p.swapaxes(-1, -2), grad), v.shape)",
           replace="dv = sum_to(matmul(p, grad), v.shape)",
           why="dV = P G instead of P^T G"),
    Mutant(id="softmax-vjp-without-rowsum", expect="rowsum", exercise="a07-attention-backward",
           find="ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale", replace="ds = p * dp * scale",
           why="through the softmax as if it were elementwise"),
    Mutant(id="backward-forgets-scale", expect="scale", exercise="a07-attention-backward",
           find="ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale",
           replace="ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))",
           why="the scale of the scores is left out of dQ and dK"),
    Mutant(id="dk-not-transposed", expect="transpose dS", exercise="a07-attention-backward",
           find="dk = sum_to(matmul(ds.swapaxes(-1, -2), q), k.shape)", replace="dk = sum_to(matmul(ds, q), k.shape)",
           why="dK = s dS Q instead of s dS^T Q"),
    Mutant(id="dk-skipped-without-dq", expect="needs asks for it", exercise="a07-attention-backward",
           find="if not (needs[0] or needs[1]):", replace="if not needs[0]:",
           why="dS computed only when dQ is needed: dK alone comes back None"),
    Mutant(id="dk-reads-needs-of-q", expect="needs asks for it", exercise="a07-attention-backward",
           find="dk = sum_to(matmul(ds.swapaxes(-1, -2), q), k.shape) if needs[1] else None",
           replace="dk = sum_to(matmul(ds.swapaxes(-1, -2), q), k.shape) if needs[0] else None",
           why="dK computed when dQ is needed, not when dK is"),
    Mutant(id="shared-kv-not-summed", expect="shared by every head", exercise="a07-attention-backward",
           find="dv = sum_to(matmul(p.swapaxes(-1, -2), grad), v.shape)",
           replace="dv = matmul(p.swapaxes(-1, -2), grad)",
           why="a V shared by every head keeps the heads' axis in its gradient"),
    Mutant(id="backward-on-data", expect="gradients of your gradients", exercise="a07-attention-backward",
           find="dp = matmul(grad, v.swapaxes(-1, -2))",
           replace="dp = Tensor(grad.data @ v.data.swapaxes(-1, -2))",
           why="dP computed on .data: first derivatives right, second ones wrong"),
    # split_heads / merge_heads
    Mutant(id="split-interleaved", expect="contiguous", exercise="a07-split-heads",
           find="return transpose(reshape(x, (N, T, num_heads, E // num_heads)), (0, 2, 1, 3))",
           replace="return transpose(reshape(x, (N, T, E // num_heads, num_heads)), (0, 3, 1, 2))",
           why="head h takes every H-th feature instead of a contiguous block"),
    Mutant(id="split-reshape-only", expect="mixes tokens", exercise="a07-split-heads",
           find="return transpose(reshape(x, (N, T, num_heads, E // num_heads)), (0, 2, 1, 3))",
           replace="return reshape(x, (N, num_heads, T, E // num_heads))",
           why="a reshape to (N, H, T, D) without the transpose mixes tokens into heads"),
    Mutant(id="split-no-divisibility-check", expect="ValueError", exercise="a07-split-heads",
           find="if num_heads <= 0 or E % num_heads:", replace="if num_heads <= 0:",
           why="E not divisible by H is not reported"),
    Mutant(id="merge-wrong-order", expect="wrong order", exercise="a07-merge-heads",
           find="return reshape(transpose(x, (0, 2, 1, 3)), (N, T, H * D))",
           replace="return reshape(transpose(x, (0, 2, 3, 1)), (N, T, H * D))",
           why="heads merged in the wrong order: their features interleaved"),
    Mutant(id="merge-reshape-only", expect="mixes tokens", exercise="a07-merge-heads",
           find="return reshape(transpose(x, (0, 2, 1, 3)), (N, T, H * D))", replace="return reshape(x, (N, T, H * D))",
           why="a reshape without the transpose mixes tokens and heads"),
    Mutant(id="merge-on-data", expect="gradient", exercise="a07-merge-heads",
           find="return reshape(transpose(x, (0, 2, 1, 3)), (N, T, H * D))",
           replace="return Tensor(x.data.transpose(0, 2, 1, 3).reshape(N, T, H * D))",
           why="merged on .data: right values, no gradient"),
    # embedding_backward_array
    Mutant(id="embedding-grad-assigned", expect="accumulated", exercise="a07-embedding-backward",
           find="np.add.at(dw, indices.reshape(-1), grad.reshape(-1, E))",
           replace="dw[indices.reshape(-1)] += grad.reshape(-1, E)",
           why="dW[ids] += g: a repeated token keeps one of its gradients (buffered fancy indexing)"),
    Mutant(id="embedding-float64", expect="dtype", exercise="a07-embedding-backward",
           find="dw = np.zeros((num_embeddings, E), dtype=grad.dtype)", replace="dw = np.zeros((num_embeddings, E))",
           why="float32 gradients give a float64 table gradient"),
    # layer_norm
    Mutant(id="layer-norm-over-batch", expect="over the batch", exercise="a07-layer-norm",
           find="y = batch_norm(x.reshape(1, x.size // D, D), None, None, training=True, eps=eps).reshape(x.shape)",
           replace="y = batch_norm(x.reshape(x.size // D, D), None, None, training=True, eps=eps).reshape(x.shape)",
           why="normalizes each feature over the samples (batch norm), not each sample over its features"),
    Mutant(id="layer-norm-shift-then-scale", expect="gamma * x_hat + beta",
           exercise="a07-layer-norm", find=_LAYER_NORM_AFFINE,
           replace="""    if bias is not None:
        y = y + bias
    if weight is not None:
        y = y * weight""",
           why="(x_hat + beta) * gamma instead of gamma * x_hat + beta"),
    Mutant(id="layer-norm-on-data", expect="gradient of x", exercise="a07-layer-norm",
           find="y = batch_norm(x.reshape(1, x.size // D, D), None, None, training=True, eps=eps).reshape(x.shape)",
           replace="y = Tensor(batch_norm(Tensor(x.data.reshape(1, x.size // D, D)), None, None, training=True, "
                   "eps=eps).data.reshape(x.shape))",
           why="normalized on .data: right values, no gradient reaches x"),
    Mutant(id="layer-norm-unbiased-variance", expect="biased variance", exercise="a07-layer-norm",
           find=_LAYER_NORM_CORE,
           replace="""    axes = tuple(range(x.ndim - k, x.ndim))
    centered = x - x.mean(axis=axes, keepdims=True)
    variance = (centered * centered).sum(axis=axes, keepdims=True) / (int(np.prod(shape)) - 1)
    y = centered / (variance + eps) ** 0.5""",
           why="the unbiased variance (divided by D - 1), not PyTorch's biased one"),
    Mutant(id="layer-norm-eps-outside-sqrt", expect="inside the square root", exercise="a07-layer-norm",
           find=_LAYER_NORM_CORE,
           replace="""    axes = tuple(range(x.ndim - k, x.ndim))
    centered = x - x.mean(axis=axes, keepdims=True)
    y = centered / ((centered * centered).mean(axis=axes, keepdims=True) ** 0.5 + eps)""",
           why="eps added to the standard deviation instead of the variance"),
    Mutant(id="layer-norm-no-shape-check", expect="ValueError", exercise="a07-layer-norm",
           find="if k == 0 or x.ndim < k or x.shape[x.ndim - k:] != shape:", replace="if k == 0:",
           why="a normalized_shape that is not the input's last axes is not reported"),
]


ALTERNATIVES = [
    Mutant(id="causal-by-comparison", exercise="a07-causal-mask",
           find="return np.tril(np.ones((L, S), dtype=bool))",
           replace="return np.arange(S)[None, :] <= np.arange(L)[:, None]",
           why="the mask as a comparison of key and query positions"),
    Mutant(id="softmax-loop-over-rows", exercise="a07-masked-softmax", find=_SOFTMAX_BODY,
           replace="""    z = x if mask is None else x + np.broadcast_to(mask, x.shape)
    out = np.zeros_like(z)
    for index in np.ndindex(z.shape[:-1]):
        row = z[index]
        if np.isneginf(row).all():
            continue  # nothing to attend to: the row stays 0
        e = np.exp(row - row.max())
        out[index] = e / e.sum()
    return out""",
           why="a loop over rows, fully masked rows skipped"),
    Mutant(id="softmax-divide-where", exercise="a07-masked-softmax", find=_SOFTMAX_BODY,
           replace="""    z = x if mask is None else x + mask
    top = z.max(axis=-1, keepdims=True)
    e = np.exp(z - np.where(top == -np.inf, 0, top))
    total = e.sum(axis=-1, keepdims=True)
    out = np.zeros_like(e)
    np.divide(e, total, out=out, where=total > 0)
    return out""",
           why="np.divide with where= instead of a guarded denominator"),
    Mutant(id="softmax-nan-to-num", exercise="a07-masked-softmax", find=_SOFTMAX_BODY,
           replace="""    z = x if mask is None else x + mask
    with np.errstate(invalid="ignore"):  # a fully masked row: -inf - (-inf) = nan, zeroed below
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        s = e / e.sum(axis=-1, keepdims=True)
    return np.nan_to_num(s, nan=0.0)""",
           why="fully masked rows computed as nan, then zeroed"),
    Mutant(id="softmax-vjp-expanded", exercise="a07-softmax-backward",
           find="return s * (grad - (grad * s).sum(axis=-1, keepdims=True))",
           replace="return s * grad - s * (s * grad).sum(axis=-1, keepdims=True)",
           why="the product expanded"),
    Mutant(id="attention-weights-then-matmul", exercise="a07-attention",
           find="return ScaledDotProductAttention.apply(query, key, value, mask=mask, scale=scale)",
           replace="return matmul(attention_weights(query, key, mask, scale), value)",
           why="composed from the weights and a matmul: the engine derives the backward"),
    Mutant(id="attention-mask-broadcast-to", exercise="a07-attention",
           find="mask = broadcast_mask(additive_mask(attn_mask, query.dtype, op), scores_shape, op)",
           replace="mask = np.broadcast_to(additive_mask(attn_mask, query.dtype, op), scores_shape)",
           why="np.broadcast_to checks the mask's shape (its ValueError) and spreads it to the scores' shape"),
    Mutant(id="attention-backward-every-gradient", exercise="a07-attention-backward",
           find="""    dv = sum_to(matmul(p.swapaxes(-1, -2), grad), v.shape) if needs[2] else None
    if not (needs[0] or needs[1]):
        return None, None, dv
    dp""",
           replace="""    dv = sum_to(matmul(p.swapaxes(-1, -2), grad), v.shape)
    needs = (True, True, True)  # every gradient, wanted or not: None is allowed, not required
    dp""",
           why="all three gradients computed whatever needs says"),
    Mutant(id="attention-backward-transpose-axes", exercise="a07-attention-backward",
           find="dv = sum_to(matmul(p.swapaxes(-1, -2), grad), v.shape) if needs[2] else None",
           replace="dv = sum_to(matmul(transpose(p, tuple(range(p.ndim - 2)) + (p.ndim - 1, p.ndim - 2)), grad), "
                   "v.shape) if needs[2] else None",
           why="the transpose written with the engine's transpose and an axes tuple"),
    Mutant(id="attention-backward-scale-late", exercise="a07-attention-backward",
           find="""ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale  # through the softmax, then the scale
    dq = sum_to(matmul(ds, k), q.shape) if needs[0] else None
    dk = sum_to(matmul(ds.swapaxes(-1, -2), q), k.shape) if needs[1] else None""",
           replace="""ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = sum_to(matmul(ds, k) * scale, q.shape) if needs[0] else None
    dk = sum_to(matmul(ds.swapaxes(-1, -2), q) * scale, k.shape) if needs[1] else None""",
           why="the scale applied after the products, and every gradient computed"),
    Mutant(id="attention-backward-einsum", exercise="a07-attention-backward",
           find="""dp = matmul(grad, v.swapaxes(-1, -2))                      # (..., L, S)""",
           replace="""from coursekit.engine.ops import einsum
    dp = einsum("...ld,...sd->...ls", grad, v)""",
           why="dP = G V^T as an einsum over the batch axes"),
    Mutant(id="split-with-swapaxes", exercise="a07-split-heads",
           find="return transpose(reshape(x, (N, T, num_heads, E // num_heads)), (0, 2, 1, 3))",
           replace="return x.reshape((N, T, num_heads, E // num_heads)).swapaxes(1, 2)",
           why="Tensor methods reshape and swapaxes"),
    Mutant(id="merge-loop-over-heads", exercise="a07-merge-heads",
           find="return reshape(transpose(x, (0, 2, 1, 3)), (N, T, H * D))",
           replace="from coursekit.engine.ops import concatenate\n"
                   "    return concatenate([x[:, h] for h in range(H)], axis=-1)",
           why="the heads concatenated one by one along the features"),
    Mutant(id="embedding-loop", exercise="a07-embedding-backward",
           find="np.add.at(dw, indices.reshape(-1), grad.reshape(-1, E))",
           replace="for token, row in zip(indices.reshape(-1), grad.reshape(-1, E)):\n        dw[token] += row",
           why="a loop over positions"),
    Mutant(id="embedding-one-hot", exercise="a07-embedding-backward",
           find="""    dw = np.zeros((num_embeddings, E), dtype=grad.dtype)
    np.add.at(dw, indices.reshape(-1), grad.reshape(-1, E))
    return dw""",
           replace="""    one_hot = np.eye(num_embeddings, dtype=grad.dtype)[indices.reshape(-1)]  # (N*T, V)
    return one_hot.T @ grad.reshape(-1, E)""",
           why="dW = one_hot(ids)^T g"),
    Mutant(id="layer-norm-mean-var", exercise="a07-layer-norm",
           find=_LAYER_NORM_CORE,
           replace="""    axes = tuple(range(x.ndim - k, x.ndim))
    centered = x - x.mean(axis=axes, keepdims=True)
    y = centered / ((centered * centered).mean(axis=axes, keepdims=True) + eps) ** 0.5""",
           why="mean and biased variance with Tensor ops, no batch_norm"),
]
