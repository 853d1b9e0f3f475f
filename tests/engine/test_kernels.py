"""The kernel seam: the fast kernels equal the teaching ones, one switch picks them, and the kit
runs the teaching ones (and the student's, once plugged in with `coursekit.use`).

Modules: `solutions/ops/kernels.py` (the selector), `solutions/ops/_fast.py` (the fast kernels,
private), the teaching kernels in `solutions/ops/im2col.py`, `conv.py`, `pool.py`,
`conv_backward.py`. Book: chapters 3 and 4.

Every pair is compared on Hypothesis-drawn shapes and parameters (batch, channels, size, kernel,
stride, padding, dilation, groups) in float32 and float64. The last part tests the fast kernels'
own machinery: the input gradient's three paths, threads, recycled buffers.
"""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import solutions as S
from solutions import Tensor, nn
from solutions.ops import _fast, conv, conv_backward, kernels, pool
from solutions.ops import im2col as teaching_im2col
from solutions.ops.conv import conv_params
from solutions.testing import assert_close

from support import REPO

ROOT = REPO
SEEDS = st.integers(0, 2**31 - 1)
DTYPES = st.sampled_from([np.float32, np.float64])


def tolerances(dtype) -> dict:
    """The two kernel sets add the same numbers in different orders: float32 agrees to ~1e-6."""
    return dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


# --------------------------------------------------------------------------------------------
# Drawn configurations
# --------------------------------------------------------------------------------------------
@st.composite
def conv_cases(draw):
    """x, w, bias and normalized parameters of a convolution in which at least one window fits."""
    groups = draw(st.integers(1, 3))
    Cg, Kg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(2))
    extent = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    H = max(1, extent[0] - sum(padding[0])) + draw(st.integers(0, 6))
    W = max(1, extent[1] - sum(padding[1])) + draw(st.integers(0, 20))  # wide enough for both col2im paths
    N = draw(st.integers(1, 3))
    dtype = draw(DTYPES)
    rng = np.random.default_rng(draw(SEEDS))
    x = rng.standard_normal((N, groups * Cg, H, W)).astype(dtype)
    w = rng.standard_normal((groups * Kg, Cg) + kernel).astype(dtype)
    b = rng.standard_normal(groups * Kg).astype(dtype) if draw(st.booleans()) else None
    return x, w, b, (stride, padding, dilation, groups), rng


@st.composite
def pool_cases(draw, ties=True):
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    pad = (draw(st.integers(0, kernel[0] // 2)), draw(st.integers(0, kernel[1] // 2)))
    H = max(1, kernel[0] - 2 * pad[0]) + draw(st.integers(0, 6))
    W = max(1, kernel[1] - 2 * pad[1]) + draw(st.integers(0, 6))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 3)), H, W)
    dtype = draw(DTYPES)
    rng = np.random.default_rng(draw(SEEDS))
    if ties and draw(st.booleans()):  # few distinct values: most windows hold several maxima
        x = rng.integers(-2, 2, size=shape).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
    return x, kernel, stride, pad, rng


# --------------------------------------------------------------------------------------------
# fast == teaching, kernel by kernel
# --------------------------------------------------------------------------------------------
@given(conv_cases())
def test_im2col_and_col2im(case):
    x, w, _, (stride, padding, dilation, _), rng = case
    kernel = w.shape[2:]
    cols = teaching_im2col.im2col(x, kernel, stride, padding, dilation)
    fast_cols = _fast.im2col_padded(_fast.pad_hw(x, padding), kernel, stride, dilation)
    np.testing.assert_array_equal(fast_cols, cols)  # a copy: equal to the bit
    assert cols.dtype == x.dtype
    c = rng.standard_normal(cols.shape).astype(x.dtype)
    N, C, H, W = x.shape
    (t, b), (left, r) = padding
    fast_back = _fast.col2im_padded(c, (N, C, H + t + b, W + left + r), kernel, stride, dilation)
    fast_back = fast_back[:, :, t:t + H, left:left + W]
    back = teaching_im2col.col2im(c, x.shape, kernel, stride, padding, dilation)
    assert back.shape == x.shape and back.dtype == x.dtype
    assert_close(fast_back, back, **tolerances(x.dtype))


