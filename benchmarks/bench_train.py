"""One training step of the digits CNN, the engine next to PyTorch.

    python benchmarks/bench_train.py                      # engine (and PyTorch if importable)
    python benchmarks/bench_train.py --rounds 5 --calls 20

One step = forward, loss (cross-entropy with label smoothing 0.1, as `solutions.training`
trains), zero_grad, backward, Adam step, on a batch of 32 digits, float32. The engine runs
`make_cnn` from `solutions/training.py`; PyTorch runs the same architecture with the engine's
initial weights copied in. Timed by the method of `fair.py` (blocks, each side at its best
thread count, minimum over rounds); the same `--profile` flag prints where the engine's step
spends its time (cProfile, one thread).
"""
from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fair  # noqa: E402
import numpy as np  # noqa: E402
from fair import torch  # noqa: E402

from solutions import Tensor, optim  # noqa: E402
from solutions.data import load_digits  # noqa: E402
from solutions.nn import functional as F  # noqa: E402
from solutions.training import make_cnn  # noqa: E402

BATCH = 32
SMOOTHING = 0.1


def batch() -> tuple[np.ndarray, np.ndarray]:
    images, labels = load_digits("train", dtype=np.float32)
    return np.ascontiguousarray(images[:BATCH]), np.asarray(labels[:BATCH])


def engine_step(images: np.ndarray, labels: np.ndarray):
    model = make_cnn(seed=0)
    model.train()
    opt = optim.Adam(model.parameters(), lr=3e-3)
    x, y = Tensor(images), Tensor(labels)

    def step() -> None:
        loss = F.cross_entropy(model(x), y, label_smoothing=SMOOTHING)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return model, step


def torch_step(engine_model, images: np.ndarray, labels: np.ndarray):
    tnn = torch.nn

    def block(c_in: int, c_out: int) -> list:
        return [tnn.Conv2d(c_in, c_out, 3, padding=1, bias=False), tnn.BatchNorm2d(c_out), tnn.ReLU()]

    model = tnn.Sequential(*block(1, 32), *block(32, 32), tnn.MaxPool2d(2), *block(32, 64), tnn.MaxPool2d(2),
                           tnn.Flatten(), tnn.Linear(256, 10))
    ours, theirs = list(engine_model.parameters()), list(model.parameters())
    if [p.shape for p in ours] != [tuple(p.shape) for p in theirs]:
        raise RuntimeError("bench_train: the PyTorch model's parameters do not match make_cnn's")
    with torch.no_grad():
        for p, q in zip(ours, theirs, strict=True):
            q.copy_(torch.from_numpy(np.array(p.data)))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64))
    loss_fn = tnn.CrossEntropyLoss(label_smoothing=SMOOTHING)

    def step() -> None:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def profile(step, calls: int = 200) -> None:
    with fair.threads(1):
        for _ in range(20):
            step()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            step()
        prof.disable()
    print(f"\ncProfile of {calls} engine steps, 1 thread (tottime: time inside the function itself)")
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20, help="timed steps per block")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of the engine's step")
    parser.add_argument("--clock", choices=sorted(fair.CLOCKS), default="wall",
                        help="cpu: process CPU time at 1 thread (steadier on a loaded machine)")
    args = parser.parse_args()
    images, labels = batch()
    model, ours = engine_step(images, labels)
    sides = {"engine": ours}
    if torch is not None:
        sides["torch"] = torch_step(model, images, labels)
    who = f"Python {platform.python_version()}, NumPy {np.__version__}, "
    who += f"PyTorch {torch.__version__}" if torch is not None else "PyTorch not installed (engine only)"
    print(f"digits CNN training step (make_cnn, batch {BATCH}, float32, Adam), {who}")
    print(f"NumPy's BLAS: {fair.blas()}")
    print(f"method: {fair.method(args.rounds, args.calls, args.clock)}; {fair.load()}")
    best = fair.compare(sides, rounds=args.rounds, calls=args.calls, warmup=5, clock=args.clock)
    line = f"  engine {best['engine'][0] * 1e3:7.2f} ms ({best['engine'][1]} thr)"
    if torch is not None:
        line += (f" | PyTorch {best['torch'][0] * 1e3:7.2f} ms ({best['torch'][1]} thr)"
                 f" | engine / PyTorch {best['engine'][0] / best['torch'][0]:.2f}x")
    print(line)
    print(f"  ({fair.load()} after the run)")
    if args.profile:
        profile(ours)


if __name__ == "__main__":
    main()
