"""Chapter 7's engine: embedding, masked softmax, scaled dot-product attention, heads, the layers
(Embedding, MultiheadAttention, positional encodings, TransformerBlock) and the sorting model.

PyTorch's numbers come from `tests/golden/attention.npz` (written by `golden_attention.py` with
torch 2.13 through `make golden`): every op's value, VJP and Hessian-vector product in float64,
and nn.MultiheadAttention / a pre-norm TransformerEncoderLayer with their own weights loaded
into ours. Property tests draw shapes and masks; the fast kernels must equal the teaching ones.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import solutions as S
from solutions import Tensor, nn, ops
from solutions.ops import kernels
from solutions.testing import assert_close, gradcheck, gradgradcheck

from support import GOLDEN
from support.strategies import leaf, seeds

GOLDEN = GOLDEN
sys.path.insert(0, str(GOLDEN))
import golden_attention  # noqa: E402  (defines the cases; torch is imported by make() alone)

CASES = golden_attention.CASES


def _load() -> dict[str, dict[str, np.ndarray]]:
    fixtures: dict[str, dict[str, np.ndarray]] = {}
    with np.load(GOLDEN / "attention.npz") as npz:
        for key in npz.files:
            case, name = key.split("/", 1)
            fixtures.setdefault(case, {})[name] = npz[key]
    return fixtures


FIXTURES = _load()
TIGHT = dict(rtol=1e-9, atol=1e-12)


@pytest.fixture(params=["fast", "teaching"])
def kernel_set(request):
    """Run a test with the reference engine's fast kernels and with the teaching ones."""
    if request.param == "teaching":
        with kernels.teaching_kernels():
            yield request.param
    else:
        yield request.param


# --------------------------------------------------------------------------------------------
# Golden: the ops
# --------------------------------------------------------------------------------------------
def test_fixtures_are_up_to_date():
    layer_cases = {*golden_attention.MHA, "block_prenorm_causal"}
    missing = sorted((set(CASES) | layer_cases) - set(FIXTURES))
    stale = sorted(set(FIXTURES) - set(CASES) - layer_cases)
    assert not missing and not stale, (
        f"attention.npz is out of date (missing {missing}, stale {stale}); run `make golden`")


def _sum_of_products(grads, dirs):
    terms = [(g * d).sum() for g, d in zip(grads, dirs, strict=True) if g is not None]
    total = terms[0] if terms else None
    for t in terms[1:]:
        total = total + t
    return total


@pytest.mark.parametrize("name", sorted(CASES))
def test_ops_match_pytorch(name, kernel_set):
    case, expected = CASES[name], FIXTURES[name]
    derived = ("out", "gout")
    names = [k for k in expected if k not in derived and not k.startswith(("grad_", "dir_", "hess_"))]
    args = {k: Tensor(expected[k], requires_grad=k in case.diff) if expected[k].dtype.kind == "f" else expected[k]
            for k in names}
    out = case.engine_fn(**args)
    assert_close(out, expected["out"], msg=f"{name}: output", **TIGHT)
    xs = [args[k] for k in case.diff]
    grads = S.grad(out, xs, Tensor(expected["gout"]), create_graph=True, allow_unused=True)
    for k, g in zip(case.diff, grads, strict=True):
        assert_close(np.zeros(expected[k].shape) if g is None else g, expected[f"grad_{k}"], msg=f"{name}: d/d{k}",
                     **TIGHT)
    s = _sum_of_products(grads, [expected[f"dir_{k}"] for k in case.diff])
    hess = [None] * len(xs) if s is None or not s.requires_grad else S.grad(s, xs, allow_unused=True)
    for k, h in zip(case.diff, hess, strict=True):
        assert_close(np.zeros(expected[k].shape) if h is None else h, expected[f"hess_{k}"],
                     msg=f"{name}: second derivative d/d{k}", **TIGHT)


