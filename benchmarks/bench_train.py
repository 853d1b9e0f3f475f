"""One training step of the digits CNN, the engine next to PyTorch.

    python benchmarks/bench_train.py                      # engine (and PyTorch if importable)
    python benchmarks/bench_train.py --rounds 5 --calls 20
    python benchmarks/bench_train.py --baseline main --rounds 10 --clock cpu   # this engine against main's
    python benchmarks/bench_train.py --baseline main --instructions           # the same, counted by valgrind

One step = forward, loss (cross-entropy with label smoothing 0.1, as `solutions.training`
trains), zero_grad, backward, Adam step, on a batch of 32 digits, float32. The engine runs
`make_cnn` from `solutions/training.py`; PyTorch runs the same architecture with the engine's
initial weights copied in. Timed by the method of `fair.py` (blocks, each side at its best
thread count, minimum over rounds); the same `--profile` flag prints where the engine's step
spends its time (cProfile, one thread).

The before/after check of a change to the engine's hot path: `--baseline COMMIT` times COMMIT's
engine (its `solutions/`, from `git archive`) against this tree's, on this script's step. Two
engines of the same name cannot share a process, so every block is a fresh process (import,
build, warm-up, then the timed steps) and the engines take turns, the order rotated every round
(A B, B A, ...; with PyTorch A B C, B C A, C A B) so that neither a drift of the machine's load
nor a place in the round favours a side. Reported: min and median over all timed steps of each
engine, their ratios, and the ratio of the two blocks of each round (the pairing least
disturbed by load that changes between rounds). `--baseline HEAD`
with a clean tree times one engine against itself: the noise of the method on this machine now.
`--instructions` instead counts the instructions of a step with valgrind's callgrind (one
thread, hash seed fixed: the same count on every run whatever the load; OpenBLAS runs its AVX2
kernels under valgrind) and lists the functions whose count changed the most.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import fair
import numpy as np
from fair import torch

from solutions import Tensor, optim
from solutions.data import load_digits
from solutions.nn import functional as F
from solutions.training import make_cnn

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


def block(args: argparse.Namespace) -> None:
    """One block of a --baseline run, in a process of its own: the step of whichever `solutions`
    is first on the path (or, with --torch, PyTorch's, from that engine's initial weights), timed
    at each thread count; the last line printed is the JSON the parent reads."""
    import solutions

    images, labels = batch()
    model, step = engine_step(images, labels)
    if args.torch:
        step = torch_step(model, images, labels)
    if args.steps is not None:  # under valgrind: the steps alone, no timing
        with fair.threads(1):
            for _ in range(args.steps):
                step()
        return
    choices = (1,) if args.clock == "cpu" else fair.THREAD_CHOICES
    times = {}
    for n in choices:
        with fair.threads(n):
            times[n] = fair.timings(step, args.calls, warmup=5, clock=args.clock)
    print(json.dumps({"engine": str(Path(solutions.__file__).resolve().parent), "times": times}))


def run_block(tree: Path, argv: list[str], env: dict[str, str] | None = None, wrap: list[str] | None = None):
    """Run this script's --block in a fresh process with the engine of `tree` first on the path."""
    path = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    command = [*(wrap or []), sys.executable, str(Path(__file__).resolve()), "--block", *argv]
    done = subprocess.run(command, env={**os.environ, **(env or {}), "PYTHONPATH": path}, capture_output=True,
                          text=True, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"bench_train: a block of the engine in {tree} failed (exit {done.returncode}):\n"
                         + "\n".join(done.stderr.splitlines()[-15:]))
    return done


def against(args: argparse.Namespace) -> None:
    """--baseline: the step of the baseline's engine, of this tree's and of PyTorch (when it is
    importable), one process per block."""
    baseline = fair.commit_name(args.baseline)
    short = baseline.split()[0]
    with fair.engine_at(args.baseline) as old:
        # side: (the engine first on its path, its block's extra arguments)
        sides = {short: (old, []), "this tree": (fair.REPO, [])}
        if torch is not None:
            sides["PyTorch"] = (fair.REPO, ["--torch"])
        subject = baseline.partition(" ")[2]
        subject = subject if len(subject) <= 60 else subject[:57] + "..."
        print(f"digits CNN training step (make_cnn, batch {BATCH}, float32, Adam): this tree's engine against "
              f"that of {short} ({subject})" + (", and PyTorch's step" if torch is not None else ""))
        print(f"Python {platform.python_version()}, NumPy {np.__version__}"
              + (f", PyTorch {torch.__version__}" if torch is not None else "") + f"; NumPy's BLAS: {fair.blas()}")
        if args.instructions:
            count_instructions(old, short)
            return
        clock = ("process CPU time at 1 thread" if args.clock == "cpu" else
                 f"wall clock, each side at its best of {'/'.join(map(str, fair.THREAD_CHOICES))} threads")
        print(f"method: one process per block (import, build, 5 warm-up steps, {args.calls} timed steps), the "
              f"sides taking turns, the order rotated every round, {args.rounds} rounds, {clock}; {fair.load()}")
        rounds: dict[str, list[dict[int, list[float]]]] = {name: [] for name in sides}
        for r in range(args.rounds):
            names = list(sides)
            for name in names[r % len(names):] + names[:r % len(names)]:  # every side in every place in turn
                tree, extra = sides[name]
                out = json.loads(run_block(tree, ["--calls", str(args.calls), "--clock", args.clock, *extra])
                                 .stdout.splitlines()[-1])
                if Path(out["engine"]) != (tree / "solutions").resolve():
                    raise SystemExit(f"bench_train: the {name} block imported the engine in {out['engine']}, "
                                     f"not the one in {tree}: is another `solutions` first on the path?")
                rounds[name].append({int(n): t for n, t in out["times"].items()})
    # each side at the thread count of its fastest step; every timed step of every round counts
    best = {name: min(blocks[0], key=lambda n: min(t for b in blocks for t in b[n])) for name, blocks in rounds.items()}
    steps = {name: [b[best[name]] for b in blocks] for name, blocks in rounds.items()}
    for name, blocks in steps.items():
        times = [t for b in blocks for t in b]
        print(f"  {name:>10}: min {min(times) * 1e3:6.2f} ms, median {statistics.median(times) * 1e3:6.2f} ms "
              f"({best[name]} thr, {len(times)} steps)")
    for a, b in (("this tree", short), (short, "PyTorch"), ("this tree", "PyTorch")):
        if b in steps:
            print("  " + ratio(steps[a], steps[b], f"{a} / {b}"))
    print(f"  ({fair.load()} after the run)")


