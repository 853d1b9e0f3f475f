"""Speed of the engine's attention against PyTorch's: a pre-norm transformer block, and the op alone.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv-golden/bin/python benchmarks/bench_attention.py
    python benchmarks/bench_attention.py --clock cpu --rounds 5     # CPU time, on a busy machine

For every shape (N batch, T positions, E width, H heads): forward + backward of one causal
pre-norm block (`nn.TransformerBlock` against `torch.nn.TransformerEncoderLayer(norm_first=True,
activation="gelu", dropout=0)`, the same computation: the golden test loads one's weights into
the other), the input and every parameter requiring grad, backward from a fixed random upstream
gradient; and `scaled_dot_product_attention` alone (causal, q, k, v (N, H, T, E/H) requiring grad).
Timed by the method of `fair.py`: blocks of calls per side, never interleaved, after warm-up,
each side at its best of 1 or 2 threads (or CPU time at 1 thread with --clock cpu), minimum over
rounds. Reported: milliseconds, the thread count, and the engine's time as a ratio of PyTorch's
(below 1 is faster), with the geometric mean over shapes.

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, if the environment sets them, hold NumPy's OpenBLAS to
older kernels; unset them for this command only (as above), and read the kernel line printed.

    python benchmarks/bench_attention.py --embedding --clock cpu --rounds 5

times the three ways the embedding's backward can scatter-add its rows (engine only): the one-hot
GEMM, the sorted sums of `np.add.reduceat` and `np.add.at`, for vocabularies on both sides of
`_fast.ONE_HOT_MAX_ROWS`, the switch between the first two in the fast kernel.
"""
from __future__ import annotations

import argparse
import math
import platform

import fair
import numpy as np
from fair import torch

from solutions import Tensor, nn, ops

# (N, T, E, H): the sorting model's block first, then wider and longer ones
SHAPES = [(64, 16, 64, 4), (32, 64, 128, 4), (8, 128, 256, 8)]


def block_case(shape, dtype, args) -> dict[str, tuple[float, int]]:
    N, T, E, H = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, T, E)).astype(dtype)
    g = rng.standard_normal((N, T, E)).astype(dtype)
    ours = nn.TransformerBlock(E, H, dtype=dtype, rng=0)

    def ours_fwd_bwd():
        ours.zero_grad()
        xt = Tensor(x, requires_grad=True)
        ours(xt).backward(g)
        return xt.grad

    sides = {"engine": ours_fwd_bwd}
    if torch is not None:
        tdtype = getattr(torch, np.dtype(dtype).name)
        layer = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=4 * E, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True).to(tdtype)
        layer.train()
        mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=tdtype)
        tx, tg = torch.from_numpy(x), torch.from_numpy(g)

        def torch_fwd_bwd():
            layer.zero_grad()
            xt = tx.clone().requires_grad_()
            layer(xt, src_mask=mask, is_causal=True).backward(tg)
            return xt.grad

        sides["torch"] = torch_fwd_bwd
    return fair.compare(sides, args.rounds, args.calls, clock=args.clock,
                        thread_choices=tuple(args.threads) if args.threads else fair.THREAD_CHOICES)