# --------------------------------------------------------------------------------------------
# Golden: nn.MultiheadAttention and the pre-norm block, PyTorch's weights loaded into ours
# --------------------------------------------------------------------------------------------
def _params(expected: dict[str, np.ndarray], rename=lambda n: n) -> dict[str, np.ndarray]:
    return {rename(k[len("param."):]): v for k, v in expected.items() if k.startswith("param.")}


@pytest.mark.parametrize("name", sorted(golden_attention.MHA))
def test_multihead_attention_matches_pytorch(name, kernel_set):
    e = FIXTURES[name]
    batch_first, N, L, S_, E, H, kw = golden_attention.MHA[name]
    mha = nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=np.float64, rng=0)
    mha.load_state_dict(_params(e))
    q = Tensor(e["query"], requires_grad=True)
    k, v = (q, q) if kw.get("self") else (Tensor(e["key"], requires_grad=True), Tensor(e["value"], requires_grad=True))
    out, weights = mha(q, k, v, key_padding_mask=e.get("key_padding_mask"), attn_mask=e.get("attn_mask"),
                       need_weights=kw.get("need_weights", True),
                       average_attn_weights=kw.get("average_attn_weights", True))
    assert_close(out, e["out"], msg=f"{name}: output", **TIGHT)
    if "weights" in e:
        assert_close(weights, e["weights"], msg=f"{name}: attention weights", **TIGHT)
    else:
        assert weights is None
    out.backward(e["upstream"])
    assert_close(q.grad, e["grad_query"], msg=f"{name}: d/dquery", **TIGHT)
    if not kw.get("self"):
        assert_close(k.grad, e["grad_key"], msg=f"{name}: d/dkey", **TIGHT)
        assert_close(v.grad, e["grad_value"], msg=f"{name}: d/dvalue", **TIGHT)
    for pname, p in mha.named_parameters():
        assert_close(p.grad, e[f"grad.{pname}"], msg=f"{name}: d/d{pname}", **TIGHT)


BLOCK_NAMES = {"self_attn": "attn", "linear1": "mlp.0", "linear2": "mlp.2", "norm1": "ln1", "norm2": "ln2"}


def _block_name(torch_name: str) -> str:
    head, _, rest = torch_name.partition(".")
    return f"{BLOCK_NAMES[head]}.{rest}"


def test_transformer_block_matches_pytorchs_pre_norm_encoder_layer(kernel_set):
    e = FIXTURES["block_prenorm_causal"]
    N, T, E = e["x"].shape
    block = nn.TransformerBlock(E, int(e["num_heads"]), dtype=np.float64, rng=0)
    block.load_state_dict(_params(e, _block_name))
    x = Tensor(e["x"], requires_grad=True)
    out = block(x)  # causal by default
    assert_close(out, e["out"], msg="block output", **TIGHT)
    out.backward(e["upstream"])
    assert_close(x.grad, e["grad_x"], msg="block d/dx", **TIGHT)
    grads = dict(block.named_parameters())
    for k in e:
        if k.startswith("grad."):
            assert_close(grads[_block_name(k[len("grad."):])].grad, e[k], msg=f"block {k}", **TIGHT)


# --------------------------------------------------------------------------------------------
# Properties: embedding
# --------------------------------------------------------------------------------------------
@given(seed=seeds, V=st.integers(1, 6), E=st.integers(1, 4),
       ids_shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
def test_embedding_gradient_adds_up_repeated_tokens(seed, V, E, ids_shape):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, V, ids_shape)
    w = leaf(rng.standard_normal((V, E)))
    upstream = rng.standard_normal(ids_shape + (E,))
    out = ops.embedding(ids, w)
    assert_close(out, w.data[ids])
    out.backward(upstream)
    expected = np.zeros((V, E))
    for pos in np.ndindex(*ids_shape):  # the definition, one position at a time
        expected[ids[pos]] += upstream[pos]
    assert_close(w.grad, expected, msg="embedding's gradient is a scatter-ADD over repeated ids")
    with kernels.teaching_kernels():
        (g,) = S.grad(ops.embedding(ids, w), w, upstream)
    assert_close(g, expected, msg="teaching scatter-add")
    gradgradcheck(lambda w: ops.embedding(ids, w) ** 2, w)