def ratio(a: list[list[float]], b: list[list[float]], label: str) -> str:
    """a's time over b's, by the min and the median of all their steps, and round by round (the
    median of a's block over that of b's block of the same round)."""
    everything_a, everything_b = [t for x in a for t in x], [t for x in b for t in x]
    paired = [statistics.median(x) / statistics.median(y) for x, y in zip(a, b, strict=True)]
    return (f"{label}: {min(everything_a) / min(everything_b):.3f}x by the min, "
            f"{statistics.median(everything_a) / statistics.median(everything_b):.3f}x by the median; "
            f"round by round {statistics.median(paired):.3f}x (from {min(paired):.3f}x to {max(paired):.3f}x)")


CALLGRIND_STEPS = (2, 12)  # the difference of two runs is the steps alone, without import and set-up


def count_instructions(old: Path, short: str) -> None:
    """Instructions per step of each engine, by callgrind: (count after 12 steps - after 2) / 10."""
    trees = {short: old, "this tree": fair.REPO}
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_train --instructions: valgrind is not installed")
    lo, hi = CALLGRIND_STEPS
    print(f"method: valgrind --tool=callgrind, instructions of {hi} steps minus those of {lo} (one process each, "
          "1 thread, PYTHONHASHSEED=0), per step; independent of the load")
    per_step, functions = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as scratch:
        for name, tree in trees.items():
            counts = []
            for steps in (lo, hi):
                out = Path(scratch) / f"{name.replace(' ', '-')}.{steps}"
                run_block(tree, ["--steps", str(steps)], env={"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"},
                          wrap=["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
                counts.append(annotate(out))
            per_step[name] = (counts[1]["PROGRAM TOTALS"] - counts[0]["PROGRAM TOTALS"]) / (hi - lo)
            functions[name] = {f: (counts[1].get(f, 0) - counts[0].get(f, 0)) / (hi - lo)
                               for f in counts[0].keys() | counts[1].keys() if f != "PROGRAM TOTALS"}
    for name in trees:
        print(f"  {name:>10}: {per_step[name] / 1e6:8.2f} M instructions per step")
    print(f"  this tree / {short}: {per_step['this tree'] / per_step[short]:.4f}x")
    before, after = functions[short], functions["this tree"]
    moved = sorted(before.keys() | after.keys(), key=lambda f: -abs(after.get(f, 0) - before.get(f, 0)))[:12]
    print(f"  the functions whose count per step changed most ({short} -> this tree, thousands of instructions):")
    for f in moved:
        print(f"    {before.get(f, 0) / 1e3:10.1f} -> {after.get(f, 0) / 1e3:10.1f}  {f[:100]}")


def annotate(profile: Path) -> dict[str, int]:
    """{function: instructions} of a callgrind profile (callgrind_annotate, every function)."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", str(profile)], capture_output=True,
                          text=True, check=True).stdout
    counts: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(.+)$", line)
        if match:
            # "path/file.c:function [library]": the paths name the build's and the venv's folders
            where, _, function = re.sub(r"\s*\[.*\]$", "", match.group(2)).strip().partition(":")
            name = "PROGRAM TOTALS" if where.startswith("PROGRAM TOTALS") else \
                f"{Path(where).name}:{function}" if function else where
            counts[name] = counts.get(name, 0) + int(match.group(1).replace(",", ""))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20, help="timed steps per block")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of the engine's step")
    parser.add_argument("--clock", choices=sorted(fair.CLOCKS), default="wall",
                        help="cpu: process CPU time at 1 thread (steadier on a loaded machine)")
    parser.add_argument("--baseline", metavar="COMMIT",
                        help="time COMMIT's engine against this tree's, one process per block, alternating")
    parser.add_argument("--instructions", action="store_true",
                        help="with --baseline: count instructions per step with valgrind instead of timing")
    parser.add_argument("--block", action="store_true", help=argparse.SUPPRESS)  # one block of --baseline
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)  # with --block: run, do not time
    parser.add_argument("--torch", action="store_true", help=argparse.SUPPRESS)  # with --block: PyTorch's step
    args = parser.parse_args()
    if args.instructions and not args.baseline:
        parser.error("--instructions compares two engines: give --baseline COMMIT")
    if args.block:
        block(args)
        return
    if args.baseline:
        against(args)
        return
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