@given(conv_cases())
def test_conv2d_array(case):
    x, w, b, params, _ = case
    z, cols = conv.conv2d_array(x, w, b, *params)
    fast_z, fast_cols = _fast.conv2d_array(x, w, b, *params)
    assert z.shape == fast_z.shape and z.dtype == fast_z.dtype
    assert_close(fast_z, z, **tolerances(x.dtype))
    np.testing.assert_array_equal(fast_cols, cols)


@given(conv_cases())
def test_conv2d_input_grad_array(case):
    x, w, _, params, rng = case
    z, _ = conv.conv2d_array(x, w, None, *params)
    g = rng.standard_normal(z.shape).astype(x.dtype)
    dx = conv.conv2d_input_grad_array(g, w, x.shape, *params)
    assert dx.shape == x.shape and dx.dtype == x.dtype
    assert_close(_fast.conv2d_input_grad_array(g, w, x.shape, *params), dx, **tolerances(x.dtype))


@given(conv_cases(), st.booleans())
def test_conv2d_weight_grad_array(case, cols_given):
    x, w, _, params, rng = case
    z, cols = conv.conv2d_array(x, w, None, *params)
    g = rng.standard_normal(z.shape).astype(x.dtype)
    given_cols = cols if cols_given else None
    dw = conv.conv2d_weight_grad_array(x, g, w.shape, *params, given_cols)
    assert dw.shape == w.shape and dw.dtype == x.dtype
    fast_cols = cols.copy() if cols_given else None
    assert_close(_fast.conv2d_weight_grad_array(x, g, w.shape, *params, fast_cols), dw, **tolerances(x.dtype))


@given(pool_cases())
def test_max_pool2d_array_and_its_scatter(case):
    x, kernel, stride, pad, rng = case
    out, index = pool.max_pool2d_array(x, kernel, stride, pad)
    fast_out, fast_index = _fast.max_pool2d_array(x, kernel, stride, pad)
    np.testing.assert_array_equal(fast_out, out)
    np.testing.assert_array_equal(fast_index, index)  # the same winner: ties go to the first maximum
    assert out.dtype == x.dtype and np.issubdtype(index.dtype, np.integer)
    g = rng.standard_normal(out.shape).astype(x.dtype)
    dx = pool.max_pool2d_scatter_array(g, index, x.shape, kernel, stride, pad)
    assert dx.shape == x.shape and dx.dtype == x.dtype
    assert_close(_fast.max_pool2d_scatter_array(g, fast_index, x.shape, kernel, stride, pad), dx, **tolerances(x.dtype))


@given(st.integers(1, 3), st.integers(1, 3), st.integers(2, 9), st.integers(2, 9), DTYPES, st.booleans(), SEEDS)
def test_the_2x2_max_pool_tournament_picks_the_first_maximum(n, c, h, w, dtype, channel_major, seed):
    """2x2 windows, stride 2, no padding (the CNN's pool) take a tournament path in the fast kernel."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 2, size=(n, c, h, w)).astype(dtype)  # few values: ties in most windows
    x[rng.random(x.shape) < 0.1] = -np.inf
    if channel_major:  # the layout a convolution's output has
        x = np.ascontiguousarray(x.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    out, index = pool.max_pool2d_array(x, (2, 2), (2, 2), (0, 0))
    fast_out, fast_index = _fast.max_pool2d_array(x, (2, 2), (2, 2), (0, 0))
    np.testing.assert_array_equal(fast_out, out)
    np.testing.assert_array_equal(fast_index, index)


@given(pool_cases(), st.integers(1, 3))
def test_max_pool2d_array_with_nan(case, nans):
    """A NaN takes the window over, the last one when there are several (PyTorch's rule)."""
    x, kernel, stride, pad, rng = case
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, nans)] = np.nan
    out, index = pool.max_pool2d_array(x, kernel, stride, pad)
    fast_out, fast_index = _fast.max_pool2d_array(x, kernel, stride, pad)
    np.testing.assert_array_equal(fast_out, out)  # NaNs in the same places
    np.testing.assert_array_equal(fast_index, index)


