"""Speed of the engine's conv2d and max_pool2d, side by side with PyTorch's CPU kernels.

    python benchmarks/bench_conv.py                 # engine (and PyTorch if importable)
    python benchmarks/bench_conv.py --repeats 20 --dtype float32
    python benchmarks/bench_conv.py --threads 1     # one core each: steadier on a busy machine

For every shape: conv2d forward (no graph) and forward + backward (x, weight and bias all
require grad; backward from a fixed random upstream gradient), in float32 and float64. Each
time is the minimum over repeats, after warm-up runs, with the engine and PyTorch alternating
inside every repeat, so a busy moment of a shared machine hits both. Reported: milliseconds,
GFLOP/s (forward 2*N*K*OH*OW*C/G*KH*KW flops, backward twice that), the engine's time as a
ratio of PyTorch's (below 1 is faster), and geometric means of the ratios. Two references
tell how far the convolution is from what the BLAS underneath can do: NumPy's matmul peak on a
large square product, and "GEMMs", the three matrix products of an im2col forward + backward
alone (no im2col, no col2im), as a ratio to PyTorch's forward + backward: no im2col
implementation on this BLAS can beat that floor.

PyTorch runs with as many threads as NumPy's BLAS (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS, or
every core), so the comparison is thread for thread. `--threads N` sets that number for both
(it must be set before NumPy starts, hence the argument parsing before the imports).
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import time
from typing import Callable

if __name__ == "__main__":
    _early = argparse.ArgumentParser(add_help=False)
    _early.add_argument("--threads", type=int)
    _threads = _early.parse_known_args()[0].threads
    if _threads:
        for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[_var] = str(_threads)

import numpy as np  # noqa: E402  (after the thread count is fixed)

from solutions import Tensor, conv2d, max_pool2d, no_grad  # noqa: E402

try:  # PyTorch is an optional oracle: the benchmark runs without it.
    import torch
except ImportError:  # pragma: no cover - depends on the venv
    torch = None


# (N, C, H, W), (K, KH, KW), stride, padding, dilation
SHAPES = [
    ((64, 1, 28, 28), (8, 5, 5), 1, 0, 1),
    ((64, 8, 12, 12), (16, 5, 5), 1, 0, 1),
    ((64, 3, 32, 32), (32, 3, 3), 1, 1, 1),
    ((64, 32, 32, 32), (64, 3, 3), 1, 1, 1),
    ((64, 64, 16, 16), (128, 3, 3), 2, 1, 1),
    ((32, 16, 32, 32), (16, 3, 3), 1, 2, 2),
]
POOL_SHAPE = (64, 32, 32, 32)


def blas_threads() -> int:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return os.cpu_count() or 1


def best_time(fn: Callable[[], object], warmup: int = 2) -> Callable[[], float]:
    """A timer for fn; the first call also runs the warm-up (big first allocations are slow)."""
    state = {"warm": False}

    def run() -> float:
        if not state["warm"]:
            for _ in range(warmup):
                fn()
            state["warm"] = True
        gc.collect()
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    return run


def side_by_side(timers: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Minimum time of each timer, running them in turn inside every repeat."""
    best = {name: math.inf for name in timers}
    for _ in range(repeats):
        for name, timer in timers.items():
            best[name] = min(best[name], timer())
    return best


def matmul_peak(dtype: np.dtype, n: int = 2048, repeats: int = 5) -> float:
    a = np.random.default_rng(0).standard_normal((n, n)).astype(dtype)
    t = side_by_side({"mm": best_time(lambda: a @ a, warmup=1)}, repeats)["mm"]
    return 2 * n**3 / t / 1e9


# --------------------------------------------------------------------------------------------
# One shape: the engine's and PyTorch's runs
# --------------------------------------------------------------------------------------------
def conv_case(shape, dtype, repeats: int) -> dict[str, float]:
    (N, C, H, W), (K, KH, KW), s, p, d = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = (rng.standard_normal((K, C, KH, KW)) / math.sqrt(C * KH * KW)).astype(dtype)
    b = rng.standard_normal(K).astype(dtype)
    OH = (H + 2 * p - d * (KH - 1) - 1) // s + 1
    OW = (W + 2 * p - d * (KW - 1) - 1) // s + 1
    g = rng.standard_normal((N, K, OH, OW)).astype(dtype)

    def ours_fwd():
        with no_grad():
            return conv2d(x, w, b, s, p, d)

    def ours_fwd_bwd():
        xt, wt, bt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True), Tensor(b, requires_grad=True)
        conv2d(xt, wt, bt, s, p, d).backward(g)
        return xt.grad, wt.grad, bt.grad

    # The floor of any im2col convolution: its three matrix products alone, with no copies.
    cols = rng.standard_normal((C * KH * KW, N * OH * OW)).astype(dtype)
    w2, gm = w.reshape(K, -1), g.transpose(1, 0, 2, 3).reshape(K, -1).copy()
    z, dw_t, dcols = np.empty((K, cols.shape[1]), dtype), np.empty((cols.shape[0], K), dtype), np.empty_like(cols)

    def gemms_only():  # into preallocated outputs: no page faults, only arithmetic
        np.matmul(w2, cols, out=z)
        np.matmul(cols, gm.T, out=dw_t)
        np.matmul(w2.T, gm, out=dcols)

    timers = {"ours_fwd": best_time(ours_fwd), "ours_fb": best_time(ours_fwd_bwd), "gemms": best_time(gemms_only)}
    if torch is not None:
        tx, tw, tb, tg = (torch.from_numpy(a) for a in (x, w, b, g))

        def torch_fwd():
            with torch.no_grad():
                return torch.nn.functional.conv2d(tx, tw, tb, s, p, d)

        def torch_fwd_bwd():
            xt, wt, bt = (a.clone().requires_grad_() for a in (tx, tw, tb))
            torch.nn.functional.conv2d(xt, wt, bt, s, p, d).backward(tg)
            return xt.grad, wt.grad, bt.grad

        timers.update(torch_fwd=best_time(torch_fwd), torch_fb=best_time(torch_fwd_bwd))
    times = side_by_side(timers, repeats)
    times["flops"] = 2.0 * N * K * OH * OW * C * KH * KW
    return times


