"""Hidden checks of a07_attention: scaled dot-product attention (the function) and its backward."""
from __future__ import annotations

import math

import numpy as np

from autograder.judge.checks import (
    Case,
    GradingFailure,
    close,
    graded,
    judged,
    raises,
    run,
    second_order,
    student_engine,
    student_rng,
    time_limit,
    type_name,
)

from .common import (
    TIME_LIMIT,
    _additive,
    _causal,
    _grads,
    _reference_attention,
    _slow,
    _student_attention,
)


# --------------------------------------------------------------------------------------------
# scaled_dot_product_attention
# --------------------------------------------------------------------------------------------
def _attention_cases(rng):
    """(label, q, k, v, keyword arguments) for scaled_dot_product_attention."""
    out = []

    def qkv(qs, ks, vs, dtype=np.float64):
        return tuple(rng.standard_normal(s).astype(dtype) for s in (qs, ks, vs))

    out.append(("(N, H, L, D) = (2, 2, 4, 8) without a mask", *qkv((2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8)), {}))
    out.append(("is_causal=True with L = S = 5, D = 4, Dv = 3", *qkv((2, 5, 4), (2, 5, 4), (2, 5, 3)),
                {"is_causal": True}))
    out.append(("is_causal=True with more keys than queries, L = 3, S = 6", *qkv((1, 2, 3, 4), (1, 2, 6, 4),
                                                                                 (1, 2, 6, 4)), {"is_causal": True}))
    keep = rng.random((2, 1, 4, 6)) < 0.7
    keep[..., 0] = True
    out.append(("a bool mask (N, 1, L, S) broadcast over the heads", *qkv((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2)),
                {"attn_mask": keep}))
    bias = rng.standard_normal((3, 5))
    bias[:, 2] = -np.inf
    out.append(("an additive float mask of biases and -inf", *qkv((2, 3, 6), (2, 5, 6), (2, 5, 6)),
                {"attn_mask": bias}))
    out.append(("a scale given by the caller", *qkv((2, 4, 6), (2, 4, 6), (2, 4, 6)), {"scale": 0.9}))
    keep = np.ones((3, 4), dtype=bool)
    keep[1] = False
    out.append(("a mask with a query that may attend nothing", *qkv((2, 3, 4), (2, 4, 4), (2, 4, 4)),
                {"attn_mask": keep}))
    keep = rng.random((2, 1, 4, 5)) < 0.7
    keep[..., 0] = True
    out.append(("one query shared by the batch (Q of shape (1, H, L, D)) and a padding mask (N, 1, L, S)",
                *qkv((1, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3)), {"attn_mask": keep}))
    out.append(("keys and values shared by every head (K, V of shape (N, 1, S, D))",
                *qkv((2, 3, 4, 4), (2, 1, 5, 4), (2, 1, 5, 3)), {"is_causal": True}))
    out.append(("float32 with is_causal=True", *qkv((2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8), np.float32),
                {"is_causal": True}))
    return out