@given(seed=seeds, small=st.booleans(), E=st.integers(1, 3), M=st.integers(0, 12))
def test_the_fast_embedding_kernel_is_the_scatter_add_on_both_sides_of_its_switch(seed, small, E, M):
    # Up to _fast.ONE_HOT_MAX_ROWS the fast kernel is a one-hot product; past it, sorted sums.
    from solutions.ops import _fast
    from solutions.ops.attention import embedding_backward_array

    rng = np.random.default_rng(seed)
    V = rng.integers(1, 6) if small else _fast.ONE_HOT_MAX_ROWS + 5
    ids = rng.integers(0, V, M)
    if M and not small:
        ids[: M // 2] = V - 1  # repeated tokens at the far end of the table
    grad = rng.standard_normal((M, E)).astype(np.float32)
    got = _fast.embedding_backward_array(grad, ids, V)
    assert got.dtype == np.float32 and got.shape == (V, E)
    assert_close(got, embedding_backward_array(grad, ids, V), rtol=1e-5, atol=1e-6)


def test_an_inf_in_the_upstream_gradient_stays_in_the_row_that_read_it(kernel_set):
    # PyTorch (and the definition) add each position's gradient to its token's row alone. A one-hot
    # product also multiplies it by the zeros of every other row: 0 * inf = nan in rows no token read.
    w = Tensor(np.zeros((4, 2)), requires_grad=True)
    upstream = np.ones((2, 2))
    upstream[0, 0] = np.inf
    ops.embedding(np.array([0, 1]), w).backward(upstream)
    assert np.array_equal(w.grad.data, [[np.inf, 1], [1, 1], [0, 0], [0, 0]]), w.grad.data


def test_embedding_padding_idx_gets_no_gradient_and_the_layer_zeroes_it():
    layer = nn.Embedding(5, 3, padding_idx=2, dtype=np.float64, rng=0)
    assert np.all(layer.weight.data[2] == 0)
    out = layer(np.array([[2, 1, 2]]))
    out.backward(np.ones(out.shape))
    assert np.all(layer.weight.grad.data[2] == 0) and np.all(layer.weight.grad.data[1] == 1)


@pytest.mark.parametrize("ids, error, message", [
    (np.array([[0, 5]]), IndexError, r"embedding: token id 5 at position \(0, 1\) is out of range for an embedding "
                                     r"table of 5 rows \(ids shape \(1, 2\)\)"),
    (np.array([-1]), IndexError, r"token id -1 at position \(0,\)"),
    (np.array([0.0, 1.0]), TypeError, r"embedding: token ids must be integers, got dtype float64"),
])
def test_embedding_errors(ids, error, message):
    with pytest.raises(error, match=message):
        nn.Embedding(5, 3, rng=0)(ids)


def test_embedding_weight_must_be_a_table():
    with pytest.raises(ValueError, match=r"embedding: weight must be a \(V, E\) table, got shape \(5,\)"):
        ops.embedding(np.array([0]), np.zeros(5))


# --------------------------------------------------------------------------------------------
# Properties: masked softmax and attention
# --------------------------------------------------------------------------------------------
@given(seed=seeds, shape=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4)))
def test_masked_softmax_rows(seed, shape):
    rng = np.random.default_rng(seed)
    x = leaf(rng.uniform(-3, 3, shape))
    keep = rng.random(shape[-2:]) < 0.6  # (L, S), broadcast over the batch; some rows fully masked
    s = ops.masked_softmax(x, keep)
    assert not np.isnan(s.data).any(), "a fully masked row must give zeros, not nan"
    assert np.all(s.data[..., ~keep] == 0), "masked entries get weight exactly 0"
    sums = s.data.sum(axis=-1)
    assert_close(sums, np.broadcast_to(keep.any(axis=-1).astype(float), sums.shape))
    assert_close(s, ops.masked_softmax(x, np.where(keep, 0.0, -np.inf)), msg="bool and additive masks agree")
    gradcheck(lambda x: ops.masked_softmax(x, keep), x)
    gradgradcheck(lambda x: ops.masked_softmax(x, keep), x)