@given(pool_cases(ties=False))
def test_avg_pool2d_array_and_its_scatter(case):
    x, kernel, stride, pad, rng = case
    out = pool.avg_pool2d_array(x, kernel, stride, pad)
    assert out.dtype == x.dtype
    assert_close(_fast.avg_pool2d_array(x, kernel, stride, pad), out, **tolerances(x.dtype))
    g = rng.standard_normal(out.shape).astype(x.dtype)
    dx = pool.avg_pool2d_scatter_array(g, x.shape, kernel, stride, pad)
    assert dx.shape == x.shape and dx.dtype == x.dtype
    assert_close(_fast.avg_pool2d_scatter_array(g, x.shape, kernel, stride, pad), dx, **tolerances(x.dtype))


def test_pools_of_integers():
    x = np.random.default_rng(0).integers(-5, 5, (2, 3, 7, 6))
    for kernel, stride, pad in [((2, 2), (2, 2), (0, 0)), ((3, 2), (1, 2), (1, 1))]:
        out, index = pool.max_pool2d_array(x, kernel, stride, pad)
        fast_out, fast_index = _fast.max_pool2d_array(x, kernel, stride, pad)
        np.testing.assert_array_equal(out, fast_out)
        np.testing.assert_array_equal(index, fast_index)
        mean = pool.avg_pool2d_array(x, kernel, stride, pad)
        assert mean.dtype == np.float64
        assert_close(mean, _fast.avg_pool2d_array(x, kernel, stride, pad))


@given(conv_cases())
def test_the_engine_gives_the_same_gradients_with_either_set(case):
    """conv2d and max_pool2d, forward, backward and a second derivative, through the ops."""
    x, w, b, (stride, padding, dilation, groups), rng = case
    assume(x.dtype == np.float64)
    params = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)

    def run():
        xt, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
        z = S.max_pool2d(S.conv2d(xt, wt, b, **params), 2, stride=1, padding=1)
        g = Tensor(np.cos(np.arange(z.size)).reshape(z.shape))
        dx, dw = S.grad(z, [xt, wt], g, create_graph=True)
        (ddw,) = S.grad((dx * dx).sum(), [wt])
        return [a.data.copy() for a in (z, dx, dw, ddw)]

    assume(min(conv.conv2d_array(x, w, b, *case[3])[0].shape[2:]) >= 1)
    fast = run()
    with kernels.teaching_kernels():
        teaching = run()
    for a, b_ in zip(fast, teaching, strict=True):
        assert_close(a, b_, rtol=1e-9, atol=1e-9)