def _attention_hint(got, q, k, v, kwargs, dtype) -> str:
    import solutions as R
    attention = R.ops.scaled_dot_product_attention
    D, Dv = q.shape[-1], v.shape[-1]

    def candidate(**changes):
        kw = {**kwargs, **changes}
        return np.array(attention(R.Tensor(q), R.Tensor(k), R.Tensor(v), **kw).data)

    if "scale" not in kwargs and close(got, candidate(scale=1.0 / D), dtype):
        return ("the scores are scaled by 1/D instead of 1/sqrt(D): a dot product of D unit-variance terms has "
                "variance D, so its standard deviation is sqrt(D)")
    if "scale" not in kwargs and close(got, candidate(scale=1.0), dtype):
        return "the scores are not scaled: multiply Q K^T by 1/sqrt(D) (or by `scale` when it is given)"
    if "scale" not in kwargs and Dv != D and close(got, candidate(scale=1.0 / math.sqrt(Dv)), dtype):
        return ("the scale is 1/sqrt(D) with D the width of the queries and keys (their last axis), whose dot "
                "products are the scores; the values' width Dv plays no part in it")
    if "scale" in kwargs and close(got, candidate(scale=1.0 / math.sqrt(D)), dtype):
        return "a scale given by the caller replaces 1/sqrt(D): use it (as a float) when it is not None"
    if kwargs.get("is_causal"):
        L, S = q.shape[-2], k.shape[-2]
        future = np.triu(np.ones((L, S), dtype=bool))
        if close(got, candidate(is_causal=False, attn_mask=future), dtype):
            return "is_causal=True: query i attends keys j <= i (the past), not j >= i"
        if close(got, candidate(is_causal=False), dtype):
            return ("is_causal=True changes nothing: every query still sees the later keys. The causal mask "
                    "(causal_mask(L, S), made additive) must reach the op: pass it as its mask")
    if "attn_mask" in kwargs:
        mask = np.asarray(kwargs["attn_mask"])
        if close(got, candidate(attn_mask=None), dtype):
            return "attn_mask is ignored: turn it into an additive mask (additive_mask) and pass it to the op"
        if mask.dtype == bool and close(got, candidate(attn_mask=~mask), dtype):
            return "a bool mask is True where a query may attend (as PyTorch's), not where it may not"
        if mask.dtype == bool and (~mask).all(axis=-1).any() and \
                close(got, candidate(attn_mask=np.where(mask, 0.0, -1e9).astype(q.dtype)), dtype):
            return ("a query whose every key is masked must give 0, and yours attends as if unmasked: the mask "
                    "was filled with a large finite number (-1e9) instead of -inf (additive_mask), and "
                    "softmax(z + c) is softmax(z)")
        if mask.dtype == bool and close(got, candidate(attn_mask=mask.astype(q.dtype)), dtype):
            return ("a bool mask is added to the scores as it is, as 0 and 1: turn it into 0 / -inf first "
                    "(additive_mask), so that a False key gets weight 0")
    return "wrong values; softmax(Q K^T * scale + mask) V"


def _attention_exception(kwargs, q, k):
    def hint(error) -> str | None:
        if "broadcast" in str(error) and kwargs.get("is_causal") and q.shape[-2] != k.shape[-2]:
            return "with is_causal the mask has one row per query and one column per key: causal_mask(L, S)"
        if "does not broadcast to the attention scores" in str(error) and q.shape[:-2] != k.shape[:-2]:
            return ("the scores' batch axes are those of query and key broadcast together: "
                    "np.broadcast_shapes(query.shape[:-2], key.shape[:-2]) + (L, S)")
        return None

    return hint


def _compare_attention(label, S, f, q, k, v, kwargs, student_kwargs=None):
    """Run the student's function and the reference on one case: values, dtype, gradients."""
    import solutions as R
    qs, ks, vs = (S.Tensor(a.copy(), requires_grad=True) for a in (q, k, v))
    skw = kwargs if student_kwargs is None else student_kwargs
    out = run(f"{label}: scaled_dot_product_attention", lambda: f(qs, ks, vs, **skw),
              hint=_attention_exception(kwargs, q, k))
    qr, kr, vr = (R.Tensor(a.copy(), requires_grad=True) for a in (q, k, v))
    want = R.ops.scaled_dot_product_attention(qr, kr, vr, **kwargs)
    if not isinstance(out, S.Tensor):
        raise GradingFailure(f"{label}: scaled_dot_product_attention returned {type_name(out)}; return the op's Tensor")
    got = np.array(out.data)
    if got.shape != want.shape:
        if got.ndim > want.ndim:
            raise GradingFailure(f"{label}: the output has more axes than (..., L, Dv): a mask must broadcast to the "
                                 "scores' shape without adding axes (check it with broadcast_mask)")
        raise GradingFailure(f"{label}: the output must have shape (..., L, Dv), the batch axes broadcast")
    if got.dtype != want.dtype:
        raise GradingFailure(f"{label}: the output is {got.dtype} for {want.dtype} inputs; build the additive mask in "
                             "the queries' dtype")
    return out, got, want, (qs, ks, vs), (qr, kr, vr)