attention_shapes = st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 4), st.integers(1, 4),
                             st.integers(1, 3), st.integers(1, 3))  # N, H, L, S, D, Dv


@given(seed=seeds, dims=attention_shapes, causal=st.booleans())
@pytest.mark.slow
def test_attention_is_softmax_scores_times_values(seed, dims, causal):
    N, H, L, S_, D, Dv = dims
    rng = np.random.default_rng(seed)
    q, k, v = (leaf(rng.standard_normal(s)) for s in ((N, H, L, D), (N, H, S_, D), (N, H, S_, Dv)))
    mask = None if causal else rng.random((N, 1, L, S_)) < 0.7  # broadcast over heads
    out = ops.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    keep = np.tril(np.ones((L, S_), dtype=bool)) if causal else mask
    scores = np.where(keep, q.data @ k.data.swapaxes(-1, -2) / np.sqrt(D), -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p = np.nan_to_num(p / p.sum(axis=-1, keepdims=True))  # fully masked rows: 0
    assert_close(out, p @ v.data, msg="softmax(QK^T/sqrt(D) + M) V")

    def f(q, k, v):
        return ops.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)

    gradcheck(f, q, k, v)
    gradgradcheck(f, q, k, v)


@given(seed=seeds, dims=attention_shapes)
def test_fast_attention_equals_the_teaching_op(seed, dims):
    N, H, L, S_, D, Dv = dims
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((N, H, L, D), (1, H, S_, D), (N, 1, S_, Dv))]
    mask = rng.random((L, S_)) < 0.7
    upstream = rng.standard_normal((N, H, L, Dv)).astype(np.float32)
    results = []
    for fast in (True, False):
        kernels.use_fast(fast)
        try:
            q, k, v = (Tensor(a, requires_grad=True) for a in arrays)
            out = ops.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            results.append([out.data, *(g.data for g in S.grad(out, [q, k, v], upstream))])
        finally:
            kernels.use_fast(kernels.default_fast())
    for got, want in zip(*results, strict=True):
        assert got.dtype == want.dtype == np.float32
        assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_causal_mask_hides_the_future():
    # The output at position t must not change when tokens after t change.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 5, 3))
    y = x.copy()
    y[..., 3:, :] += 10.0
    a = ops.scaled_dot_product_attention(x, x, x, is_causal=True).data
    b = ops.scaled_dot_product_attention(y, y, y, is_causal=True).data
    assert_close(a[..., :3, :], b[..., :3, :])
    assert not np.allclose(a[..., 3:, :], b[..., 3:, :])
    assert np.array_equal(ops.causal_mask(2, 3), [[True, False, False], [True, True, False]])


def test_a_mask_that_requires_grad_is_refused_not_silently_detached():
    # The mask is a constant: a learned bias passed as a mask would never train. Every entry point
    # says so; a learned bias is added to the scores (masked_softmax(scores + bias)), which trains.
    q = leaf(np.ones((1, 2, 2)))
    bias = Tensor(np.zeros((2, 2)), requires_grad=True)
    refused = r"the mask .*requires grad.*constant.*masked_softmax\(scores \+ bias\)"
    with pytest.raises(TypeError, match="scaled_dot_product_attention: " + refused):
        ops.scaled_dot_product_attention(q, q, q, attn_mask=bias)
    with pytest.raises(TypeError, match="masked_softmax: " + refused):
        ops.masked_softmax(q, bias)
    mha = nn.MultiheadAttention(2, 1, batch_first=True, dtype=np.float64, rng=0)
    with pytest.raises(TypeError, match="MultiheadAttention: " + refused):
        mha(q, q, q, attn_mask=bias)
    with pytest.raises(TypeError, match="MultiheadAttention: " + refused):
        mha(q, q, q, key_padding_mask=Tensor(np.zeros((1, 2)), requires_grad=True))
    # A constant float mask (a Tensor that does not require grad) is still a mask.
    out = ops.scaled_dot_product_attention(q, q, q, attn_mask=Tensor(np.zeros((2, 2))))
    assert_close(out, ops.scaled_dot_product_attention(q, q, q).data)
    # The way to train a bias: add it to the scores, which the engine differentiates.
    scores = ops.matmul(q, q.swapaxes(-1, -2))
    ops.masked_softmax(scores + bias).sum().backward()
    assert bias.grad is not None


