"""Per-node overhead of the engine: a long chain of ops on tiny tensors, next to NumPy and PyTorch.

On a 1-element tensor the arithmetic is free, so what is left is the cost of the graph itself:
building one node in the forward pass, and visiting it (plus accumulating its gradient) in the
backward pass. Every chain is timed side by side in one run, repeat after repeat, and the best
(minimum) time of each is reported, because the minimum is the measurement least disturbed by
whatever else the machine is doing. Frameworks run in blocks, never interleaved, each at its best
thread count (`fair.py`). The clock is this thread's CPU time by default (time spent
waiting for a core that another process holds is not counted); `--clock wall` uses
`perf_counter` instead. Python's garbage collector stays on, as in real use, and runs between
run.

    python benchmarks/bench_graph.py            # engine vs NumPy (and PyTorch if importable)
    python benchmarks/bench_graph.py --ops 2000 --rounds 5 --clock wall

Chains (each has `--ops` op applications, so times are per op):

(a) unary: y = tanh(y), y = y * 1.0001, y = y / 1.0001, cycling; every node has one tensor input.
(b) shared parameter: y = y * w + x with one 1-element `w` that requires grad, used by every other
    node: its gradient is accumulated hundreds of times, the worst case for accumulation.
(c) broadcasting: as (b), but y has 16 elements and w is 0-d, so every multiply's backward sums
    its gradient back to w's shape (unbroadcast).

"NumPy" is the same arithmetic on 1-element ndarrays with no graph: forward is the chain itself,
backward is the hand-written chain rule (the multiplications a backward pass must do anyway).
It is the floor that any NumPy-based engine sits above.
"""
from __future__ import annotations

import argparse
import gc
import platform
import time
from typing import Callable

import fair
import numpy as np
from fair import torch

from solutions import Tensor

Timer = Callable[[], tuple[float, float]]  # one run -> (forward seconds, backward seconds)
CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}
clock = CLOCKS["cpu"]


# --------------------------------------------------------------------------------------------
# The chains, one builder per framework. Each returns a function that runs the chain once.
# --------------------------------------------------------------------------------------------
def _unary_step(i: int, y, tanh):
    k = i % 3
    if k == 0:
        return tanh(y)
    if k == 1:
        return y * 1.0001
    return y / 1.0001