def _check_gradients(label, S, out, want, student, reference, rng, dtype):
    import solutions as R
    upstream = rng.standard_normal(want.shape)
    mine = run(f"{label}: the gradients through your output", _grads, S, out, list(student), upstream)
    ref = _grads(R, want, list(reference), upstream)
    for name, a, b in zip(("query", "key", "value"), mine, ref, strict=True):
        if a is None or not close(a, b, dtype):
            raise GradingFailure(f"{label}: the gradient reaching {name} is wrong or missing: apply the op to the "
                                 "Tensors themselves (ScaledDotProductAttention.apply), not to .data or copies")


def _check_dropout(S, f, rng):
    """dropout_p > 0 drops attention weights, drawn from the caller's generator (dropout_attention)."""
    import solutions as R
    q, k, v = (rng.standard_normal((2, 2, 5, 4)) for _ in range(3))
    label = "dropout_p = 0.5 with a seeded rng, is_causal=True"
    seed = int(rng.integers(2**31))
    kwargs = {"dropout_p": 0.5, "is_causal": True}
    out, got, want, student, reference = _compare_attention(
        label, S, f, q, k, v, {**kwargs, "rng": np.random.default_rng(seed)},
        student_kwargs={**kwargs, "rng": student_rng(seed)})
    if not close(got, want.data):
        kept = np.array(R.ops.scaled_dot_product_attention(R.Tensor(q), R.Tensor(k), R.Tensor(v), is_causal=True).data)
        if close(got, kept):
            raise GradingFailure(f"{label}: dropout_p is ignored: with dropout_p > 0 the weights are dropped while "
                                 "training (return dropout_attention(...))")
        raise GradingFailure(f"{label}: the dropped weights must be drawn from the caller's rng (pass dropout_p and "
                             "rng on to dropout_attention), so that a seeded generator reproduces them")
    _check_gradients(label, S, out, want, student, reference, rng, np.float64)
    label = "dropout_p = 1 (every weight dropped)"
    zero = run(f"{label}: scaled_dot_product_attention",
               lambda: f(S.Tensor(q), S.Tensor(k), S.Tensor(v), dropout_p=1.0, rng=student_rng(seed)))
    if not isinstance(zero, S.Tensor) or not np.all(np.asarray(zero.data) == 0):
        raise GradingFailure(f"{label}: with every weight dropped the output is 0; dropout_p is passed on to "
                             "dropout_attention as it is")


@graded("a07-attention", "solutions.ops.attention:scaled_dot_product_attention", points=3)
def check_attention(scaled_dot_product_attention, rng):
    S = student_engine()
    f = scaled_dot_product_attention
    with time_limit(TIME_LIMIT, _slow("scaled_dot_product_attention")):
        for label, q, k, v, kwargs in _attention_cases(rng):
            dtype = q.dtype
            out, got, want, student, reference = _compare_attention(label, S, f, q, k, v, kwargs)
            if not close(got, want.data, dtype):
                raise GradingFailure(f"{label}: " + _attention_hint(got, q, k, v, kwargs, dtype))
            _check_gradients(label, S, out, want, student, reference, rng, dtype)
        _check_dropout(S, f, rng)
        q, k, v = (S.Tensor(rng.standard_normal((2, 3, 4))) for _ in range(3))
        error = raises(f, q, k, v, attn_mask=np.ones((3, 3), dtype=bool), is_causal=True)
        if not isinstance(error, ValueError):
            raise GradingFailure("attn_mask together with is_causal=True must raise a ValueError that says to pass "
                                 "one or the other, not both" + ("" if error is None else
                                                                 f" (yours raised {type_name(error)})"))
        for p in (-0.1, 1.5):
            if not isinstance(raises(f, q, k, v, dropout_p=p), ValueError):
                raise GradingFailure("a dropout_p outside [0, 1] must raise a ValueError")
        # a (L, D) query and a (2, L, S) mask: the scores are (L, S), and the mask would add an axis
        q, k, v = (S.Tensor(rng.standard_normal(shape)) for shape in ((3, 4), (5, 4), (5, 2)))
        wide = np.ones((2, 3, 5), dtype=bool)
        error = raises(f, q, k, v, attn_mask=wide)
        if not isinstance(error, ValueError):
            raise GradingFailure("a mask that does not broadcast to the scores' shape (a (2, L, S) mask for (L, S) "
                                 "scores) must raise a ValueError (broadcast_mask checks it); yours "
                                 + ("returned an output with an extra batch axis" if error is None else
                                    f"raised {type_name(error)}"))


