"""Speed of the engine's conv2d and max_pool2d, side by side with PyTorch's CPU kernels.

    python benchmarks/bench_conv.py                 # engine (and PyTorch if importable)
    python benchmarks/bench_conv.py --rounds 5 --dtype float32
    python benchmarks/bench_conv.py --threads 1     # only one thread count for every side

For every shape: conv2d forward (no graph) and forward + backward (x, weight and bias all
require grad; backward from a fixed random upstream gradient), in float32 and float64. Timed
by the method of `fair.py`: blocks of calls per side, never interleaved, after warm-up, each
side at its best of 1 or 2 threads, minimum over rounds. Reported: milliseconds, GFLOP/s
(forward 2*N*K*OH*OW*C/G*KH*KW flops, backward twice that), the thread count each side was
fastest with, the engine's time as a ratio of PyTorch's (below 1 is faster), and geometric
means of the ratios. Two references tell how far the convolution is from what the BLAS
underneath can do: NumPy's matmul peak on a large square product, and "GEMMs", the three
matrix products of an im2col forward + backward alone (no im2col, no col2im), as a ratio to
PyTorch's forward + backward.
"""
from __future__ import annotations

import argparse
import math
import platform

import fair
import numpy as np
from fair import torch

from solutions import Tensor, conv2d, max_pool2d, no_grad

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


def matmul_peak(dtype: np.dtype, n: int = 2048) -> float:
    a = np.random.default_rng(0).standard_normal((n, n)).astype(dtype)
    with fair.threads(max(fair.THREAD_CHOICES)):
        t = fair.block(lambda: a @ a, calls=3, warmup=1)
    return 2 * n**3 / t / 1e9


# --------------------------------------------------------------------------------------------
# One shape: the engine's and PyTorch's runs
# --------------------------------------------------------------------------------------------
def conv_case(shape, dtype, args) -> dict[str, tuple[float, int]]:
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

    sides = {"ours_fwd": ours_fwd, "ours_fb": ours_fwd_bwd, "gemms": gemms_only}
    if torch is not None:
        tx, tw, tb, tg = (torch.from_numpy(a) for a in (x, w, b, g))

        def torch_fwd():
            with torch.no_grad():
                return torch.nn.functional.conv2d(tx, tw, tb, s, p, d)

        def torch_fwd_bwd():
            xt, wt, bt = (a.clone().requires_grad_() for a in (tx, tw, tb))
            torch.nn.functional.conv2d(xt, wt, bt, s, p, d).backward(tg)
            return xt.grad, wt.grad, bt.grad

        sides.update(torch_fwd=torch_fwd, torch_fb=torch_fwd_bwd)
    times = fair.compare(sides, args.rounds, args.calls, thread_choices=args.thread_choices, clock=args.clock)
    times["flops"] = (2.0 * N * K * OH * OW * C * KH * KW, 0)
    return times