def test_dropout_one_zeroes_the_output():
    q = leaf(np.ones((1, 2, 2)))
    zero = ops.scaled_dot_product_attention(q, q, q, dropout_p=1.0, rng=np.random.default_rng(0))
    assert np.all(zero.data == 0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(q=(2, 3, 4), k=(2, 5, 3), v=(2, 5, 4)), r"query and key must have the same last axis D.*query \(2, 3, 4\) "
                                                   r"and key \(2, 5, 3\)"),
    (dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 6, 4)), r"key and value must have the same number of positions S"),
    (dict(q=(2, 3, 4), k=(3, 5, 4), v=(3, 5, 4)), r"the batch axes of query \(2, 3, 4\), key \(3, 5, 4\)"),
    (dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 4), mask=(3, 4)), r"scaled_dot_product_attention: mask of shape \(3, 4\) "
                                                                r"does not broadcast to the attention scores of shape "
                                                                r"\(2, 3, 5\)"),
    (dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 4), mask=(3, 5), is_causal=True), r"either attn_mask or is_causal"),
])
def test_attention_errors(kwargs, message):
    q, k, v = (np.zeros(kwargs[n]) for n in ("q", "k", "v"))
    mask = np.ones(kwargs["mask"], dtype=bool) if "mask" in kwargs else None
    with pytest.raises(ValueError, match=message):
        ops.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=kwargs.get("is_causal", False))


def test_masked_softmax_mask_must_broadcast():
    with pytest.raises(ValueError, match=r"masked_softmax: mask of shape \(2, 2\) does not broadcast to the attention "
                                         r"scores of shape \(3, 4\)"):
        ops.masked_softmax(np.zeros((3, 4)), np.ones((2, 2), dtype=bool))


# --------------------------------------------------------------------------------------------
# Heads
# --------------------------------------------------------------------------------------------
@given(seed=seeds, N=st.integers(1, 2), T=st.integers(1, 3), H=st.integers(1, 3), D=st.integers(1, 3))
def test_split_and_merge_heads(seed, N, T, H, D):
    x = leaf(np.random.default_rng(seed).standard_normal((N, T, H * D)))
    heads = ops.split_heads(x, H)
    assert heads.shape == (N, H, T, D)
    for h in range(H):  # head h owns features h*D .. (h+1)*D - 1, PyTorch's layout
        assert_close(heads.data[:, h], x.data[..., h * D:(h + 1) * D])
    assert_close(ops.merge_heads(heads), x.data)
    gradcheck(lambda x: ops.split_heads(x, H) ** 2, x)


def test_head_count_errors():
    with pytest.raises(ValueError, match=r"split_heads: embedding width E = 6 \(input shape \(1, 2, 6\)\) is not "
                                         r"divisible by num_heads = 4"):
        ops.split_heads(np.zeros((1, 2, 6)), 4)
    with pytest.raises(ValueError, match=r"MultiheadAttention: embed_dim \(6\) must be divisible by num_heads \(4\)"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match=r"merge_heads: expected \(N, H, T, D\), got shape \(2, 3\)"):
        ops.merge_heads(np.zeros((2, 3)))