# --------------------------------------------------------------------------------------------
# attention_backward
# --------------------------------------------------------------------------------------------
def _backward_cases(rng):
    """(label, q, k, v, additive mask or None, scale, needs, second order)."""
    out = []

    def qkv(qs, ks, vs, dtype=np.float64):
        return tuple(rng.standard_normal(s).astype(dtype) for s in (qs, ks, vs))

    out.append(("L = S = 4, D = Dv = 3, no mask", *qkv((2, 4, 3), (2, 4, 3), (2, 4, 3)), None, 1 / math.sqrt(3),
                (True, True, True), True))
    out.append(("L = 3, S = 5, D = 4, Dv = 2, causal mask", *qkv((2, 3, 4), (2, 5, 4), (2, 5, 2)), _causal(3, 5),
                0.5, (True, True, True), False))
    keep = rng.random((2, 1, 4, 4)) < 0.7
    keep[..., 0] = True
    keep[1, 0, 2] = False
    out.append(("heads (N, H, L, D) = (2, 3, 4, 4), a padding mask with a fully masked row",
                *qkv((2, 3, 4, 4), (2, 3, 4, 4), (2, 3, 4, 4)), _additive(keep, np.float64), 0.5,
                (True, True, True), True))
    out.append(("K and V shared by every head (broadcast batch axes)", *qkv((2, 3, 4, 5), (2, 1, 4, 5), (2, 1, 4, 3)),
                _causal(4, 4), 1 / math.sqrt(5), (True, True, True), False))
    for needs in ((False, False, True), (False, True, False), (True, False, False), (False, True, True)):
        wanted = ", ".join(n for n, w in zip(("dQ", "dK", "dV"), needs, strict=True) if w)
        out.append((f"only {wanted} needed (needs = {needs})", *qkv((2, 4, 3), (2, 5, 3), (2, 5, 2)), _causal(4, 5),
                    0.6, needs, False))
    out.append(("float32, heads, causal", *qkv((2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8), np.float32),
                _causal(4, 4, np.float32), 1 / math.sqrt(8), (True, True, True), False))
    return out