def sdpa_case(shape, dtype, args) -> dict[str, tuple[float, int]]:
    N, T, E, H = shape
    rng = np.random.default_rng(1)
    q, k, v, g = (rng.standard_normal((N, H, T, E // H)).astype(dtype) for _ in range(4))

    def ours_fwd_bwd():
        qt, kt, vt = (Tensor(a, requires_grad=True) for a in (q, k, v))
        ops.scaled_dot_product_attention(qt, kt, vt, is_causal=True).backward(g)
        return qt.grad

    sides = {"engine": ours_fwd_bwd}
    if torch is not None:
        tq, tk, tv, tg = (torch.from_numpy(a) for a in (q, k, v, g))

        def torch_fwd_bwd():
            qt, kt, vt = (a.clone().requires_grad_() for a in (tq, tk, tv))
            torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True).backward(tg)
            return qt.grad

        sides["torch"] = torch_fwd_bwd
    return fair.compare(sides, args.rounds, args.calls, clock=args.clock,
                        thread_choices=tuple(args.threads) if args.threads else fair.THREAD_CHOICES)


# (vocabulary V, tokens N*T, width E): the sorting model's, then larger vocabularies
EMBEDDING_SHAPES = [(11, 1024, 48), (64, 2048, 64), (128, 2048, 64), (256, 2048, 64), (1024, 2048, 64),
                    (4096, 4096, 128)]


def embedding_case(shape, args) -> dict[str, tuple[float, int]]:
    """dW (V, E) from a float32 upstream (M, E) and M token ids, three ways."""
    V, M, E = shape
    rng = np.random.default_rng(2)
    g = rng.standard_normal((M, E)).astype(np.float32)
    ids = rng.integers(0, V, M)

    def one_hot():
        hot = np.zeros((V, M), dtype=g.dtype)
        hot[ids, np.arange(M)] = 1
        return hot @ g

    def sorted_sums():
        order = np.argsort(ids, kind="stable")
        tokens = ids[order]
        starts = np.flatnonzero(np.r_[True, tokens[1:] != tokens[:-1]])
        dw = np.zeros((V, E), dtype=g.dtype)
        dw[tokens[starts]] = np.add.reduceat(g[order], starts, axis=0)
        return dw

    def add_at():
        dw = np.zeros((V, E), dtype=g.dtype)
        np.add.at(dw, ids, g)
        return dw

    sides = {"one-hot GEMM": one_hot, "sorted sums": sorted_sums, "np.add.at": add_at}
    return fair.compare(sides, args.rounds, args.calls, clock=args.clock,
                        thread_choices=tuple(args.threads) if args.threads else fair.THREAD_CHOICES)


def embedding_main(args) -> None:
    from solutions.ops import _fast

    print(f"embedding backward, float32 (the fast kernel: one-hot up to V = {_fast.ONE_HOT_MAX_ROWS}, "
          "sorted sums above)")
    print("  V     N*T    E     one-hot ms   sorted sums ms   np.add.at ms")
    for shape in EMBEDDING_SHAPES:
        best = embedding_case(shape, args)
        V, M, E = shape
        times = [best[name][0] * 1e3 for name in ("one-hot GEMM", "sorted sums", "np.add.at")]
        print(f"  {V:<5d} {M:<5d} {E:<4d} " + "   ".join(f"{t:12.3f}" for t in times))


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--dtype", choices=("float32", "float64", "both"), default="float32")
    parser.add_argument("--clock", choices=tuple(fair.CLOCKS), default="wall")
    parser.add_argument("--threads", type=int, nargs="*", default=None, help="thread counts to try (default 1 2)")
    parser.add_argument("--embedding", action="store_true",
                        help="time the embedding backward's three scatter-adds instead (engine only)")
    args = parser.parse_args(argv)
    if args.embedding:
        print(f"NumPy {np.__version__} ({fair.blas()}); {fair.load()}")
        print(f"method: {fair.method(args.rounds, args.calls, args.clock)}")
        embedding_main(args)
        print(f"{fair.load()}")
        return {}
    dtypes = ("float32", "float64") if args.dtype == "both" else (args.dtype,)
    print(f"{platform.processor() or platform.machine()}, NumPy {np.__version__} ({fair.blas()}), "
          f"PyTorch {torch.__version__ if torch is not None else 'absent'}; {fair.load()}")
    print(f"method: {fair.method(args.rounds, args.calls, args.clock)}")
    ratios: dict[str, list[float]] = {}
    for dtype in dtypes:
        for what, case in (("block fwd+bwd", block_case), ("sdpa fwd+bwd", sdpa_case)):
            key = f"{what} {dtype}"
            print(f"\n{key}        engine ms (threads)   torch ms (threads)   ratio")
            for shape in SHAPES:
                best = case(shape, np.dtype(dtype), args)
                ours, n_ours = best["engine"]
                line = f"  N={shape[0]:3d} T={shape[1]:3d} E={shape[2]:3d} H={shape[3]}  {ours * 1e3:9.2f} ({n_ours})"
                if "torch" in best:
                    theirs, n_theirs = best["torch"]
                    ratios.setdefault(key, []).append(ours / theirs)
                    line += f"   {theirs * 1e3:9.2f} ({n_theirs})   {ours / theirs:5.2f}x"
                print(line)
            if ratios.get(key):
                geo = math.exp(sum(map(math.log, ratios[key])) / len(ratios[key]))
                print(f"  geometric mean of the ratios: {geo:.2f}x")
    print(f"\n{fair.load()}")
    return ratios


if __name__ == "__main__":
    main()
