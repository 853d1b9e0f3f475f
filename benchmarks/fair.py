"""Timing two libraries fairly on a small shared machine: blocks, best thread count, rounds.

Used by every benchmark here and by `book/_code/measure_torch.py`. The method, and why:

- **Blocks, never interleaved.** A side runs `calls` times in a row, then the other side does.
  After a call, OpenBLAS and OpenMP threads keep spinning for a while; if the other library's
  call comes next, those threads steal its cores (on the digits CNN step PyTorch measured
  86 ms interleaved and 4.9 ms in blocks).
- **Warm-up** calls start every block (first big allocations are slow, caches are cold).
- **Each side at its best thread count**: every block is run at 1 and at 2 threads (NumPy's
  BLAS through `threadpoolctl`, since OPENBLAS_NUM_THREADS is read only at import; the engine's
  copy threads through `solutions.ops._fast.THREADS`; PyTorch through `torch.set_num_threads`)
  and each side keeps its faster setting. Small tensors are often fastest on one thread.
- **Rounds**: the whole set of blocks runs `rounds` times (the sides take turns), and each time
  is the minimum over all its calls in all rounds, the measurement least disturbed by whatever
  else the machine runs. The load average is printed with every table.
- `clock="cpu"` (`--clock cpu` in the benchmarks) measures this process's CPU time instead, at
  one thread for every side: time spent waiting for a core that another process holds is not
  counted, so on a loaded shared machine the ratio stays meaningful where wall times are not.
"""
from __future__ import annotations

import gc
import io
import os
import subprocess
import tarfile
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from threadpoolctl import threadpool_limits

try:  # PyTorch is an optional oracle: every benchmark runs without it.
    import torch
except ImportError:  # pragma: no cover - depends on the venv
    torch = None

try:
    from solutions.ops import _fast
except ImportError:  # the course kit's engine has no fast kernels
    _fast = None

REPO = Path(__file__).resolve().parents[1]
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
THREAD_CHOICES = tuple(sorted({1, min(2, CORES)}))


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def method(rounds: int, calls: int, clock: str = "wall") -> str:
    if clock == "cpu":
        return (f"blocks of {calls} calls per side (never interleaved) after warm-up, process CPU time at 1 thread "
                f"each, minimum over {rounds} rounds")
    return (f"blocks of {calls} calls per side (never interleaved) after warm-up, wall clock, each side at its "
            f"best of {'/'.join(map(str, THREAD_CHOICES))} threads, minimum over {rounds} rounds")


def blas() -> str:
    """NumPy's BLAS and the CPU kernels it picked: OPENBLAS_CORETYPE=Haswell, for one, limits
    OpenBLAS to AVX2 on a CPU with AVX-512 (half the float32 GEMM speed measured here)."""
    from threadpoolctl import threadpool_info

    for info in threadpool_info():
        if info.get("user_api") == "blas":
            return (f"{info.get('internal_api')} {info.get('version')} ({info.get('architecture')} kernels"
                    + (f", OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']}" if "OPENBLAS_CORETYPE" in os.environ
                       else "") + ")")
    return "no BLAS found by threadpoolctl"


def load() -> str:
    if not hasattr(os, "getloadavg"):
        return "load average unknown"
    return f"load average {os.getloadavg()[0]:.2f} on {CORES} cores"


@contextmanager
def threads(n: int) -> Iterator[None]:
    """Inside the block, NumPy's BLAS, the engine's copy threads and PyTorch use n threads."""
    was_fast = _fast.THREADS if _fast is not None else None
    was_torch = torch.get_num_threads() if torch is not None else None
    if _fast is not None:
        _fast.THREADS = n
    if torch is not None:
        torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        if _fast is not None:
            _fast.THREADS = was_fast
        if torch is not None:
            torch.set_num_threads(was_torch)


def timings(fn: Callable[[], object], calls: int, warmup: int, clock: str = "wall") -> list[float]:
    """The times of `calls` calls of fn in a row, after `warmup` untimed ones (seconds)."""
    now = CLOCKS[clock]
    for _ in range(warmup):
        fn()
    gc.collect()
    times = []
    for _ in range(calls):
        t = now()
        fn()
        times.append(now() - t)
    return times


def block(fn: Callable[[], object], calls: int, warmup: int, clock: str = "wall") -> float:
    """The fastest of `calls` calls of fn in a row, after `warmup` untimed ones (seconds)."""
    return min(timings(fn, calls, warmup, clock))


def compare(sides: dict[str, Callable[[], object]], rounds: int = 3, calls: int = 5, warmup: int = 2,
            thread_choices: tuple[int, ...] = THREAD_CHOICES, clock: str = "wall") -> dict[str, tuple[float, int]]:
    """{side: (best seconds, the thread count it was reached with)}, by the method above."""
    if clock == "cpu":
        thread_choices = (1,)  # CPU time of several threads adds up: compare one thread each
    best = {name: (float("inf"), 0) for name in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            for n in thread_choices:
                with threads(n):
                    t = block(fn, calls, warmup, clock)
                if t < best[name][0]:
                    best[name] = (t, n)
    return best


# --------------------------------------------------------------------------------------------
# An earlier commit's engine, for before/after checks (`bench_train.py --baseline`)
# --------------------------------------------------------------------------------------------
def commit_name(commit: str) -> str:
    """`commit` as its short hash and subject line; SystemExit naming it when git does not know it."""
    done = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%h %s", f"{commit}^{{commit}}", "--"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"no commit {commit!r} in {REPO}: {done.stderr.strip()}")
    return done.stdout.strip()


@contextmanager
def engine_at(commit: str) -> Iterator[Path]:
    """A scratch folder holding the engine (`solutions/`) as it was at `commit` (`git archive`,
    nothing else of the repository): first on PYTHONPATH, it is the engine a process imports
    instead of this tree's. Removed at the end of the block."""
    commit_name(commit)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, "solutions"],
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tree:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        yield Path(tree)