# --------------------------------------------------------------------------------------------
# Layers beyond the golden cases
# --------------------------------------------------------------------------------------------
def test_multihead_attention_errors_and_fully_masked_rows():
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=np.float64, rng=0)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 3, 4)))
    with pytest.raises(ValueError, match=r"attn_mask must have shape \(L, S\) = \(3, 3\) or \(N \* num_heads, L, S\) "
                                         r"= \(4, 3, 3\), got \(2, 2\)"):
        mha(x, x, x, attn_mask=np.zeros((2, 2), dtype=bool))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(N, S\) = \(2, 3\)"):
        mha(x, x, x, key_padding_mask=np.zeros((3,), dtype=bool))
    with pytest.raises(ValueError, match=r"query must be \(N, L, E\).*E = embed_dim = 4"):
        mha(Tensor(np.zeros((2, 3, 5))), x, x)
    hidden = np.zeros((3, 3), dtype=bool)
    hidden[1] = True  # query 1 may attend nothing
    for need_weights in (True, False):
        out, w = mha(x, x, x, attn_mask=hidden, need_weights=need_weights)
        assert not np.isnan(out.data).any()
        assert_close(out.data[:, 1], np.broadcast_to(mha.out_proj.bias.data, (2, 4)))  # zero heads -> the bias
        if need_weights:
            assert np.all(w.data[:, 1] == 0)


def test_multihead_attention_per_head_masks_and_float_masks():
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=np.float64, rng=2)
    x = Tensor(np.random.default_rng(2).standard_normal((2, 3, 4)))
    hidden = ~np.tril(np.ones((3, 3), dtype=bool))  # this layer's convention: True = not allowed
    shared, _ = mha(x, x, x, attn_mask=hidden)
    per_head, _ = mha(x, x, x, attn_mask=np.broadcast_to(hidden, (2 * 2, 3, 3)))
    additive, _ = mha(x, x, x, attn_mask=np.where(hidden, -np.inf, 0.0))
    causal, _ = mha(x, x, x, is_causal=True)
    for other in (per_head, additive, causal):
        assert_close(other, shared.data)
    padded, _ = mha(x, x, x, key_padding_mask=np.array([[False, False, True], [False, False, False]]))
    short, _ = mha(x[:1, :2], x[:1, :2], x[:1, :2])
    assert_close(padded.data[0, :2], short.data[0], msg="a padded key changes nothing")


def test_multihead_attention_returns_the_weights_it_applied_under_dropout():
    # PyTorch returns the dropped-out weights it multiplied the values by, not the softmax before it.
    mha = nn.MultiheadAttention(4, 2, dropout=0.5, batch_first=True, dtype=np.float64, rng=3)
    x = Tensor(np.random.default_rng(3).standard_normal((2, 5, 4)))
    out, w = mha(x, x, x, average_attn_weights=False)
    assert (w.data == 0).any(), "half the weights are dropped"
    v = ops.split_heads(x.data @ mha.in_proj_weight.data[8:].T + mha.in_proj_bias.data[8:], 2)
    heads = ops.merge_heads(w.data @ v.data).data
    assert_close(out, heads @ mha.out_proj.weight.data.T + mha.out_proj.bias.data,
                 msg="the output is the returned weights times the values")
    mha.eval()
    _, w = mha(x, x, x, average_attn_weights=False)
    assert_close(w.data.sum(axis=-1), np.ones((2, 2, 5)), msg="no dropout in evaluation")


def test_multihead_attention_unbatched_equals_batched():
    mha = nn.MultiheadAttention(4, 2, dtype=np.float64, rng=1)  # sequence-first (L, N, E)
    x = np.random.default_rng(1).standard_normal((3, 1, 4))
    batched, w = mha(Tensor(x), Tensor(x), Tensor(x))
    single, w1 = mha(Tensor(x[:, 0]), Tensor(x[:, 0]), Tensor(x[:, 0]))
    assert_close(single, batched.data[:, 0])
    assert_close(w1, w.data[0])