@given(st.sampled_from([(5, 3), (4, 3, 5), (3, 2, 4, 3), (16, 4, 2, 2)]), DTYPES, st.floats(0.0, 1.0), SEEDS)
def test_the_fused_batch_norm_equals_the_composite(shape, dtype, momentum, seed):
    """BatchNorm in training mode: one fast node (`_fast.batch_norm_train`) or a05's composite of
    ops (teaching kernels) give the same output, running statistics, gradients and second derivative."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    layer = nn.BatchNorm2d if len(shape) == 4 else nn.BatchNorm1d

    def run():
        bn = layer(shape[1], momentum=momentum, dtype=dtype)
        bn.weight.data[:] = np.linspace(0.5, 1.5, shape[1])
        bn.bias.data[:] = np.linspace(-1, 1, shape[1])
        xt = Tensor(x, requires_grad=True)
        y = bn(xt)
        dx, dw, db = S.grad(y, [xt, bn.weight, bn.bias], Tensor(g), create_graph=True)
        (ddx,) = S.grad((dx * dx).sum() + (dw * db).sum(), [xt])
        return type(y.grad_fn).__name__, [a.copy() for a in (y.data, bn.running_mean, bn.running_var)] + [
            t.data.copy() for t in (dx, dw, db, ddx)]

    name, fast = run()
    with kernels.teaching_kernels():
        teaching_name, teaching = run()
    assert (name, teaching_name) == ("BatchNormTrain", "Add")
    for a, b_ in zip(fast, teaching, strict=True):
        assert a.dtype == b_.dtype
        assert_close(a, b_, **tolerances(dtype))


def test_dilate_and_erode_have_one_kernel_each():
    assert kernels.dilate_array is conv_backward.dilate_array
    assert kernels.erode_array is conv_backward.erode_array
    assert kernels.max_pool2d_gather_array is pool.max_pool2d_gather_array


# --------------------------------------------------------------------------------------------
# The one switch
# --------------------------------------------------------------------------------------------
def test_the_reference_engine_runs_the_fast_kernels_and_can_switch():
    assert kernels.fast_available() and kernels.fast_enabled()
    for name in kernels.FAST:
        assert getattr(kernels, name) is getattr(_fast, name), name
    with kernels.teaching_kernels():
        assert not kernels.fast_enabled()
        for name, home in kernels.TEACHING.items():
            module = sys.modules[f"solutions.ops.{home}"]
            assert getattr(kernels, name) is getattr(module, name), name
        assert kernels.recycle(np.ones(3)) is None and kernels.channel_major(x := np.ones((1, 2, 1, 1))) is x
    assert kernels.fast_enabled()
    kernels.use_fast(False)
    try:
        assert not kernels.fast_enabled()
    finally:
        kernels.use_fast(True)
    assert kernels.fast_enabled()


def test_the_ops_look_the_kernel_up_when_they_run():
    calls = []
    real = kernels.max_pool2d_array

    def spy(*args):
        calls.append(args[1:])
        return real(*args)

    with mock.patch.object(kernels, "max_pool2d_array", spy):
        S.max_pool2d(np.ones((1, 1, 4, 4)), 2)
    assert calls == [((2, 2), (2, 2), (0, 0))]


@pytest.mark.parametrize("value, fast", [("teaching", False), ("fast", True), (None, True)])
def test_the_environment_variable_picks_the_set_at_import(value, fast):
    env = {k: v for k, v in os.environ.items() if k != "SOLUTIONS_KERNELS"}
    if value is not None:
        env["SOLUTIONS_KERNELS"] = value
    code = "from solutions.ops import kernels; print(kernels.fast_enabled())"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(fast)


def test_a_wrong_environment_value_is_named():
    env = dict(os.environ, SOLUTIONS_KERNELS="turbo")
    result = subprocess.run([sys.executable, "-c", "import solutions"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0 and "SOLUTIONS_KERNELS must be 'fast' or 'teaching', got 'turbo'" in result.stderr


# --------------------------------------------------------------------------------------------
# The kit: teaching kernels only, and `use` reaches the ops through the seam
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    from autograder.kit import build_kit

    folder = tmp_path_factory.mktemp("kit")
    build_kit(folder)
    return folder


def run_in_kit(folder: Path, code: str) -> subprocess.CompletedProcess:
    """A fresh interpreter in `folder` (which holds coursekit/); the reference is importable only
    through `REFERENCE`, the repository root, to build correct answers to plug in."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SOLUTIONS_KERNELS")}
    env["REFERENCE"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=180)