def pool_case(dtype, args) -> dict[str, tuple[float, int]]:
    x = np.random.default_rng(0).standard_normal(POOL_SHAPE).astype(dtype)
    n, c, h, w = POOL_SHAPE
    g = np.random.default_rng(1).standard_normal((n, c, h // 2, w // 2)).astype(dtype)

    def ours():
        xt = Tensor(x, requires_grad=True)
        max_pool2d(xt, 2).backward(g)
        return xt.grad

    sides = {"ours": ours}
    if torch is not None:
        tx, tg = torch.from_numpy(x), torch.from_numpy(g)

        def theirs():
            xt = tx.clone().requires_grad_()
            torch.nn.functional.max_pool2d(xt, 2).backward(tg)
            return xt.grad

        sides["torch"] = theirs
    return fair.compare(sides, args.rounds, args.calls, thread_choices=args.thread_choices, clock=args.clock)


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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=5, help="timed calls per block")
    parser.add_argument("--dtype", choices=["float32", "float64", "both"], default="both")
    parser.add_argument("--threads", type=int, help="only this thread count (default: the best of 1 and 2)")
    parser.add_argument("--clock", choices=sorted(fair.CLOCKS), default="wall",
                        help="cpu: process CPU time at 1 thread (steadier on a loaded machine)")
    args = parser.parse_args()
    args.thread_choices = (args.threads,) if args.threads else fair.THREAD_CHOICES
    dtypes = [np.float32, np.float64] if args.dtype == "both" else [np.dtype(args.dtype).type]
    print(f"conv2d benchmark: Python {platform.python_version()}, NumPy {np.__version__}, "
          f"PyTorch {torch.__version__ if torch is not None else 'not installed (engine only)'}")
    print(f"NumPy's BLAS: {fair.blas()}")
    print(f"method: {fair.method(args.rounds, args.calls, args.clock)}; {fair.load()}")
    print("times in ms; GF/s = GFLOP/s; thr = the thread count a side was fastest with; "
          "ratio = engine time / PyTorch time\n")
    summary = []
    for dtype in dtypes:
        name = np.dtype(dtype).name
        peak = matmul_peak(dtype)
        print(f"{name}: NumPy matmul peak {peak:.0f} GF/s (2048x2048); {fair.load()}")
        header = (f"{'shape':34} {'fwd ms':>7} {'thr':>3} {'torch':>7} {'thr':>3} {'ratio':>5} | {'fwd+bwd':>7} "
                  f"{'GF/s':>5} {'thr':>3} {'torch':>7} {'thr':>3} {'ratio':>5} | {'GEMMs':>6} {'ratio':>5}")
        print(header)
        print("-" * len(header))
        ratios_f, ratios_fb, ratios_floor = [], [], []
        for shape in SHAPES:
            t = conv_case(shape, dtype, args)
            (f, nf), (fb, nfb), (gm, _) = t["ours_fwd"], t["ours_fb"], t["gemms"]
            line = f"{describe(shape):34} {f * 1e3:7.2f} {nf:3d} "
            if torch is not None:
                (tf, ntf), (tfb, ntfb) = t["torch_fwd"], t["torch_fb"]
                ratios_f.append(f / tf)
                ratios_fb.append(fb / tfb)
                ratios_floor.append(gm / tfb)
                gfs = 3 * t["flops"][0] / fb / 1e9
                line += f"{tf * 1e3:7.2f} {ntf:3d} {f / tf:5.2f} | {fb * 1e3:7.2f} {gfs:5.0f} {nfb:3d} "
                line += f"{tfb * 1e3:7.2f} {ntfb:3d} {fb / tfb:5.2f} | {gm * 1e3:6.2f} {gm / tfb:5.2f}"
            else:
                line += f"{'':7} {'':3} {'':5} | {fb * 1e3:7.2f} {3 * t['flops'][0] / fb / 1e9:5.0f} {nfb:3d} "
                line += f"{'':7} {'':3} {'':5} | {gm * 1e3:6.2f}"
            print(line, flush=True)
        if torch is not None:
            gf, gfb = gmean(ratios_f), gmean(ratios_fb)
            print(f"{'geometric mean of ratios':34} {'':7} {'':3} {'':7} {'':3} {gf:5.2f} | {'':7} {'':5} {'':3} "
                  f"{'':7} {'':3} {gfb:5.2f} | {'':6} {gmean(ratios_floor):5.2f}")
            summary.append((name, gf, gfb))
        pool = pool_case(dtype, args)
        line = f"max_pool2d 2x2 fwd+bwd {POOL_SHAPE}: {pool['ours'][0] * 1e3:.2f} ms ({pool['ours'][1]} thr)"
        if torch is not None:
            line += (f", PyTorch {pool['torch'][0] * 1e3:.2f} ms ({pool['torch'][1]} thr), "
                     f"ratio {pool['ours'][0] / pool['torch'][0]:.2f}")
        print(line + f"; {fair.load()}\n")
    if summary:
        how = fair.method(args.rounds, args.calls, args.clock)
        print(f"summary (engine / PyTorch, geometric mean over shapes; {how}):")
        for name, gf, gfb in summary:
            print(f"  conv2d {name}: forward {gf:.2f}x, forward+backward {gfb:.2f}x")
    else:
        print("PyTorch is not importable here: engine times only (run with .venv-golden/bin/python to compare)")


if __name__ == "__main__":
    main()
