"""Hidden checks of a07_attention: the causal mask, the masked softmax and its VJP."""
from __future__ import annotations

import numpy as np

from autograder.judge.checks import (
    Case,
    Context,
    GradingFailure,
    check_op,
    close,
    graded,
    in_sandbox,
    judged,
    run,
    time_limit,
    type_name,
)

from .common import TIME_LIMIT, _additive, _causal, _kept, _same, _slow, _softmax


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
MASKED_MAXIMUM = "a masked score is its row's largest, by hundreds"


def _softmax_cases(rng):
    """(label, x, additive mask or None) on arrays; scores, masks and dtypes of a real attention."""
    cases = []
    x = rng.standard_normal((2, 5, 5))
    cases.append(("scores (N, L, S) = (2, 5, 5) with a causal (L, S) mask broadcast over the batch", x,
                  _causal(5, 5)))
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
    cases.append(("large scores (hundreds) with a causal mask", rng.standard_normal((2, 4, 4)) * 400, _causal(4, 4)))
    x = rng.standard_normal((2, 3, 5))
    x[:, :, -1] = 1000.0  # the last key is masked from every query: after masking, another score is the max
    cases.append((MASKED_MAXIMUM, x, _causal(3, 5)))
    x = rng.standard_normal((2, 2, 3, 5)).astype(np.float32)
    cases.append(("float32 scores and mask (L, S) = (3, 5)", x, _causal(3, 5, np.float32)))
    return cases


@np.errstate(all="ignore")
def _max_before_mask(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """softmax(x + mask) with the row maximum of x, not of x + mask, subtracted: a masked score far
    above the others leaves exp() nothing but underflow in its row."""
    e = np.exp(x + mask - x.max(axis=-1, keepdims=True))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1)


def _softmax_hint(got, x, mask, want, dtype) -> str:
    """The kind of mistake that gives `got` for softmax(x + mask) (want)."""
    z = x if mask is None else x + mask
    full = np.isneginf(z).all(axis=-1)
    if mask is not None:
        keep = np.broadcast_to(np.isfinite(mask), z.shape)
        lost = (_max_before_mask(x, mask) == 0).all(axis=-1) & (want.sum(axis=-1) > 0.5)
        if lost.any() and ((got == 0) | np.isnan(got))[lost].all() and close(got[~lost], want[~lost], dtype):
            return ("the row maximum is taken before the mask: when a masked score is the row's largest, "
                    "exp(z - max) underflows to 0 for every key that counts; subtract the maximum of x + mask")
        if np.isneginf(got).any() or _same(got, _softmax(x) + mask, dtype):
            return ("the mask is added after the softmax (-inf weights): add it to the scores before the softmax, so "
                    "a masked key gets weight 0 and the others renormalize")
        if close(got, _softmax(x) * keep, dtype):
            return ("the mask is applied after the softmax (the weights multiplied by a 0/1 mask): the masked keys' "
                    "share is lost, so a row no longer sums to 1, and their scores still count in the normalizer; "
                    "add the mask to the scores before the softmax")
    if full.any() and close(got[~full], want[~full], dtype) and close(got[full], _softmax(x)[full], dtype):
        return ("a fully masked row must come out all zeros (nothing to attend to), and yours is the softmax of "
                "its scores as if unmasked: a masked entry was filled with a large finite number (-1e9) instead of "
                "-inf, and softmax(z + c) is softmax(z)")
    if full.any() and np.isnan(got[full]).any() and np.all(np.isfinite(got[~full])):
        return ("a row whose every entry is masked gives nan (its max is -inf, and -inf - (-inf) is nan); PyTorch "
                "returns zeros for it: handle that row")
    if not np.all(np.isfinite(got)):
        return ("the weights overflow to nan/inf for large scores: subtract each row's maximum before np.exp "
                "(softmax(z) = softmax(z - c))")
    if mask is not None and close(got, _softmax(x), dtype):
        return "the mask is ignored: add it to the scores before the softmax"
    for axis in range(-x.ndim, -1):
        if close(got, _softmax(z, axis), dtype):
            return ("the softmax is taken over the wrong axis: each query's weights (the last axis, the keys) must "
                    "sum to 1")
    if close(got, _softmax(z.reshape(-1)).reshape(z.shape), dtype) or close(got, np.exp(z) / np.exp(z).sum(), dtype):
        return ("the sum runs over the whole array: normalize each row on its own (sum along axis -1, "
                "keepdims=True)")
    if (got == 0).all(axis=-1).any() and not full[(got == 0).all(axis=-1)].all():
        return ("rows that have keys to attend to come out all zero: subtract each row's own maximum (axis -1, "
                "keepdims=True), not one maximum of the whole array")
    return "wrong weights; softmax(x + mask) along the last axis"