def engine_chain(kind: str, n_ops: int) -> Timer:
    def run() -> tuple[float, float]:
        n = 16 if kind == "c" else 1
        x0 = Tensor(np.full(n, 0.5), requires_grad=True)
        w = Tensor(np.array(0.999) if kind == "c" else np.full(1, 0.999), requires_grad=True)
        x = Tensor(np.full(n, 0.001))
        t0 = clock()
        y = x0
        if kind == "a":
            for i in range(n_ops):
                y = _unary_step(i, y, Tensor.tanh)
        else:
            for _ in range(n_ops // 2):
                y = y * w + x
        t1 = clock()
        y.backward(np.ones(n))
        t2 = clock()
        return t1 - t0, t2 - t1

    return run


def numpy_chain(kind: str, n_ops: int) -> Timer:
    def run() -> tuple[float, float]:
        n = 16 if kind == "c" else 1
        y = np.full(n, 0.5)
        w = np.array(0.999) if kind == "c" else np.full(1, 0.999)
        x = np.full(n, 0.001)
        saved = []
        t0 = clock()
        if kind == "a":
            for i in range(n_ops):
                y = _unary_step(i, y, np.tanh)
                saved.append(y)
        else:
            for _ in range(n_ops // 2):
                saved.append(y)
                y = y * w + x
        t1 = clock()
        g = np.ones(n)
        gw = np.zeros_like(w)
        if kind == "a":
            for i in reversed(range(n_ops)):
                k = i % 3
                if k == 0:
                    t = saved[i]
                    g = g * (1.0 - t * t)
                elif k == 1:
                    g = g * 1.0001
                else:
                    g = g / 1.0001
        else:
            for y_in in reversed(saved):
                # add: gradient passes through (and x needs none); mul: to y and to w
                gw = gw + (g * y_in).sum() if kind == "c" else gw + g * y_in
                g = g * w
        t2 = clock()
        return t1 - t0, t2 - t1

    return run


def torch_chain(kind: str, n_ops: int) -> Timer:
    def run() -> tuple[float, float]:
        n = 16 if kind == "c" else 1
        x0 = torch.full((n,), 0.5, dtype=torch.float64, requires_grad=True)
        w = torch.full(() if kind == "c" else (1,), 0.999, dtype=torch.float64, requires_grad=True)
        x = torch.full((n,), 0.001, dtype=torch.float64)
        t0 = clock()
        y = x0
        if kind == "a":
            for i in range(n_ops):
                y = _unary_step(i, y, torch.tanh)
        else:
            for _ in range(n_ops // 2):
                y = y * w + x
        t1 = clock()
        y.backward(torch.ones(n, dtype=torch.float64))
        t2 = clock()
        return t1 - t0, t2 - t1

    return run


# --------------------------------------------------------------------------------------------
# Measurement: the method of `fair.py` (blocks per framework, never interleaved; best thread count)
# --------------------------------------------------------------------------------------------
def measure(timers: dict[str, Timer], rounds: int, calls: int, warmup: int = 3) -> dict[str, tuple[float, float]]:
    best = {name: [float("inf"), float("inf")] for name in timers}
    for _ in range(rounds):
        for name, run in timers.items():
            for n in fair.THREAD_CHOICES:
                with fair.threads(n):
                    for _ in range(warmup):
                        run()
                    for _ in range(calls):
                        gc.collect()  # start every run with the same, empty, young generation
                        fwd, bwd = run()
                        best[name][0] = min(best[name][0], fwd)
                        best[name][1] = min(best[name][1], bwd)
    return {name: (f, b) for name, (f, b) in best.items()}


CHAINS = {
    "a": "unary chain: tanh, *1.0001, /1.0001",
    "b": "y = y * w + x, shared 1-element w",
    "c": "y = y * w + x, 16 elements, 0-d w",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1000, help="ops per chain (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of blocks; the minimum is kept")
    parser.add_argument("--calls", type=int, default=7, help="timed runs per block")
    parser.add_argument("--chains", default="abc", help="which chains to run (default abc)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="cpu: thread CPU time (default); wall")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]

    who = f"Python {platform.python_version()}, NumPy {np.__version__}"
    who += f", PyTorch {torch.__version__}" if torch is not None else ", PyTorch not installed (engine only)"
    print(f"per-op overhead, {args.ops}-op chains, float64, {args.clock} clock ({who})")
    print(f"method: blocks of {args.calls} runs per framework (never interleaved) after warm-up, each at its best "
          f"of {'/'.join(map(str, fair.THREAD_CHOICES))} threads, {args.clock} clock "
          f"({'this thread' if args.clock == 'cpu' else 'wall'}), minimum over {args.rounds} rounds; {fair.load()}")
    print("times in microseconds per op; 'x' columns are engine / other\n")

    header = f"{'chain':<40} {'pass':<8} {'engine':>8} {'numpy':>8} {'x numpy':>8}"
    if torch is not None:
        header += f" {'torch':>8} {'x torch':>8}"
    print(header)
    print("-" * len(header))
    for kind in args.chains:
        timers = {"engine": engine_chain(kind, args.ops), "numpy": numpy_chain(kind, args.ops)}
        if torch is not None:
            timers["torch"] = torch_chain(kind, args.ops)
        best = measure(timers, args.rounds, args.calls)
        for p, label in enumerate(("forward", "backward")):
            us = {name: best[name][p] / args.ops * 1e6 for name in best}
            row = f"{'(' + kind + ') ' + CHAINS[kind] if p == 0 else '':<40} {label:<8} "
            row += f"{us['engine']:8.2f} {us['numpy']:8.2f} {us['engine'] / us['numpy']:8.1f}"
            if torch is not None:
                row += f" {us['torch']:8.2f} {us['engine'] / us['torch']:8.2f}"
            print(row)


if __name__ == "__main__":
    main()