def _backward_hint(name: str, got: np.ndarray, q, k, v, p, g, scale, dtype) -> str:
    sw = np.swapaxes
    dp = g @ sw(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    if name == "value":
        if got.shape == (p @ g).shape and close(got, p @ g, dtype):
            return "dV = P^T G: transpose P (its last two axes) before the product"
        return "wrong dV; dV = P^T G"
    other = k if name == "query" else q
    plain = p * dp
    candidates = [(ds, "the scale s multiplies the scores, so dQ and dK are multiplied by it too"),
                  (ds * scale * scale, "the scale is applied twice: dS = s * (softmax VJP), once"),
                  (plain * scale, "the softmax's VJP is P * (dP - rowsum(dP * P)), not P * dP: the weights of a "
                                  "row are coupled by the normalization"),
                  (p * (dp - (dp * p).sum(axis=-2, keepdims=True)) * scale,
                   "the rowsum in the softmax's VJP is along the last axis (the keys)")]
    for d, message in candidates:
        cand = d @ other if name == "query" else sw(d, -1, -2) @ other
        if cand.shape == got.shape and close(got, cand, dtype):
            return message
    if name == "key":
        wrong = (ds * scale) @ q
        if wrong.shape == got.shape and close(got, wrong, dtype):
            return "dK = s dS^T Q: transpose dS (its last two axes), the keys are its columns"
    if name == "query":
        wrong = (ds * scale) @ q if q.shape[-2] == k.shape[-2] else None
        if wrong is not None and wrong.shape == got.shape and close(got, wrong, dtype):
            return "dQ = s dS K: the product is with the keys, each score being a query's dot product with a key"
    return f"wrong d{name[0].upper()}; dQ = s dS K, dK = s dS^T Q with dS = P * (dP - rowsum(dP * P)), dP = G V^T"


@graded("a07-attention-backward", "solutions.ops.attention:attention_backward", points=4)
def check_attention_backward(attention_backward, rng):
    import solutions as R
    S = student_engine()
    f = attention_backward
    reference = judged().reference()
    SA = _student_attention()
    RA = _reference_attention()
    with time_limit(TIME_LIMIT, _slow("attention_backward")):
        for label, q, k, v, mask, scale, needs, twice in _backward_cases(rng):
            dtype = q.dtype
            L = q.shape[-2]
            g = rng.standard_normal(np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (L, v.shape[-1])).astype(dtype)
            qs, ks, vs = (S.Tensor(a.copy(), requires_grad=True) for a in (q, k, v))
            ps = SA.attention_weights(qs, ks, mask, scale)
            got = run(f"{label}: attention_backward", f, S.Tensor(g.copy()), qs, ks, vs, ps, scale, needs,
                      hint=lambda e: "check which operands need a transpose of their last two axes"
                      if "matmul" in str(e) or "shape" in str(e) else None)
            qr, kr, vr = (R.Tensor(a.copy(), requires_grad=True) for a in (q, k, v))
            pr = RA.attention_weights(qr, kr, mask, scale)
            want = reference(R.Tensor(g.copy()), qr, kr, vr, pr, scale, needs)
            if isinstance(got, list):
                got = tuple(got)
            if not isinstance(got, tuple) or len(got) != 3:
                raise GradingFailure(f"{label}: attention_backward returns the tuple (dq, dk, dv)")
            P = np.array(pr.data, dtype=np.float64)
            for name, x, mine, ref, needed in zip(("query", "key", "value"), (q, k, v), got, want, needs, strict=True):
                if not needed:
                    continue
                if mine is None:
                    raise GradingFailure(f"{label}: the gradient of {name} is None, but needs asks for it: compute dS "
                                         "whenever dQ or dK is wanted, and each gradient whenever its own entry of "
                                         "needs is True, whatever the others are")
                if isinstance(mine, np.ndarray) or not isinstance(mine, S.Tensor):
                    raise GradingFailure(f"{label}: the gradient of {name} is {type_name(mine)}; return Tensors "
                                         "built with Tensor operations (matmul, swapaxes, *, sum)")
                data = np.array(mine.data, dtype=np.float64)
                if data.shape != x.shape:
                    if len(data.shape) == len(x.shape) and x.shape[:-2] != data.shape[:-2]:
                        raise GradingFailure(f"{label}: the gradient of {name} keeps the broadcast batch axes: a K or "
                                             "V shared by every head receives the sum over the heads (sum_to)")
                    raise GradingFailure(f"{label}: the gradient of {name} must have {name}'s shape; check which "
                                         "operands need a transpose of their last two axes")
                if not close(data, ref.data, dtype):
                    raise GradingFailure(f"{label}: " + _backward_hint(
                        name, data, *(a.astype(np.float64) for a in (q, k, v)), P, g.astype(np.float64), scale,
                        dtype))
            if twice:
                case = Case(label, [q, k, v], lambda E, a, b, c, m=mask, s=scale:
                            E.ops.attention.ScaledDotProductAttention.apply(a, b, c, mask=m, scale=s),
                            names=("query", "key", "value"))
                upstream = rng.standard_normal(g.shape)
                mine2 = run(f"{label} with create_graph=True: attention_backward", second_order, S, case, upstream,
                            (True, True, True))
                want2 = second_order(R, case, upstream, (True, True, True))
                if not all(close(a, b, dtype) for a, b in zip(mine2, want2, strict=True)):
                    raise GradingFailure(f"{label}: gradients of your gradients (create_graph=True) are wrong: build "
                                         "the gradients from Tensor operations on grad, q, k, v and p, not from "
                                         ".data arrays or new Tensors")