@graded("a07-masked-softmax", "solutions.ops.attention:masked_softmax_array", points=2)
def check_masked_softmax(masked_softmax_array, rng):
    f = masked_softmax_array
    reference = judged().reference()
    with time_limit(TIME_LIMIT, _slow("masked_softmax_array")):
        for label, x, mask in _softmax_cases(rng):
            there = {"x": (in_sandbox(x), x.copy()), "mask": (in_sandbox(mask), None if mask is None else
                                                                 mask.copy())}
            got = run(f"{label}: masked_softmax_array", f, there["x"][0], there["mask"][0])
            _kept("masked_softmax_array", there, label)
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
            raise GradingFailure(f"{label}: " + _softmax_hint(got, x, mask, want, want.dtype))


def _masked_softmax_call(mask):
    return lambda E, x: E.ops.attention.masked_softmax(x, mask)


def _softmax_backward_exception(error) -> str | None:
    if "broadcast" in str(error):
        return ("<g, s> must keep the summed axis (sum(axis=-1, keepdims=True)) so that it broadcasts against each "
                "row")
    return None


# attention_backward holds the softmax's gradient (dS = P * (dP - <dP, P>)): withheld, or an answer could call it.
@graded("a07-softmax-backward", "solutions.ops.attention:MaskedSoftmax", regions=("backward",), points=2,
        title="MaskedSoftmax.backward", withholds=("a07-attention-backward",))
def check_softmax_backward(MaskedSoftmax, rng):
    cases = [Case(label, [x], _masked_softmax_call(mask), names=("x",), second_order=k in (0, 3))
             for k, (label, x, mask) in enumerate(_softmax_cases(rng))
             if not label.startswith("large") and label != MASKED_MAXIMUM]

    def hint(ctx: Context):
        s, g = ctx.out, ctx.g
        x = ctx.inputs[0]
        if ctx.matches(s * g):
            return ("the outputs of a row are coupled through the normalization: the VJP is s * (g - <g, s>) "
                    "along the last axis, not s * g (only the Jacobian's diagonal)")
        if ctx.matches(s * (g - (g * s).sum())):
            return "<g, s> is taken per row: sum along the last axis (keepdims=True), not over the whole tensor"
        for axis in range(-s.ndim, -1):
            if ctx.matches(s * (g - (g * s).sum(axis=axis, keepdims=True))):
                return ("<g, s> is summed over the wrong axis: the softmax normalized the last axis (the keys), "
                        "so sum along axis -1")
        if s.shape[-1] == s.shape[-2] and ctx.matches(s * (g - np.expand_dims((g * s).sum(axis=-1), -2))):
            return ("<g, s> lost its summed axis and broadcast along the wrong one: sum(axis=-1, keepdims=True) "
                    "keeps one value per row")
        if ctx.matches(s * (g + (g * s).sum(axis=-1, keepdims=True))):
            return "the sign: the VJP is s * (g - <g, s>)"
        if ctx.matches(g - (g * s).sum(axis=-1, keepdims=True)):
            return "multiply by s: the VJP is s * (g - <g, s>), which also sends nothing to masked entries"
        plain = _softmax(x)
        if ctx.matches(plain * (g - (g * plain).sum(axis=-1, keepdims=True))):
            return ("the VJP uses a softmax of x without the mask: use the saved output s (self.output), which is 0 "
                    "at the masked entries")
        return "wrong gradient: the VJP of the softmax is s * (g - sum(g * s, axis=-1, keepdims=True))"

    with time_limit(TIME_LIMIT, _slow("MaskedSoftmax.backward")):
        check_op(MaskedSoftmax, "MaskedSoftmax", cases, rng, hint, exception_hint=_softmax_backward_exception)
