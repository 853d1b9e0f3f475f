"""Hidden checks of a07_attention: the pieces of a transformer and their backward passes.

The exercises are functions of `solutions/ops/attention.py` (causal_mask, masked_softmax_array,
MaskedSoftmax.backward, scaled_dot_product_attention, attention_backward, split_heads,
merge_heads, embedding_backward_array) and `solutions/nn/functional.py` (layer_norm). Each is
judged on its own by the trusted judge: the student's answer runs in the sandbox's engine, where
every other exercise is the reference, on inputs built there (Tensors of that engine); the same
case runs through the reference here and only plain data crosses. Cases cover masks broadcast over
batch and heads, additive float masks, fully masked rows, more keys than queries, keys and values
shared by every head (broadcast batch axes), repeated tokens, float32 and gradients of gradients.
Messages name the kind of mistake (the classic ones by name: a scale of 1/D, a mask added after the
softmax, the wrong axis, heads merged out of order, a causal mask off by one, an embedding gradient
assigned instead of accumulated, layer norm over the batch), never the hidden inputs or values.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from autograder.judge.checks import (
    Case,
    Context,
    GradingFailure,
    check_op,
    close,
    graded,
    judged,
    run,
    second_order,
    student_engine,
    student_module,
    time_limit,
    type_name,
)

TIME_LIMIT = 30.0


def _slow(name: str) -> str:
    return f"{name}: the checks took more than {TIME_LIMIT:g} s on small inputs; is there an endless loop?"


def _dtype_name(dtype) -> str:
    return np.dtype(dtype).name


def _reference_attention():
    return importlib.import_module("solutions.ops.attention")


def _student_attention():
    return student_module("solutions.ops.attention")


def _raises(f, *args, **kwargs):
    """The exception f raises (None if it returns); a student's exception also is its builtin class."""
    try:
        f(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 (the student's code: any exception is an answer here)
        return error
    return None


def _additive(mask: np.ndarray, dtype) -> np.ndarray:
    out = np.zeros(mask.shape, dtype=dtype)
    out[~mask] = -np.inf
    return out


@np.errstate(all="ignore")
def _softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax along `axis` with fully masked rows as zeros (for the hints' candidates)."""
    m = np.max(z, axis=axis, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(m), m, 0))
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)


def _same(got: np.ndarray, candidate: np.ndarray, dtype) -> bool:
    """Equal values, infinities and nan in the same places (for candidates with -inf entries)."""
    got, candidate = np.asarray(got, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if got.shape != candidate.shape:
        return False
    finite = np.isfinite(candidate)
    if not np.array_equal(np.isfinite(got), finite) or not np.array_equal(got[~finite], candidate[~finite],
                                                                          equal_nan=True):
        return False
    return close(got[finite], candidate[finite], dtype)


def _grads(E, out, inputs, upstream):
    """Gradients (arrays, None where no gradient reached) of <out, upstream> in engine E."""
    if not out.requires_grad:  # built outside the graph (on .data, or from copies): nothing reaches the inputs
        return [None] * len(inputs)
    gs = E.grad(out, list(inputs), E.Tensor(upstream.astype(out.dtype)), allow_unused=True)
    return [None if g is None else np.array(g.data, dtype=np.float64) for g in gs]


# --------------------------------------------------------------------------------------------
# causal_mask
# --------------------------------------------------------------------------------------------
@graded("a07-causal-mask", "solutions.ops.attention:causal_mask", points=1)
def check_causal_mask(causal_mask, rng):
    f = causal_mask
    reference = judged().reference()
    cases = [("a square mask, L = 6", (6,)), ("a single position", (1,)), ("L = 4 with S = 4 given", (4, 4)),
             ("more keys than queries, (L, S) = (3, 7)", (3, 7)), ("more queries than keys, (L, S) = (6, 2)", (6, 2))]
    with time_limit(TIME_LIMIT, _slow("causal_mask")):
        for label, args in cases:
            got = run(f"{label}: causal_mask", f, *args)
            want = reference(*args)
            if not isinstance(got, np.ndarray):
                raise GradingFailure(f"{label}: causal_mask returned {type_name(got)}; return an (L, S) bool ndarray")
            if got.shape != want.shape:
                raise GradingFailure(f"{label}: the mask must have shape (L, S) (S defaults to L)")
            if got.dtype != np.bool_:
                raise GradingFailure(f"{label}: the mask must be a bool array (True = attend), got {got.dtype}")
            if np.array_equal(got, want):
                continue
            L, S = want.shape
            ones = np.ones((L, S), dtype=bool)
            if np.array_equal(got, np.tril(ones, -1)):
                raise GradingFailure(f"{label}: the causal mask is off by one: it hides the diagonal, but query i "
                                     "attends key i itself (True where j <= i)")
            if np.array_equal(got, np.tril(ones, 1)):
                raise GradingFailure(f"{label}: the causal mask is off by one: query i also sees key i + 1, the very "
                                     "token it must predict (True where j <= i)")
            if any(np.array_equal(got, m) for m in (~want, np.triu(ones), np.triu(ones, 1))):
                raise GradingFailure(f"{label}: the mask lets queries see the future: True where key j is in the "
                                     "past or present of query i (j <= i), False above the diagonal")
            if S != L and np.array_equal(got, np.tril(ones, S - L)):
                raise GradingFailure(f"{label}: with S != L the mask stays aligned at the top left (j <= i), as "
                                     "PyTorch's is_causal is, not at the bottom right")
            raise GradingFailure(f"{label}: wrong values; True exactly where j <= i")


# --------------------------------------------------------------------------------------------
# masked_softmax_array (the forward kernel) and MaskedSoftmax.backward
# --------------------------------------------------------------------------------------------
def _softmax_cases(rng):
    """(label, x, additive mask or None) on arrays; scores, masks and dtypes of a real attention."""
    cases = []
    x = rng.standard_normal((2, 5, 5))
    cases.append(("scores (N, L, S) = (2, 5, 5) with a causal (L, S) mask broadcast over the batch", x,
                  _additive(np.tril(np.ones((5, 5), dtype=bool)), np.float64)))
    x = rng.standard_normal((2, 3, 4, 6))
    keep = rng.random((2, 1, 4, 6)) < 0.7
    keep[:, :, :, 0] = True
    cases.append(("scores (N, H, L, S) with a padding mask (N, 1, L, S) broadcast over the heads", x,
                  _additive(keep, np.float64)))
    cases.append(("scores without a mask", rng.standard_normal((3, 4, 7)), None))
    x = rng.standard_normal((2, 4, 5))
    keep = np.ones((2, 4, 5), dtype=bool)
    keep[1, 2] = False
    keep[0, 0, 1:] = False
    cases.append(("a mask with one fully masked row (nothing to attend to)", x, _additive(keep, np.float64)))
    bias = rng.standard_normal((4, 5))
    bias[:, -1] = -np.inf
    cases.append(("a float mask of finite biases and -inf", rng.standard_normal((3, 4, 5)), bias))
    cases.append(("large scores (hundreds) with a causal mask", rng.standard_normal((2, 4, 4)) * 400,
                  _additive(np.tril(np.ones((4, 4), dtype=bool)), np.float64)))
    x = rng.standard_normal((2, 2, 3, 5)).astype(np.float32)
    cases.append(("float32 scores and mask (L, S) = (3, 5)", x,
                  _additive(np.tril(np.ones((3, 5), dtype=bool)), np.float32)))
    return cases


@graded("a07-masked-softmax", "solutions.ops.attention:masked_softmax_array", points=2)
def check_masked_softmax(masked_softmax_array, rng):
    f = masked_softmax_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("masked_softmax_array")):
        for label, x, mask in _softmax_cases(rng):
            got = run(f"{label}: masked_softmax_array", f, x.copy(), None if mask is None else mask.copy())
            want = reference(x, mask)
            if got is None:
                raise GradingFailure(f"{label}: masked_softmax_array returned None; return the weights")
            if not isinstance(got, np.ndarray):
                raise GradingFailure(f"{label}: masked_softmax_array returned {type_name(got)}; return an ndarray")
            if got.shape != want.shape:
                raise GradingFailure(f"{label}: the weights must have the scores' shape (the mask broadcasts to it)")
            if got.dtype != want.dtype:
                raise GradingFailure(f"{label}: masked_softmax_array returned {got.dtype} for {want.dtype} scores; "
                                     "keep the input's dtype")
            if close(got, want, want.dtype) and np.all(np.isfinite(got)):
                continue
            z = x if mask is None else x + mask
            full = np.isneginf(z).all(axis=-1)
            if mask is not None and np.isneginf(got).any() or \
                    mask is not None and _same(got, _softmax(x) + mask, want.dtype):
                raise GradingFailure(f"{label}: the mask is added after the softmax (-inf weights): add it to the "
                                     "scores before the softmax, so a masked key gets weight 0 and the others "
                                     "renormalize")
            if full.any() and np.isnan(got[full]).any() and np.all(np.isfinite(got[~full])):
                raise GradingFailure(f"{label}: a row whose every entry is masked gives nan (its max is -inf, and "
                                     "-inf - (-inf) is nan); PyTorch returns zeros for it: handle that row")
            if not np.all(np.isfinite(got)):
                raise GradingFailure(f"{label}: the weights overflow to nan/inf for large scores: subtract each "
                                     "row's maximum before np.exp (softmax(z) = softmax(z - c))")
            if mask is not None and close(got, _softmax(x), want.dtype):
                raise GradingFailure(f"{label}: the mask is ignored: add it to the scores before the softmax")
            for axis in range(-x.ndim, -1):
                if close(got, _softmax(z, axis), want.dtype):
                    raise GradingFailure(f"{label}: the softmax is taken over the wrong axis: each query's weights "
                                         "(the last axis, the keys) must sum to 1")
            raise GradingFailure(f"{label}: wrong weights; softmax(x + mask) along the last axis")


def _masked_softmax_call(mask):
    return lambda E, x: E.ops.attention.masked_softmax(x, mask)


@graded("a07-softmax-backward", "solutions.ops.attention:MaskedSoftmax", regions=("backward",), points=2,
        title="MaskedSoftmax.backward")
def check_softmax_backward(MaskedSoftmax, rng):
    cases = [Case(label, [x], _masked_softmax_call(mask), names=("x",), second_order=k in (0, 3))
             for k, (label, x, mask) in enumerate(_softmax_cases(rng)) if not label.startswith("large")]

    def hint(ctx: Context):
        s, g = ctx.out, ctx.g
        if ctx.matches(s * g):
            return ("the outputs of a row are coupled through the normalization: the VJP is s * (g - <g, s>) "
                    "along the last axis, not s * g (only the Jacobian's diagonal)")
        if ctx.matches(s * (g - (g * s).sum())):
            return "<g, s> is taken per row: sum along the last axis (keepdims=True), not over the whole tensor"
        for axis in range(-s.ndim, -1):
            if ctx.matches(s * (g - (g * s).sum(axis=axis, keepdims=True))):
                return ("<g, s> is summed over the wrong axis: the softmax normalized the last axis (the keys), "
                        "so sum along axis -1")
        if ctx.matches(s * (g + (g * s).sum(axis=-1, keepdims=True))):
            return "the sign: the VJP is s * (g - <g, s>)"
        if ctx.matches(g - (g * s).sum(axis=-1, keepdims=True)):
            return "multiply by s: the VJP is s * (g - <g, s>), which also sends nothing to masked entries"
        return "wrong gradient: the VJP of the softmax is s * (g - sum(g * s, axis=-1, keepdims=True))"

    with time_limit(TIME_LIMIT, _slow("MaskedSoftmax.backward")):
        check_op(MaskedSoftmax, "MaskedSoftmax", cases, rng, hint)


# --------------------------------------------------------------------------------------------
# scaled_dot_product_attention (the function) and attention_backward
# --------------------------------------------------------------------------------------------
def _attention_cases(rng):
    """(label, q, k, v, keyword arguments) for scaled_dot_product_attention."""
    out = []

    def qkv(qs, ks, vs, dtype=np.float64):
        return tuple(rng.standard_normal(s).astype(dtype) for s in (qs, ks, vs))

    out.append(("(N, H, L, D) = (2, 2, 4, 8) without a mask", *qkv((2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8)), {}))
    out.append(("is_causal=True with L = S = 5", *qkv((2, 5, 4), (2, 5, 4), (2, 5, 3)), {"is_causal": True}))
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
    out.append(("keys and values shared by every head (K, V of shape (N, 1, S, D))",
                *qkv((2, 3, 4, 4), (2, 1, 5, 4), (2, 1, 5, 3)), {"is_causal": True}))
    out.append(("float32 with is_causal=True", *qkv((2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8), np.float32),
                {"is_causal": True}))
    return out


def _attention_hint(label, got, q, k, v, kwargs, dtype) -> str:
    import solutions as R
    attention = R.ops.scaled_dot_product_attention
    D = q.shape[-1]

    def candidate(**changes):
        kw = {**kwargs, **changes}
        return np.array(attention(R.Tensor(q), R.Tensor(k), R.Tensor(v), **kw).data)

    if "scale" not in kwargs and close(got, candidate(scale=1.0 / D), dtype):
        return ("the scores are scaled by 1/D instead of 1/sqrt(D): a dot product of D unit-variance terms has "
                "variance D, so its standard deviation is sqrt(D)")
    if "scale" not in kwargs and close(got, candidate(scale=1.0), dtype):
        return "the scores are not scaled: multiply Q K^T by 1/sqrt(D) (or by `scale` when it is given)"
    if "scale" in kwargs and close(got, candidate(scale=1.0 / math.sqrt(D)), dtype):
        return "a scale given by the caller replaces 1/sqrt(D): use it (as a float) when it is not None"
    if kwargs.get("is_causal"):
        L, S = q.shape[-2], k.shape[-2]
        future = np.triu(np.ones((L, S), dtype=bool))
        if close(got, candidate(is_causal=False, attn_mask=future), dtype):
            return "is_causal=True: query i attends keys j <= i (the past), not j >= i"
        if close(got, candidate(is_causal=False), dtype):
            return "is_causal=True is ignored: build causal_mask(L, S) as an additive mask"
    if "attn_mask" in kwargs and close(got, candidate(attn_mask=None), dtype):
        return "attn_mask is ignored: turn it into an additive mask (additive_mask) and pass it to the op"
    if "attn_mask" in kwargs and np.asarray(kwargs["attn_mask"]).dtype == bool and \
            close(got, candidate(attn_mask=~np.asarray(kwargs["attn_mask"])), dtype):
        return "a bool mask is True where a query may attend (as PyTorch's), not where it may not"
    return "wrong values; softmax(Q K^T * scale + mask) V"


@graded("a07-attention", "solutions.ops.attention:scaled_dot_product_attention", points=3)
def check_attention(scaled_dot_product_attention, rng):
    import solutions as R
    S = student_engine()
    f = scaled_dot_product_attention
    with time_limit(TIME_LIMIT, _slow("scaled_dot_product_attention")):
        for label, q, k, v, kwargs in _attention_cases(rng):
            dtype = q.dtype
            qs, ks, vs = (S.Tensor(a.copy(), requires_grad=True) for a in (q, k, v))
            out = run(f"{label}: scaled_dot_product_attention", lambda: f(qs, ks, vs, **kwargs))  # noqa: B023
            qr, kr, vr = (R.Tensor(a.copy(), requires_grad=True) for a in (q, k, v))
            want = R.ops.scaled_dot_product_attention(qr, kr, vr, **kwargs)
            if not isinstance(out, S.Tensor):
                raise GradingFailure(f"{label}: scaled_dot_product_attention returned {type_name(out)}; return the "
                                     "op's Tensor")
            got = np.array(out.data)
            if got.shape != want.shape:
                raise GradingFailure(f"{label}: the output must have shape (..., L, Dv), the batch axes broadcast")
            if got.dtype != want.dtype:
                raise GradingFailure(f"{label}: the output is {got.dtype} for {want.dtype} inputs; build the "
                                     "additive mask in the queries' dtype")
            if not close(got, want.data, dtype):
                raise GradingFailure(f"{label}: " + _attention_hint(label, got, q, k, v, kwargs, dtype))
            upstream = rng.standard_normal(want.shape)
            mine = run(f"{label}: the gradients through your output", _grads, S, out, [qs, ks, vs], upstream)
            ref = _grads(R, want, [qr, kr, vr], upstream)
            for name, a, b in zip(("query", "key", "value"), mine, ref, strict=True):
                if a is None or not close(a, b, dtype):
                    raise GradingFailure(f"{label}: the gradient reaching {name} is wrong or missing: apply the "
                                         "op to the Tensors themselves (ScaledDotProductAttention.apply), not to "
                                         ".data or copies")
        q, k, v = (S.Tensor(rng.standard_normal((2, 3, 4))) for _ in range(3))
        error = _raises(f, q, k, v, attn_mask=np.ones((3, 3), dtype=bool), is_causal=True)
        if not isinstance(error, ValueError):
            raise GradingFailure("attn_mask together with is_causal=True must raise a ValueError that says to pass "
                                 "one or the other, not both" + ("" if error is None else
                                                                 f" (yours raised {type_name(error)})"))
        for p in (-0.1, 1.5):
            if not isinstance(_raises(f, q, k, v, dropout_p=p), ValueError):
                raise GradingFailure("a dropout_p outside [0, 1] must raise a ValueError")


def _backward_cases(rng):
    """(label, q, k, v, additive mask or None, scale, needs, second order)."""
    out = []

    def qkv(qs, ks, vs, dtype=np.float64):
        return tuple(rng.standard_normal(s).astype(dtype) for s in (qs, ks, vs))

    def causal(L, S, dtype=np.float64):
        return _additive(np.tril(np.ones((L, S), dtype=bool)), dtype)

    out.append(("L = S = 4, D = Dv = 3, no mask", *qkv((2, 4, 3), (2, 4, 3), (2, 4, 3)), None, 1 / math.sqrt(3),
                (True, True, True), True))
    out.append(("L = 3, S = 5, D = 4, Dv = 2, causal mask", *qkv((2, 3, 4), (2, 5, 4), (2, 5, 2)), causal(3, 5),
                0.5, (True, True, True), False))
    keep = rng.random((2, 1, 4, 4)) < 0.7
    keep[..., 0] = True
    keep[1, 0, 2] = False
    out.append(("heads (N, H, L, D) = (2, 3, 4, 4), a padding mask with a fully masked row",
                *qkv((2, 3, 4, 4), (2, 3, 4, 4), (2, 3, 4, 4)), _additive(keep, np.float64), 0.5,
                (True, True, True), True))
    out.append(("K and V shared by every head (broadcast batch axes)", *qkv((2, 3, 4, 5), (2, 1, 4, 5), (2, 1, 4, 3)),
                causal(4, 4), 1 / math.sqrt(5), (True, True, True), False))
    out.append(("only dV needed (needs = (False, False, True))", *qkv((2, 4, 3), (2, 5, 3), (2, 5, 2)), None, 0.6,
                (False, False, True), False))
    out.append(("float32, heads, causal", *qkv((2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8), np.float32),
                causal(4, 4, np.float32), 1 / math.sqrt(8), (True, True, True), False))
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
                    raise GradingFailure(f"{label}: the gradient of {name} is None, but needs asks for it")
                if isinstance(mine, np.ndarray) or not isinstance(mine, S.Tensor):
                    raise GradingFailure(f"{label}: the gradient of {name} is {type_name(mine)}; return Tensors "
                                         "built with Tensor operations (matmul, swapaxes, *, sum)")
                data = np.array(mine.data, dtype=np.float64)
                if data.shape != x.shape:
                    if len(data.shape) == len(x.shape) and x.shape[:-2] != data.shape[:-2]:
                        raise GradingFailure(f"{label}: the gradient of {name} keeps the broadcast batch axes: a K or "
                                             "V shared by every head receives the sum over the heads (_sum_to)")
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


# --------------------------------------------------------------------------------------------
# split_heads, merge_heads
# --------------------------------------------------------------------------------------------
def _reshuffle_check(label, name, f, S, x, want_fn, hints, rng):
    """Forward values and the gradient (the inverse movement) of a reshape/transpose function."""
    import solutions as R
    xs = S.Tensor(x.copy(), requires_grad=True)
    out = run(f"{label}: {name}", f, xs)
    if not isinstance(out, S.Tensor):
        raise GradingFailure(f"{label}: {name} returned {type_name(out)}; return a Tensor (the engine's reshape and "
                             "transpose)")
    xr = R.Tensor(x.copy(), requires_grad=True)
    want = want_fn(R, xr)
    got = np.array(out.data)
    if got.shape != want.shape:
        raise GradingFailure(f"{label}: {name} returned the wrong shape")
    if not np.array_equal(got, want.data):
        for candidate, message in hints:
            c = candidate(x)
            if c.shape == got.shape and np.array_equal(got, c):
                raise GradingFailure(f"{label}: {message}")
        raise GradingFailure(f"{label}: wrong values: head h owns features h*D .. (h+1)*D - 1 of every token")
    upstream = rng.standard_normal(want.shape)
    mine = run(f"{label}: the gradient through {name}", _grads, S, out, [xs], upstream)[0]
    if mine is None or not np.allclose(mine, _grads(R, want, [xr], upstream)[0]):
        raise GradingFailure(f"{label}: no correct gradient reaches x through {name}: use the engine's reshape and "
                             "transpose on the Tensor (their gradients undo them), not .data")


@graded("a07-split-heads", "solutions.ops.attention:split_heads", points=1)
def check_split_heads(split_heads, rng):
    S = student_engine()
    f = split_heads
    cases = [("(N, T, E) = (2, 5, 12), 3 heads", (2, 5, 12), 3), ("(N, T, E) = (1, 4, 8), 2 heads", (1, 4, 8), 2),
             ("one head", (2, 3, 4), 1), ("a head per feature", (2, 3, 4), 4)]
    with time_limit(TIME_LIMIT, _slow("split_heads")):
        for label, shape, H in cases:
            N, T, E = shape
            D = E // H
            hints = [
                (lambda a, N=N, T=T, D=D, H=H: a.reshape(N, T, D, H).transpose(0, 3, 1, 2),
                 "head h must own the contiguous features h*D .. (h+1)*D - 1 (PyTorch's layout), not every H-th "
                 "feature: reshape to (N, T, H, D)"),
                (lambda a, N=N, T=T, D=D, H=H: a.reshape(N, H, T, D),
                 "a reshape alone to (N, H, T, D) mixes tokens into heads: reshape to (N, T, H, D), then swap the "
                 "T and H axes (transpose)"),
            ]
            _reshuffle_check(label, "split_heads", lambda x, H=H: f(x, H), S,  # noqa: B023
                             rng.standard_normal(shape), lambda E_, x, H=H: E_.ops.split_heads(x, H), hints, rng)
        out = run("an ndarray input: split_heads", f, np.arange(24.0).reshape(1, 4, 6), 2)
        if not isinstance(out, S.Tensor) or out.shape != (1, 2, 4, 3):
            raise GradingFailure("split_heads of an ndarray: turn it into a Tensor first (as_tensor) and return "
                                 "a Tensor of shape (N, H, T, D)")
        for label, args in [("E = 10 with 4 heads", (np.ones((2, 3, 10)), 4)), ("0 heads", (np.ones((2, 3, 6)), 0)),
                            ("a 2-D input", (np.ones((3, 6)), 2))]:
            error = _raises(f, S.Tensor(args[0]), args[1])
            if not isinstance(error, ValueError):
                raise GradingFailure(f"{label}: split_heads must raise a ValueError naming the problem")
            if label.startswith("E =") and "head" not in str(error).lower():
                raise GradingFailure(f"{label}: raise your own ValueError naming E and num_heads (the head count "
                                     "must divide E), before reshape fails with a message about elements")


@graded("a07-merge-heads", "solutions.ops.attention:merge_heads", points=1)
def check_merge_heads(merge_heads, rng):
    S = student_engine()
    cases = [("(N, H, T, D) = (2, 3, 5, 4)", (2, 3, 5, 4)), ("(N, H, T, D) = (1, 2, 4, 2)", (1, 2, 4, 2)),
             ("one head", (2, 1, 3, 4)), ("D = 1", (2, 4, 3, 1))]
    with time_limit(TIME_LIMIT, _slow("merge_heads")):
        for label, shape in cases:
            N, H, T, D = shape
            hints = [
                (lambda a, N=N, T=T, H=H, D=D: a.transpose(0, 2, 3, 1).reshape(N, T, H * D),
                 "the heads are merged in the wrong order: each head's D features must stay together, head 0's "
                 "first (transpose to (N, T, H, D), then reshape), not interleaved"),
                (lambda a, N=N, T=T, H=H, D=D: a.reshape(N, T, H * D),
                 "a reshape alone mixes tokens and heads: move the head axis next to D first (transpose to "
                 "(N, T, H, D)), then reshape"),
            ]
            _reshuffle_check(label, "merge_heads", merge_heads, S, rng.standard_normal(shape),
                             lambda E_, x: E_.ops.merge_heads(x), hints, rng)
        if not isinstance(_raises(merge_heads, S.Tensor(np.ones((2, 3, 4)))), ValueError):
            raise GradingFailure("a 3-D input: merge_heads must raise a ValueError naming the shape")


# --------------------------------------------------------------------------------------------
# embedding_backward_array
# --------------------------------------------------------------------------------------------
@graded("a07-embedding-backward", "solutions.ops.attention:embedding_backward_array", points=2)
def check_embedding_backward(embedding_backward_array, rng):
    import solutions as R
    S = student_engine()
    f = embedding_backward_array
    reference = judged().reference()
    cases = [("ids (N, T) = (2, 6) with repeated tokens, V = 5, E = 3", (2, 6), 5, 3, np.float64),
             ("every token the same (one id repeated 8 times)", (1, 8), 4, 2, np.float64),
             ("ids (N, T) = (3, 5), a vocabulary larger than the batch, V = 20", (3, 5), 20, 4, np.float64),
             ("1-D ids", (7,), 4, 3, np.float64),
             ("float32 gradients", (2, 5), 6, 4, np.float32)]
    with time_limit(TIME_LIMIT, _slow("embedding_backward_array")):
        for label, ids_shape, V, E, dtype in cases:
            ids = np.zeros(ids_shape, dtype=np.int64) if label.startswith("every") else \
                rng.integers(0, min(V, 4) if V < 10 else V, ids_shape)
            g = rng.standard_normal(ids_shape + (E,)).astype(dtype)
            got = run(f"{label}: embedding_backward_array", f, g.copy(), ids.copy(), V)
            want = reference(g, ids, V)
            if not isinstance(got, np.ndarray):
                raise GradingFailure(f"{label}: embedding_backward_array returned {type_name(got)}; return an ndarray")
            if got.shape != want.shape:
                raise GradingFailure(f"{label}: dW must have shape (num_embeddings, E), one row per token of the "
                                     "table")
            if got.dtype != want.dtype:
                raise GradingFailure(f"{label}: dW is {got.dtype} for {want.dtype} gradients; keep grad's dtype")
            if close(got, want, dtype):
                continue
            last = np.zeros_like(want)
            last[ids.reshape(-1)] = g.reshape(-1, E)
            if close(got, last, dtype):
                raise GradingFailure(f"{label}: a repeated token's gradient is assigned, not accumulated: "
                                     "`dW[ids] += g` (or `=`) keeps only one of its rows (NumPy's buffered fancy "
                                     "indexing); add every one, with np.add.at or a loop")
            raise GradingFailure(f"{label}: wrong dW; row v is the sum of the gradients of every position whose "
                                 "token is v")
        # inside the engine: the embedding's backward runs the kernel
        ids = rng.integers(0, 3, (2, 4))
        w = rng.standard_normal((5, 3))
        upstream = rng.standard_normal((2, 4, 3))
        ws, wr = S.Tensor(w.copy(), requires_grad=True), R.Tensor(w.copy(), requires_grad=True)
        mine = run("the engine's embedding with your kernel", _grads, S, S.ops.embedding(ids, ws), [ws], upstream)[0]
        if mine is None or not close(mine, _grads(R, R.ops.embedding(ids, wr), [wr], upstream)[0]):
            raise GradingFailure("the engine's embedding, running your kernel in its backward, gives a wrong "
                                 "gradient: the kernel must not depend on anything but its arguments")


# --------------------------------------------------------------------------------------------
# layer_norm
# --------------------------------------------------------------------------------------------
def _layer_norm_hint(got, x, shape, w, b, eps, dtype) -> str:
    k = len(shape)
    axes = tuple(range(x.ndim - k, x.ndim))
    flat = x.reshape(-1, int(np.prod(shape)))
    over_batch = ((flat - flat.mean(axis=0)) / np.sqrt(flat.var(axis=0) + eps)).reshape(x.shape)
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + eps)
    ww = 1.0 if w is None else w
    bb = 0.0 if b is None else b
    candidates = [
        (over_batch * ww + bb, "layer norm is normalized over the batch (each feature across the samples): that is "
                               "batch norm; layer norm normalizes each sample over its own last axes"),
        ((x_hat + bb) * ww, "the bias is added before the weight scales: gamma * x_hat + beta"),
        ((x - mu) / np.sqrt(x.var(axis=axes, ddof=1, keepdims=True) + eps) * ww + bb,
         "use the biased variance (divide by D, not D - 1), as PyTorch does"),
        ((x - mu) / (np.sqrt(var) + eps) * ww + bb, "eps goes inside the square root: sqrt(var + eps)"),
    ]
    for candidate, message in candidates:
        if close(got, candidate, dtype):
            return message
    return "wrong values; (x - mean) / sqrt(var + eps) over the last axes, then weight * x_hat + bias"