def test_the_kit_has_no_fast_kernels(kit):
    assert not (kit / "coursekit" / "engine" / "ops" / "_fast.py").exists()
    for path in (kit / "coursekit").rglob("*.py"):
        text = path.read_text()
        for marker in ("ThreadPoolExecutor", "def recycle", "register_at_fork", "def channel_major", "np.uint8"):
            assert marker not in text, f"{path.name} has {marker!r}"
    result = run_in_kit(kit, """
        import numpy as np
        import coursekit
        from coursekit.engine.ops import conv2d, kernels, max_pool2d
        assert not kernels.fast_available() and not kernels.fast_enabled()
        try:
            kernels.use_fast(True)
        except RuntimeError as error:
            assert "teaching kernels only" in str(error)
        else:
            raise AssertionError("use_fast(True) worked in the kit")
        for call, exercise in [(lambda: conv2d(np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2))), "conv2d_array"),
                               (lambda: max_pool2d(np.ones((1, 1, 4, 4)), 2), "max_pool2d_array")]:
            try:
                call()
            except NotImplementedError as error:
                assert str(error).startswith(f"{exercise} is an exercise you have not done yet"), error
            else:
                raise AssertionError(f"{exercise} is not stubbed in the kit")
        print("ok")
    """)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_use_plugs_a_kernel_into_the_kits_ops(kit):
    """The student's kernels, wrapped to count their calls, replace the kit's by name: conv2d then
    runs them in its forward and backward, the pools and dilate/erode theirs. Where one exercise
    calls another (conv2d_array calls im2col), the engine's version calls the plugged one."""
    result = run_in_kit(kit, """
        import os, sys
        import numpy as np
        sys.path.append(os.environ["REFERENCE"])
        from solutions.ops import kernels as reference_kernels
        reference_kernels.use_fast(False)       # the answers below: the reference's teaching kernels
        import solutions.ops.conv as C, solutions.ops.conv_backward as B, solutions.ops.pool as P
        import solutions.ops.im2col as reference

        import coursekit
        from coursekit import use
        from coursekit.engine import Tensor
        from coursekit.engine.ops import avg_pool2d, conv2d, dilate, erode, max_pool2d

        calls = []

        def counted(name, fn):
            def wrapper(*args, **kwargs):
                calls.append(name)
                return fn(*args, **kwargs)
            wrapper.__name__ = name
            return wrapper

        names = {"output_size": reference, "windows": reference, "im2col": reference, "col2im": reference,
                 "conv2d_input_grad_array": C, "conv2d_weight_grad_array": C, "max_pool2d_array": P,
                 "max_pool2d_scatter_array": P, "avg_pool2d_array": P, "dilate_array": B, "erode_array": B}
        use(*(counted(name, getattr(home, name)) for name, home in names.items()))

        rng = np.random.default_rng(0)
        x = Tensor(rng.standard_normal((2, 3, 6, 5)), requires_grad=True)
        w = Tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
        use(counted("conv2d_array", C.conv2d_array))
        z = conv2d(x, w, stride=2, padding=1)
        z.grad_fn.backward(Tensor(np.ones(z.shape)))     # the op's backward, no graph walk
        assert calls.count("conv2d_array") == 1 and "conv2d_input_grad_array" in calls \\
            and "conv2d_weight_grad_array" in calls, calls
        reference_z = reference_kernels.conv2d_array(x.data, w.data, None, (2, 2), ((1, 1), (1, 1)), (1, 1), 1)[0]
        assert np.allclose(z.data, reference_z)

        calls.clear()
        p = max_pool2d(x, 2)
        p.grad_fn.backward(Tensor(np.ones(p.shape)))
        a = avg_pool2d(x, 2)
        d = dilate(x, 2)
        d.grad_fn.backward(Tensor(np.ones(d.shape)))
        erode(np.ones((3, 3)), 2)
        assert calls == ["max_pool2d_array", "max_pool2d_scatter_array", "avg_pool2d_array", "dilate_array",
                         "erode_array", "erode_array"], calls
        print("ok")
    """)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr + result.stdout