def test_sinusoidal_table_is_the_formula():
    from solutions.nn.attention import sinusoidal_table

    E = 6
    table = sinusoidal_table(7, E)
    for t in range(7):
        for i in range(E):
            angle = t / 10000 ** (2 * (i // 2) / E)
            assert table[t, i] == pytest.approx(np.sin(angle) if i % 2 == 0 else np.cos(angle), abs=1e-12)
    pe = nn.SinusoidalPositionalEncoding(5, max_len=4, dtype=np.float64)
    assert_close(pe(Tensor(np.zeros((2, 3, 5)))), np.broadcast_to(sinusoidal_table(4, 5)[:3], (2, 3, 5)))
    with pytest.raises(ValueError, match=r"the sequence has 5 positions .* max_len = 4"):
        pe(Tensor(np.zeros((1, 5, 5))))


def test_learned_positions_are_trained():
    pos = nn.LearnedPositionalEncoding(3, max_len=4, dtype=np.float64, rng=0)
    out = pos(Tensor(np.zeros((2, 2, 3))))
    out.backward(np.ones(out.shape))
    assert_close(pos.weight.grad, np.concatenate([np.full((2, 3), 2.0), np.zeros((2, 3))]))


# --------------------------------------------------------------------------------------------
# The sorting transformer
# --------------------------------------------------------------------------------------------
def test_sorting_data_splits_are_disjoint_and_sorted():
    from solutions import sequence

    rng = np.random.default_rng(0)
    train, test = sequence.make_batch(rng, 500, 6, "train"), sequence.make_batch(rng, 500, 6, "test")
    assert np.all(train[:, 6] == sequence.SEP)
    assert np.array_equal(train[:, 7:], np.sort(train[:, :6], axis=1))
    assert not sequence.held_out(train[:, :6]).any() and sequence.held_out(test[:, :6]).all()
    # Held out by multiset: no held-out line's sorted answer is ever a training target, and every
    # reordering of a held-out line's digits is held out too.
    assert not {tuple(r) for r in train[:, 7:]} & {tuple(r) for r in test[:, 7:]}
    shuffled = rng.permuted(test[:, :6], axis=1)
    assert sequence.held_out(shuffled).all() and not sequence.held_out(rng.permuted(train[:, :6], axis=1)).any()
    assert 0.08 < sequence.held_out(rng.integers(0, 10, (4000, 6))).mean() < 0.17  # about one in eight


def test_sorting_model_shapes_and_attention_maps():
    from solutions import sequence

    settings = sequence.Settings(length=3, embed_dim=8, num_heads=2, layers=2)
    model = sequence.SortingTransformer(settings)
    lines = sequence.make_batch(np.random.default_rng(0), 4, 3, "train")
    assert model(lines[:, :-1]).shape == (4, 6, sequence.VOCAB)
    assert model.attention_maps() == [None, None]
    model(lines[:, :-1], need_weights=True)
    for w in model.attention_maps():
        assert w.shape == (4, 2, 6, 6)
        assert_close(w.sum(axis=-1), np.ones((4, 2, 6)), rtol=1e-5)
        assert np.all(np.triu(w, 1) == 0), "a causal map has nothing above the diagonal"
    assert sequence.generate(model, lines[:, :4], 3).shape == (4, 3)
    loss = sequence.sequence_loss(model, lines, 3)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_generate_leaves_the_model_in_the_mode_it_found():
    from solutions import sequence

    settings = sequence.Settings(length=3, embed_dim=8, num_heads=2)
    model = sequence.SortingTransformer(settings)
    prompts = sequence.make_batch(np.random.default_rng(0), 2, 3, "test")[:, :4]
    for training in (False, True):
        model.train(training)
        sequence.generate(model, prompts, 3)
        assert model.training is training


def test_the_model_answer_of_attention_is_textbook_code():
    # The a07 model answer (and so the notebook step) calls the op; any faster path lives beneath it.
    import inspect

    source = inspect.getsource(ops.attention.scaled_dot_product_attention)
    assert "kernels" not in source and "fused" not in source, source


@pytest.mark.slow
def test_a_reduced_sorting_transformer_learns_well_beyond_chance():
    from solutions import sequence

    settings = sequence.Settings(length=5, embed_dim=32, num_heads=2, layers=1, batch_size=32, steps=150,
                                 eval_size=300)
    model, record = sequence.train(settings)
    result = sequence.evaluate(model, settings)
    # Chance is 10 % per digit and 1e-5 per sequence of five.
    assert record["losses"][-1] < 0.5 * record["losses"][0]
    assert result["digits"] > 0.9, result
    assert result["exact"] > 0.6, result