def pool_case(dtype, repeats: int) -> dict[str, float]:
    x = np.random.default_rng(0).standard_normal(POOL_SHAPE).astype(dtype)
    n, c, h, w = POOL_SHAPE
    g = np.random.default_rng(1).standard_normal((n, c, h // 2, w // 2)).astype(dtype)

    def ours():
        xt = Tensor(x, requires_grad=True)
        max_pool2d(xt, 2).backward(g)
        return xt.grad

    timers = {"ours": best_time(ours)}
    if torch is not None:
        tx, tg = torch.from_numpy(x), torch.from_numpy(g)

        def theirs():
            xt = tx.clone().requires_grad_()
            torch.nn.functional.max_pool2d(xt, 2).backward(tg)
            return xt.grad

        timers["torch"] = best_time(theirs)
    return side_by_side(timers, repeats)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------
def describe(shape) -> str:
    (N, C, H, W), (K, KH, KW), s, p, d = shape
    return f"({N},{C},{H},{W}) k{K} {KH}x{KW} s{s} p{p} d{d}"


def gmean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dtype", choices=["float32", "float64", "both"], default="both")
    parser.add_argument("--threads", type=int, help="threads for NumPy's BLAS, the engine's copies and PyTorch")
    args = parser.parse_args()
    threads = blas_threads()
    if torch is not None:
        torch.set_num_threads(threads)
    dtypes = [np.float32, np.float64] if args.dtype == "both" else [np.dtype(args.dtype).type]
    print(f"conv2d benchmark: Python {platform.python_version()}, NumPy {np.__version__}, "
          f"PyTorch {torch.__version__ if torch is not None else '(not installed)'}, {threads} threads")
    if hasattr(os, "getloadavg"):  # other work on the machine shows up in every number below
        print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("times are the minimum over repeats (ms); GF/s = GFLOP/s; ratio = engine time / PyTorch time\n")
    summary = []
    for dtype in dtypes:
        name = np.dtype(dtype).name
        peak = matmul_peak(dtype)
        print(f"{name}: NumPy matmul peak {peak:.0f} GF/s (2048x2048)")
        header = (f"{'shape':34} {'fwd ms':>8} {'GF/s':>6} {'torch':>8} {'ratio':>6} | {'fwd+bwd':>8} {'GF/s':>6} "
                  f"{'torch':>8} {'ratio':>6} | {'GEMMs':>7} {'ratio':>6}")
        print(header)
        print("-" * len(header))
        ratios_f, ratios_fb, ratios_floor = [], [], []
        for shape in SHAPES:
            t = conv_case(shape, dtype, args.repeats)
            f, fb = t["ours_fwd"], t["ours_fb"]
            line = f"{describe(shape):34} {f * 1e3:8.2f} {t['flops'] / f / 1e9:6.1f} "
            if torch is not None:
                rf, rfb = f / t["torch_fwd"], fb / t["torch_fb"]
                ratios_f.append(rf)
                ratios_fb.append(rfb)
                line += f"{t['torch_fwd'] * 1e3:8.2f} {rf:6.2f} | {fb * 1e3:8.2f} {3 * t['flops'] / fb / 1e9:6.1f} "
                line += f"{t['torch_fb'] * 1e3:8.2f} {rfb:6.2f} | {t['gemms'] * 1e3:7.2f} {t['gemms'] / t['torch_fb']:6.2f}"
                ratios_floor.append(t["gemms"] / t["torch_fb"])
            else:
                line += f"{'':8} {'':6} | {fb * 1e3:8.2f} {3 * t['flops'] / fb / 1e9:6.1f} {'':8} {'':6} | {t['gemms'] * 1e3:7.2f}"
            print(line, flush=True)
        if torch is not None:
            gf, gfb = gmean(ratios_f), gmean(ratios_fb)
            print(f"{'geometric mean of ratios':34} {'':8} {'':6} {'':8} {gf:6.2f} | {'':8} {'':6} {'':8} {gfb:6.2f} | "
                  f"{'':7} {gmean(ratios_floor):6.2f}")
            summary.append((name, gf, gfb))
        pool = pool_case(dtype, args.repeats)
        line = f"max_pool2d 2x2 fwd+bwd {POOL_SHAPE}: {pool['ours'] * 1e3:.2f} ms"
        if torch is not None:
            line += f", PyTorch {pool['torch'] * 1e3:.2f} ms, ratio {pool['ours'] / pool['torch']:.2f}"
        print(line + "\n")
    if summary:
        print("summary (engine / PyTorch, geometric mean over shapes):")
        for name, gf, gfb in summary:
            print(f"  {name}: forward {gf:.2f}x, forward+backward {gfb:.2f}x")


if __name__ == "__main__":
    main()