def test_the_kits_conv2d_array_calls_the_plugged_im2col(tmp_path):
    """In a kit where only a03's im2col is left to do (as in the grader's sandbox, whose other
    exercises are the reference), plugging it in makes the engine's conv2d run it."""
    from autograder.course import catalogue
    from autograder.kit import build_kit

    build_kit(tmp_path, specs=[s for s in catalogue.assignment("a03_im2col") if s.id in ("a03-im2col", "a03-max-pool")])
    result = run_in_kit(tmp_path, """
        import os, sys
        import numpy as np
        sys.path.append(os.environ["REFERENCE"])
        from solutions.ops import kernels as reference_kernels
        reference_kernels.use_fast(False)
        import solutions.ops.pool as P
        import solutions.ops.im2col as reference

        from coursekit import use
        from coursekit.engine.ops import conv2d, max_pool2d
        try:
            conv2d(np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2)))
        except NotImplementedError as error:
            assert str(error).startswith("im2col is an exercise you have not done yet"), error
        else:
            raise AssertionError("im2col is not stubbed")
        calls = []

        def im2col(*args, **kwargs):
            calls.append("im2col")
            return reference.im2col(*args, **kwargs)

        def max_pool2d_array(*args):
            calls.append("max_pool2d_array")
            return P.max_pool2d_array(*args)

        use(im2col, max_pool2d_array)
        x = np.random.default_rng(1).standard_normal((2, 3, 6, 5))
        z = conv2d(x, np.ones((2, 3, 3, 3)), padding=1)
        assert calls == ["im2col"], calls
        assert np.allclose(z.data, reference_kernels.conv2d_array(x, np.ones((2, 3, 3, 3)), None, (1, 1),
                                                                  ((1, 1), (1, 1)), (1, 1), 1)[0])
        max_pool2d(x, 2)
        assert calls == ["im2col", "max_pool2d_array"], calls
        print("ok")
    """)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr + result.stdout


# --------------------------------------------------------------------------------------------
# The fast kernels' own machinery: three input-gradient paths, threads, recycled buffers
# --------------------------------------------------------------------------------------------
@given(conv_cases())
def test_the_three_input_gradient_paths_agree(case):
    """dx three ways: col2im over images, col2im with the batch innermost (narrow outputs), and
    for stride 1 the derived correlation. The fast kernel picks one by shape; all must agree."""
    x, w, _, (stride, padding, dilation, groups), rng = case
    z, _ = conv.conv2d_array(x, w, None, stride, padding, dilation, groups)
    g = rng.standard_normal(z.shape).astype(x.dtype)
    args = (g, w, x.shape, stride, padding, dilation, groups)
    expected = conv.conv2d_input_grad_array(*args)
    tol = tolerances(x.dtype)
    assert_close(_fast._input_grad_by_col2im_batch_last(*args), expected, **tol)
    # 64-byte chunks: one image (or output row) per piece, so the chunk loops run
    with mock.patch.object(_fast, "CHUNK_BYTES", 64):
        assert_close(_fast._input_grad_by_col2im_batch_last(*args), expected, **tol)
        with mock.patch.object(_fast, "NARROW", 0):  # never batch-innermost
            assert_close(_fast._input_grad_by_col2im(*args), expected, **tol)
    if stride == (1, 1):
        assert_close(_fast._input_grad_by_correlation(g, w, x.shape, padding, dilation, groups), expected, **tol)


@pytest.fixture
def many_threads(monkeypatch):
    """Split every copy over 3 threads, however small."""
    monkeypatch.setattr(_fast, "THREADS", 3)
    monkeypatch.setattr(_fast, "PARALLEL_MIN_BYTES", 0)


def _conv_run(x, w, **params):
    xt, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    z = S.conv2d(xt, wt, **params)
    z.backward(np.cos(np.arange(z.size)).reshape(z.shape))
    return z.data.copy(), xt.grad.data.copy(), wt.grad.data.copy()


