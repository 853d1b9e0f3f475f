"""What the capstone check (a06-train-step) costs per student, and the margin its budget leaves.

    python benchmarks/bench_capstone.py                       # cost after, margin table
    python benchmarks/bench_capstone.py --rounds 3 --no-margin

Cost: the model answers (the source notebooks of a01..a06, solutions in) judged by
:func:`autograder.judge.judge.judge` exactly as ``autograder grade`` judges one student, in a
subprocess of its own: CPU seconds of the judge and of the sandbox together (the sandbox run as a
plain subprocess, ``unsafe``, so that its CPU time is counted; bubblewrap's own start-up is the
same for every check), and the wall time with the real sandbox. CPU time is the number to
compare on a shared machine; the wall time depends on the load, printed beside it. (The cost of
the check before issue 21 cut it, 18.6 CPU-s per student against 4.2, was measured with an
option that ran an earlier commit's check on today's judge; the catalogue's change of issue 22
ended that: an old check module no longer loads. See that stop's closing note.)

Margin: the check's training (its recipe, batches, augmentation and held-out split, the same
draws) run in this process on the reference engine, with the model answers, with each capstone
mutant of ``train_step`` (autograder/mutants/a06_training.py) and with a broken a02 op (``Mul``
whose x-gradient multiplies by x, a02's ``mul-swapped``): the held-out accuracy each would reach
if accuracy were all the check looked at. (The check stops them earlier, each with its own
message: tests/grader/test_exercises.py and tests/grader/test_capstone_trust.py.) Then the model answers at
other budgets (epochs, training images), for the choice of the budget.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]

SOURCE = REPO / "assignments" / "source"
EXERCISE = "a06-train-step"


# --------------------------------------------------------------------------------------------
# Cost per student
# --------------------------------------------------------------------------------------------
def _cells(assignment: str) -> list[dict]:
    return [c for p in sorted((SOURCE / assignment).glob("*.ipynb")) for c in json.loads(p.read_text())["cells"]]


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def worker(rounds: int) -> None:
    """Judge the model answers `rounds` times (unsafe: CPU) and once in the real sandbox (wall)."""
    from autograder.course import catalogue
    from autograder.judge.bubblewrap import Sandbox
    from autograder.judge.judge import code_cells, judge
    earlier = [(a, _cells(a)) for a in sorted(p.name for p in SOURCE.iterdir() if p.name < "a06")]
    cells = code_cells(_cells("a06_training"), EXERCISE)
    budget = catalogue.exercise(EXERCISE).budget or 60.0
    cpu: list[float] = []
    wall: list[float] = []
    for unsafe in [True] * rounds + [False]:
        t0, c0 = time.perf_counter(), _cpu()
        verdict = judge(EXERCISE, cells, sandbox=Sandbox(unsafe=unsafe), budget=budget, earlier=earlier)
        if not verdict.passed:
            sys.exit(f"the model answers failed the check: {verdict.message}\n{verdict.detail}")
        (cpu if unsafe else wall).append(_cpu() - c0 if unsafe else time.perf_counter() - t0)
    print(json.dumps({"cpu": cpu, "wall": wall, "load": os.getloadavg()[0]}))


def cost(rounds: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--worker", "--rounds", str(rounds)], capture_output=True,
                         text=True, cwd=REPO)
    if out.returncode != 0:
        sys.exit(f"the cost worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# The margin: the check's training on the reference engine, with broken pieces
# --------------------------------------------------------------------------------------------
def simulate(train_step: Callable, seed: int, epochs: int, images: int) -> float:
    """The check's training (same draws from the same generator) in this process; held-out accuracy."""
    from autograder.exercises import a06_training as C
    from solutions import Tensor, optim
    from solutions import training as R
    rng = np.random.default_rng(seed)
    saved = C.TRAIN_IMAGES
    C.TRAIN_IMAGES = images
    try:
        split = C._split(rng)
    finally:
        C.TRAIN_IMAGES = saved
    model = R.make_cnn(int(rng.integers(0, 2**31)))
    optimizer = optim.Adam(model.parameters(), lr=C.LR)
    x_all, y_all = split["train"]
    total = epochs * -(-len(y_all) // C.BATCH)
    step = 0
    model.train()
    for _ in range(epochs):
        order = rng.permutation(len(y_all))
        for start in range(0, len(y_all), C.BATCH):
            pick = order[start:start + C.BATCH]
            x = R.random_shift(x_all[pick], rng) if C.AUGMENT else x_all[pick]
            optimizer.param_groups[0]["lr"] = R.cosine_lr(C.LR, step, total)
            train_step(model, Tensor(x), Tensor(y_all[pick]), optimizer, R.F.cross_entropy)
            step += 1
    weights = R.weights(model)
    if not all(np.all(np.isfinite(v)) for v in weights.values()):
        return 0.0
    return C.accuracy(weights, split)


def _mutated_train_step(mutant) -> Callable:
    from solutions import training as R
    source = inspect.getsource(R.train_step)
    assert mutant.find in source, mutant.id
    namespace = dict(vars(R))
    exec(compile(source.replace(mutant.find, mutant.replace), f"<{mutant.id}>", "exec"), namespace)
    return namespace["train_step"]


class BrokenMul:
    """a02's ``mul-swapped`` in the reference engine while the block runs: dz/dx = x instead of y."""

    def __enter__(self) -> BrokenMul:
        from autograder.mutants.a02_broadcasting import MUTANTS
        from solutions.ops import elementwise
        mutant = next(m for m in MUTANTS if m.id == "mul-swapped")
        self.original = elementwise.Mul.backward
        source = textwrap.dedent(inspect.getsource(self.original))
        namespace = dict(vars(elementwise))
        exec(compile(source.replace(mutant.find, mutant.replace), "<mul-swapped>", "exec"), namespace)
        elementwise.Mul.backward = namespace["backward"]
        return self

    def __exit__(self, *exc: object) -> None:
        from solutions.ops import elementwise
        elementwise.Mul.backward = self.original


def _accuracies(train_step: Callable, seeds: list[int], epochs: int, images: int) -> str:
    out = []
    for seed in seeds:
        try:
            out.append(f"{simulate(train_step, seed, epochs, images):6.1%}")
        except Exception as error:  # noqa: BLE001 (a mutant that cannot train: say how it stops)
            out.append(f"{'stops: ' + type(error).__name__:>6}")
    return "  ".join(out)


def margin(seeds: list[int], budgets: list[tuple[int, int]]) -> None:
    from autograder.exercises import a06_training as C
    from autograder.mutants.a06_training import MUTANTS
    from solutions import training as R
    from solutions.training import blas_threads
    print(f"\nmargin at the check's budget ({C.EPOCHS} epochs, {C.TRAIN_IMAGES} training images, "
          f"{1797 - C.TRAIN_IMAGES} held out, pass mark {C.TARGET:.0%}); held-out accuracy per split:")
    rows: list[tuple[str, Callable[[], str]]] = [
        ("model answers", lambda: _accuracies(R.train_step, seeds, C.EPOCHS, C.TRAIN_IMAGES))]
    for mutant in MUTANTS:
        step = _mutated_train_step(mutant)
        rows.append((f"train_step: {mutant.id}", lambda step=step: _accuracies(step, seeds, C.EPOCHS, C.TRAIN_IMAGES)))

    def broken_mul() -> str:
        with BrokenMul():
            return _accuracies(R.train_step, seeds, C.EPOCHS, C.TRAIN_IMAGES)
    rows.append(("a02 Mul: mul-swapped", broken_mul))
    with blas_threads(1):
        for name, accuracies in rows:
            t0 = time.process_time()
            line = accuracies()
            print(f"  {name:42s} {line}   ({(time.process_time() - t0) / len(seeds):.2f} CPU-s per run)", flush=True)
        print("\nthe model answers at other budgets (epochs x training images):")
        for epochs, images in budgets:
            t0 = time.process_time()
            line = _accuracies(R.train_step, seeds, epochs, images)
            print(f"  {epochs:2d} epochs x {images:4d} images{'':20s} {line}   "
                  f"({(time.process_time() - t0) / len(seeds):.2f} CPU-s per run)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="judgings of the model answers per method (CPU)")
    parser.add_argument("--seeds", type=int, default=4, help="splits per row of the margin table")
    parser.add_argument("--no-margin", action="store_true")
    parser.add_argument("--no-cost", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.rounds)
        return
    if not args.no_cost:
        print(f"per-student cost of {EXERCISE}, model answers: CPU-s of judge + sandbox (unsafe sandbox, "
              f"{args.rounds} rounds, min) and wall-s in the real sandbox (1 round)")
        r = cost(args.rounds)
        print(f"  CPU {min(r['cpu']):6.1f} s   wall {r['wall'][0]:6.1f} s   (load average {r['load']:.1f})", flush=True)
    if not args.no_margin:
        margin(list(range(args.seeds)), [(1, 700), (1, 1000), (2, 1437), (3, 1437)])


if __name__ == "__main__":
    main()