@graded("a07-layer-norm", "solutions.nn.functional:layer_norm", points=3)
def check_layer_norm(layer_norm, rng):
    import solutions as R
    S = student_engine()
    f = layer_norm
    reference = judged().reference()
    cases = [("tokens (N, T, E) = (2, 3, 6) over E, with weight and bias", (2, 3, 6), 6, True, True, 1e-5),
             ("(M, E) = (5, 4) with weight only, eps = 0.1", (5, 4), (4,), True, False, 0.1),
             ("over the last two axes (2, 3, 4) -> normalized_shape (3, 4), with bias only", (2, 3, 4), (3, 4), False,
              True, 1e-5),
             ("without weight and bias, (4, 7)", (4, 7), 7, False, False, 1e-5),
             ("float32 tokens (2, 4, 8)", (2, 4, 8), 8, True, True, 1e-5)]
    with time_limit(TIME_LIMIT, _slow("layer_norm")):
        for k, (label, shape, norm, affine_w, affine_b, eps) in enumerate(cases):
            dtype = np.float32 if label.startswith("float32") else np.float64
            nshape = (norm,) if isinstance(norm, int) else norm
            x = (rng.standard_normal(shape) * 2 + rng.standard_normal(shape[-1:]) * 3).astype(dtype)
            w = rng.uniform(0.5, 1.5, nshape).astype(dtype) if affine_w else None
            b = rng.standard_normal(nshape).astype(dtype) if affine_b else None
            arrays = [x, w, b]
            sts = [None if a is None else S.Tensor(a.copy(), requires_grad=True) for a in arrays]
            rts = [None if a is None else R.Tensor(a.copy(), requires_grad=True) for a in arrays]
            out = run(f"{label}: layer_norm", f, sts[0], norm, sts[1], sts[2], eps)
            want = reference(rts[0], norm, rts[1], rts[2], eps)
            if not isinstance(out, S.Tensor):
                raise GradingFailure(f"{label}: layer_norm returned {type_name(out)}; return a Tensor built with "
                                     "Tensor operations")
            got = np.array(out.data)
            if got.shape != want.shape:
                raise GradingFailure(f"{label}: layer_norm must keep x's shape")
            if got.dtype != want.dtype:
                raise GradingFailure(f"{label}: layer_norm returned {got.dtype} for {want.dtype} input; keep the dtype")
            if not close(got, want.data, dtype):
                raise GradingFailure(f"{label}: " + _layer_norm_hint(
                    got, x.astype(np.float64), nshape, None if w is None else w.astype(np.float64),
                    None if b is None else b.astype(np.float64), eps, dtype))
            upstream = rng.standard_normal(shape)
            live = [t for t in sts if t is not None]
            mine = run(f"{label}: the gradients through your layer_norm", _grads, S, out, live, upstream)
            ref = _grads(R, want, [t for t in rts if t is not None], upstream)
            names = [n for n, a in zip(("x", "weight", "bias"), arrays, strict=True) if a is not None]
            for name, a, r in zip(names, mine, ref, strict=True):
                if a is None or not close(a, r, dtype):
                    raise GradingFailure(f"{label}: the gradient of {name} is wrong or missing: build layer_norm from "
                                         "Tensor operations on x, weight and bias (never .data), so the engine "
                                         "derives its backward")
            if k == 0:
                case = Case(label, [x, w, b], lambda E, a, ww, bb, n=norm, e=eps:
                            E.nn.functional.layer_norm(a, n, ww, bb, e), names=("x", "weight", "bias"))
                mine2 = run(f"{label} with create_graph=True: layer_norm", second_order, S, case, upstream,
                            (True, True, True))
                want2 = second_order(R, case, upstream, (True, True, True))
                if not all(close(a, b2, dtype) for a, b2 in zip(mine2, want2, strict=True)):
                    raise GradingFailure(f"{label}: gradients of gradients (create_graph=True) through layer_norm are "
                                         "wrong: use Tensor operations only")
        for label, x_shape, norm, wshape in [("normalized_shape (3,) for input (2, 4)", (2, 4), 3, None),
                                             ("normalized_shape (2, 4) for input (4, 2)", (4, 2), (2, 4), None),
                                             ("a weight of shape (3,) for normalized_shape (4,)", (2, 4), 4, (3,))]:
            weight = None if wshape is None else S.Tensor(np.ones(wshape))
            if not isinstance(_raises(f, S.Tensor(np.ones(x_shape)), norm, weight), ValueError):
                raise GradingFailure(f"{label}: layer_norm must raise a ValueError naming the shapes")