@pytest.mark.parametrize("width", [8, 20])  # narrow outputs take the batch-innermost col2im
@pytest.mark.parametrize("params", [dict(stride=2, padding=1), dict(padding=1), dict(dilation=2, groups=2)])
def test_threaded_copies_give_the_same_results(params, width, many_threads):
    rng = np.random.default_rng(14)
    x, w = rng.standard_normal((5, 4, 9, width)), rng.standard_normal((4, 2 if params.get("groups") else 4, 3, 3))
    threaded = _conv_run(x, w, **params)
    _fast.THREADS = 1
    for a, b in zip(threaded, _conv_run(x, w, **params), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op, args", [("max_pool2d", (2,)), ("max_pool2d", (3, 2, 1)), ("avg_pool2d", (2,)),
                                      ("avg_pool2d", (3, 1, 1))])
def test_threaded_pools_give_the_same_results(op, args, many_threads):
    x = np.random.default_rng(4).integers(-2, 3, (5, 3, 8, 8)).astype(float)  # ties everywhere

    def run():
        xt = Tensor(x, requires_grad=True)
        z = getattr(S, op)(xt, *args)
        z.backward(np.cos(np.arange(z.size)).reshape(z.shape))
        return z.data.copy(), xt.grad.data.copy()

    threaded = run()
    _fast.THREADS = 1
    for a, b in zip(threaded, run(), strict=True):
        np.testing.assert_array_equal(a, b)


def _conv_sum_in_child(queue, x, w):
    queue.put(float(S.conv2d(x, w, padding=1).data.sum()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_threaded_copies_work_in_a_forked_child(many_threads):
    """A forked child inherits the thread pool object but not its threads: it must not hang."""
    x, w = np.ones((4, 2, 6, 6)), np.ones((3, 2, 3, 3))
    expected = float(S.conv2d(x, w, padding=1).data.sum())  # the parent's pool now exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_conv_sum_in_child, args=(queue, x, w))
    child.start()
    try:
        assert queue.get(timeout=30) == expected
    finally:
        child.join(timeout=30)


def test_recycled_buffers_never_change_earlier_results(monkeypatch):
    monkeypatch.setattr(_fast, "RECYCLE_MIN_BYTES", 0)  # recycle even tiny arrays
    rng = np.random.default_rng(15)
    x1, x2, w = rng.standard_normal((2, 3, 7, 7)), rng.standard_normal((2, 3, 7, 7)), rng.standard_normal((4, 3, 3, 3))
    first = _conv_run(x1, w, padding=1)
    xt, wt = Tensor(x1, requires_grad=True), Tensor(w, requires_grad=True)
    z = S.conv2d(xt, wt, padding=1)
    z.backward(np.cos(np.arange(z.size)).reshape(z.shape))
    kept = (z.data, xt.grad.data, wt.grad.data)
    for _ in range(3):  # the same shapes again: every recycled buffer is reused
        _conv_run(x2, w, padding=1)
        with S.no_grad():
            S.conv2d(x2, w, padding=1)
    for a, b in zip(kept, first, strict=True):
        np.testing.assert_array_equal(a, b)

    # create_graph: the gradient's own graph keeps what it saved; later calls must not touch it
    def second_derivative(interleave):
        xt, wt = Tensor(x1, requires_grad=True), Tensor(w, requires_grad=True)
        (gw,) = S.grad(S.conv2d(xt, wt, padding=1).sum(), [wt], create_graph=True)
        before = gw.data.copy()
        if interleave:
            _conv_run(x2, w, padding=1)
        (ggx,) = S.grad((gw * gw).sum(), [xt])
        np.testing.assert_array_equal(gw.data, before)
        return ggx.data

    np.testing.assert_array_equal(second_derivative(True), second_derivative(False))


def test_conv_params_normalize_like_the_kernels_expect():
    """The ops hand the kernels pairs and ((top, bottom), (left, right)); so do these tests."""
    stride, pads, dilation, groups = conv_params("conv2d", (1, 2, 5, 5), (2, 2, 3, 3), None, 2, 1, 1, 1)
    assert (stride, pads, dilation, groups) == ((2, 2), ((1, 1), (1, 1)), (1, 1), 1)
